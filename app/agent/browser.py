"""``BrowserAgent`` and ``BrowserContextHelper`` (shared with Manus): the live browser state
goes into the next-step prompt, which is not stored, so screenshots never pile up in memory;
the screenshot rides on that user message only for models that take images.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from app.agent.toolcall import ToolCallAgent
from app.logger import logger
from app.prompt.browser import NEXT_STEP_PROMPT, SYSTEM_PROMPT
from app.schema import Message
from app.tool.base import result_failed
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection

_BROWSER_TOOL = "browser_use"


class BrowserContextHelper:
    """Reads the browser tool's state and formats the browser next-step prompt from it."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.current_base64_image: str | None = None
        #: Called with each state read (and its screenshot), e.g. by the web UI's live view.
        self.on_state: Callable[[dict[str, Any], str | None], None] | None = None

    def browser_tool(self) -> Any:
        tool = self.agent.available_tools.get_tool(_BROWSER_TOOL)
        if tool is not None and getattr(tool, "llm", "absent") is None:
            tool.llm = self.agent.llm  # extract_content uses the agent's model
        return tool

    async def get_browser_state(self) -> dict[str, Any] | None:
        """The tool's state as a dict (screenshot kept aside), or None if there is none."""
        tool = self.browser_tool()
        if tool is None or not hasattr(tool, "get_current_state"):
            return None
        result = await tool.get_current_state()
        if result_failed(result):
            logger.debug(f"No browser state: {result}")
            return None
        self.current_base64_image = result.base64_image
        try:
            state: dict[str, Any] = json.loads(result.output)
        except (TypeError, ValueError):
            logger.warning("The browser state was not valid JSON")
            return None
        if self.on_state is not None:
            self.on_state(state, result.base64_image)
        return state

    async def format_next_step_prompt(self, template: str = NEXT_STEP_PROMPT) -> str:
        """``template`` with the browser placeholders filled from the current state."""
        self.current_base64_image = None
        state = await self.get_browser_state()
        url = tabs = above = below = ""
        if state:
            url = f"\n   URL: {state.get('url', '')}\n   Title: {state.get('title', '')}"
            tab_list = state.get("tabs") or []
            if tab_list:
                listed = "; ".join(
                    f"{t.get('tab_id')}: {t.get('title') or t.get('url')}"
                    + (" (current)" if t.get("active") else "")
                    for t in tab_list
                )
                tabs = f"\n   {len(tab_list)} tab(s) open: {listed}"
            scroll = state.get("scroll_info") or {}
            above_px = int(scroll.get("pixels_above") or 0)
            below_px = int(scroll.get("pixels_below") or 0)
            if above_px > 0:
                above = f"\n   {above_px} pixels of content above the visible part"
            if below_px > 0:
                below = f"\n   {below_px} pixels of content below the visible part"
            elements = state.get("interactive_elements")
            if elements:
                below += f"\n   Interactive elements:\n{elements}"
            if state.get("note"):
                below += f"\n   {state['note']}"
        else:
            url = "\n   (no page is open yet)"
        return template.format(
            url_placeholder=url,
            tabs_placeholder=tabs,
            content_above_placeholder=above,
            content_below_placeholder=below,
            results_placeholder="",
        )

    def attach_screenshot(self, messages: list[Message]) -> list[Message]:
        """Put the screenshot on the final (next-step) user message, if the model takes images."""
        image, self.current_base64_image = self.current_base64_image, None
        llm = self.agent.llm
        if not image or not messages or messages[-1].role != "user":
            return messages
        if not getattr(llm, "supports_images", False):
            return messages
        last = messages[-1]
        return [*messages[:-1], Message.user_message(last.content or "", base64_image=image)]

    async def cleanup_browser(self) -> None:
        tool = self.browser_tool()
        if tool is not None:
            await tool.cleanup()


def _browser_tools() -> ToolCollection:
    # Measured: 40 ms of ``import app.agent.manus`` (budget 0.5 s); loaded with the first browser.
    from app.tool.browser_use_tool import BrowserUseTool

    return ToolCollection(BrowserUseTool(), Terminate())


class BrowserAgent(ToolCallAgent):
    """Completes tasks in a browser; every step's prompt carries the live page state."""

    name: str = "browser"
    description: str = "A browser agent that can control a browser to accomplish tasks"

    system_prompt: str = SYSTEM_PROMPT
    next_step_prompt: str = NEXT_STEP_PROMPT

    max_observe: int = 10000
    max_steps: int = 20

    #: Built for the workspace by the validator below, unless passed in.
    available_tools: ToolCollection = Field(default_factory=ToolCollection)
    special_tool_names: list[str] = Field(default_factory=lambda: [Terminate().name])

    _helper: BrowserContextHelper | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _setup_tools(self) -> BrowserAgent:
        if "available_tools" not in self.model_fields_set:
            self.available_tools = _browser_tools()
        self._helper = BrowserContextHelper(self)
        return self

    @property
    def browser_context_helper(self) -> BrowserContextHelper:
        assert self._helper is not None
        return self._helper

    async def think(self) -> bool:
        template = self.next_step_prompt
        self.next_step_prompt = await self.browser_context_helper.format_next_step_prompt(
            template or NEXT_STEP_PROMPT
        )
        try:
            return await super().think()
        finally:
            self.next_step_prompt = template

    def _request_messages(self) -> list[Message]:
        return self.browser_context_helper.attach_screenshot(super()._request_messages())

    async def cleanup(self) -> None:
        await self.browser_context_helper.cleanup_browser()
        await super().cleanup()
