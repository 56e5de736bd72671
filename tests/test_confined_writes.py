"""The one confined writer (``app.sandbox.files.write_confined``) and the tools that use it.

The attack replayed: sandboxed code plants a symlink where a host-side tool will write (the
chart tool's ``visualization/<slug>.html``, or the ``visualization`` folder itself) pointing at a
root-only file or directory outside the workspace, then the model asks for a chart whose title
carries an ``authorized_keys`` line. A scripted hostile model drives a real agent (its
``python_execute`` on the ``local`` and ``bubblewrap`` backends, as root, and the chart tool);
the outside file must stay byte for byte the same, nothing may appear in the outside directory,
and the model must get a tool error naming the link while the run goes on.

The writer itself: a link at every component (planted before, or flipped in by a thread while
it writes), a hard link to an outside file, ownership for the sandbox's user, and a full disk
(the old content stays whole, no temporary file is left).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.agent.toolcall import ToolCallAgent
from app.exceptions import ToolError
from app.llm import LLM
from app.sandbox.files import (
    FileAccessPolicy,
    PathChangedError,
    confined_path,
    open_directory,
    write_confined,
)
from app.schema import AgentState
from app.testing import ScriptedLLMServer, call, tool_calls
from app.tool import DataVisualization, ToolCollection
from app.tool.chart.render import chart_slug
from app.tool.python_execute import PythonExecute
from app.tool.terminate import Terminate
from tests.disk_utils import fill, small_tmpfs
from tests.sandbox_utils import BACKENDS, make_sandbox

__all__ = ["small_tmpfs"]  # the fixture, imported for pytest

ORIGINAL = b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOriginalOperatorKey operator@host\n"
TITLE = "k\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAttackerKeyAttackerKey attacker\n"
SLUG = chart_slug(TITLE)
ROWS = [{"x": i, "y": i * i} for i in range(1, 6)]


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of resolving beneath a root: the kernel's ``openat2`` and the O_NOFOLLOW walk."""
    if request.param == "walk":
        monkeypatch.setenv("OPENMANUS_NO_OPENAT2", "1")
    return str(request.param)


def _outside(tmp_path: Path) -> tuple[Path, Path]:
    """A root-only directory holding a root-only ``authorized_keys``, outside the workspace."""
    outside = tmp_path / "root-only"
    outside.mkdir()
    outside.chmod(0o700)
    keys = outside / "authorized_keys"
    keys.write_bytes(ORIGINAL)
    keys.chmod(0o600)
    return outside, keys


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(directory)): (p.read_bytes() if p.is_file() else b"", p.lstat().st_mode)
        for p in sorted(directory.rglob("*"))
    }


# --- the attack, replayed by a hostile model ------------------------------------------------


PLANT = {
    # the chart's own file is a link to the root-only file
    "file": (
        "import os\n"
        "os.makedirs('visualization', exist_ok=True)\n"
        "os.symlink({keys!r}, 'visualization/{slug}.html')\n"
        "print('planted', os.path.islink('visualization/{slug}.html'))\n"
    ),
    # the chart folder itself is a link to the root-only directory
    "dir": (
        "import os\n"
        "os.symlink({outside!r}, 'visualization')\n"
        "print('planted', os.path.islink('visualization'))\n"
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("plant", ["file", "dir"])
@pytest.mark.parametrize("backend", BACKENDS)
async def test_hostile_model_cannot_write_through_a_planted_link(
    backend: str,
    plant: str,
    tmp_path: Path,
    llm_server: ScriptedLLMServer,
    make_llm: Callable[..., LLM],
) -> None:
    pytest.importorskip("matplotlib")
    ws = tmp_path / "ws"
    ws.mkdir()
    outside, keys = _outside(tmp_path)
    before = _snapshot(outside)
    code = PLANT[plant].format(keys=str(keys), outside=str(outside), slug=SLUG)
    chart = {"charts": [{"chartTitle": TITLE, "data": ROWS}], "output_type": "both"}
    llm_server.push(
        tool_calls(call("python_execute", {"code": code})),
        tool_calls(call("data_visualization", chart)),
        tool_calls(call("python_execute", {"code": "print('still running')"})),
        tool_calls(call("terminate", {"status": "success"})),
    )
    sandbox = make_sandbox(backend, ws)
    agent = ToolCallAgent(
        llm=make_llm(),
        available_tools=ToolCollection(
            PythonExecute(workspace=ws, sandbox=sandbox),
            DataVisualization(workspace=ws, sandbox=sandbox),
            Terminate(),
        ),
        max_steps=6,
    )
    try:
        result = await agent.run("draw the chart")
    finally:
        await sandbox.cleanup()

    assert keys.read_bytes() == ORIGINAL  # byte for byte: no authorized_keys line added
    assert _snapshot(outside) == before  # nothing created in the root-only directory
    assert result.state == AgentState.FINISHED
    tool_texts = [
        [m["content"] for m in r.body["messages"] if m["role"] == "tool"]
        for r in llm_server.requests
    ]
    assert "planted True" in tool_texts[1][-1]
    refusal = tool_texts[2][-1]
    link = ws / "visualization" / f"{SLUG}.html" if plant == "file" else ws / "visualization"
    assert "Error" in refusal and f"{link} is a symbolic link" in refusal, refusal
    assert str(keys if plant == "file" else outside) in refusal  # the link's target is named
    assert "was not saved" in refusal
    assert "still running" in tool_texts[3][-1]  # the run went on after the refusal
    if plant == "file":  # the PNG beside the planted link is an ordinary workspace file
        png = ws / "visualization" / f"{SLUG}.png"
        assert f"saved before: {png}" in refusal
        assert png.is_file() and not png.is_symlink()


@pytest.mark.e2e
@pytest.mark.parametrize("backend", BACKENDS)
async def test_chart_saved_in_the_workspace_names_the_real_path(
    backend: str, tmp_path: Path
) -> None:
    """Without an attack the chart lands in the workspace, owned by the sandbox's user."""
    pytest.importorskip("matplotlib")
    ws = tmp_path / "ws"
    ws.mkdir()
    sandbox = make_sandbox(backend, ws)
    try:
        await sandbox.start()
        tool = DataVisualization(workspace=ws, sandbox=sandbox)
        result = await tool.execute(charts=[{"chartTitle": "Squares", "data": ROWS}])
        png = ws / "visualization" / "Squares.png"
        assert f"saved {png}" in result.output
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        owner = sandbox.file_owner
        if owner is not None:  # bubblewrap as root: sandboxed code runs as nobody
            assert (png.stat().st_uid, png.stat().st_gid) == owner
            assert (png.parent.stat().st_uid, png.parent.stat().st_gid) == owner
        listing = await sandbox.run("ls visualization && echo more >> visualization/Squares.png")
        assert "Squares.png" in listing.stdout and listing.exit_code == 0, listing
    finally:
        await sandbox.cleanup()


# --- the writer itself ------------------------------------------------------------------------


def test_writes_beneath_the_root_creating_parents(tmp_path: Path, resolver: str) -> None:
    path = write_confined(tmp_path, "a/b/c.txt", b"hello")
    assert path == tmp_path / "a" / "b" / "c.txt" and path.read_bytes() == b"hello"
    assert write_confined(tmp_path, ("a", "b", "c.txt"), b"again") == path
    assert path.read_bytes() == b"again"
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["c.txt"]  # no temp left


@pytest.mark.parametrize("relative", ["../x", "a/../../x", "/etc/x", "a/\x00b", "", "."])
def test_paths_that_could_leave_the_root_are_refused(tmp_path: Path, relative: str) -> None:
    with pytest.raises(ToolError):
        write_confined(tmp_path / "ws", relative, b"x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("make_parents", [True, False])
@pytest.mark.parametrize("depth", [0, 1, 2])
def test_a_link_at_any_component_is_refused_and_named(
    tmp_path: Path, resolver: str, depth: int, make_parents: bool
) -> None:
    outside, keys = _outside(tmp_path)
    before = _snapshot(outside)
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    parts = ["a", "b", "authorized_keys"]
    link = ws.joinpath(*parts[: depth + 1])
    if link.is_dir():
        link.rename(ws / f"moved{depth}")
    link.symlink_to(keys if depth == 2 else outside)
    with pytest.raises(PathChangedError) as refused:
        write_confined(ws, "/".join(parts), b"attacker\n", make_parents=make_parents)
    assert f"{link} is a symbolic link" in str(refused.value)
    assert _snapshot(outside) == before


def test_a_link_inside_the_root_is_not_followed_either(tmp_path: Path, resolver: str) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to("real")
    with pytest.raises(PathChangedError, match="alias is a symbolic link"):
        write_confined(tmp_path, "alias/f.txt", b"x")
    assert list((tmp_path / "real").iterdir()) == []


def test_a_hard_link_to_an_outside_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    _, keys = _outside(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    os.link(keys, ws / "keys")
    keys.chmod(0o4755)  # set-id bits on the outside file must not reach the new one
    write_confined(ws, "keys", b"new content\n")
    assert keys.read_bytes() == ORIGINAL
    new = (ws / "keys").stat()
    assert new.st_nlink == 1 and (ws / "keys").read_bytes() == b"new content\n"
    assert not new.st_mode & (stat.S_ISUID | stat.S_ISGID)


def test_new_files_and_folders_belong_to_the_given_owner(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("the suite runs as root (it replays attacks on root-owned files)")
    nobody = (65534, 65534)
    path = write_confined(tmp_path, "made/by/agent.txt", b"x", owner=nobody)
    for p in (path, path.parent, path.parent.parent):
        assert (p.stat().st_uid, p.stat().st_gid) == nobody, p
    policy = FileAccessPolicy.create(tmp_path, owner=nobody)
    policy.locate("made/second.txt").write_atomic(b"y")
    assert (tmp_path / "made" / "second.txt").stat().st_uid == 65534


def test_an_aborted_stream_leaves_the_old_content(tmp_path: Path) -> None:
    target = confined_path(tmp_path, "up/load.bin")
    target.write_atomic(b"old", make_parents=True)
    with pytest.raises(RuntimeError), target.open_atomic() as out:
        out.write(b"new, half")
        raise RuntimeError("the client went away")
    assert (tmp_path / "up" / "load.bin").read_bytes() == b"old"
    assert [p.name for p in (tmp_path / "up").iterdir()] == ["load.bin"]
    with target.open_atomic() as out:
        out.write(b"new ")
        out.write(memoryview(b"whole"))
    assert out.size == 9 and (tmp_path / "up" / "load.bin").read_bytes() == b"new whole"


def test_a_directory_is_not_replaced_by_a_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match="not a regular file"):
        write_confined(tmp_path, "d", b"x")
    assert (tmp_path / "d").is_dir()


@pytest.fixture
def flipper(tmp_path: Path) -> Iterator[dict[str, int]]:
    """A thread flipping ``ws/d`` between a real directory and a link to the root-only
    directory, and ``ws/f.txt`` between a file and a link to the root-only file."""
    outside, keys = _outside(tmp_path)
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "f.txt").write_bytes(b"inside\n")
    stop = threading.Event()
    count = {"flips": 0}

    def flip() -> None:
        while not stop.is_set():
            for name, real, target in (("d", "d.real", outside), ("f.txt", "f.real", keys)):
                try:
                    os.rename(ws / name, ws / real)
                    os.symlink(target, ws / name)
                    os.unlink(ws / name)
                    os.rename(ws / real, ws / name)
                except OSError:
                    pass
            count["flips"] += 1

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        yield count
    finally:
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive()


def test_a_link_flipped_in_while_writing_never_leads_outside(
    tmp_path: Path, resolver: str, flipper: dict[str, int]
) -> None:
    outside = tmp_path / "root-only"
    ws = tmp_path / "ws"
    before = _snapshot(outside)
    written = refused = other = 0
    for i in range(5000):
        relative: tuple[str, ...] = (
            ("d", f"n{i % 7}", "chart.html"),
            ("d", f"f{i}.txt"),
            ("f.txt",),
        )[i % 3]
        try:
            write_confined(ws, relative, TITLE.encode(), make_parents=i % 2 == 0)
            written += 1
        except PathChangedError:
            refused += 1
        except (FileNotFoundError, NotADirectoryError):
            other += 1  # d was moved aside at that instant and not re-created (no parents)
        if i >= 300 and written and refused and flipper["flips"] > 100:
            break
    assert written > 0 and refused > 0, (written, refused, other, flipper)
    assert _snapshot(outside) == before  # no write ever landed outside


def test_open_directory_refuses_a_link_for_the_session_folder(tmp_path: Path) -> None:
    outside, _ = _outside(tmp_path)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ".sessions").symlink_to(outside)
    with pytest.raises(PathChangedError, match=r"\.sessions is a symbolic link"):
        open_directory(tmp_path / "ws", (".sessions",), create=True, mode=0o700)
    fd = open_directory(tmp_path / "ws", ("fresh",), create=True, mode=0o700)
    os.close(fd)
    assert stat.S_IMODE((tmp_path / "ws" / "fresh").stat().st_mode) == 0o700


# --- a full disk ------------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_full_disk_keeps_the_old_content_whole(small_tmpfs: Path) -> None:
    write_confined(small_tmpfs, "data/keep.txt", b"old content\n")
    fill(small_tmpfs)
    before = sorted(p.name for p in (small_tmpfs / "data").iterdir())
    with pytest.raises(OSError) as full:
        write_confined(small_tmpfs, "data/keep.txt", b"n" * (256 * 1024))
    assert full.value.errno in (errno.ENOSPC, errno.EDQUOT)
    assert (small_tmpfs / "data" / "keep.txt").read_bytes() == b"old content\n"
    assert sorted(p.name for p in (small_tmpfs / "data").iterdir()) == before  # no temp file


@pytest.mark.e2e
async def test_a_full_disk_is_a_clear_chart_error(small_tmpfs: Path) -> None:
    pytest.importorskip("matplotlib")
    tool = DataVisualization(workspace=small_tmpfs)
    await tool.execute(charts=[{"chartTitle": "Squares", "data": ROWS}])
    png = small_tmpfs / "visualization" / "Squares.png"
    old = png.read_bytes()
    (small_tmpfs / "filler").mkdir()
    fill(small_tmpfs / "filler")
    rows = [{"x": i, "y": (i * 7919) % 101} for i in range(400)]
    with pytest.raises(ToolError, match=r"was not saved as .*No space left"):
        await tool.execute(charts=[{"chartTitle": "Squares", "data": rows, "chartType": "bar"}])
    assert png.read_bytes() == old
    assert sorted(p.name for p in png.parent.iterdir()) == ["Squares.png"]


# --- the other host-side writers --------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("backend", BACKENDS)
async def test_sandbox_copies_never_follow_a_planted_link(backend: str, tmp_path: Path) -> None:
    """``copy_from`` into the workspace and ``write_file`` go through the confined writer."""
    from app.config import SandboxSettings
    from app.sandbox.core.sandbox import UpstreamSandbox

    outside, keys = _outside(tmp_path)
    before = _snapshot(outside)
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = SandboxSettings.model_validate(
        {"backend": backend, "memory_limit": "256m", "timeout": 30}
    )
    box = UpstreamSandbox(settings, {str(ws): settings.work_dir})
    await box.create()
    try:
        await box.write_file("given.txt", "agent wrote this\n")
        planted = await box.run_command(
            f"ln -s {outside} out && mkdir -p sub && ln -s {keys} sub/keys && echo planted"
        )
        assert "planted" in planted, planted
        with pytest.raises(PathChangedError, match=f"{ws / 'out'} is a symbolic link"):
            await box.copy_from("given.txt", str(ws / "out" / "authorized_keys"))
        with pytest.raises(PathChangedError, match="is a symbolic link"):
            await box.copy_from("given.txt", str(ws / "sub" / "keys"))
        await box.copy_from("given.txt", str(ws / "copies" / "given.txt"))
        assert (ws / "copies" / "given.txt").read_text() == "agent wrote this\n"
        owner = box.sandbox.file_owner
        if owner is not None:
            assert (ws / "copies").stat().st_uid == owner[0]
    finally:
        await box.cleanup()
    assert keys.read_bytes() == ORIGINAL
    assert _snapshot(outside) == before
