"""Where the time of a run against a real model goes: waiting on the model, or everything else.

``python -m bench.real_model --base-url http://127.0.0.1:8080/v1 --model local`` (or
``python -m bench --real-model --base-url ... --model ...``) runs one agent task against an
OpenAI-compatible server that is already running (llama-cpp-python's server, see
``scripts/setup-real-model.sh``; this starts nothing) and splits each step's wall time into:

* **model**: time waiting on HTTP responses, as the LLM reports it through the public hook
  ``app.llm.context.request_timer`` (every attempt, from sending to the end of the answer);
* **tools**: from the step's first tool call to its last tool result (events);
* **framework**: the rest (prompt building, parsing, memory, events, bookkeeping).

If the LLM of this build does not report through the hook, model time is shown as n/a.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_PROMPT", "StepTimes", "main", "measure_real_model", "render_real_model"]

DEFAULT_PROMPT = (
    "Use the echo tool to repeat the word 'hello' once, then call the terminate tool with "
    "status 'success'."
)


@dataclass
class StepTimes:
    """One step's wall time and its parts, in seconds."""

    step: int
    wall: float = 0.0
    model: float = 0.0
    requests: int = 0
    tools: float = 0.0

    @property
    def framework(self) -> float:
        return max(self.wall - self.model - self.tools, 0.0)


@dataclass
class _Recorder:
    steps: dict[int, StepTimes] = field(default_factory=dict)
    current: StepTimes | None = None
    started: float = 0.0
    first_call: float | None = None
    last_result: float | None = None
    outside_model: float = 0.0  # model time outside any step (e.g. a final summary)
    outside_requests: int = 0

    def on_request(self, seconds: float) -> None:
        if self.current is None:
            self.outside_model += seconds
            self.outside_requests += 1
        else:
            self.current.model += seconds
            self.current.requests += 1

    def on_event(self, event: Any) -> None:
        now = time.perf_counter()
        kind = getattr(event, "kind", "")
        if kind == "step_started":
            self.current = self.steps.setdefault(event.step, StepTimes(event.step))
            self.started, self.first_call, self.last_result = now, None, None
        elif kind == "tool_call" and self.first_call is None:
            self.first_call = now
        elif kind == "tool_result":
            self.last_result = now
        elif kind == "step_finished" and self.current is not None:
            self.current.wall = now - self.started
            if self.first_call is not None and self.last_result is not None:
                self.current.tools = max(self.last_result - self.first_call, 0.0)
            self.current = None


async def measure_real_model(
    base_url: str,
    model: str,
    *,
    agent: str = "toolcall",
    steps: int = 5,
    prompt: str = DEFAULT_PROMPT,
    api_key: str = "sk-local",
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Run one task and return its figures (see :func:`render_real_model`)."""
    from app.config import LLMSettings
    from app.llm import LLM
    from app.llm.context import request_timer

    settings = LLMSettings(
        model=model, base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout
    )
    llm = LLM.create(llm_config=settings)
    instance = _agent(agent, llm, steps)
    recorder = _Recorder()
    unsubscribe = instance.subscribe(recorder.on_event)
    token = request_timer.set(recorder.on_request)
    started = time.perf_counter()
    try:
        result = await instance.run(prompt)
    finally:
        total = time.perf_counter() - started
        request_timer.reset(token)
        unsubscribe()
        await llm.aclose()
    timed = sum(s.requests for s in recorder.steps.values()) + recorder.outside_requests
    requests = int(getattr(result.usage, "requests", 0) or 0)
    supported = timed > 0 or requests == 0
    model_s = sum(s.model for s in recorder.steps.values()) + recorder.outside_model
    tools_s = sum(s.tools for s in recorder.steps.values())
    return {
        "base_url": base_url,
        "model": model,
        "agent": agent,
        "state": str(getattr(result.state, "value", result.state)),
        "steps": result.steps,
        "requests": requests,
        "timed_requests": timed,
        "total_s": total,
        "model_s": model_s if supported else None,
        "tools_s": tools_s,
        "framework_s": max(total - model_s - tools_s, 0.0) if supported else None,
        "per_step": [
            {
                "step": s.step,
                "wall_s": s.wall,
                "model_s": s.model if supported else None,
                "tools_s": s.tools,
                "framework_s": s.framework if supported else None,
            }
            for s in sorted(recorder.steps.values(), key=lambda s: s.step)
        ],
    }


def _agent(kind: str, llm: Any, steps: int) -> Any:
    from app.tool.tool_collection import ToolCollection

    if kind == "manus":
        from app.agent.manus import Manus

        return Manus(llm=llm, max_steps=steps)
    from app.agent.toolcall import ToolCallAgent
    from bench.loops import bench_tools

    return ToolCallAgent(llm=llm, available_tools=ToolCollection(*bench_tools()), max_steps=steps)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{1000 * value:.1f}"


def render_real_model(figures: dict[str, Any]) -> str:
    """The figures as a table: per step and in total, model vs tools vs framework time."""
    lines = [
        f"Real model: {figures['model']} at {figures['base_url']} ({figures['agent']} agent, "
        f"{figures['steps']} steps, {figures['requests']} requests, ended {figures['state']})",
        f"  {'step':>6}{'wall ms':>12}{'model ms':>12}{'tools ms':>12}{'framework ms':>14}",
    ]
    for row in figures["per_step"]:
        lines.append(
            f"  {row['step']:>6}{_ms(row['wall_s']):>12}{_ms(row['model_s']):>12}"
            f"{_ms(row['tools_s']):>12}{_ms(row['framework_s']):>14}"
        )
    lines.append(
        f"  {'total':>6}{_ms(figures['total_s']):>12}{_ms(figures['model_s']):>12}"
        f"{_ms(figures['tools_s']):>12}{_ms(figures['framework_s']):>14}"
    )
    if figures["model_s"] is None:
        lines.append(
            "  model time n/a: this build's LLM does not report through "
            "app.llm.context.request_timer"
        )
    elif figures["steps"]:
        share = figures["framework_s"] / figures["total_s"] if figures["total_s"] else 0.0
        per_step = [r["framework_s"] for r in figures["per_step"] if r["framework_s"] is not None]
        median = statistics.median(per_step) if per_step else 0.0
        lines.append(
            f"  framework: {100 * share:.1f}% of the run, median {1000 * median:.1f} ms per step"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The real-model options (shared with ``python -m bench --real-model``)."""
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. .../v1")
    parser.add_argument("--model", default="local", help="model name (default: local)")
    parser.add_argument("--api-key", default="sk-local")
    parser.add_argument("--agent", choices=["toolcall", "manus"], default="toolcall")
    parser.add_argument("--max-steps", type=int, default=5, help="step budget (default 5)")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)


def run_from_args(args: argparse.Namespace) -> dict[str, Any]:
    from app.logger import define_log_level

    define_log_level("ERROR", "OFF")
    return asyncio.run(
        measure_real_model(
            args.base_url, args.model, agent=args.agent, steps=args.max_steps,
            prompt=args.prompt, api_key=args.api_key,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_model", description=__doc__)
    add_arguments(parser)
    parser.add_argument("--json", metavar="PATH", help="also write the raw figures here")
    args = parser.parse_args(argv)
    if not args.base_url:
        parser.error("--base-url is required (start the model server first)")
    figures = run_from_args(args)
    print(render_real_model(figures))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
