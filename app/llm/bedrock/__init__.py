"""Amazon Bedrock's Converse API as a :class:`app.llm.Model` (``api_type = "aws"``).

Everything Bedrock-specific lives here: where requests go (``endpoint``), who signs them
(``credentials``: the AWS chain or a Bedrock API key), the request body (``converse``,
``images``), the answer (``reply``, ``events``), error mapping at the edge (``errors``) and
``BedrockModel`` itself. Importing this package imports neither botocore nor httpx2: the
first request does, off the event loop. Only ``app.llm.stack`` builds it (and upstream's
``app.bedrock`` adapter).
"""

from app.llm.bedrock.model import BedrockModel

__all__ = ["BedrockModel"]
