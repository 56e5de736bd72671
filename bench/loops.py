"""The loops being compared: our agent, and two minimal baselines doing the same work.

All three send the same growing conversation (system prompt, task, one assistant tool call
and one tool result per step, the next-step prompt last) with the same tool definitions, and
run the same trivial ``echo`` tool inline. The baselines skip everything a framework adds, so
they bound what a loop can reach on this machine:

* ``raw_sdk``: ``AsyncOpenAI.chat.completions.create`` directly (what the peers build on);
* ``raw_http``: the request JSON posted with a plain HTTP client, the reply parsed by hand.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from app.prompt.toolcall import NEXT_STEP_PROMPT, SYSTEM_PROMPT
from app.tool.base import BaseTool

__all__ = [
    "API_KEY",
    "TASK",
    "Echo",
    "Wait",
    "bench_llm",
    "bench_tools",
    "run_ours",
    "run_raw_http",
    "run_raw_http_stream",
    "run_raw_sdk",
    "workload",
]

API_KEY = "sk-bench-0123456789abcdef"
TASK = "Repeat after me, using the echo tool, until you are told to stop."
MAX_TOKENS = 4096
TEMPERATURE = 0.0


class Echo(BaseTool):
    """The trivial tool every loop runs: hands its argument back."""

    name: str = "echo"
    description: str = "Return the given text unchanged."
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Text to return."}},
        "required": ["text"],
    }
    concurrency_safe: bool = True

    async def execute(self, text: str) -> str:
        return text


class Wait(BaseTool):
    """A read-only tool that takes a while (an I/O-bound lookup), for the parallel figure."""

    name: str = "wait"
    description: str = "Wait for a short while, then report the label."
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {"label": {"type": "string"}},
        "required": ["label"],
    }
    concurrency_safe: bool = True
    seconds: float = 0.05

    async def execute(self, label: str) -> str:
        await asyncio.sleep(self.seconds)
        return label


def bench_tools() -> list[BaseTool]:
    from app.tool.terminate import Terminate

    return [Echo(), Terminate()]


def bench_llm(base_url: str, model: str = "echo") -> Any:
    """An independent LLM on the bench server (the scenario is chosen by ``model``)."""
    from app.config import LLMSettings
    from app.llm import LLM

    settings = LLMSettings(
        model=model,
        base_url=base_url,
        api_key=API_KEY,
        max_tokens=MAX_TOKENS,
        temperature=TEMPERATURE,
        max_retries=2,
        timeout=120.0,
    )
    return LLM.create(llm_config=settings)


async def run_ours(
    llm: Any, steps: int, tools: list[BaseTool] | None = None, listener: Any = None
) -> int:
    """Our ToolCallAgent for ``steps`` steps; returns the steps taken. ``listener`` (a
    tracing listener, for example) is subscribed to its events."""
    from app.agent.toolcall import ToolCallAgent
    from app.schema import Memory
    from app.tool.tool_collection import ToolCollection

    agent = ToolCallAgent(
        llm=llm,
        available_tools=ToolCollection(*(tools or bench_tools())),
        max_steps=steps,
        # Same history as the baselines: nothing is trimmed away.
        memory=Memory(max_messages=2 * steps + 10),
    )
    if listener is not None:
        agent.subscribe(listener)
    result = await agent.run(TASK)
    return result.steps


def _tool_message(call_id: str, name: str, output: str) -> dict[str, Any]:
    # The same observation text our agent stores, so every loop sends the same bytes.
    return {
        "role": "tool",
        "content": f"Observed output of cmd `{name}` executed:\n{output}",
        "name": name,
        "tool_call_id": call_id,
    }


def _start() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": TASK}]


_NEXT = {"role": "user", "content": NEXT_STEP_PROMPT}


async def run_raw_sdk(client: Any, model: str, tools: list[dict[str, Any]], steps: int) -> int:
    """The peers' loop: ``chat.completions.create`` with the growing message list."""
    echo = Echo()
    messages = _start()
    for _ in range(steps):
        response = await client.chat.completions.create(
            model=model,
            messages=[*messages, _NEXT],
            tools=tools,
            tool_choice="auto",
            max_tokens=MAX_TOKENS,
            temperature=TEMPERATURE,
        )
        message = response.choices[0].message
        calls = message.tool_calls or []
        messages.append(
            {
                "role": "assistant",
                "content": message.content or "",
                "tool_calls": [c.model_dump(exclude_none=True) for c in calls],
            }
        )
        for c in calls:
            output = await echo.execute(**json.loads(c.function.arguments))
            messages.append(_tool_message(c.id, c.function.name, output))
    return steps


def workload(tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What every loop sends, as plain data for loops that import nothing from ``app``."""
    if tools is None:
        tools = [tool.to_param() for tool in bench_tools()]
    return {
        "system": SYSTEM_PROMPT,
        "task": TASK,
        "next": NEXT_STEP_PROMPT,
        "tools": tools,
        "api_key": API_KEY,
        "max_tokens": MAX_TOKENS,
        "temperature": TEMPERATURE,
    }


async def run_raw_http(
    http: Any, url: str, model: str, tools: list[dict[str, Any]], steps: int
) -> int:
    """The floor: the same JSON posted with a plain HTTP client (``bench.raw``)."""
    from bench.raw import run_raw_http as raw_loop

    return await raw_loop(http, url, model, workload(tools), steps)


async def run_raw_http_stream(
    http: Any, url: str, model: str, tools: list[dict[str, Any]], steps: int
) -> int:
    """The floor with every turn streamed, as ours is (``bench.raw``)."""
    from bench.raw import run_raw_http_stream as raw_loop

    return await raw_loop(http, url, model, workload(tools), steps)
