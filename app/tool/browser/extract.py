"""``extract_content``: the page as markdown, then one LLM call that pulls out what the goal
asks for. The page goes to the model as markdown (never raw HTML), capped in length, with
every registered secret (and key-shaped string) redacted like any other request."""

from __future__ import annotations

import json
from typing import Any

from app.exceptions import LLMError, ToolError
from app.logger import redact
from app.schema import Message

EXTRACTION_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "extract_content",
        "description": "Report the information taken from the page for the given goal.",
        "parameters": {
            "type": "object",
            "properties": {
                "extracted_content": {
                    "type": "object",
                    "description": "What the page says about the goal.",
                    "properties": {
                        "text": {"type": "string", "description": "The extracted information."},
                        "metadata": {
                            "type": "object",
                            "properties": {
                                "source": {"type": "string", "description": "Where it was found."}
                            },
                        },
                    },
                    "required": ["text"],
                }
            },
            "required": ["extracted_content"],
        },
    },
}

_INSTRUCTION = (
    "You read a web page for someone and extract exactly what their goal asks for, using only "
    "the page content below. If the page does not contain it, say so plainly. Reply by calling "
    "extract_content.\n\nGoal: {goal}\n\nPage URL: {url}\n\nPage content (markdown{note}):\n{page}"
)


async def page_markdown(extract_clean_markdown: Any, session: Any, limit: int) -> tuple[str, int]:
    """The focused page as markdown, cut at ``limit`` characters; returns it and its full length."""
    markdown, _stats = await extract_clean_markdown(browser_session=session, extract_links=True)
    markdown = markdown.strip()
    return markdown[:limit], len(markdown)


async def extract_with_llm(llm: Any, *, goal: str, url: str, page: str, full_length: int) -> str:
    """Ask the model for the goal's information; its answer, as text."""
    note = f", first {len(page)} of {full_length} characters" if full_length > len(page) else ""
    prompt = _INSTRUCTION.format(goal=goal, url=url, note=note, page=page or "(the page is empty)")
    prompt = redact(prompt)  # like every other request: no registered secret leaves with it
    try:
        reply = await llm.ask_tool(
            [Message.user_message(prompt)], tools=[EXTRACTION_TOOL], tool_choice="required"
        )
    except LLMError as e:
        raise ToolError(f"Could not extract content: the model call failed: {e}") from e
    for call in reply.tool_calls or []:
        if call.function.name != "extract_content":
            continue
        try:
            args = json.loads(call.function.arguments or "{}")
        except ValueError:
            return call.function.arguments
        content = args.get("extracted_content", args)
        if isinstance(content, dict):
            text = str(content.get("text") or "").strip()
            source = (content.get("metadata") or {}).get("source")
            if text:
                return f"{text}\n(source: {source})" if source else text
        elif isinstance(content, str) and content.strip():
            return content.strip()
    if reply.content and reply.content.strip():
        return reply.content.strip()
    raise ToolError("Could not extract content: the model returned nothing usable")
