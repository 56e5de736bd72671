"""Upstream's ``browser_use`` actions on browser-use's session and tools; what the model can
fix (a missing argument, an unknown index or tab, a page that fails to load) is a ``ToolError``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Literal, get_args

from app.exceptions import ToolError
from app.tool.browser.extract import extract_with_llm, page_markdown
from app.tool.browser.state import current_title, refresh_selector_map
from app.tool.browser.urls import check_url_resolved, is_blocked, own_server

Action = Literal[
    "go_to_url",
    "click_element",
    "input_text",
    "scroll_down",
    "scroll_up",
    "scroll_to_text",
    "send_keys",
    "get_dropdown_options",
    "select_dropdown_option",
    "go_back",
    "refresh",
    "web_search",
    "wait",
    "extract_content",
    "switch_tab",
    "open_tab",
    "close_tab",
]
ACTIONS: tuple[str, ...] = get_args(Action)
#: Arguments an action needs (upstream's ``dependencies``; the others need none).
REQUIRED: dict[str, tuple[str, ...]] = {
    "go_to_url": ("url",),
    "click_element": ("index",),
    "input_text": ("index", "text"),
    "scroll_to_text": ("text",),
    "send_keys": ("keys",),
    "get_dropdown_options": ("index",),
    "select_dropdown_option": ("index", "text"),
    "web_search": ("query",),
    "extract_content": ("goal",),
    "switch_tab": ("tab_id",),
    "open_tab": ("url",),
}

_MAX_WAIT = 60


class BrowserActions:
    """The actions, bound to one connected session. Built per call by the tool."""

    def __init__(
        self,
        bu: Any,
        session: Any,
        tools: Any,
        *,
        max_content_length: int,
        llm: Callable[[], Any],
        search: Callable[[str], Awaitable[Any]],
    ) -> None:
        self.bu = bu
        self.session = session
        self.tools = tools
        self.max_content_length = max_content_length
        self._llm = llm
        self._search = search

    async def run(self, action: str, args: dict[str, Any]) -> str:
        handler = getattr(self, f"_{action}")
        await self._leave_local_page()  # e.g. reached by a script after the last action
        try:
            return await handler(**{key: args[key] for key in REQUIRED.get(action, ())}, extra=args)
        finally:
            await self._leave_local_page()

    async def _leave_local_page(self) -> None:
        """A page on a local address (a link or script led there) is left at once, before
        anything of it reaches the model."""
        try:
            url = await self.session.get_current_page_url()
        except Exception:  # no page yet
            return
        server = own_server(url) if url else None
        if server is None and not (url and is_blocked(url)):
            return
        with contextlib.suppress(Exception):
            await self._event(self.bu.events.NavigateToUrlEvent(url="about:blank"))
        if server is not None:
            raise ToolError(
                f"The page went to {url[:200]!r}, which is this program's own {server.label}; "
                "the browser may not open it, so the page was closed."
            )
        raise ToolError(
            f"The page went to {url[:200]!r}, a local address the browser may not show; it "
            "was closed. Only web pages (http, https) can be opened."
        )

    # ---- helpers ---------------------------------------------------------------------------

    async def _tool(self, name: str, **params: Any) -> str:
        """Run one of browser-use's own actions; its error text becomes a ``ToolError``."""
        result = await getattr(self.tools, name)(browser_session=self.session, **params)
        if result.error:
            raise ToolError(str(result.error))
        return str(result.extracted_content or "").strip()

    async def _event(self, event: Any) -> Any:
        dispatched = self.session.event_bus.dispatch(event)
        await dispatched
        return await dispatched.event_result(raise_if_any=True, raise_if_none=False)

    async def _element(self, index: Any) -> int:
        """Check the index exists on the page (re-reading the page's elements if needed)."""
        try:
            index = int(index)
        except (TypeError, ValueError):
            raise ToolError(f"index must be an integer, not {index!r}") from None
        selector_map = await self.session.get_selector_map()
        if index not in selector_map:
            selector_map = await refresh_selector_map(self.session)
        if index not in selector_map:
            known = ", ".join(str(i) for i in sorted(selector_map)[:40]) or "none"
            raise ToolError(
                f"There is no element with index {index} on the page. Known indices: {known}. "
                "Read the current browser state again; indices change when the page changes."
            )
        return index

    async def _navigate(self, url: str, *, new_tab: bool, timeout: float) -> str:
        """Open ``url`` once it passed ``check_url_resolved``; returns the address opened."""
        url = await check_url_resolved(str(url))
        event = self.bu.events.NavigateToUrlEvent(
            url=url, new_tab=new_tab, timeout_ms=int(timeout * 1000), event_timeout=timeout
        )
        try:
            await self._event(event)
        except TimeoutError as e:
            raise ToolError(f"The page {url} did not load within {timeout:g} s") from e
        except Exception as e:
            raise ToolError(f"Could not load {url}: {e}") from e
        return url

    async def _page_summary(self) -> str:
        url = await self.session.get_current_page_url()
        title = await current_title(self.session)
        return f"{title} ({url})" if title else url

    # ---- actions ---------------------------------------------------------------------------

    async def _go_to_url(self, url: str, extra: dict[str, Any]) -> str:
        url = await self._navigate(url, new_tab=False, timeout=extra["_timeout"])
        return f"Navigated to {url}; now showing {await self._page_summary()}"

    async def _open_tab(self, url: str, extra: dict[str, Any]) -> str:
        url = await self._navigate(url, new_tab=True, timeout=extra["_timeout"])
        return f"Opened a new tab with {url}; now showing {await self._page_summary()}"

    async def _click_element(self, index: Any, extra: dict[str, Any]) -> str:
        index = await self._element(index)
        message = await self._tool("click", index=index)
        return f"{message or f'Clicked element {index}'}; page: {await self._page_summary()}"

    async def _input_text(self, index: Any, text: Any, extra: dict[str, Any]) -> str:
        index = await self._element(index)
        message = await self._tool("input", index=index, text=str(text))
        return f"{message or 'Typed the text'} into element {index}"

    async def _scroll(self, down: bool, amount: Any) -> str:
        if amount is None:
            summary = await self.session.get_browser_state_summary(include_screenshot=False)
            info = summary.page_info
            amount = info.viewport_height if info else 800
        try:
            pixels = int(amount)
        except (TypeError, ValueError):
            raise ToolError(f"scroll_amount must be a number of pixels, not {amount!r}") from None
        if pixels <= 0:
            raise ToolError("scroll_amount must be a positive number of pixels")
        direction = "down" if down else "up"
        await self._event(self.bu.events.ScrollEvent(direction=direction, amount=pixels))
        return f"Scrolled {direction} by {pixels} pixels"

    async def _scroll_down(self, extra: dict[str, Any]) -> str:
        return await self._scroll(True, extra.get("scroll_amount"))

    async def _scroll_up(self, extra: dict[str, Any]) -> str:
        return await self._scroll(False, extra.get("scroll_amount"))

    async def _scroll_to_text(self, text: Any, extra: dict[str, Any]) -> str:
        text = str(text)
        try:
            await self._event(self.bu.events.ScrollToTextEvent(text=text))
        except Exception as e:
            raise ToolError(f"The text {text!r} was not found on the page") from e
        return f"Scrolled to the text {text!r}"

    async def _send_keys(self, keys: Any, extra: dict[str, Any]) -> str:
        return await self._tool("send_keys", keys=str(keys)) or f"Sent keys: {keys}"

    async def _get_dropdown_options(self, index: Any, extra: dict[str, Any]) -> str:
        index = await self._element(index)
        return await self._tool("dropdown_options", index=index)

    async def _select_dropdown_option(self, index: Any, text: Any, extra: dict[str, Any]) -> str:
        index = await self._element(index)
        return await self._tool("select_dropdown", index=index, text=str(text))

    async def _go_back(self, extra: dict[str, Any]) -> str:
        await self._event(self.bu.events.GoBackEvent())
        return f"Went back; now showing {await self._page_summary()}"

    async def _refresh(self, extra: dict[str, Any]) -> str:
        await self._event(self.bu.events.RefreshEvent())
        return f"Reloaded {await self._page_summary()}"

    async def _wait(self, extra: dict[str, Any]) -> str:
        seconds = extra.get("seconds")
        seconds = 3 if seconds is None else seconds
        try:
            seconds = float(seconds)
        except (TypeError, ValueError):
            raise ToolError(f"seconds must be a number, not {seconds!r}") from None
        seconds = min(max(seconds, 0.0), float(_MAX_WAIT), max(extra["_timeout"] - 1, 0))
        await asyncio.sleep(seconds)
        return f"Waited {seconds:g} seconds"

    async def _switch_tab(self, tab_id: Any, extra: dict[str, Any]) -> str:
        tabs = await self.session.get_tabs()
        try:
            position = int(tab_id)
        except (TypeError, ValueError):
            raise ToolError(f"tab_id must be an integer, not {tab_id!r}") from None
        if not 0 <= position < len(tabs):
            raise ToolError(
                f"There is no tab {position}; open tabs are 0..{len(tabs) - 1}: "
                + "; ".join(f"{i}: {t.url}" for i, t in enumerate(tabs))
            )
        await self._event(self.bu.events.SwitchTabEvent(target_id=tabs[position].target_id))
        return f"Switched to tab {position}: {await self._page_summary()}"

    async def _close_tab(self, extra: dict[str, Any]) -> str:
        target = self.session.agent_focus_target_id
        if target is None:
            raise ToolError("There is no open tab to close")
        closed_url = await self.session.get_current_page_url()
        await self._event(self.bu.events.CloseTabEvent(target_id=target))
        tabs = await self.session.get_tabs()
        if not tabs:
            return f"Closed the tab with {closed_url}; no tabs are open now"
        if self.session.agent_focus_target_id not in {t.target_id for t in tabs}:
            await self._event(self.bu.events.SwitchTabEvent(target_id=tabs[-1].target_id))
        return f"Closed the tab with {closed_url}; now showing {await self._page_summary()}"

    async def _web_search(self, query: Any, extra: dict[str, Any]) -> str:
        response = await self._search(str(query))
        if getattr(response, "error", None):
            raise ToolError(str(response.error))
        results = getattr(response, "results", None) or []
        if not results:
            raise ToolError(f"The web search for {query!r} found nothing")
        first = await self._navigate(results[0].url, new_tab=False, timeout=extra["_timeout"])
        return f"{response.output}\n\nOpened the first result: {first}"

    async def _extract_content(self, goal: Any, extra: dict[str, Any]) -> str:
        url = await self.session.get_current_page_url()
        page, full_length = await page_markdown(
            self.bu.extract_clean_markdown, self.session, self.max_content_length
        )
        found = await extract_with_llm(
            self._llm(), goal=str(goal), url=url, page=page, full_length=full_length
        )
        return f"Extracted from page {url} for the goal {str(goal)!r}:\n{found}"
