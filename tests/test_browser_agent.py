"""Manus and BrowserAgent drive the real browser on the scripted server: the next-step prompt
carries the browser state, and the screenshot reaches image-capable models only, in a user
message (never in a tool message)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.agent.browser import BrowserAgent
from app.agent.manus import Manus
from app.config import AppConfig, BrowserSettings, config
from app.prompt.browser import NEXT_STEP_PROMPT
from app.prompt.manus import NEXT_STEP_PROMPT as MANUS_NEXT_STEP
from app.schema import AgentState
from app.testing import call, text, tool_calls
from tests.conftest import llm_settings
from tests.web_fixtures import WebServer, isolated_tempdir

pytest.importorskip("browser_use")  # the browser extra

pytestmark = pytest.mark.browser

PAGE = """<html><head><title>Shop</title></head><body>
<a href="/cart">Open the cart</a><button>Buy now</button>
<div style="height: 3000px"></div><p>Footer</p></body></html>"""


@pytest.fixture
def web() -> Iterator[WebServer]:
    with WebServer() as server:
        server.html("/shop", PAGE)
        yield server


@pytest.fixture
def browser_config(llm_server, tmp_path) -> Iterator[None]:
    """A config with a headless browser, and a temp dir that must stay clean (tmp_path is
    made first, so it does not land in that temp dir)."""
    with isolated_tempdir():
        config.use(
            AppConfig(llm=llm_settings(llm_server), browser_config=BrowserSettings(headless=True))
        )
        try:
            yield
        finally:
            config.reset()


def _image_parts(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [part for part in content if part.get("type") == "image_url"]


async def test_manus_browses_and_the_prompt_carries_the_browser_state(
    llm_server, make_llm, browser_config, web, tmp_path
) -> None:
    llm_server.push(
        tool_calls(call("browser_use", {"action": "go_to_url", "url": web.url + "/shop"})),
        tool_calls(call("terminate", {"status": "success"}), content="Found the shop."),
    )
    agent = await Manus.create(llm=make_llm(), workspace=tmp_path)
    assert "browser_use" in agent.available_tools.tool_map
    result = await agent.run("Open the shop page")
    assert result.state == AgentState.FINISHED and result.final_answer == "Found the shop."

    first, second = (r.body["messages"] for r in llm_server.requests)
    assert first[-1]["content"] == MANUS_NEXT_STEP  # no browser yet: the usual prompt
    step_prompt = second[-1]
    assert step_prompt["role"] == "user"
    text_part = next(p["text"] for p in step_prompt["content"] if p["type"] == "text")
    assert f"URL: {web.url}/shop" in text_part and "Title: Shop" in text_part
    assert "Buy now" in text_part and "pixels of content below" in text_part
    assert len(_image_parts(step_prompt)) == 1  # gpt-4o-mini accepts images
    tool_message = next(m for m in second if m["role"] == "tool")
    assert "Navigated to" in tool_message["content"]
    assert all(not _image_parts(m) for m in second if m["role"] == "tool")
    # The state is per step, not stored: the memory has no browser prompt.
    assert not any("Current browser state" in (m.content or "") for m in agent.memory.messages)
    assert not agent.available_tools.get_tool("browser_use").is_started  # closed after run


async def test_no_screenshot_for_a_model_without_images(
    llm_server, browser_config, web, tmp_path
) -> None:
    from app.llm import LLM

    llm = LLM.create(llm_config=llm_settings(llm_server, model="llama3", supports_images=False))
    llm_server.push(
        tool_calls(call("browser_use", {"action": "go_to_url", "url": web.url + "/shop"})),
        text("done"),
    )
    agent = BrowserAgent(llm=llm)
    assert list(agent.available_tools.tool_map) == ["browser_use", "terminate"]
    assert agent.name == "browser" and agent.max_steps == 20
    result = await agent.run("look at the shop")
    assert result.final_answer == "done"
    first, second = (r.body["messages"] for r in llm_server.requests)
    assert "(no page is open yet)" in first[-1]["content"]
    assert isinstance(second[-1]["content"], str) and "Title: Shop" in second[-1]["content"]
    assert not any(_image_parts(m) for m in second)
    assert "image was omitted" not in str(second)
    assert NEXT_STEP_PROMPT.split("{")[0] in second[-1]["content"]
