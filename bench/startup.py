"""Cold start: how long a fresh interpreter takes to show ``--help`` or import the agents."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["STARTUP_COMMANDS", "heavy_modules_loaded", "measure_startup"]

ROOT = Path(__file__).resolve().parent.parent

#: What is timed, each in a fresh interpreter: the CLI's help, importing the agent classes,
#: and, for reference, the bare interpreter and the openai SDK alone.
STARTUP_COMMANDS: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "python main.py --help": ["main.py", "--help"],
    "import app.agent.manus": ["-c", "import app.agent.manus"],
    "import openai (reference)": ["-c", "import openai"],
}

_HEAVY = ("openai", "httpx2", "mcp", "browser_use", "playwright", "tiktoken")


def _env(pycache: Path | None = None) -> dict[str, str]:
    """Without ``pycache``, nothing is written; with it, bytecode is cached there (outside
    the checkout), so timed runs read compiled code as an installed package does."""
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    if pycache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def measure_startup(reps: int) -> dict[str, float]:
    """Median wall seconds per command, after one untimed run that warms the file cache and
    compiles the bytecode (into a temporary cache: a checkout without ``__pycache__`` would
    otherwise be compiled from source at every start)."""
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        env = _env(Path(tmp))
        for label, args in STARTUP_COMMANDS.items():
            command = [sys.executable, *args]
            subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=True)
            samples = []
            for _ in range(reps):
                start = time.perf_counter()
                subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=True)
                samples.append(time.perf_counter() - start)
            results[label] = statistics.median(samples)
    return results


def heavy_modules_loaded(code: str) -> list[str]:
    """Which heavy packages a fresh interpreter has imported after running ``code``."""
    probe = (
        f"{code}\nimport sys\n"
        f"print('loaded:' + ','.join(m for m in {_HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    line = next((x for x in reversed(out) if x.startswith("loaded:")), "loaded:")
    return [m for m in line.removeprefix("loaded:").split(",") if m]
