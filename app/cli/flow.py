"""``run_flow.py``: a task planned into steps and carried out by Manus (and the data analyst).
The plan and the steps' status go to stderr as they change, the summary to stdout.
"""

from __future__ import annotations

import argparse

from app.cli.options import add_common_options, add_prompt_option, check_common_args, run_program

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
    return run_program("FlowSession", args, problem)
