"""``run_flow.py``: a task planned into steps and carried out by Manus (and the data analyst).

The plan and every step's status are shown on stderr as they change; the final summary goes
to stdout. Options, Ctrl-C handling and exit codes are those of ``main.py``; a step cut short
by Ctrl-C stays ``in_progress``, and ``--resume`` carries it on (``PlanningFlow.execute("")``).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    TerminalSession,
    answer,
    say,
)
from app.cli.options import add_common_options, add_prompt_option, check_common_args

if TYPE_CHECKING:
    from app.agent.base import BaseAgent
    from app.events import EventBus
    from app.flow.planning import PlanningFlow
    from app.flow.result import FlowResult
    from app.session import SessionData, SessionRecorder

__all__ = ["DEFAULT_TIMEOUT", "FlowSession", "build_parser", "main"]

DEFAULT_TIMEOUT = 3600.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run_flow.py",
        description="OpenManus planning flow: the task is split into a plan whose steps are "
        "carried out by agents, with the progress shown live. Without --prompt, reads one "
        "task per line ('exit' to leave).",
    )
    add_prompt_option(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds allowed for one task's whole flow (default: {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--data-analysis",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add the data-analysis agent (default: [runflow] use_data_analysis_agent)",
    )
    add_common_options(parser, max_steps_help="step budget of each agent per plan step")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = check_common_args(args)
    if problem is None and not args.timeout > 0:
        problem = "--timeout must be a positive number of seconds"
    if problem:
        say(f"error: {problem}")
        return EXIT_CONFIG
    try:
        return asyncio.run(FlowSession(args).run())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


class FlowSession(TerminalSession):
    """One planning flow per task; the agents (and their conversations) persist across tasks."""

    log_name = "openmanus_flow"
    session_kind = "flow"
    banner = "OpenManus flow ready. Type a task and press Enter; 'exit' or Ctrl-D to leave."

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.agents: dict[str, BaseAgent] = {}
        self.flow: PlanningFlow | None = None

    async def build(self) -> None:
        from app.agent.manus import Manus
        from app.config import config
        from app.flow.base import FlowType
        from app.flow.factory import FlowFactory
        from app.logger import logger

        kwargs = self.agent_options()
        self.agents["manus"] = await Manus.create(**kwargs)
        use_data = self.args.data_analysis
        if use_data is None:
            use_data = config.run_flow_config.use_data_analysis_agent
        if use_data:
            from app.agent.data_analysis import DataAnalysis
            from app.tool.chart.render import matplotlib_available

            if not matplotlib_available():
                logger.warning(
                    "The data-analysis agent cannot draw charts without matplotlib "
                    "(pip install -e '.[data]')"
                )
            self.agents["data_analysis"] = DataAnalysis(**kwargs)
        # Progress is rendered from the flow's events (see TerminalSession._watch).
        flow = FlowFactory.create_flow(FlowType.PLANNING, self.agents, timeout=self.args.timeout)
        self.flow = flow
        logger.info(
            f"Planning flow ready with agents: {', '.join(a.name for a in self.agents.values())}"
        )

    def start_task(self, prompt: str) -> Awaitable[Any]:
        assert self.flow is not None
        return self.flow.execute(prompt)

    def event_bus(self) -> EventBus | None:
        return self.flow.events if self.flow is not None else None

    def session_header(self) -> dict[str, Any]:
        return {"agents": {key: agent.name for key, agent in self.agents.items()}}

    def attach_session(self, recorder: SessionRecorder, *, already_written: bool) -> None:
        assert self.flow is not None
        recorder.attach_flow(self.flow, already_written=already_written)

    def restore_session(self, data: SessionData) -> None:
        assert self.flow is not None
        data.restore_flow(self.flow)

    def continue_task(self) -> Awaitable[Any]:
        assert self.flow is not None
        return self.flow.execute("")

    def report(self, result: FlowResult) -> int:
        if result.summary:
            answer(result.summary)
        if self.task_usage is not None and self.task_usage.requests:
            say(f"Tokens: {self.task_usage}")
        if result.error is not None:
            say(f"error: {result.error}")
            return EXIT_FAILED
        if result.timed_out:
            say(f"error: the flow did not finish within {self.args.timeout:g} s")
            return EXIT_FAILED
        if not result.ok:
            blocked = [
                i for i, s in enumerate(result.plan.get("step_statuses", [])) if s != "completed"
            ]
            say(f"Not every step was completed (blocked: {', '.join(map(str, blocked))})")
            return EXIT_FAILED
        return EXIT_OK

    async def cleanup(self) -> None:
        for agent in self.agents.values():
            await agent.cleanup()
