"""A 50-task batch on the local backend against per-task scripts: every way a task ends."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from app.batch import BatchOptions, read_results, run_batch
from app.config import AppConfig, config
from app.testing import keyed_server
from tests.batch_helpers import fifty_tasks, write_tasks
from tests.conftest import llm_settings

pytestmark = pytest.mark.e2e


@pytest.fixture
def batch_env(tmp_path: Path):
    """A keyed server with the 50 scripts, and the process config pointing at it."""
    tasks, scripts = fifty_tasks(tmp_path)
    server = keyed_server(scripts).start()
    config.use(AppConfig(llm=llm_settings(server, max_retries=0), workspace_root=tmp_path))
    try:
        yield tasks, server
    finally:
        config.reset()
        server.stop()


def check_fifty(results, tmp_path: Path) -> None:
    states = {task_id: r.state for task_id, r in results.items()}
    by_kind: dict[str, set[str]] = {}
    for task_id, state in states.items():
        by_kind.setdefault(task_id.split("-")[0], set()).add(state)
    assert by_kind == {
        "ok": {"FINISHED"},
        "wrong": {"FINISHED"},
        "file": {"FINISHED"},
        "auth": {"ERROR"},
        "steps": {"IDLE"},
        "hang": {"TIMEOUT"},
        "crash": {"CRASHED"},
    }
    ok = results["ok-03"]
    assert (ok.status, ok.final_answer, ok.correct, ok.steps) == ("done", "21", True, 1)
    assert ok.usage == {
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "total_tokens": 110,
        "requests": 1,
    }
    assert results["wrong-1"].correct is False and results["wrong-1"].status == "done"
    assert "401" in results["auth-0"].error or "key" in results["auth-0"].error.lower()
    assert "max_steps" in results["steps-0"].error and results["steps-0"].steps == 2
    assert results["hang-0"].error == "timed out after 1.5 s"
    assert results["crash-0"].error == "RuntimeError: agent bug: step exploded"
    for i in range(5):
        workspace = Path(results[f"file-{i}"].workspace)
        assert (workspace / "copy.txt").read_text() == "payload 42\n"
        assert workspace.parent == tmp_path / "results_workspaces"
    # Every task has its session file, in its own workspace, holding its prompt.
    from app.session import read_session

    for result in results.values():
        session = Path(result.session_file)
        assert session.parent == Path(result.workspace) / ".sessions"
        assert read_session(session).first_prompt
    assert read_session(Path(ok.session_file)).state == "finished"


async def test_fifty_tasks_local(batch_env, tmp_path):
    tasks, server = batch_env
    stream = io.StringIO()
    report = await run_batch(
        BatchOptions(
            tasks=write_tasks(tmp_path / "tasks.jsonl", tasks),
            output=tmp_path / "results.jsonl",
            concurrency=16,
            rate_limit=6000,
            burst=1,
            progress_stream=stream,
        )
    )
    results = read_results(tmp_path / "results.jsonl")
    assert len(results) == 50 and report.results == results
    check_fifty(results, tmp_path)

    summary = report.summary
    assert (summary.total, summary.done, summary.failed) == (50, 35, 15)
    assert (summary.scored, summary.correct) == (30, 25)
    assert summary.accuracy == pytest.approx(25 / 30)
    assert summary.states == {"FINISHED": 35, "ERROR": 5, "IDLE": 4, "TIMEOUT": 3, "CRASHED": 3}
    assert summary.usage["requests"] == 25 + 5 + 10 + 8
    assert summary.latency["max"] >= 1.5 and summary.throughput > 0
    assert json.loads(report.summary_path.read_text())["done"] == 35
    assert "done 35 failed 15 running 0" in stream.getvalue()

    # the shared rate limit spaced every request (6000/min, one at a time: >= 10 ms apart)
    times = sorted(r.received_at for r in server.requests if r.route == "chat")
    assert len(times) >= 48
    assert times[-1] - times[0] >= (len(times) - 1) * 0.010 * 0.9

    # a second run with the same output has nothing left to do
    again = await run_batch(
        BatchOptions(
            tasks=tmp_path / "tasks.jsonl", output=tmp_path / "results.jsonl", progress=False
        )
    )
    assert again.summary.ran == 0 and again.summary.done == 35
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 50
