"""The OpenAI chat-completions implementation of :class:`app.llm.Model`.

Everything OpenAI-specific lives here: the wire format (``wire``, ``formatting``,
``messages``), streaming, the HTTP and SDK transports, error mapping at the edge, and
``OpenAIChatModel`` itself. Importing this package does not import the openai SDK.
"""
