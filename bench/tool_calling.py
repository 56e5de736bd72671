"""How often a small local model gets a task done, per tool-calling mode, side by side.

``python -m bench.tool_calling`` starts llama-cpp-python's server with each model of the
real-model tier (``bash scripts/setup-real-model.sh``) and runs Manus on one task ("Create a
file named hello.txt containing exactly: Hello, world", 4 steps at most) several times per
mode, one fixed seed per run (sent by a proxy in front of the server), then prints per model
and mode: the runs that left exactly the right file, the share of tool calls valid for their
tool's schema, the calls caught for copying an example's placeholders (valid for the schema
but never run), and the seconds a run took. Each mode runs against the server configuration it
is meant for: ``native`` and ``auto`` against ``chatml-function-calling`` (the server offers
tool calls), ``auto-plain``, ``text``, ``constrained`` and ``constrained-2`` (two requests a
turn: ``constrained_steps = 2``) against the model's own template (the server drops tools).
Not a timed test: a benchmark (docs/local-models.md quotes it).

    python -m bench.tool_calling --models smollm2 --modes constrained text --runs 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TASK = "Create a file named hello.txt containing exactly: Hello, world"
EXPECTED = "Hello, world"
FILE = "hello.txt"
#: Mode -> (tool_calling, which chat format the server runs with: "tools" or "own",
#: constrained_steps).
MODES: dict[str, tuple[str, str, int]] = {
    "native": ("native", "tools", 1),
    "auto": ("auto", "tools", 1),
    "auto-plain": ("auto", "own", 1),
    "text": ("text", "own", 1),
    "constrained": ("constrained", "own", 1),
    "constrained-2": ("constrained", "own", 2),
}
#: Each model's chat format for "tools" and "own" (Gemma's GGUF has no template of its own).
CHAT_FORMATS: dict[str, dict[str, str | None]] = {
    "smollm2": {"tools": "chatml-function-calling", "own": None},
    "gemma3": {"tools": "chatml-function-calling", "own": "gemma"},
}
#: The seeds of the runs, one each (run i uses SEEDS[i], then SEEDS[-1] + i).
SEEDS = (11, 23, 37, 41, 53, 67, 71, 83, 97, 101)


def seed_of(run: int) -> int:
    return SEEDS[run] if run < len(SEEDS) else SEEDS[-1] + run


@dataclass
class Run:
    """One run of the task: whether it left the file, and its calls."""

    seed: int
    success: bool
    content: str | None
    calls: list[tuple[str, str]] = field(default_factory=list)
    #: Calls not valid for their tool's schema, with the problem.
    invalid: list[tuple[str, str, str]] = field(default_factory=list)
    #: Calls caught for copying an example's placeholders (valid for the schema, never run:
    #: the model's judgement), as the placeholders copied.
    caught: list[list[str]] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0
    outcome: str = ""


@dataclass
class Rate:
    """The runs of one model in one mode."""

    model: str
    mode: str
    runs: list[Run]

    @property
    def successes(self) -> int:
        return sum(run.success for run in self.runs)

    @property
    def calls(self) -> int:
        return sum(len(run.calls) for run in self.runs)

    @property
    def valid(self) -> int:
        """Calls valid for their tool's schema and run (caught copies are neither invalid
        nor counted here)."""
        return self.calls - self.caught - sum(len(run.invalid) for run in self.runs)

    @property
    def caught(self) -> int:
        return sum(len(run.caught) for run in self.runs)

    @property
    def seconds(self) -> float:
        return statistics.mean(run.seconds for run in self.runs) if self.runs else 0.0


@dataclass
class Calls:
    """The calls of one run: all of them, those their tool's schema refuses, and those caught
    for copying an example's placeholders (never run)."""

    made: list[tuple[str, str]] = field(default_factory=list)
    invalid: list[tuple[str, str, str]] = field(default_factory=list)
    caught: list[list[str]] = field(default_factory=list)


def check_calls(agent: Any) -> Calls:
    """Every call the agent's model made, and those its tool's schema refuses (the agent's
    own check: unknown tool, arguments that are not a JSON object, or invalid ones); a call
    standing for a caught copy of an example is counted apart."""
    from app.llm.constrained import copied_placeholders

    found = Calls()
    calls, invalid = found.made, found.invalid
    for message in agent.memory.messages:
        for call in message.tool_calls or ():
            name, arguments = call.function.name, call.function.arguments or ""
            calls.append((name, arguments))
            copied = copied_placeholders(call)
            if copied is not None:
                found.caught.append(copied)
                continue
            tool = agent.available_tools.get_tool(name)
            try:
                if tool is None:
                    raise ValueError("unknown tool")
                value = json.loads(arguments or "{}")
                if not isinstance(value, dict):
                    raise ValueError("arguments are not a JSON object")
                tool.validate_arguments(value)
            except Exception as e:  # any refusal is what we count
                invalid.append((name, arguments, str(e)[:200]))
    return found


class Seeds:
    """A proxy rewrite that sends the current run's seed with every chat request."""

    def __init__(self) -> None:
        self.seed = SEEDS[0]

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "seed": self.seed}


async def run_task(
    base_url: str,
    tool_calling: str,
    *,
    seed: int,
    workspace: Path,
    temperature: float,
    max_steps: int = 4,
    max_tokens: int = 128,
    timeout: float = 300.0,
    constrained_steps: int = 1,
) -> Run:
    """Manus on the task in ``workspace`` against ``base_url`` (the seed is the caller's
    business: a proxy sends it)."""
    from app.agent.manus import Manus
    from app.config import LLMSettings
    from app.llm import LLM

    settings = LLMSettings(
        model="local",
        base_url=base_url,
        api_key="sk-local",
        max_tokens=max_tokens,
        temperature=temperature,
        timeout=timeout,
        max_retries=1,
        tool_calling=tool_calling,  # type: ignore[arg-type]  # checked by the settings
        constrained_steps=constrained_steps,  # type: ignore[arg-type]  # checked too
    )
    llm = LLM.create(llm_config=settings)
    agent = await Manus.create(connect_mcp=False, llm=llm, workspace=workspace, max_steps=max_steps)
    started = time.perf_counter()
    try:
        result = await agent.run(TASK)
        outcome = str(result.stop_reason) if result.ok else (result.failure or "failed")
        steps = result.steps
    except Exception as e:  # a run that raises is a failed run, counted
        outcome, steps = f"raised {type(e).__name__}: {e}"[:200], agent.current_step
    finally:
        with contextlib.suppress(Exception):
            await agent.cleanup()
        await llm.aclose()
    seconds = time.perf_counter() - started
    target = workspace / FILE
    content = target.read_text(errors="replace") if target.is_file() else None
    found = check_calls(agent)
    return Run(
        seed,
        content == EXPECTED,
        content,
        found.made,
        found.invalid,
        found.caught,
        steps,
        seconds,
        outcome,
    )


@contextlib.contextmanager
def served(model: str, chat_format: str | None, n_ctx: int, log_dir: Path) -> Iterator[str]:
    """A llama server for ``model`` and a seeding proxy in front of it: yields the proxy's
    base URL (the proxy's rewrite is reached as ``served.seeds``)."""
    from app.testing import LlamaServer, RecordingProxy

    label = f"{model}-{chat_format or 'own'}"
    with LlamaServer(
        model, chat_format=chat_format, n_ctx=n_ctx, log_path=log_dir / f"{label}.log"
    ) as server:
        proxy = RecordingProxy(server.base_url, rewrite=SEEDS_REWRITE).start()
        try:
            yield proxy.base_url
        finally:
            proxy.stop()


#: The rewrite the benchmark's proxies share (one run at a time).
SEEDS_REWRITE = Seeds()


async def measure(
    model: str,
    mode: str,
    base_url: str,
    runs: int,
    *,
    temperature: float,
    max_steps: int,
    max_tokens: int,
    log: Any = None,
) -> Rate:
    """``runs`` runs of the task in ``mode`` against ``base_url`` (a seeding proxy), each in an
    emptied workspace; the endpoint memory is one per model and mode, as a user's would be."""
    tool_calling, _, steps = MODES[mode]
    done: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench-tool-calling-") as tmp:
        os.environ["OPENMANUS_CACHE_DIR"] = str(Path(tmp) / "cache")
        workspace = Path(tmp) / "ws"  # one path: the server's prompt cache serves every run
        for i in range(runs):
            shutil.rmtree(workspace, ignore_errors=True)
            workspace.mkdir()
            SEEDS_REWRITE.seed = seed_of(i)
            run = await run_task(
                base_url,
                tool_calling,
                seed=seed_of(i),
                workspace=workspace,
                temperature=temperature,
                max_steps=max_steps,
                max_tokens=max_tokens,
                constrained_steps=steps,
            )
            done.append(run)
            if log is not None:
                log(
                    f"{model} {mode} seed {run.seed}: {'ok' if run.success else 'no'} "
                    f"({run.content!r}) {len(run.calls)} calls, {len(run.invalid)} invalid, "
                    f"{len(run.caught)} copies caught, "
                    f"{run.seconds:.1f} s; {run.outcome}; calls: "
                    + "; ".join(f"{n} {a}" for n, a in run.calls)[:600]
                )
    return Rate(model, mode, done)


def render(rates: Sequence[Rate]) -> str:
    """The table: one row per model and mode."""
    lines = [
        f"{'model':<9} {'mode':<12} {'hello.txt right':>16} {'valid calls':>12} "
        f"{'copies caught':>14} {'s/run':>7}",
    ]
    for rate in rates:
        share = f"{rate.valid}/{rate.calls}" if rate.calls else "0/0"
        lines.append(
            f"{rate.model:<9} {rate.mode:<12} {f'{rate.successes}/{len(rate.runs)}':>16} "
            f"{share:>12} {rate.caught:>14} {rate.seconds:>7.1f}"
        )
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> list[Rate]:
    import sys

    from app.logger import define_log_level

    define_log_level("WARNING")
    rates: list[Rate] = []
    log_dir = Path(tempfile.mkdtemp(prefix="bench-llama-logs-"))

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    for model in args.models:
        by_server: dict[str | None, list[str]] = {}
        for mode in args.modes:
            by_server.setdefault(CHAT_FORMATS[model][MODES[mode][1]], []).append(mode)
        for chat_format, modes in by_server.items():
            with served(model, chat_format, args.n_ctx, log_dir) as base_url:
                for mode in modes:
                    rate = await measure(
                        model,
                        mode,
                        base_url,
                        args.runs,
                        temperature=args.temperature,
                        max_steps=args.max_steps,
                        max_tokens=args.max_tokens,
                        log=say if args.verbose else None,
                    )
                    rates.append(rate)
                    say(render([rate]).splitlines()[-1])
    return rates


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2", "gemma3"], choices=CHAT_FORMATS)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per run")
    args = parser.parse_args(argv)
    rates = asyncio.run(_main(args))
    print(render(rates))


if __name__ == "__main__":
    main()
