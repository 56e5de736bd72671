"""Upstream's sandbox API on a real engine: ``LocalSandboxClient``, ``DockerSandbox``,
``SandboxManager`` and ``AsyncDockerizedTerminal`` do what upstream's did (a container per
sandbox, files on container paths, bind mounts, the manager's limit and idle sweep, a
persistent terminal session), in our words. Tier e2e; skipped only where no engine can run."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.config import SandboxSettings
from app.exceptions import SandboxError, SandboxTimeoutError
from app.sandbox.client import LocalSandboxClient, create_sandbox_client
from app.sandbox.core.manager import SandboxManager
from app.sandbox.core.sandbox import DockerSandbox
from app.sandbox.core.terminal import AsyncDockerizedTerminal
from app.sandbox.docker import LABEL, OWNER_LABEL, owner_id
from tests.sandbox_utils import DOCKER_IMAGE, requires_docker

pytestmark = [pytest.mark.e2e, requires_docker]


def settings(**values: object) -> SandboxSettings:
    base: dict[str, object] = {"image": DOCKER_IMAGE, "timeout": 60}
    base.update(values)
    return SandboxSettings(**base)


def relays_of(container_id: str) -> list[int]:
    """Host processes relaying into the container (each carries its id in its arguments)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"docker_relay" in args and container_id.encode() in args:
            found.append(int(proc.name))
    return found


def terminal_threads(container_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"docker-terminal-{container_id[:12]}"]


def container_exists(container_id: str) -> bool:
    import docker

    client = docker.from_env()
    try:
        client.containers.get(container_id)
        return True
    except docker.errors.NotFound:
        return False
    finally:
        client.close()


async def test_the_client_runs_a_container_with_the_settings(tmp_path: Path) -> None:
    client = create_sandbox_client()
    assert isinstance(client, LocalSandboxClient)
    try:
        await client.create(settings(memory_limit="300m", cpu_limit=0.5))
        box = client.sandbox
        assert isinstance(box, DockerSandbox)
        host = box.container.attrs["HostConfig"]
        assert host["Memory"] == 300 * 1024**2 and host["NanoCpus"] == 500_000_000
        assert host["NetworkMode"] == "none"
        # Commands run in the container, not on this host.
        assert (await client.run_command("hostname")).strip() == "sandbox"
        assert "Python 3" in await client.run_command("python3 --version")
        assert (await client.run_command("echo 'test'")) == "test"
        with pytest.raises(SandboxTimeoutError, match="timed out after 1 seconds"):
            await client.run_command("sleep 10", timeout=1)
        assert (await client.run_command("echo again")) == "again"
        container_id = box.container.id
    finally:
        await client.cleanup()
    assert not container_exists(container_id)


async def test_files_live_on_container_paths(tmp_path: Path) -> None:
    client = LocalSandboxClient()
    await client.create(settings())
    try:
        await client.write_file("/workspace/test.txt", "Hello, Wörld!")
        assert await client.read_file("/workspace/test.txt") == "Hello, Wörld!"
        await client.write_file("nested/deeper/a.txt", "relative to work_dir")
        assert "relative" in await client.run_command("cat /workspace/nested/deeper/a.txt")
        await client.write_file("/tmp/scratch.txt", "tmpfs is the container's /tmp")
        assert "tmpfs" in await client.read_file("/tmp/scratch.txt")
        await client.copy_from("/tmp/scratch.txt", str(tmp_path / "scratch.txt"))
        assert (tmp_path / "scratch.txt").read_text() == "tmpfs is the container's /tmp"

        source = tmp_path / "src.txt"
        source.write_text("Copy to container")
        await client.copy_to(str(source), "/workspace/copied.txt")
        assert await client.read_file("/workspace/copied.txt") == "Copy to container"
        folder = tmp_path / "folder"
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "f.txt").write_text("in a folder")
        await client.copy_to(str(folder), "/workspace/tree")
        assert await client.read_file("/workspace/tree/sub/f.txt") == "in a folder"
        await client.copy_to(str(source), "/tmp/in/copied.txt")
        assert await client.run_command("cat /tmp/in/copied.txt") == "Copy to container"

        target = tmp_path / "out" / "dst.txt"
        await client.copy_from("/workspace/test.txt", str(target))
        assert target.read_text() == "Hello, Wörld!"
        into = tmp_path / "into"
        into.mkdir()
        await client.copy_from("/workspace/tree", str(into))
        assert (into / "tree" / "sub" / "f.txt").read_text() == "in a folder"

        # A link the code plants resolves inside the container, never on this host.
        await client.run_command("ln -s /etc/hostname /workspace/link")
        assert await client.read_file("/workspace/link") == "sandbox\n"
        with pytest.raises(FileNotFoundError, match="not found"):
            await client.read_file("/nonexistent.txt")
        with pytest.raises(FileNotFoundError, match="not found"):
            await client.copy_from("/nonexistent.txt", str(tmp_path / "local.txt"))
        with pytest.raises(FileNotFoundError, match="not found"):
            await client.copy_to(str(tmp_path / "missing"), "/workspace/x")
        with pytest.raises(SandboxError, match="unsafe"):
            await client.read_file("/workspace/../etc/passwd")
        with pytest.raises(SandboxError, match="Read-only file system"):
            await client.write_file("/etc/evil.conf", "x")
    finally:
        await client.cleanup()


async def test_volume_bindings_mount_host_directories(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    (data / "test.txt").write_text("Volume test")
    client = LocalSandboxClient()
    await client.create(settings(), {str(data): "/data", str(work): "/workspace"})
    try:
        assert await client.read_file("/data/test.txt") == "Volume test"
        await client.run_command("echo from-container > /data/back.txt; touch made-here")
        assert (data / "back.txt").read_text() == "from-container\n"
        assert (work / "made-here").exists()  # work_dir bound to the given directory
    finally:
        await client.cleanup()
    assert work.exists() and (data / "back.txt").exists()  # bound directories are kept


async def test_a_sandbox_has_upstreams_attributes_and_leaves_nothing(tmp_path: Path) -> None:
    box = DockerSandbox(settings(network_enabled=True))
    assert box.container is None and box.terminal is None
    await box.create()
    try:
        assert box.client is not None
        assert box.terminal is not None and box.terminal.container.id == box.container.id
        assert (await box.terminal.run_command("pwd")) == "/workspace"
        assert box.container.attrs["HostConfig"]["NetworkMode"] == "bridge"
        await box.write_file("/workspace/test.py", "print('Hello from Python!')")
        assert "Hello from Python!" in await box.run_command("python3 /workspace/test.py")
        private = box.sandbox.workspace
        assert (private / "test.py").exists()  # work_dir is a private host directory
        container_id = box.container.id
    finally:
        await box.cleanup()
    assert not container_exists(container_id) and not private.exists()
    with pytest.raises(SandboxError, match="not initialized"):
        await box.run_command("true")


async def test_a_missing_image_is_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    box = DockerSandbox(settings(image="openmanus-no-such-image:latest"))
    with pytest.raises(SandboxError, match="openmanus-no-such-image"):
        await box.create()
    assert box.container is None and box.terminal is None


async def test_the_manager_limits_and_sweeps_idle_sandboxes() -> None:
    async with SandboxManager(max_sandboxes=2, idle_timeout=60, cleanup_interval=30) as manager:
        first = await manager.create_sandbox(settings())
        second = await manager.create_sandbox(settings())
        with pytest.raises(RuntimeError, match=r"^Maximum number of sandboxes \(2\) reached$"):
            await manager.create_sandbox(settings())
        sandbox = await manager.get_sandbox(first)
        assert (await sandbox.run_command("echo 'test'")) == "test"
        with pytest.raises(KeyError, match=r"Sandbox .* not found"):
            await manager.get_sandbox("nonexistent-id")
        ids = [manager._sandboxes[i].container.id for i in (first, second)]  # type: ignore[attr-defined]

        manager.idle_timeout = 0  # both are idle now, by any clock
        async with manager.sandbox_operation(second):  # in use: never idle
            await manager._cleanup_idle_sandboxes()
            assert first not in manager._sandboxes and second in manager._sandboxes
        assert not container_exists(ids[0]) and container_exists(ids[1])
        assert manager.get_stats()["total_sandboxes"] == 1
    assert not manager._sandboxes and not manager._last_used
    assert not container_exists(ids[1])


async def test_the_terminal_keeps_its_session(tmp_path: Path) -> None:
    import docker

    client = docker.from_env()
    container = client.containers.run(
        DOCKER_IMAGE,
        ["tail", "-f", "/dev/null"],
        detach=True,
        init=True,
        labels={LABEL: "1", OWNER_LABEL: owner_id()},  # reaped like ours if this test dies
    )
    try:
        terminal = AsyncDockerizedTerminal(
            container.id, working_dir="/srv/work", env_vars={"TEST_VAR": "test_value"}
        )
        await terminal.init()
        try:
            assert await terminal.run_command("echo $TEST_VAR") == "test_value"
            assert await terminal.run_command("pwd") == "/srv/work"
            await terminal.run_command("cd /tmp && export KEPT=yes")
            assert await terminal.run_command("pwd; echo $KEPT") == "/tmp\nyes"
            assert await terminal.run_command("echo out; echo err >&2; false") == "out\nerr"
            assert terminal.last_exit_code == 1
            assert await terminal.run_command("printf '$ not a prompt\\n'") == "$ not a prompt"
            with pytest.raises(TimeoutError):
                await terminal.run_command("sleep 30 & sleep 31", timeout=1)
            # The timed-out command and its background job are gone; a new session answers.
            assert "sleep" not in await terminal.run_command("ps -eo args")
            assert await terminal.run_command("exit 4") == ""
            assert await terminal.run_command("echo back") == "back"
            big = await terminal.run_command("head -c 3000000 /dev/zero | tr '\\0' a")
            assert big.endswith("more bytes of output dropped]") and len(big) < 1_100_000
        finally:
            await terminal.close()
        assert terminal.session is not None and not terminal.session.alive
    finally:
        container.remove(force=True)
        client.close()


async def until_running(
    container: Any, command: str, task: asyncio.Future[Any] | None = None
) -> None:
    """Wait until ``command`` runs in the container (a minute at most)."""
    deadline = time.monotonic() + 60
    while (
        command.encode() not in (await asyncio.to_thread(container.exec_run, "ps -eo args")).output
    ):
        assert time.monotonic() < deadline, f"{command} never ran"
        assert task is None or not task.done(), "the command ended before it was seen"
        await asyncio.sleep(0.05)


def caller_of(terminal: AsyncDockerizedTerminal, command: str, outcome: list[object]) -> None:
    """Run ``command`` on a loop of this thread; its output or error into ``outcome``."""

    async def run() -> object:
        try:
            return await terminal.run_command(command)
        except Exception as exc:
            return exc

    outcome.append(asyncio.run(run()))


def test_a_sandbox_made_on_one_loop_is_used_on_another_and_closed_from_a_third() -> None:
    # Upstream's tests make the sandbox in a module-scoped fixture and use it from each test's
    # own event loop; each asyncio.run below is a loop of its own, closed when it returns.
    box = asyncio.run(DockerSandbox(settings()).create())
    assert box.terminal is not None and box.container is not None
    container_id = box.container.id
    try:

        async def use() -> tuple[str, str, str]:
            assert box.terminal is not None
            await box.terminal.run_command("cd /tmp && export KEPT=yes")
            await box.write_file("note.txt", "from the second loop")
            state = await box.terminal.run_command("pwd; echo $KEPT")  # the same shell
            return state, await box.read_file("note.txt"), await box.run_command("echo ok")

        assert asyncio.run(use()) == ("/tmp\nyes", "from the second loop", "ok")
        assert len(relays_of(container_id)) == 1  # one shell, kept between the loops
    finally:
        asyncio.run(box.cleanup())
    assert not container_exists(container_id)
    assert relays_of(container_id) == [] and terminal_threads(container_id) == []


def test_two_loops_at_once_get_their_own_answers_and_a_caller_that_gives_up_kills_its_command() -> (
    None
):
    box = asyncio.run(DockerSandbox(settings()).create())
    assert box.terminal is not None and box.container is not None
    terminal, container = box.terminal, box.container
    answers: dict[str, list[str]] = {}
    outcome: list[object] = []
    caller_thread: threading.Thread | None = None

    def caller(name: str) -> None:
        async def commands() -> list[str]:
            return [await terminal.run_command(f"echo {name}-{i}") for i in range(15)]

        answers[name] = asyncio.run(commands())

    try:
        # A second client on another thread's loop, at the same time: commands take turns.
        threads = [threading.Thread(target=caller, args=(n,)) for n in ("left", "right")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert answers == {n: [f"{n}-{i}" for i in range(15)] for n in ("left", "right")}

        async def give_up() -> str:
            task = asyncio.ensure_future(terminal.run_command("sleep 300 & sleep 301; echo late"))
            await until_running(container, "sleep 301", task)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The shell was out of step (its command's output still to come): a new one answers.
            return await terminal.run_command("echo after; ps -eo args")

        after = asyncio.run(give_up())
        assert after.startswith("after\n") and "sleep 30" not in after and "late" not in after

        # Closed from this thread while another thread's loop waits on a command: that caller
        # is told, not left waiting.
        caller_thread = threading.Thread(target=caller_of, args=(terminal, "sleep 302", outcome))
        caller_thread.start()
        asyncio.run(until_running(container, "sleep 302"))
    finally:
        asyncio.run(box.cleanup())
    if caller_thread is not None:
        caller_thread.join(60)
        assert not caller_thread.is_alive()
        assert isinstance(outcome[0], SandboxError) and "closed while" in str(outcome[0])
    assert relays_of(container.id) == [] and terminal_threads(container.id) == []
