"""``main.py``: the interactive terminal program around Manus. Progress goes to stderr, only
final answers to stdout (``python main.py -p ... > answer.txt`` works); a run that does not
complete exits 1 with its reason on stderr.
"""

from __future__ import annotations

import argparse

from app.cli.options import add_common_options, add_prompt_option, check_common_args, run_program


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="OpenManus: a general-purpose agent that runs code, edits files and more. "
        "Without --prompt, opens an interactive prompt (one task per line; 'exit' to leave).",
    )
    add_prompt_option(parser)
    add_common_options(parser, max_steps_help="step budget per task (default: 20)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_program("AgentSession", args, check_common_args(args))
