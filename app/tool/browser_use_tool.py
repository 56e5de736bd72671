"""``browser_use``: the model drives a real Chromium through browser-use (upstream's name,
actions and schema); started lazily, one call at a time, replaced when it died."""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar, TypeVar

from pydantic import ConfigDict, Field, PrivateAttr

from app.config import BrowserSettings, config
from app.exceptions import ToolError
from app.llm import LLM
from app.tool.base import BaseTool, ToolFailure, ToolResult
from app.tool.browser.actions import ACTIONS, REQUIRED, Action, BrowserActions
from app.tool.browser.guard import blocked_note
from app.tool.browser.runtime import BrowserRuntime, load_browser_use
from app.tool.browser.state import read_state
from app.tool.declared import ToolArgs
from app.tool.web_search import WebSearch

#: Upstream's type variable for the tool's context (kept for code importing it).
Context = TypeVar("Context")

_DESCRIPTION = """\
Control a web browser: open pages, read them, click, type, scroll, use tabs and search the web.
The browser keeps its state between calls. Elements are addressed by the [index] shown in the
current browser state; indices change when the page changes, so read the state again after
navigating. Actions:
- go_to_url(url): open a URL in the current tab; open_tab(url): open it in a new tab
- click_element(index); input_text(index, text): type into a field (replaces its content)
- scroll_down / scroll_up(scroll_amount: pixels, default one screen); scroll_to_text(text)
- send_keys(keys): keys or shortcuts such as "Enter", "Escape", "Control+a"
- get_dropdown_options(index); select_dropdown_option(index, text): pick an option by its text
- go_back; refresh; wait(seconds)
- switch_tab(tab_id); close_tab: close the current tab
- web_search(query): search the web and open the first result
- extract_content(goal): read the whole current page and return what the goal asks for
"""


class BrowserUseArgs(ToolArgs):
    # Which arguments each action needs, as upstream's schema says it (JSON Schema
    # ``dependencies``); execute checks it, with a message naming the action.
    model_config = ConfigDict(
        json_schema_extra={"dependencies": {name: list(REQUIRED.get(name, ())) for name in ACTIONS}}
    )

    action: Action = Field(description="The action to run.")
    url: str | None = Field(None, description="URL for 'go_to_url' or 'open_tab'.")
    index: int | None = Field(
        None,
        description="Element index for 'click_element', 'input_text', "
        "'get_dropdown_options' and 'select_dropdown_option'.",
    )
    text: str | None = Field(
        None, description="Text for 'input_text', 'scroll_to_text' or 'select_dropdown_option'."
    )
    scroll_amount: int | None = Field(
        None,
        description="Pixels to scroll for 'scroll_down' or 'scroll_up' (default: one screen).",
    )
    tab_id: int | None = Field(None, description="Tab number for 'switch_tab'.")
    query: str | None = Field(None, description="Search query for 'web_search'.")
    goal: str | None = Field(None, description="What to extract, for 'extract_content'.")
    keys: str | None = Field(None, description="Keys to send for 'send_keys'.")
    seconds: int | None = Field(None, description="Seconds to wait for 'wait'.")


_NAVIGATING = {"go_to_url", "open_tab", "web_search", "refresh", "go_back"}


class BrowserUseTool(BaseTool):
    """One browser per tool instance; ``cleanup()`` closes it and the next call starts anew."""

    name: str = "browser_use"
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = BrowserUseArgs

    settings: BrowserSettings | None = Field(
        default=None, description="Browser settings; None means the config's [browser]."
    )
    llm: Any = Field(default=None, description="LLM for extract_content; None: the default LLM.")
    web_search_tool: Any = Field(default=None, description="WebSearch used by 'web_search'.")
    start_timeout: float = Field(default=30.0, gt=0)

    _runtime: BrowserRuntime | None = PrivateAttr(default=None)

    def _settings(self) -> BrowserSettings:
        if self.settings is None:
            self.settings = config.section_or_default("browser_config")
        return self.settings

    @property
    def runtime(self) -> BrowserRuntime:
        if self._runtime is None:
            self._runtime = BrowserRuntime(self._settings(), start_timeout=self.start_timeout)
        return self._runtime

    @property
    def is_started(self) -> bool:
        """Whether a browser is (or was, until it died) open."""
        return self._runtime is not None and self._runtime.started

    def _get_llm(self) -> Any:
        if self.llm is None:
            self.llm = LLM()
        return self.llm

    async def _search(self, query: str) -> Any:
        if self.web_search_tool is None:
            self.web_search_tool = WebSearch()
        return await self.web_search_tool.execute(query, num_results=3, rounds=1)

    async def execute(
        self,
        action: str,
        url: str | None = None,
        index: int | None = None,
        text: str | None = None,
        scroll_amount: int | None = None,
        tab_id: int | None = None,
        query: str | None = None,
        goal: str | None = None,
        keys: str | None = None,
        seconds: int | None = None,
    ) -> ToolResult:
        if action not in ACTIONS:
            raise ToolError(f"Unknown action {action!r}. Known actions: {', '.join(ACTIONS)}.")
        args: dict[str, Any] = {
            "url": url,
            "index": index,
            "text": text,
            "scroll_amount": scroll_amount,
            "tab_id": tab_id,
            "query": query,
            "goal": goal,
            "keys": keys,
            "seconds": seconds,
        }
        missing = [key for key in REQUIRED.get(action, ()) if args.get(key) in (None, "")]
        if missing:
            raise ToolError(f"Action '{action}' needs: {', '.join(missing)}.")
        timeout = self._settings().action_timeout
        args["_timeout"] = timeout
        runtime = self.runtime
        async with runtime.lock:
            note = await runtime.ensure()
            bu = await load_browser_use()
            actions = BrowserActions(
                bu,
                runtime.session,
                runtime.tools,
                max_content_length=self._settings().max_content_length,
                llm=self._get_llm,
                search=self._search,
            )
            try:
                output = await asyncio.wait_for(actions.run(action, args), timeout)
            except Exception as e:
                if isinstance(e, TimeoutError):
                    what = (
                        f"The page {url or ''} did not load"
                        if action in _NAVIGATING
                        else f"The browser action '{action}' did not finish"
                    )
                    message = f"{what} within {timeout:g} s."
                elif isinstance(e, ToolError):
                    message = e.message
                elif not await runtime.is_healthy():
                    message = (
                        f"The browser stopped during '{action}' ({type(e).__name__}: {e}). "
                        "The next browser action starts a new browser."
                    )
                else:
                    message = f"Browser action '{action}' failed: {e}"
                raise ToolError(_join(note, message, runtime)) from e
            output = _join(note, output, runtime)
        return ToolResult(output=output)

    async def get_current_state(self, context: Any = None) -> ToolResult:
        """url, title, tabs, interactive elements, scroll position (JSON) and a screenshot."""
        if not self.is_started:
            return ToolFailure(error="The browser has not been opened yet")
        runtime = self.runtime
        async with runtime.lock:
            try:
                note = await runtime.ensure()
                state, screenshot = await asyncio.wait_for(
                    read_state(runtime.session), self._settings().action_timeout
                )
            except Exception as e:
                return ToolFailure(error=f"Could not read the browser state: {e}")
        if note:
            state["note"] = note
        refused = blocked_note(runtime.take_blocked())
        if refused:
            state["blocked"] = refused
        return ToolResult(output=json.dumps(state, ensure_ascii=False), base64_image=screenshot)

    async def cleanup(self) -> None:
        """Close the browser (the Chromium we started is killed, its files deleted)."""
        if self._runtime is not None:
            async with self._runtime.lock:
                await self._runtime.close()
        if self.web_search_tool is not None:
            await self.web_search_tool.cleanup()


def _join(note: str | None, text: str, runtime: BrowserRuntime | None = None) -> str:
    """The restart note, the text, then what the browser refused meanwhile (if anything)."""
    text = f"{note}\n{text}" if note else text
    refused = blocked_note(runtime.take_blocked()) if runtime is not None else None
    return f"{text}\n{refused}" if refused else text
