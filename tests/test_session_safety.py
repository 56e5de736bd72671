"""Sessions against a hostile model and a hostile machine: a ``.sessions`` symlink, two
``--resume`` of one session at once, and a disk that fills up mid-run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.exceptions import SessionError
from app.session import SessionStore, read_session
from app.testing import call, tool_calls
from tests.disk_utils import small_tmpfs
from tests.test_main_e2e import MAIN, child_env, run_main, write_config

pytestmark = pytest.mark.e2e

__all__ = ["small_tmpfs"]  # the fixture, used by name

SECRET_PROMPT = "the second run's private prompt 91c2"


def test_a_sessions_symlink_planted_by_the_model_is_refused(tmp_path, llm_server):
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    cfg = write_config(tmp_path, llm_server.base_url)
    plant = f"rm -rf .sessions && ln -s {outside} .sessions && echo planted"
    llm_server.push(
        tool_calls(call("bash", {"command": plant})),
        tool_calls(call("terminate", {"status": "success"})),
    )
    first = run_main(tmp_path, "-c", str(cfg), "-w", str(ws), "-p", "plant it")
    assert first.returncode == 0, first.stderr
    assert (ws / ".sessions").is_symlink()

    second = run_main(tmp_path, "-c", str(cfg), "-w", str(ws), "-p", SECRET_PROMPT)
    assert second.returncode == 2
    assert "symbolic link" in second.stderr and "Traceback" not in second.stderr
    assert list(outside.iterdir()) == []  # nothing, least of all the prompt, went outside
    listed = run_main(tmp_path, "-c", str(cfg), "-w", str(ws), "--list-sessions")
    assert listed.returncode == 2 and "symbolic link" in listed.stderr


def test_a_session_file_replaced_by_a_link_is_not_read_or_appended(tmp_path):
    store = SessionStore(tmp_path / "sessions")
    recorder = store.start("agent")
    recorder.writer.close()
    host = tmp_path / "host.jsonl"
    host.write_text(recorder.path.read_text())
    recorder.path.unlink()
    recorder.path.symlink_to(host)
    before = host.read_bytes()
    with pytest.raises(SessionError, match="symbolic link"):
        store.load(recorder.session_id)
    with pytest.raises(SessionError, match="symbolic link"):
        store.resume(recorder.session_id)
    assert host.read_bytes() == before
    assert store.list() == []  # links are not listed


def _cut_off_session(ws: Path) -> str:
    """A real session file of a run that stopped after its first step."""
    store = SessionStore.for_workspace(ws)
    recorder = store.start("agent", program="openmanus")
    recorder.note("task", prompt="compute it")
    recorder.note("run_started", agent="Manus", prompt="compute it", max_steps=20, resumed=False)
    recorder.writer.add(
        {"type": "message", "agent": "Manus", "message": {"role": "user", "content": "compute it"}}
    )
    recorder.note(
        "checkpoint", agent="Manus", name="Manus", step=1, max_steps=20, state="RUNNING", usage=None
    )
    recorder.writer.close()
    return recorder.session_id


def test_two_resumes_of_one_session_at_once_the_second_is_refused(tmp_path, llm_server):
    ws = tmp_path / "ws"
    ws.mkdir()
    session_id = _cut_off_session(ws)
    cfg = write_config(tmp_path, llm_server.base_url)
    # The first resume waits (in its own bash) until the test says go: it holds the session.
    wait = "until [ -e go ]; do sleep 0.05; done; echo went"
    llm_server.push(
        tool_calls(call("bash", {"command": wait})),
        tool_calls(call("terminate", {"status": "success"}), content="Done once."),
    )
    first = subprocess.Popen(
        [sys.executable, str(MAIN), "-c", str(cfg), "-w", str(ws), "--resume", session_id],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    try:
        assert llm_server.wait_for_requests(1, timeout=60)  # the first one is running now
        listed = run_main(tmp_path, "-c", str(cfg), "-w", str(ws), "--list-sessions")
        assert session_id in listed.stdout and "running" in listed.stdout
        second = run_main(tmp_path, "-c", str(cfg), "-w", str(ws), "--resume", session_id)
        (ws / "go").touch()
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert second.returncode == 3
    assert "in use by another process" in second.stderr and "Traceback" not in second.stderr
    assert first.returncode == 0, err
    assert out.strip() == "Done once."
    assert len(llm_server.requests) == 2  # the cut-off task ran once (two steps)
    records = (ws / ".sessions" / f"{session_id}.jsonl").read_text()
    assert records.count('"type":"resumed"') == 1
    assert read_session(ws / ".sessions" / f"{session_id}.jsonl").state == "finished"


def test_a_disk_full_mid_run_is_an_error_and_the_session_reads_incomplete(
    tmp_path, llm_server, small_tmpfs
):
    ws = small_tmpfs
    cfg = write_config(tmp_path, llm_server.base_url)
    llm_server.push(
        # The model fills the disk; the records of this step can then not be written.
        tool_calls(call("bash", {"command": "head -c 1000000 /dev/zero > filler; echo full"})),
        tool_calls(call("terminate", {"status": "success"}), content="All done."),
    )
    run = run_main(tmp_path, "-c", str(cfg), "-w", str(ws), "-p", "fill the disk")
    assert run.returncode == 4, run.stderr
    assert "error: Cannot write the session file" in run.stderr
    assert "No space left on device" in run.stderr and "Traceback" not in run.stderr
    [session_file] = (ws / ".sessions").glob("*.jsonl")
    data = read_session(session_file)
    # `incomplete` when the write_failed record still fitted, else `interrupted` (as a kill)
    assert data.state in ("incomplete", "interrupted") and data.incomplete
    listed = run_main(tmp_path, "-c", str(cfg), "-w", str(ws), "--list-sessions")
    assert data.state in listed.stdout

    (ws / "filler").unlink()  # room again: resume carries on from the last good record
    llm_server.push(tool_calls(call("terminate", {"status": "success"}), content="Resumed."))
    resumed = run_main(tmp_path, "-c", str(cfg), "-w", str(ws), "--resume", session_file.stem)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "Resumed."
    assert "Carrying on" in resumed.stderr
    assert read_session(session_file).state == "finished"
