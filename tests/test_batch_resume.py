"""``python -m app.batch`` as a real process: killed midway, then resumed; bad input; and the
Ray backend starting (and stopping) its own local Ray."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from app.batch import read_results
from app.testing import KeyedScripts, ScriptedLLMServer, slow, text
from app.testing.keyed import request_prompt
from tests.batch_helpers import write_tasks
from tests.proc_utils import ROOT, processes_mentioning, short_temp_dir
from tests.test_main_e2e import child_env, write_config

FAST, LATE, WORKERS = 12, 12, 4


def start_batch(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.batch", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or child_env(tmp_path),
        cwd=tmp_path,
    )


@pytest.mark.e2e
def test_killed_batch_resumes_without_redoing_finished_tasks(tmp_path):
    fast = {f"Task fast {i}": f"f{i}" for i in range(FAST)}
    late = {f"Task late {i}": f"l{i}" for i in range(LATE)}
    tasks = [
        {"id": f"fast-{i}", "prompt": p, "agent": "toolcall", "expected": a}
        for i, (p, a) in enumerate(fast.items())
    ]
    tasks += [
        {"id": f"late-{i}", "prompt": p, "agent": "toolcall", "expected": a}
        for i, (p, a) in enumerate(late.items())
    ]
    path = write_tasks(tmp_path / "tasks.jsonl", tasks)
    out = tmp_path / "results.jsonl"
    # First run: the late tasks hang, so the batch is caught with exactly the fast ones done.
    first = KeyedScripts(
        {**{p: [text(a)] for p, a in fast.items()}, **{p: [slow(120, text("never"))] for p in late}}
    )
    with ScriptedLLMServer(responder=first) as server:
        config = write_config(tmp_path, server.base_url)
        args = (str(path), "-o", str(out), "-c", str(config), "-j", str(WORKERS), "--no-progress")
        proc = start_batch(tmp_path, *args)
        try:
            # every worker holds a hanging task: each fast task's result is already written
            assert server.wait_for_requests(FAST + WORKERS, timeout=60)
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        kept = read_results(out)
        assert set(kept) == {f"fast-{i}" for i in range(FAST)}

        # Second run: fast tasks have no script any more (redoing one would fail it).
        server.responder = KeyedScripts({p: [text(a)] for p, a in late.items()})
        done = start_batch(tmp_path, *args)
        stdout, stderr = done.communicate(timeout=120)
        assert done.returncode == 0, stderr
        prompts = Counter(request_prompt(r) for r in server.requests)

    results = read_results(out)
    assert len(results) == FAST + LATE
    assert len(out.read_text().splitlines()) == FAST + LATE  # no task written twice
    assert all(r.state == "FINISHED" and r.correct for r in results.values())
    assert all(prompts[p] == 1 for p in fast)
    assert sorted(prompts[p] for p in late) == [1] * (LATE - WORKERS) + [2] * WORKERS
    assert "tasks: 24  done: 24  failed: 0" in stdout
    assert "accuracy: 24/24 = 100.0%" in stdout
    summary = json.loads((tmp_path / "results.summary.json").read_text())
    assert summary["ran"] == LATE and summary["done"] == FAST + LATE


@pytest.mark.e2e
def test_bad_tasks_file_is_reported_before_anything_runs(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        '{"id": "a", "prompt": "x"}\nnot json\n{"id": "a", "prompt": "y"}\n'
        '{"id": "b", "prompt": "z", "agent": "nosuch"}\n{"prompt": "no id"}\n'
    )
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    proc = start_batch(tmp_path, str(path), "-o", str(tmp_path / "out.jsonl"), "-c", str(config))
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "line 2: not valid JSON" in stderr
    assert "line 3: duplicate id 'a' (first on line 1)" in stderr
    assert "line 5: id: Field required" in stderr
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.ray
def test_ray_backend_starts_and_stops_its_own_local_ray(tmp_path):
    pytest.importorskip("ray")  # the ray extra
    scripts = {f"Task {i}": [text(f"answer {i}")] for i in range(6)}
    tasks = [{"id": str(i), "prompt": p, "agent": "toolcall"} for i, p in enumerate(scripts)]
    path = write_tasks(tmp_path / "tasks.jsonl", tasks)
    temp = short_temp_dir("omray-")  # short: Ray's socket paths are limited
    guarded = child_env(tmp_path)
    env_json = json.dumps(
        {"env_vars": {"OPENMANUS_BLOCK_NETWORK": "1", "PYTHONPATH": guarded["PYTHONPATH"]}}
    )
    # The workers (which run the agents) get the network guard through the runtime env. The
    # driver goes without: Ray's own daemons inherit its environment and must reach the
    # node's address, which is not loopback. The driver itself only talks to 127.0.0.1.
    driver_env = {**guarded, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled"}
    del driver_env["OPENMANUS_BLOCK_NETWORK"]
    with ScriptedLLMServer(responder=KeyedScripts(scripts)) as server:
        config = write_config(tmp_path, server.base_url)
        proc = start_batch(
            tmp_path,
            str(path),
            "-o",
            str(tmp_path / "out.jsonl"),
            "-c",
            str(config),
            "-b",
            "ray",
            "--ray-num-cpus",
            "1",
            "--ray-temp-dir",
            str(temp),
            "--ray-runtime-env",
            env_json,
            env=driver_env,
        )
        try:
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    try:
        assert proc.returncode == 0, stderr
        results = read_results(tmp_path / "out.jsonl")
        assert {r.final_answer for r in results.values()} == {f"answer {i}" for i in range(6)}
        assert "tasks: 6  done: 6  failed: 0" in stdout
        assert processes_mentioning(str(temp)) == []  # the Ray it started is gone
    finally:
        for pid in processes_mentioning(str(temp)):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
