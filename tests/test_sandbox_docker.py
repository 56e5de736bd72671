"""The docker backend. Its container tests need a reachable Docker engine and skip without
one; the archive filter, path mapping and the "no engine" error are tested everywhere."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from app.config_models import SandboxSettings
from app.exceptions import SandboxError, SandboxUnavailableError
from app.sandbox.archive import make_tar, safe_extract
from app.sandbox.docker import DockerSandbox
from app.tool.python_execute import PythonExecute
from app.tool.str_replace_editor import StrReplaceEditor


def _engine_problem() -> str | None:
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (extra 'docker')"
    try:
        client = docker.from_env()
        client.ping()
        client.close()
    except Exception as exc:
        return f"no Docker engine reachable: {exc}"
    return None


ENGINE_PROBLEM = _engine_problem()
requires_engine = pytest.mark.skipif(ENGINE_PROBLEM is not None, reason=str(ENGINE_PROBLEM))


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


@pytest.mark.skipif(ENGINE_PROBLEM is None, reason="a Docker engine is reachable here")
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


# --- with a real engine -------------------------------------------------------------------------


@pytest.fixture
async def docker_box(tmp_path: Path):  # type: ignore[no-untyped-def]
    box = DockerSandbox(
        SandboxSettings(backend="docker", memory_limit="256m", timeout=60), tmp_path
    )
    yield box
    await box.cleanup()


@requires_engine
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
    assert not hog["success"]
    editor = StrReplaceEditor(sandbox=docker_box)
    out = await editor.execute(command="create", path="/workspace/e.txt", file_text="e\n")
    assert "/workspace/e.txt" in str(out) and (tmp_path / "e.txt").read_text() == "e\n"


@requires_engine
async def test_docker_cleanup_removes_the_container(docker_box: DockerSandbox) -> None:
    import docker

    assert (await docker_box.run("exit 7")).exit_code == 7
    container_id = docker_box.container_id
    await docker_box.cleanup()
    client = docker.from_env()
    try:
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(container_id)
    finally:
        client.close()
