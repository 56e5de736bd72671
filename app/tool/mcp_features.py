"""What our MCP client answers when a server asks *it* something (docs/mcp.md): sampling
with the agent's own LLM (only servers with ``"sampling": true`` in ``mcp.json``; secrets
redacted from the answer), elicitation through ``ask_human``'s input provider
(``app.mcp.client.elicitation``), and the workspace as the one ``file://`` root.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.exceptions import OpenManusError
from app.logger import logger, redact_registered
from app.mcp.client.elicitation import ElicitationAnswer, describe_form, parse_answer
from app.sandbox.files import resolve_workspace
from app.schema import Message
from app.tool.ask_human import get_input_provider

__all__ = ["SAMPLING_REFUSED", "MCPClientFeatures"]

#: JSON-RPC code for "the user (here: the configuration) rejected the request" (MCP spec).
SAMPLING_REFUSED = -1
_MAX_SAMPLING_MESSAGES = 200


class MCPClientFeatures:
    """Sampling, elicitation and roots for every connection of one ``MCPClients``. None means:
    no ``llm``, sampling refused; ``ask_human``'s provider; the configured workspace."""

    def __init__(
        self,
        *,
        llm: Any = None,
        input_provider: Any = None,
        workspace: Path | None = None,
        elicitation_attempts: int = 3,
        elicitation_timeout: float | None = 600.0,
    ) -> None:
        self.llm = llm
        self.input_provider = input_provider
        self.workspace = workspace
        self.elicitation_attempts = max(1, elicitation_attempts)
        self.elicitation_timeout = elicitation_timeout

    def root_path(self) -> Path:
        workspace = self.workspace if self.workspace is not None else resolve_workspace(None)
        return Path(workspace).resolve()

    async def list_roots(self, context: Any = None) -> Any:
        from mcp import types
        from pydantic import FileUrl

        path = self.root_path()
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl(path.as_uri()), name=path.name)])

    async def sample(self, server_id: str, allowed: bool, params: Any) -> Any:
        """Answer ``sampling/createMessage`` with our LLM, or an error saying why not."""
        from mcp import types

        if not allowed:
            logger.warning(f"MCP server '{server_id}' asked for an LLM completion: refused")
            return types.ErrorData(
                code=SAMPLING_REFUSED,
                message=f"Sampling is not allowed for MCP server '{server_id}': this client "
                'answers sampling requests only for servers with "sampling": true in mcp.json.',
            )
        if self.llm is None:
            return types.ErrorData(
                code=SAMPLING_REFUSED,
                message="Sampling is unavailable: no LLM is attached to this MCP client.",
            )
        if getattr(params, "tools", None):
            return types.ErrorData(
                code=types.INVALID_PARAMS,
                message="Sampling with tools is not supported by this client.",
            )
        try:
            messages = _to_messages(params.messages)
        except ValueError as e:
            return types.ErrorData(code=types.INVALID_PARAMS, message=str(e))
        hints = getattr(getattr(params, "model_preferences", None), "hints", None) or []
        names = [h.name for h in hints if getattr(h, "name", None)]
        if names:
            logger.debug(f"MCP server '{server_id}' prefers models {names}; using {self.llm.model}")
        llm = self.llm
        limit = max(1, min(int(params.max_tokens), int(getattr(llm, "max_tokens", 4096))))
        key = "max_completion_tokens" if getattr(llm, "is_reasoning_model", False) else "max_tokens"
        extra: dict[str, Any] = {key: limit}
        if params.stop_sequences:
            extra["stop"] = list(params.stop_sequences)[:4]

        system = [Message.system_message(params.system_prompt)] if params.system_prompt else None
        logger.info(f"🧠 MCP server '{server_id}' asked for a completion ({limit} tokens max)")
        try:
            response = await llm.request(
                messages, system, temperature=params.temperature, stream=False, **extra
            )
        except (TimeoutError, OpenManusError, OSError) as e:
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=redact_registered(f"The LLM failed: {e}")
            )
        text = redact_registered(response.message.content or "")
        stop = "maxTokens" if response.finish_reason == "length" else "endTurn"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model=str(getattr(llm, "model", "unknown")),
            stop_reason=stop,
        )

    async def elicit(self, server_id: str, params: Any) -> Any:
        """Put the server's question to the user; accept/decline/cancel as they answer."""
        from mcp import types

        answer = await self._ask_until_valid(server_id, params)
        logger.info(f"MCP server '{server_id}' asked the user; answer: {answer.action}")
        if answer.action != "accept" or getattr(params, "mode", "form") == "url":
            return types.ElicitResult(action=answer.action)
        return types.ElicitResult(action="accept", content=answer.content or {})

    async def _ask_until_valid(self, server_id: str, params: Any) -> ElicitationAnswer:
        provider = self.input_provider or get_input_provider()
        if getattr(params, "mode", "form") == "url":
            schema: dict[str, Any] = {}
            question = (
                f"MCP server '{server_id}' asks you to open this address: {params.url}\n"
                f"{params.message}\nType ok once you have done it, 'decline' to refuse, "
                "'cancel' or an empty line to dismiss."
            )
        else:
            schema = dict(params.requested_schema or {})
            question = describe_form(server_id, params.message, schema)
        for attempt in range(self.elicitation_attempts):
            try:
                reply = await asyncio.wait_for(provider.ask(question), self.elicitation_timeout)
            except TimeoutError:
                return ElicitationAnswer("cancel")
            except Exception as e:  # a frontend's failure is a dismissed question, not a crash
                logger.warning(f"Could not ask the user for MCP server '{server_id}': {e}")
                return ElicitationAnswer("cancel")
            answer = parse_answer(reply, schema)
            if isinstance(answer, ElicitationAnswer):
                return answer
            if attempt + 1 < self.elicitation_attempts:
                question = f"{answer} Please answer again.\n" + question.split("\n", 1)[-1]
        return ElicitationAnswer("cancel")


def _to_messages(messages: list[Any]) -> list[Any]:
    """The server's conversation as our messages (text, and images as images)."""
    if not messages:
        raise ValueError("sampling needs at least one message")
    if len(messages) > _MAX_SAMPLING_MESSAGES:
        raise ValueError(f"sampling takes at most {_MAX_SAMPLING_MESSAGES} messages")
    out = []
    for message in messages:
        texts: list[str] = []
        image: str | None = None
        for block in message.content_as_list:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "image" and image is None:
                image = block.data
            else:
                texts.append(f"[{kind} content omitted]")
        text = "\n".join(texts)
        if message.role == "assistant":
            out.append(Message.assistant_message(text))
        else:
            out.append(Message.user_message(text, base64_image=image))
    return out
