"""The acceptance run: main.py with an ``api_type = "anthropic"`` profile and Claude's prices,
as a subprocess against the scripted Anthropic server."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import ModelPrice
from app.llm.pricing import cost_of
from app.llm.usage import Usage
from app.testing.anthropic_server import SCRIPTED_API_KEY, ScriptedAnthropicServer
from tests.anthropic_helpers import MODEL, PRICE, notes_script
from tests.test_main_e2e import MAIN, child_env

pytestmark = pytest.mark.e2e

_TOKENS = re.compile(
    r"Tokens: (\d+) prompt \+ (\d+) completion = (\d+) tokens in (\d+) request\(s\), "
    r"(\d+) cached, (\d+) written to cache, cost \$(\d+\.\d+)"
)


def anthropic_config(tmp_path: Path, server: ScriptedAnthropicServer) -> Path:
    """A config as a user writes one for Claude: the profile and its [pricing] entry."""
    prices = "\n".join(f"{key} = {value}" for key, value in PRICE.items())
    path = tmp_path / "config.toml"
    path.write_text(
        f"""[llm]
api_type = "anthropic"
model = "{MODEL}"
base_url = "{server.base_url}"
api_key = "{SCRIPTED_API_KEY}"
max_tokens = 4096
max_retries = 0
timeout = 30

[pricing."{MODEL}"]
{prices}
"""
    )
    return path


def test_a_20_step_manus_run_in_main_is_billed_mostly_at_the_cached_rate(tmp_path: Path) -> None:
    steps = 20
    script = notes_script(steps)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {k: v for k, v in child_env(tmp_path).items() if not k.startswith("ANTHROPIC")}
    with ScriptedAnthropicServer(script) as server:
        config = anthropic_config(tmp_path, server)
        command = [sys.executable, str(MAIN), "-p", "write twenty notes"]
        proc = subprocess.run(
            [*command, "--config", str(config), "--workspace", str(workspace)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=180,
        )
        requests = server.message_requests
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "All written."
    assert len(requests) == steps and (workspace / "note_18.txt").read_text() == "note 18\n"
    match = _TOKENS.search(proc.stderr)
    assert match, proc.stderr[-2000:]
    prompt, completion, total, count, cached, written = (int(g) for g in match.groups()[:6])
    printed_cost = float(match.group(7))
    assert count == steps and total == prompt + completion
    assert cached >= 0.8 * prompt, match.group(0)
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cached_tokens=cached,
        cache_write_tokens=written,
    )
    # The printed cost is the cached price: a tenth for reads, 1.25x for writes.
    assert printed_cost == pytest.approx(cost_of(usage, ModelPrice(**PRICE)), abs=1e-4)
    full = cost_of(usage, ModelPrice(input=PRICE["input"], output=PRICE["output"]))
    assert printed_cost < 0.5 * full
