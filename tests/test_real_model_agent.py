"""Agents against a real server: recovery from context overflow, cut answers, and ``main.py``
as a subprocess. The model's choices are not asserted; where a test needs a particular choice,
the recording proxy makes the server force it (a ``tool_choice`` naming the tool, a ban on the
end-of-text tokens)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.agent.toolcall import ToolCallAgent
from app.config import CompactionSettings
from app.events import Compacted
from app.exceptions import ContextWindowExceededError
from app.schema import Message
from app.testing.proxy import ProxiedExchange
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection
from tests.real_model_fixtures import ROOT, child_env, write_config

pytestmark = pytest.mark.real_model

MAIN = ROOT / "main.py"
SMOLLM2_NO_EOS = {"0": -100, "2": -100}


def filler(seed: int, words: int) -> str:
    """Distinct words, so the text costs roughly a token or two per word."""
    return " ".join(f"w{seed}x{i}" for i in range(words))


def overflowed(exchange: ProxiedExchange) -> bool:
    return b"context_length_exceeded" in exchange.response


def answered(exchange: ProxiedExchange) -> bool:
    """The server produced an answer (a streamed request may get 200 and no events)."""
    return exchange.status == 200 and (
        exchange.response_json() is not None or b"data: {" in exchange.response
    )


async def test_overflow_compacts_and_retries_instead_of_dying(real_llm, recording_proxy):
    """A conversation larger than the server's 2048-token window (not known in advance: the
    model is called "local"): the first request gets 400 context_length_exceeded, the agent
    learns the window, compacts its history and asks again instead of failing the run."""
    proxy = recording_proxy("smollm2-2k")
    llm = real_llm("smollm2-2k", base_url=proxy.base_url, max_tokens=16)
    agent = ToolCallAgent(
        llm=llm,
        available_tools=ToolCollection(Terminate()),
        max_steps=2,
        compaction=CompactionSettings(summary_max_tokens=96),
    )
    for turn in range(8):  # about 3000 tokens of older conversation (~5 tokens a word)
        agent.memory.add_message(Message.user_message(f"Note {turn}: {filler(turn, 70)}"))
        agent.memory.add_message(Message.assistant_message(f"Noted {turn}."))
    compactions: list[Compacted] = []
    agent.subscribe(lambda e: compactions.append(e) if isinstance(e, Compacted) else None)

    result = await agent.run("Reply with one word.")

    chats = proxy.chat_requests()
    overflows = [i for i, e in enumerate(chats) if e.status == 400 and overflowed(e)]
    assert overflows, f"the server never saw the overflow: {[e.status for e in chats]}"
    assert any(answered(e) for e in chats[overflows[0] + 1 :]), "never asked again"
    assert not isinstance(result.error, ContextWindowExceededError), repr(result)
    assert llm.context_window == 2048  # learned from the server's message
    assert compactions, "no Compacted event"
    assert compactions[0].after_tokens < compactions[0].before_tokens


async def test_cut_answers_are_not_reported_as_success(real_llm, recording_proxy):
    """Every reply is cut at max_tokens (finish_reason "length"): the run must not end as a
    success with a half-written answer."""

    def no_end(body: dict) -> dict:
        return {**body, "logit_bias": SMOLLM2_NO_EOS}

    proxy = recording_proxy("smollm2", rewrite=no_end)
    llm = real_llm("smollm2", base_url=proxy.base_url, max_tokens=3)
    agent = ToolCallAgent(
        llm=llm,
        available_tools=ToolCollection(Terminate()),
        max_steps=3,
        compaction=CompactionSettings(),
    )
    result = await agent.run("Describe the sea.")
    served = [e.completion() for e in proxy.chat_requests()]
    assert served and all(s is not None and s["finish_reason"] == "length" for s in served)
    assert result.steps <= 3
    assert not result.ok, f"a cut answer was reported as success: {result!r}"
    assert result.failure and "max_tokens" in result.failure


# ---- main.py as a subprocess --------------------------------------------------------------


def run_main(tmp_path: Path, config: Path, *args: str, timeout: float = 240):
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return subprocess.run(
        [
            sys.executable,
            str(MAIN),
            "--config",
            str(config),
            "--workspace",
            str(workspace),
            "--no-session",
            *args,
        ],
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def assert_only_the_answer_on_stdout(stdout: str) -> None:
    assert "Observed output" not in stdout and "Executing step" not in stdout, stdout
    assert not any(line.startswith("Step ") for line in stdout.splitlines()), stdout


def test_main_finishes_with_exit_0_when_the_model_terminates(tmp_path, recording_proxy):
    """Manus through main.py -p against the function-calling server, the server forced to call
    terminate: exit code 0, progress on stderr, nothing but the answer on stdout."""

    def call_terminate(body: dict) -> dict:
        return {**body, "tool_choice": {"type": "function", "function": {"name": "terminate"}}}

    proxy = recording_proxy("smollm2-fc", rewrite=call_terminate)
    config = write_config(tmp_path / "config.toml", proxy.base_url, max_tokens=64)
    proc = run_main(tmp_path, config, "-p", "Say hello, then finish.", "--max-steps", "3")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Executing step 1/3" in proc.stderr
    chats = proxy.chat_requests()
    print("USAGE", [e.response_json() and e.response_json().get("usage") for e in chats])
    assert len(chats) == 1 and chats[0].has_tools
    names = {t["function"]["name"] for t in chats[0].tools}
    assert {"terminate", "python_execute", "str_replace_editor"} <= names
    assert_only_the_answer_on_stdout(proc.stdout)


def test_main_ends_in_a_documented_state_whatever_the_model_writes(tmp_path, recording_proxy):
    """Unforced: SmolLM2 with its own template writes whatever it writes. main.py ends within
    max_steps with exit code 0 (finished) or 1 (failed, saying why on stderr), never a
    traceback, and stdout carries only the answer."""
    proxy = recording_proxy("smollm2")
    config = write_config(tmp_path / "config.toml", proxy.base_url, max_tokens=48)
    proc = run_main(tmp_path, config, "-p", "What is two plus two?", "--max-steps", "2")
    assert proc.returncode in (0, 1), proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert_only_the_answer_on_stdout(proc.stdout)
    # At most max_steps turns plus one compaction, each possibly a refused stream asked again.
    assert len(proxy.chat_requests()) <= 2 * (2 + 1)
    if proc.returncode == 1:
        assert "error:" in proc.stderr or "without finishing" in proc.stderr, proc.stderr[-2000:]


def test_a_run_failed_by_an_outage_resumes_with_its_own_budget(tmp_path, recording_proxy):
    """Issue 29 items 5 and 7: main.py started with ``--max-steps 4`` fails at once (nothing
    listens at the endpoint: an outage). ``--resume`` with no new prompt, the server back,
    carries the task on within the recorded budget (step 1/4, not 1/20) instead of printing
    "Resumed session" and exiting 0; the server is asked with the original prompt."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def main(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(MAIN), "--config", str(config), "-w", str(workspace)]
        return subprocess.run(
            [*command, *args],
            capture_output=True,
            text=True,
            env=child_env(tmp_path),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            timeout=240,
        )

    config = write_config(tmp_path / "config.toml", down)
    failed = main(config, "--max-steps", "4", "-p", "Say hello, then finish.")
    assert failed.returncode not in (0, 2), failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
    [session_file] = (workspace / ".sessions").glob("*.jsonl")

    def call_terminate(body: dict) -> dict:
        return {**body, "tool_choice": {"type": "function", "function": {"name": "terminate"}}}

    proxy = recording_proxy("smollm2-fc", rewrite=call_terminate)
    write_config(config, proxy.base_url, max_tokens=64)
    resumed = main(config, "--resume", session_file.stem)
    assert "Carrying on the task that failed" in resumed.stderr, resumed.stderr[-3000:]
    assert "Executing step 1/4" in resumed.stderr
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    [chat] = proxy.chat_requests()
    assert [m["content"] for m in chat.messages if m["role"] == "user"][:1] == [
        "Say hello, then finish."
    ]
