"""The docker backend. Its container tests (tier e2e) need a Docker engine, which
scripts/test.sh sets up (scripts/setup-docker.sh) and skip only where none can run; the
archive filter, path mapping, binding checks and the "no engine" error run everywhere."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from app.config import SandboxSettings
from app.exceptions import SandboxError, SandboxUnavailableError
from app.sandbox.archive import make_tar, safe_extract
from app.sandbox.docker import LABEL, OWNER_LABEL, RUN_LABEL, DockerSandbox, owner_id, run_id
from app.sandbox.docker import _block_metadata as block_metadata
from app.tool.bash import Bash
from app.tool.python_execute import PythonExecute
from app.tool.str_replace_editor import StrReplaceEditor
from tests.sandbox_utils import DOCKER_IMAGE, requires_docker


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize(
    ("member", "data", "reason"),
    [
        (_member("/etc/evil"), b"x", "absolute path"),
        (_member("../evil"), b"x", "outside the destination"),
        (_member("a/../../evil"), b"x", "outside the destination"),
        (_member("link", tarfile.SYMTYPE, "/etc/passwd"), None, "absolute path"),
        (_member("link", tarfile.SYMTYPE, "../../etc"), None, "out of the destination"),
        (_member("hard", tarfile.LNKTYPE, "../secret"), None, "out of the destination"),
        (_member("dev", tarfile.CHRTYPE), None, "device"),
        (_member("fifo", tarfile.FIFOTYPE), None, "device or pipe"),
    ],
)
def test_unsafe_archive_members_are_refused_before_anything_is_written(
    tmp_path: Path, member: tarfile.TarInfo, data: bytes | None, reason: str
) -> None:
    dest = tmp_path / "dest"
    archive = _tar((_member("good.txt"), b"fine"), (member, data))
    with pytest.raises(SandboxError, match=reason):
        safe_extract(archive, dest)
    assert not (dest / "good.txt").exists()
    assert not (tmp_path / "evil").exists()


def test_safe_archives_round_trip_without_setuid_bits(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("alpha")
    (source / "rel").symlink_to("sub/a.txt")
    tool = source / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o4755)
    names = safe_extract(make_tar(source), tmp_path / "out")
    assert "src/sub/a.txt" in names
    out = tmp_path / "out" / "src"
    assert (out / "rel").read_text() == "alpha"
    assert not (out / "tool").stat().st_mode & 0o4000
    with pytest.raises(SandboxError, match="unusable archive"):
        safe_extract(b"not a tar archive at all" * 40, tmp_path / "bad")


def test_paths_map_between_host_and_container(tmp_path: Path) -> None:
    box = DockerSandbox(SandboxSettings(backend="docker", work_dir="/workspace"), tmp_path)
    assert box.to_host_path("/workspace/a/b.py") == f"{tmp_path}/a/b.py"
    assert box.to_host_path("/workspace") == str(tmp_path)
    assert box.to_host_path("/workspacex/a") == "/workspacex/a"
    assert box.to_sandbox_path(f"Edited {tmp_path}/a.py") == "Edited /workspace/a.py"
    assert (box.python, box.shell, box.workdir) == ("python3", "/bin/bash", "/workspace")
    assert box.exit_status(137) == -9 and box.exit_status(1) == 1


def test_bindings_map_and_never_expose_the_engine(tmp_path: Path) -> None:
    data = tmp_path / "data"
    box = DockerSandbox(
        SandboxSettings(backend="docker"), tmp_path / "ws", volume_bindings={str(data): "/data/"}
    )
    assert box.to_host_path("/data/x.csv") == f"{data}/x.csv"
    assert box.to_host_path("/workspace/a") == f"{tmp_path}/ws/a"
    assert (
        box.to_sandbox_path(f"{data}/x.csv and {tmp_path}/ws/a") == "/data/x.csv and /workspace/a"
    )
    assert box.policy().resolve(f"{data}/x.csv") == data / "x.csv"  # the editor may go there
    for host in ("/", "/var/run", "/run", "/var/run/docker.sock"):
        with pytest.raises(SandboxError, match="Docker engine's socket"):
            DockerSandbox(SandboxSettings(backend="docker"), tmp_path, volume_bindings={host: "/h"})
    with pytest.raises(SandboxError, match="must be absolute"):
        DockerSandbox(SandboxSettings(backend="docker"), tmp_path, volume_bindings={"/srv": "x"})


async def test_without_an_engine_the_tools_report_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("docker")  # without the SDK the error names the extra instead
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    box = DockerSandbox(SandboxSettings(backend="docker"), tmp_path)
    with pytest.raises(SandboxUnavailableError, match="no Docker engine is reachable"):
        await box.start()
    result = await PythonExecute(sandbox=box).execute(code="print(1)")
    assert not result["success"] and "sandbox is not available" in result["observation"]
    assert not box.started
    await box.cleanup()


# --- with a real engine (e2e) -------------------------------------------------------------------


@pytest.fixture
async def docker_box(tmp_path: Path):  # type: ignore[no-untyped-def]
    box = DockerSandbox(
        SandboxSettings(backend="docker", image=DOCKER_IMAGE, memory_limit="256m", timeout=60),
        tmp_path,
    )
    yield box
    await box.cleanup()


@pytest.mark.e2e
@requires_docker
async def test_docker_confines_writes_network_and_memory(
    docker_box: DockerSandbox, tmp_path: Path
) -> None:
    result = await docker_box.run(
        "echo hi > /workspace/in.txt; touch /etc/x; "
        "python3 -c 'import socket; socket.create_connection("
        '("1.1.1.1", 53), timeout=3)\'; echo done'
    )
    assert (tmp_path / "in.txt").read_text() == "hi\n"
    assert "Read-only file system" in result.stderr
    assert "done" in result.stdout and "Network is unreachable" in result.stderr
    hog = await PythonExecute(sandbox=docker_box).execute(code="x = bytearray(2 * 1024**3)")
    assert not hog["success"] and "MemoryError" in hog["observation"]
    editor = StrReplaceEditor(sandbox=docker_box)
    out = await editor.execute(command="create", path="/workspace/e.txt", file_text="e\n")
    assert "/workspace/e.txt" in str(out) and (tmp_path / "e.txt").read_text() == "e\n"


@pytest.mark.e2e
@requires_docker
async def test_the_container_is_unprivileged_labelled_and_removed(
    docker_box: DockerSandbox,
) -> None:
    import docker

    assert (await docker_box.run("exit 7")).exit_code == 7
    container = docker_box.container
    container.reload()
    host = container.attrs["HostConfig"]
    assert host["Privileged"] is False and host["CapDrop"] == ["ALL"]
    assert host["ReadonlyRootfs"] is True and "no-new-privileges" in host["SecurityOpt"]
    assert host["NetworkMode"] == "none" and host["PidsLimit"] == 256
    assert host["Memory"] == 256 * 1024**2
    sources = [m["Source"] for m in container.attrs["Mounts"]]
    assert not any("docker.sock" in s or s in ("/", "/run", "/var/run") for s in sources)
    assert container.labels[LABEL] == "1"
    assert container.labels[OWNER_LABEL] == owner_id() and container.labels[RUN_LABEL] == run_id()
    container_id = docker_box.container_id
    await docker_box.cleanup()
    client = docker.from_env()
    try:
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(container_id)
    finally:
        client.close()


@pytest.mark.e2e
@requires_docker
async def test_extra_bindings_are_shared_with_the_tools(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.csv").write_text("a,b\n1,2\n")
    box = DockerSandbox(
        SandboxSettings(backend="docker", image=DOCKER_IMAGE, timeout=60),
        tmp_path / "ws",
        volume_bindings={str(data): "/data"},
    )
    bash = Bash(sandbox=box)
    try:
        out = str(await bash.execute(command="cat /data/in.csv; echo 3,4 >> /data/in.csv; pwd"))
        assert "1,2" in out and "/workspace" in out
        assert (data / "in.csv").read_text() == "a,b\n1,2\n3,4\n"
        editor = StrReplaceEditor(sandbox=box)
        view = await editor.execute(command="view", path="/data/in.csv")
        assert "3,4" in str(view)
    finally:
        await bash.cleanup()
        await box.cleanup()


@pytest.mark.e2e
@requires_docker
async def test_a_run_that_times_out_leaves_nothing_in_the_container(
    docker_box: DockerSandbox,
) -> None:
    code = (
        "import os, subprocess\n"
        "subprocess.Popen(['setsid', 'sleep', '600'])\n"
        "subprocess.Popen(['sleep', '601'])\n"
        "print('started', flush=True)\n"
        "os.system('sleep 602')\n"
    )
    result = await PythonExecute(sandbox=docker_box).execute(code=code, timeout=2)
    assert "timed out after 2 seconds" in result["observation"]
    listing = await docker_box.run("ps -eo args")
    assert "sleep" not in listing.stdout, listing.stdout
    # The busy processes are gone; the container itself stays usable.
    assert (await docker_box.run("echo alive")).stdout == "alive\n"


class _FirstContainerEnds(DockerSandbox):
    """A sandbox whose first container ends before it is handed out (as one did once on a
    loaded machine, with no reason the engine could give)."""

    ended: str | None = None

    def _create_started(
        self, client: Any, image: str, memory: int | None, volumes: dict[str, Any]
    ) -> Any:
        if self.ended is None:
            container = client.containers.run(
                image,
                ["sh", "-c", "exit 3"],
                detach=True,
                labels={LABEL: "1", OWNER_LABEL: owner_id()},
            )
            container.wait()
            try:
                block_metadata(client, container, image)  # what a networked start does next
            except SandboxUnavailableError as exc:
                self.ended = str(exc)
                raise
        return super()._create_started(client, image, memory, volumes)


@pytest.mark.e2e
@requires_docker
async def test_a_container_that_ends_while_starting_is_replaced(tmp_path: Path) -> None:
    import docker

    from app.logger import logger

    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING")
    settings = SandboxSettings(backend="docker", image=DOCKER_IMAGE, network_enabled=True)
    box = _FirstContainerEnds(settings, tmp_path)
    try:
        assert (await box.run("echo ok")).stdout == "ok\n"
    finally:
        await box.cleanup()
        logger.remove(sink)
    assert box.ended is not None
    assert "stopped while starting (status exited, exit code 3)" in box.ended
    assert any("exit code 3" in w and "starting another" in w for w in warnings), warnings
    client = docker.from_env()
    try:  # the one that ended is removed, not left behind
        left = client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner_id()}"})
        assert [c for c in left if c.attrs["State"].get("ExitCode") == 3] == []
    finally:
        client.close()


class _RuncFailsOnce:
    """The Docker SDK's client, whose first ``containers.run`` meets runc's transient failure
    as the engine reports it (seen on a loaded machine, for an image that has python3)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failures = 0
        self.containers = self

    def run(self, *args: Any, **kwargs: Any) -> Any:
        import docker

        if not self.failures:
            self.failures += 1
            raise docker.errors.APIError(
                "400 Client Error: Bad Request",
                explanation="failed to create shim task: OCI runtime create failed: runc create "
                'failed: unable to start container process: exec: "python3": executable file '
                "not found in $PATH: unknown",
            )
        return self._client.containers.run(*args, **kwargs)


@pytest.mark.e2e
@requires_docker
def test_the_network_helper_is_started_again_after_a_transient_runc_failure() -> None:
    import docker

    client = docker.from_env()
    container = client.containers.run(
        DOCKER_IMAGE,
        ["tail", "-f", "/dev/null"],
        detach=True,
        network_mode="bridge",
        labels={LABEL: "1", OWNER_LABEL: owner_id()},
    )
    try:
        flaky = _RuncFailsOnce(client)
        block_metadata(flaky, container, DOCKER_IMAGE)
        assert flaky.failures == 1
        probe = (
            "import socket\ns = socket.socket()\ns.settimeout(5)\n"
            "try:\n    s.connect(('169.254.169.254', 80))\n    print('connected')\n"
            "except OSError as e:\n    print(e.errno)\n"
        )
        out = container.exec_run(["python3", "-c", probe], user="1000")
        assert out.output.decode().strip() == "13", out  # EACCES: the route is blocked
    finally:
        container.remove(force=True)
        client.close()
