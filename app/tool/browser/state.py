"""What the model is told about the page: url, title, tabs, elements, scroll, screenshot."""

from __future__ import annotations

import contextlib
from typing import Any

STATE_HELP = (
    "[n] in interactive_elements is the index to pass to click_element, input_text, "
    "get_dropdown_options and select_dropdown_option. Only elements in or near the visible "
    "part of the page are listed; scroll to see more. Tabs are numbered by tab_id for switch_tab."
)


async def current_title(session: Any, fallback: str = "") -> str:
    """``document.title`` of the focused tab (the target's cached title can lag behind)."""
    with contextlib.suppress(Exception):
        cdp = await session.get_or_create_cdp_session()
        reply = await cdp.cdp_client.send.Runtime.evaluate(
            params={"expression": "document.title", "returnByValue": True},
            session_id=cdp.session_id,
        )
        title = (reply.get("result") or {}).get("value")
        if isinstance(title, str) and title:
            return title
    return fallback


async def refresh_selector_map(session: Any) -> dict[int, Any]:
    """Index the page's interactive elements again (indices come from the last state read)."""
    summary = await session.get_browser_state_summary(include_screenshot=False)
    return summary.dom_state.selector_map


async def read_state(session: Any) -> tuple[dict[str, Any], str | None]:
    """The page state as upstream's JSON shape, plus a base64 screenshot (or None)."""
    summary = await session.get_browser_state_summary(include_screenshot=True)
    tabs = await session.get_tabs()
    focus = session.agent_focus_target_id
    tab_list = [
        {"tab_id": i, "url": tab.url, "title": tab.title, "active": tab.target_id == focus}
        for i, tab in enumerate(tabs)
    ]
    info = summary.page_info
    viewport = info.viewport_height if info else 0
    state: dict[str, Any] = {
        "url": summary.url,
        "title": await current_title(session, summary.title),
        "tabs": tab_list,
        "help": STATE_HELP,
        "interactive_elements": summary.dom_state.llm_representation()
        or "(no interactive elements visible)",
        "scroll_info": {
            "pixels_above": info.pixels_above if info else 0,
            "pixels_below": info.pixels_below if info else 0,
            "total_height": info.page_height if info else 0,
        },
        "viewport_height": viewport,
    }
    return state, summary.screenshot or None
