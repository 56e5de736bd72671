"""The local and bubblewrap backends through the real tools: confinement, limits, cleanup."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import sys
from pathlib import Path

import pytest

from app.config import SandboxSettings
from app.exceptions import ToolError
from app.sandbox.base import Sandbox
from app.sandbox.local import LocalSandbox
from app.sandbox.processes import ProcessScope
from app.tool.bash import Bash
from app.tool.python_execute import PythonExecute
from app.tool.str_replace_editor import StrReplaceEditor
from tests.sandbox_utils import BACKENDS, make_sandbox, processes_under, requires_bwrap

pytestmark = pytest.mark.e2e

PY = sys.executable


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture(params=BACKENDS)
async def sandbox(request: pytest.FixtureRequest, workspace: Path):  # type: ignore[no-untyped-def]
    box = make_sandbox(request.param, workspace)
    yield box
    await box.cleanup()


# --- files ----------------------------------------------------------------------------------


async def test_editor_and_file_api_refuse_paths_out_of_the_workspace(
    sandbox: Sandbox, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("original\n")
    (workspace / "link.txt").symlink_to(outside)
    editor = StrReplaceEditor(sandbox=sandbox)
    for path in ("../outside.txt", str(outside), "link.txt", "sub/../../outside.txt"):
        with pytest.raises(ToolError, match="outside the allowed locations"):
            await editor.execute(command="create", path=path, file_text="pwned\n")
        with pytest.raises(ToolError, match="outside the allowed locations"):
            await sandbox.write_file(path, b"pwned\n")
    assert outside.read_text() == "original\n"
    # Shell metacharacters are just characters in a file name.
    name = "$(touch pwned); `id`|x.txt"
    await editor.execute(command="create", path=name, file_text="ok\n")
    assert (workspace / name).read_text() == "ok\n"
    assert not (workspace / "pwned").exists()
    assert await sandbox.read_file(name) == b"ok\n"


@requires_bwrap
async def test_bubblewrap_code_cannot_write_outside_the_workspace(
    workspace: Path, tmp_path: Path
) -> None:
    box = make_sandbox("bubblewrap", workspace)
    outside = tmp_path / "outside.txt"
    outside.write_text("original\n")
    (workspace / "link.txt").symlink_to(outside)
    bash = Bash(sandbox=box)
    py = PythonExecute(sandbox=box)
    try:
        out = str(
            await bash.execute(
                command=f"echo pwned > {outside}; echo pwned > link.txt; "
                "touch /usr/pwned; echo inside > in.txt"
            )
        )
        assert "Read-only file system" in out
        result = await py.execute(
            code=f"open({str(outside)!r}, 'a').write('pwned')\nopen('/etc/pwned', 'w')"
        )
        assert not result["success"]
        assert outside.read_text() == "original\n"
        assert "pwned" not in {*os.listdir("/usr"), *os.listdir("/etc")}
        assert (workspace / "in.txt").read_text() == "inside\n"
        # Outside the workspace and the system directories there is only a private tmpfs:
        # what code writes there is its own, and the host's files are not visible.
        listing = str(await bash.execute(command=f"cat {outside}"))
        assert "original" not in listing and "pwned" in listing
        assert not (tmp_path / "pwned").exists()
    finally:
        await bash.cleanup()
        await py.cleanup()


# --- network ----------------------------------------------------------------------------------


@requires_bwrap
@pytest.mark.parametrize("enabled", [False, True])
async def test_bubblewrap_network_only_when_enabled(workspace: Path, enabled: bool) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    box = make_sandbox("bubblewrap", workspace, network_enabled=enabled)
    code = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        "    print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('FAILED', e)\n"
        "print('interfaces', sorted(name for _, name in socket.if_nameindex()))\n"
    )
    try:
        result = await PythonExecute(sandbox=box).execute(code=code, timeout=10)
    finally:
        server.close()
        await box.cleanup()
    # Never the host's loopback, network or not (tests/test_sandbox_network.py has more).
    assert "FAILED" in result["observation"] and "CONNECTED" not in result["observation"]
    if enabled:  # user-mode networking (slirp4netns) is up
        assert "interfaces ['lo', 'tap0']" in result["observation"], result
    else:
        assert "interfaces ['lo']" in result["observation"], result


# --- limits -------------------------------------------------------------------------------------


async def test_memory_limit_stops_a_memory_hog(sandbox: Sandbox) -> None:
    hog = "x = bytearray(1024 ** 3)\nprint('allocated')"
    result = await PythonExecute(sandbox=sandbox).execute(code=hog)
    assert not result["success"]
    assert "MemoryError" in result["observation"] and "allocated" not in result["observation"]
    assert "[memory limit: 256 MiB of data per process]" in result["observation"]
    bash = Bash(sandbox=sandbox)
    try:
        hog = f"{sandbox.python} -c 'bytearray(1024 ** 3)'; echo status=$?"
        out = str(await bash.execute(command=hog))
    finally:
        await bash.cleanup()
    assert "MemoryError" in out and "status=1" in out


async def test_cpu_limit_stops_a_busy_loop(
    workspace: Path, request: pytest.FixtureRequest, sandbox: Sandbox
) -> None:
    box = make_sandbox(sandbox.backend, workspace, cpu_limit=0.05)
    try:
        result = await PythonExecute(sandbox=box).execute(code="while True: pass", timeout=20)
    finally:
        await box.cleanup()
    assert not result["success"]
    if box.backend == "docker":  # cpu_limit is a share of CPUs there: throttled, not killed
        assert "timed out after 20 seconds" in result["observation"]
        return
    assert (
        "killed by SIGXCPU: the CPU time limit of 2 seconds was reached" in (result["observation"])
    )


async def test_timeout_kills_runaway_code_and_its_children(
    sandbox: Sandbox, workspace: Path
) -> None:
    code = (
        "import signal, subprocess\n"
        "subprocess.Popen(['sleep', '600'])\n"
        "subprocess.Popen(['setsid', 'sleep', '600'])\n"
        "print('started', flush=True)\n"
        "signal.pause()\n"
    )
    result = await PythonExecute(sandbox=sandbox).execute(code=code, timeout=1)
    assert "timed out after 1 seconds" in result["observation"]
    assert "started" in result["observation"]
    left = processes_under(workspace)
    for pid in left:
        os.kill(pid, 9)
    # Documented limit of the local backend: setsid leaves the process group.
    assert len(left) == (1 if sandbox.backend == "local" else 0)


async def test_processes_left_by_bash_die_with_the_session(
    sandbox: Sandbox, workspace: Path
) -> None:
    bash = Bash(sandbox=sandbox)
    out = str(await bash.execute(command="sleep 600 & sleep 601 & echo bg"))
    assert "bg" in out and len(processes_under(workspace)) >= 3
    await bash.cleanup()
    assert processes_under(workspace) == []


async def test_too_many_processes_stop_the_command(sandbox: Sandbox, workspace: Path) -> None:
    box = make_sandbox(sandbox.backend, workspace, max_processes=24)
    bash = Bash(sandbox=box)
    try:
        result = await bash.execute(command="for i in $(seq 200); do sleep 60 & done; wait")
        assert result.error and "limit of 24 processes" in result.error
        assert processes_under(workspace, "sleep") == []
        assert "again" in str(await bash.execute(command="echo again"))
        spawn = "import subprocess\nfor _ in range(100): subprocess.Popen(['sleep', '60'])\n"
        out = await PythonExecute(sandbox=box).execute(code=spawn, timeout=20)
        assert "limit of 24 processes" in out["observation"]
        assert processes_under(workspace, "sleep") == []
    finally:
        await bash.cleanup()
        await box.cleanup()
    assert processes_under(workspace) == []


# --- behaviour kept inside the sandbox ----------------------------------------------------------


async def test_exit_codes_and_state_are_reported(sandbox: Sandbox) -> None:
    result = await sandbox.run("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr, result.ok) == (
        3,
        "out\n",
        "err\n",
        False,
    )
    bash = Bash(sandbox=sandbox, timeout=1)
    try:
        await bash.execute(command="mkdir -p sub && cd sub && export X=kept")
        interrupted = await bash.execute(command="sleep 30")
        assert interrupted.error and "interrupted (SIGINT)" in interrupted.error
        assert "shell is still running" in interrupted.error
        out = str(await bash.execute(command="echo $X; pwd; false"))
        assert "kept" in out and out.split("\n")[1] == sandbox.workdir + "/sub"
        assert "[exit code: 1]" in out
    finally:
        await bash.cleanup()


async def test_children_inherit_no_credentials(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.logger import register_secret

    register_secret("registered-value-0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-abcdefghijklmnop")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-12345678")
    monkeypatch.setenv("INNOCENT_NAME", "prefix registered-value-0123456789")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    bash = Bash(sandbox=sandbox)
    try:
        env_text = str(await bash.execute(command="env"))
    finally:
        await bash.cleanup()
    py = await PythonExecute(sandbox=sandbox).execute(code="import os; print(dict(os.environ))")
    for text in (env_text, py["observation"]):
        assert "HARMLESS_SETTING" in text
        for needle in (
            "sk-env-key",
            "OPENAI_API_KEY",
            "tok-12345678",
            "registered-value",
            "INNOCENT_NAME",
        ):
            assert needle not in text


@requires_bwrap
async def test_bubblewrap_hides_the_agent_and_its_files(workspace: Path, tmp_path: Path) -> None:
    secret_file = tmp_path / "config.toml"
    secret_file.write_text('api_key = "sk-hidden"\n')
    box = make_sandbox("bubblewrap", workspace)
    try:
        result = await box.run(
            f"cat {secret_file}; cat /proc/{os.getpid()}/environ; "
            "ls /proc | grep -c '^[0-9]'; cat /etc/shadow | wc -c"
        )
    finally:
        await box.cleanup()
    assert "sk-hidden" not in result.stdout
    assert "No such file" in result.stderr
    lines = result.stdout.split()
    assert int(lines[0]) < 10  # only the sandbox's own processes
    assert lines[1] == "0"  # /etc/shadow is masked


@requires_bwrap
async def test_missing_bwrap_is_a_clear_error(workspace: Path) -> None:
    from app.sandbox.bubblewrap import BubblewrapSandbox

    box = BubblewrapSandbox(None, workspace, bwrap=str(workspace / "no-bwrap"))
    box._bwrap = None
    result = await PythonExecute(sandbox=box).execute(code="print(1)")
    assert not result["success"]
    assert "sandbox is not available" in result["observation"]
    out = await Bash(sandbox=box).execute(command="echo hi")
    assert out.error and "sandbox is not available" in out.error


async def test_cleanup_is_idempotent_and_restartable(sandbox: Sandbox) -> None:
    assert (await sandbox.run("echo one")).stdout == "one\n"
    await sandbox.cleanup()
    await sandbox.cleanup()
    assert not sandbox.started
    assert (await sandbox.run("echo two")).stdout == "two\n"
    assert sandbox.started


async def test_concurrent_runs_share_one_sandbox(sandbox: Sandbox) -> None:
    results = await asyncio.gather(*(sandbox.run(f"echo {i}") for i in range(4)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]


@requires_bwrap
async def test_a_finished_runs_clean_up_never_reaches_a_later_runs_namespace(
    workspace: Path,
) -> None:
    """The kernel gives a freed PID namespace's number to the next namespace created. A run's
    clean-up found its processes by that number, so it could SIGKILL another run's (in CI a
    memory hog died of a kill nobody meant for it). The number stays held until the run is
    released, and a released scope looks for nothing."""
    box = make_sandbox("bubblewrap", workspace)
    await box.start()

    async def start() -> tuple[asyncio.subprocess.Process, ProcessScope, str]:
        spec = box.command(["sh", "-c", "readlink /proc/self/ns/pid; read line || :"])
        proc = await asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=spec.cwd,
            env=spec.env,
            start_new_session=True,
        )
        assert proc.stdout is not None
        namespace = (await proc.stdout.readline()).decode().strip()
        return proc, box.scope(proc.pid), namespace

    def holders(namespace: str) -> list[str]:
        """Our descriptors that keep ``namespace`` alive, and so its number taken."""
        found = []
        for fd in os.listdir("/proc/self/fd"):  # the listing's own descriptor is gone by now
            with contextlib.suppress(FileNotFoundError):
                if os.readlink(f"/proc/self/fd/{fd}") == namespace:
                    found.append(fd)
        return found

    later: list[asyncio.subprocess.Process] = []
    try:
        first, scope, first_ns = await start()
        assert first_ns.startswith("pid:[") and len(scope.members() or []) >= 2
        assert first.stdin is not None
        first.stdin.close()
        assert await first.wait() == 0
        assert holders(first_ns), "the finished run's namespace number is free for reuse"
        for _ in range(5):
            proc, _, namespace = await start()
            later.append(proc)
            assert namespace != first_ns
        assert await scope.kill(deadline=1.0)  # the finished run's clean-up, once more
        scope.release()
        assert holders(first_ns) == [] and scope.members() == []
        assert [p.returncode for p in later] == [None] * len(later)
        for proc in later:
            assert proc.stdin is not None
            proc.stdin.write(b"go on\n")
            await proc.stdin.drain()
            assert await proc.wait() == 0  # alive, and answering
    finally:
        for proc in later:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await box.cleanup()


class _BusyMachine(LocalSandbox):
    """A local sandbox whose first starts meet a machine out of processes (EAGAIN), as when
    another run's fork bomb is being killed."""

    busy_starts = 2

    async def _start(self) -> None:
        if self.busy_starts:
            self.busy_starts -= 1
            raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        await super()._start()


async def test_a_start_that_meets_a_busy_machine_is_tried_again(tmp_path: Path) -> None:
    box = _BusyMachine(SandboxSettings(), tmp_path)
    bash = Bash(sandbox=box)
    try:
        result = await bash.execute(command="echo started")
    finally:
        await bash.cleanup()
    assert str(result).strip() == "started", result
    assert box.busy_starts == 0


async def test_a_machine_that_stays_busy_is_reported(tmp_path: Path) -> None:
    box = _BusyMachine(SandboxSettings(), tmp_path)
    box.busy_starts = 10
    bash = Bash(sandbox=box)
    try:
        result = await bash.execute(command="echo never")
    finally:
        await bash.cleanup()
    assert result.error and "out of processes for now" in result.error, result
    assert "Resource temporarily unavailable" in result.error
    assert box.busy_starts == 5  # four pauses, five starts: then the model hears of it
