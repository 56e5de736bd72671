"""The sandbox under attack, second review: the workspace hand-over (bubblewrap as root) with
a hostile sandbox user racing it, the private ``/tmp``'s size, and fork bombs in ``bash``."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from app.sandbox import handover
from app.sandbox.bubblewrap import NOBODY
from app.sandbox.docker import ContainerGuard
from app.sandbox.guard import ProcessGuard
from app.sandbox.handover import adopt_tree
from app.sandbox.launcher import LaunchOptions, launcher_argv
from app.sandbox.processes import ProcessScope, group_members
from app.tool.bash import Bash
from app.tool.mcp import MCPClients
from tests.mcp_helpers import http_server, write_config
from tests.sandbox_utils import fenced, make_sandbox, requires_bwrap
from tests.test_sandbox_hostile import until

IS_ROOT = os.geteuid() == 0
FILLER = [f"f{n}" for n in range(100)]
as_root = pytest.mark.skipif(not IS_ROOT, reason="the hand-over only happens as root")

_libc = ctypes.CDLL(None, use_errno=True)
_MS_BIND = 0x1000
_MNT_DETACH = 2


def owner(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_uid, info.st_gid


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A root-owned directory next to the workspace holding root-owned files (``f``, and
    ``f0`` to ``f99`` like the attacker's directories): what an attacker wants the hand-over
    to give to ``nobody``."""
    out = tmp_path / "outside"
    out.mkdir(mode=0o700)
    for name in ("f", *FILLER):
        (out / name).write_text("root's\n")
    return out


def untouched(outside: Path) -> bool:
    """Whether the directory and everything in it still belong to root."""
    return all(owner(p) == (0, 0) for p in (outside, *outside.iterdir()))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@contextlib.contextmanager
def mounted(source: str | None, target: Path, fstype: str | None, flags: int) -> Iterator[None]:
    """A mount made by this (root) process for the test, always taken down again."""
    src = source.encode() if source else b"none"
    kind = fstype.encode() if fstype else None
    if _libc.mount(src, str(target).encode(), kind, flags, None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}")
    try:
        yield
    finally:
        _libc.umount2(str(target).encode(), _MNT_DETACH)


# --- the walker, on hostile trees (unit) -----------------------------------------------------


@as_root
def test_the_hand_over_skips_links_other_mounts_shared_files_and_special_files(
    workspace: Path, outside: Path, tmp_path: Path
) -> None:
    (workspace / "dir" / "sub").mkdir(parents=True)
    (workspace / "dir" / "file").write_text("mine\n")
    (workspace / "to-outside").symlink_to(outside)
    (workspace / "to-secret").symlink_to(outside / "f")
    shared = tmp_path / "shared-secret"
    shared.write_text("a system file, say\n")
    os.link(shared, workspace / "hard")
    os.mkfifo(workspace / "fifo")
    (workspace / "tmpfs").mkdir()
    (workspace / "bound").mkdir()
    bound_source = tmp_path / "bound-source"
    bound_source.mkdir()
    (bound_source / "g").write_text("root's too\n")
    with (
        mounted("tmpfs", workspace / "tmpfs", "tmpfs", 0),
        mounted(str(bound_source), workspace / "bound", None, _MS_BIND),
    ):
        (workspace / "tmpfs" / "t").write_text("another file system\n")
        changed = adopt_tree(workspace, NOBODY)
        assert owner(workspace / "tmpfs") == (0, 0)
        assert owner(workspace / "tmpfs" / "t") == (0, 0)
        # A bind mount of the same file system: same st_dev, told apart by its mount id.
        assert owner(workspace / "bound") == (0, 0)
        assert owner(workspace / "bound" / "g") == (0, 0)
        assert adopt_tree(workspace, NOBODY) == 0  # nothing left to hand over
    for mine in ("", "dir", "dir/sub", "dir/file"):
        assert owner(workspace / mine) == NOBODY, mine
    assert changed == 4
    for kept in (outside, outside / "f", shared, workspace / "fifo", bound_source / "g"):
        assert owner(kept) == (0, 0), kept
    assert owner(workspace / "to-outside") == (0, 0)  # the link itself is not changed either


@as_root
def test_the_hand_over_stops_at_its_depth_and_size_bounds(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = workspace.joinpath(*["d"] * (handover.MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    adopt_tree(workspace, NOBODY)
    assert owner(workspace.joinpath(*["d"] * (handover.MAX_DEPTH - 1))) == NOBODY
    assert owner(deep) == (0, 0)  # below the deepest level walked
    wide = workspace / "wide"
    wide.mkdir()
    for n in range(50):
        (wide / str(n)).write_text("x")
    monkeypatch.setattr(handover, "MAX_ENTRIES", 10)
    adopt_tree(workspace, NOBODY)
    assert sum(owner(p) == NOBODY for p in wide.iterdir()) < 10


@as_root
def test_a_parent_swapped_for_a_link_mid_walk_never_redirects_the_hand_over(
    workspace: Path, outside: Path
) -> None:
    """The race of the review, in one process: a thread keeps swapping directories for links
    to a directory holding root's files of the same names, while the walk runs again and
    again."""
    names = [f"d{n}" for n in range(10)]
    for name in names:
        (workspace / name).mkdir()
        for filler in FILLER:
            (workspace / name / filler).write_text("the sandbox's\n")
    stop = threading.Event()
    swaps = 0

    def attack() -> None:
        nonlocal swaps
        while not stop.is_set():
            for name in names:
                real, moved = workspace / name, workspace / f"{name}.real"
                with contextlib.suppress(OSError):
                    real.rename(moved)
                    real.symlink_to(outside)
                    time.sleep(0.0002)  # the link stays a moment; noqa: sleep-ok
                    real.unlink()
                    moved.rename(real)
                    swaps += 1

    attacker = threading.Thread(target=attack)
    attacker.start()
    try:
        for _ in range(30):
            adopt_tree(workspace, NOBODY)
    finally:
        stop.set()
        attacker.join()
    assert swaps > 30
    assert untouched(outside)


# --- the race, replayed by a hostile sandbox (e2e) --------------------------------------------

#: Run as ``nobody`` inside a bubblewrap sandbox: keep swapping directories holding ``f`` for
#: links to ``argv[1]`` (a host path: the sandbox does not see it, the root walking the tree
#: would). Stops by itself after a few minutes.
_ATTACK = """
import os, sys, time
target, names = sys.argv[1], [f"d{n}" for n in range(20)]
for name in names:
    os.makedirs(name, exist_ok=True)
    for n in range(100):
        with open(f"{name}/f{n}", "w") as f:
            f.write("mine")
give_up = time.monotonic() + 300
while time.monotonic() < give_up:
    for name in names:
        try:
            os.rename(name, name + ".real")
            os.symlink(target, name)
            time.sleep(0.0002)  # the attack: the link stays a moment before the swap back
            os.unlink(name)
            os.rename(name + ".real", name)
        except OSError:
            pass
"""


@pytest.mark.e2e
@requires_bwrap
@as_root
async def test_sandbox_starts_hand_over_nothing_outside_the_workspace(
    workspace: Path, outside: Path
) -> None:
    """A background job of one sandbox races the hand-over of 30 other sandboxes starting on
    the same workspace (what the MCP server does per HTTP session)."""
    (workspace / "attack.py").write_text(_ATTACK)
    attacker_box = make_sandbox("bubblewrap", workspace)
    attacker = Bash(sandbox=attacker_box)
    try:
        started = await attacker.execute(command=f"python3 attack.py {outside} > /dev/null 2>&1 &")
        assert not started.error, started
        assert await until(lambda: len(list(workspace.glob("d*"))) >= 20)
        for _ in range(30):
            box = make_sandbox("bubblewrap", workspace)
            await box.start()
            await box.cleanup()
    finally:
        await attacker.cleanup()
    assert untouched(outside)
    # What the sandboxed code made is nobody's (d0 may be left mid-swap: a link to ``outside``
    # beside d0.real).
    candidates = (workspace / "d0", workspace / "d0.real")
    made = [d / "f0" for d in candidates if d.is_dir() and not d.is_symlink()]
    assert made and owner(made[0]) == NOBODY


@pytest.mark.e2e
@requires_bwrap
@as_root
@pytest.mark.timeout(600)  # 16 sandboxes beside a busy attacker: minutes on a loaded machine
async def test_mcp_http_sessions_hand_over_nothing_outside_the_workspace(
    tmp_path: Path, outside: Path
) -> None:
    """The review's replay: one MCP client leaves the attack running in its shell while other
    clients open sessions (a sandbox each) on the server's workspace."""
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text() + '[sandbox]\nbackend = "bubblewrap"\n')
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "attack.py").write_text(_ATTACK)
    args = ["-m", "app.mcp.server", "--transport", "http", "--port", "0", "--config", str(cfg)]
    mallory = MCPClients(connect_timeout=30)
    with http_server(args, tmp_path) as (_proc, url):
        try:
            await mallory.connect_http(url)
            started = await mallory.execute(
                name="mcp_openmanus_bash",
                tool_input={"command": f"python3 attack.py {outside} > /dev/null 2>&1 & echo go"},
            )
            assert "go" in started.output, started
            for _ in range(15):
                client = MCPClients(connect_timeout=30)
                try:
                    await client.connect_http(url)
                    seen = await client.execute(
                        name="mcp_openmanus_bash", tool_input={"command": "id -u"}
                    )
                finally:
                    await client.disconnect()
                assert (seen.output or "").strip() == str(NOBODY[0]), seen
        finally:
            await mallory.disconnect()
    assert untouched(outside)


# --- the private /tmp holds at most memory_limit (e2e) -----------------------------------------


@pytest.mark.e2e
@requires_bwrap
async def test_bubblewrap_tmp_holds_no_more_than_the_memory_limit(workspace: Path) -> None:
    box = make_sandbox("bubblewrap", workspace, memory_limit="64m")
    bash = Bash(sandbox=box)
    try:
        filled = await bash.execute(command="head -c 100M /dev/zero > /tmp/big; du -m /tmp/big")
        after = await bash.execute(command="rm /tmp/big && echo 1 > /tmp/small && cat /tmp/small")
    finally:
        await bash.cleanup()
    text = str(filled)
    assert "No space left on device" in text, text
    written = int(text.split("[stderr]")[0].split()[0])
    assert 0 < written <= 64
    assert str(after).strip() == "1"


# --- fork bombs in bash (e2e) --------------------------------------------------------------------

#: The backends whose processes run on this host (docker's container has its own pids limit).
HOST_BACKENDS = [pytest.param("local"), pytest.param("bubblewrap", marks=requires_bwrap)]
BOMBS = [
    pytest.param(":(){ :|:& };:", id="background"),
    pytest.param(":(){ :|: ; };:", id="foreground"),
]


@pytest.mark.e2e
@pytest.mark.parametrize("bomb", BOMBS)
@pytest.mark.parametrize("use_cgroup", [True, False], ids=["cgroup-if-possible", "watchdog"])
@pytest.mark.parametrize("backend", HOST_BACKENDS)
async def test_a_fork_bomb_is_reported_and_the_next_command_works(
    backend: str, use_cgroup: bool, bomb: str, workspace: Path
) -> None:
    box = make_sandbox(backend, workspace, max_processes=64)
    box.guard = ProcessGuard(64, use_cgroup=use_cgroup)
    bash = Bash(sandbox=box, timeout=60)
    try:
        # A bomb under the watchdog grows until it is killed: in the fence, at most to 512
        # tasks (this worker's threads included), never to the machine's limit, which the other
        # test worker would meet. Leaving it waits until what the bomb left is reaped.
        with fenced(512):
            result = await bash.execute(command=bomb)
            assert result.error and "limit of 64 processes" in result.error, result
            assert "fork bomb" in result.error
            # Everything the bomb started is gone (the next shell does not exist yet).
            assert await until(lambda: box.process_count() == 0, timeout=10)
        begin = time.monotonic()
        after = await bash.execute(command="echo ok; ls / > /dev/null && echo forked")
        took = time.monotonic() - begin
    finally:
        await bash.cleanup()
    assert str(after).splitlines() == ["ok", "forked"], after
    # Promptly, not at the 60 s command timeout the old code hit; the margin is for a machine
    # whose other test worker is busy (a bomb's processes take seconds to die there).
    assert took < 30, took


@pytest.mark.e2e
async def test_a_cgroup_full_of_unreaped_processes_is_replaced(workspace: Path) -> None:
    """Dead processes nobody reaps (here: children of a process that then ``exec``s ``sleep``,
    which never waits) still count against ``pids.max``: the guard moves what lives to a new
    cgroup, so the sandbox can fork again."""
    guard = ProcessGuard(16)
    guard.open()
    if guard.cgroup is None:
        pytest.skip("no writable pids cgroup hierarchy on this machine (the watchdog path)")
    old = guard.cgroup
    # Each child ends once its parent has become ``sleep``: a zombie for good.
    child = 'until read -r c < /proc/$$/comm && [ "$c" = sleep ]; do :; done'
    script = f"for i in $(seq 12); do ({child}) & done; exec sleep 600"
    argv = launcher_argv(["bash", "-c", script], LaunchOptions(cgroup=guard.cgroup_procs))
    proc = await asyncio.create_subprocess_exec(*argv, cwd=workspace)
    try:
        # Counted, and every child a zombie (a loaded machine lets them notice the exec late).
        assert await until(
            lambda: int((old / "pids.current").read_text()) >= 13 and guard.members() == [proc.pid]
        )
        assert not guard.has_room()
        assert await asyncio.to_thread(guard.make_room)
        assert guard.cgroup != old and guard.has_room()
        assert await asyncio.to_thread(guard.members) == [proc.pid]
        assert guard.pressure() == (0, 0)
    finally:
        await guard.close()
        await proc.wait()
    assert not old.exists()


@pytest.mark.e2e
async def test_a_containers_full_cgroup_is_never_replaced(workspace: Path) -> None:
    """A container's cgroup belongs to the engine, and the container's pids and memory limits
    hold only inside it: when it is full, the guard waits for the container's init to reap and
    never moves the container's processes to a cgroup of its own."""
    owner = ProcessGuard(4)
    owner.open()  # stands in for the engine's cgroup: one we may write to
    if owner.cgroup is None:
        pytest.skip("no writable pids cgroup hierarchy on this machine (the watchdog path)")
    engines = owner.cgroup
    argv = launcher_argv(["sleep", "600"], LaunchOptions(cgroup=owner.cgroup_procs))
    proc = await asyncio.create_subprocess_exec(*argv, cwd=workspace)
    try:
        assert await until(lambda: owner.members() == [proc.pid])
        guard = ContainerGuard(4)
        guard.attach(proc.pid)
        assert guard.cgroup == engines and not guard.has_room()
        siblings = set(engines.parent.iterdir())
        assert not await asyncio.to_thread(guard.make_room)
        assert guard.cgroup == engines and set(engines.parent.iterdir()) == siblings
        assert (engines / "cgroup.procs").read_text().split() == [str(proc.pid)]
        await guard.close()
        assert engines.exists()  # the engine removes it, with the container
    finally:
        await owner.close()
        await proc.wait()


@pytest.mark.e2e
async def test_the_watchdog_outlives_a_moment_without_threads() -> None:
    """A fork bomb can leave the machine out of processes, so that Python cannot start a worker
    thread for a while: the process watchdog waits that out and still kills what is over the
    limit (it used to end there, and a bomb then ran until the command's timeout)."""
    refused, exhausted = [], asyncio.Event()

    class OutOfThreads(ThreadPoolExecutor):
        """What ``run_in_executor`` meets when no worker thread can start, five times."""

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            if len(refused) < 5:
                refused.append(fn)
                if len(refused) == 5:
                    exhausted.set()
                raise RuntimeError("can't start new thread")
            return super().submit(fn, *args, **kwargs)

    group = await asyncio.create_subprocess_exec(
        "sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 60 & done; wait", start_new_session=True
    )
    executor = OutOfThreads(2)
    asyncio.get_running_loop().set_default_executor(executor)
    guard = ProcessGuard(4, use_cgroup=False)
    try:
        guard.track(ProcessScope(group.pid))
        await asyncio.wait_for(exhausted.wait(), 10)
        assert await until(lambda: not group_members(group.pid), timeout=20)
        assert guard.limit_kills >= 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            group.kill()
        await group.wait()
        await guard.close()
        executor.shutdown(wait=False)
