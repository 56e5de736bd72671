"""The Ray backend against a Ray started locally for these tests: the same 50 tasks give the
same results as the local backend, and a task that kills its worker process harms no other."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.batch import BatchOptions, read_results, run_batch
from app.config import AppConfig, config
from app.testing import call, keyed_server, slow, text, tool_calls
from app.testing.netguard import SITE_DIR
from tests.batch_helpers import comparable, fifty_tasks, write_tasks
from tests.conftest import llm_settings
from tests.proc_utils import ROOT, processes_mentioning, short_temp_dir

ray = pytest.importorskip("ray")  # the ray extra

pytestmark = pytest.mark.ray


def worker_runtime_env() -> dict[str, object]:
    """Workers get the network guard and can import the tests' helper agents."""
    return {
        "env_vars": {
            "PYTHONPATH": os.pathsep.join([SITE_DIR, str(ROOT)]),
            "OPENMANUS_BLOCK_NETWORK": "1",
        }
    }


@pytest.fixture(scope="module")
def local_ray() -> Iterator[str]:
    """A private local Ray for this module, in a short temp dir of its own (Ray's socket
    paths must fit in 107 bytes, which pytest's temp dirs do not)."""
    temp = str(short_temp_dir("omray-"))
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # no token written to the home directory
    try:
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            _temp_dir=temp,
            log_to_driver=False,
            runtime_env=worker_runtime_env(),
        )
        yield temp
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved
        left = processes_mentioning(temp)
        for pid in left:
            os.kill(pid, 9)
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"Ray processes outlived ray.shutdown(): {left}"


@pytest.fixture
def use_server(tmp_path: Path) -> Iterator:
    servers = []

    def start(scripts):
        server = keyed_server(scripts).start()
        servers.append(server)
        config.use(AppConfig(llm=llm_settings(server, max_retries=0), workspace_root=tmp_path))
        return server

    try:
        yield start
    finally:
        config.reset()
        for server in servers:
            server.stop()


async def test_fifty_tasks_same_results_on_both_backends(local_ray, use_server, tmp_path):
    tasks, scripts = fifty_tasks(tmp_path)
    server = use_server(scripts)
    path = write_tasks(tmp_path / "tasks.jsonl", tasks)
    common = {
        "tasks": path,
        "concurrency": 16,
        "workspace_root": tmp_path / "ws",
        "progress": False,
        "rate_limit": 6000,
        "burst": 1,
    }

    local = await run_batch(BatchOptions(output=tmp_path / "local.jsonl", **common))
    local_requests = len(server.requests)
    on_ray = await run_batch(BatchOptions(output=tmp_path / "ray.jsonl", backend="ray", **common))

    assert len(on_ray.results) == 50
    assert comparable(on_ray.results) == comparable(local.results)
    assert comparable(read_results(tmp_path / "ray.jsonl")) == comparable(local.results)
    assert on_ray.summary.states == local.summary.states
    assert on_ray.summary.usage == local.summary.usage
    for i in range(5):
        assert (tmp_path / "ws" / f"file-{i}" / "copy.txt").read_text() == "payload 42\n"

    # the limiter actor spaced the requests of every worker (>= 10 ms apart)
    times = sorted(r.received_at for r in server.requests[local_requests:] if r.route == "chat")
    assert len(times) >= 48
    assert times[-1] - times[0] >= (len(times) - 1) * 0.010 * 0.9
    assert ray.is_initialized()  # a Ray the backend did not start is left running


async def test_a_task_that_kills_its_worker_harms_no_other(local_ray, use_server, tmp_path):
    """All six tasks share one worker process; one kills it. The five others are run again
    alone and finish; the killer kills the quarantine worker too and is recorded CRASHED."""
    scripts = {"Task killer": [tool_calls(call("bash", {"command": "kill -9 $PPID"}))]}
    tasks = [{"id": "killer", "prompt": "Task killer", "agent": "swe"}]
    for i in range(5):
        prompt = f"Task innocent {i}"
        scripts[prompt] = [slow(1.0, text(f"fine {i}"))]
        tasks.append({"id": f"innocent-{i}", "prompt": prompt, "agent": "toolcall"})
    server = use_server(scripts)
    backend_options = {"workers": 1}
    report = await run_batch(
        BatchOptions(
            tasks=write_tasks(tmp_path / "tasks.jsonl", tasks),
            output=tmp_path / "out.jsonl",
            backend="ray",
            concurrency=6,
            progress=False,
            backend_options=backend_options,
        )
    )
    killer = report.results["killer"]
    assert killer.state == "CRASHED" and "worker process died" in killer.error
    for i in range(5):
        innocent = report.results[f"innocent-{i}"]
        assert (innocent.state, innocent.final_answer) == ("FINISHED", f"fine {i}")
    assert server.responder.counts["Task killer"] == 2  # once among others, once alone
