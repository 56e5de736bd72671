"""The MCP client side, below the tools: connecting to servers (``connection``) and answering
their requests to us (``features``: sampling, elicitation, roots). ``app.tool.mcp`` makes the
servers' tools our tools; the server side (``app.mcp.server``) is an application above the
agents. The ``mcp`` SDK is imported only when a connection is made."""
