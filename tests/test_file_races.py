"""The editor against a model that swaps symlinks in while it works.

A real background process flips a workspace directory and a workspace file into symlinks to a
host directory and file, in a tight loop, while the editor views, creates, edits, lists and
undoes many times. Whatever the timing, nothing outside the workspace may be read, created or
changed. Replayed through the tool API (both resolvers: ``openat2`` and the ``O_NOFOLLOW``
walk) and by a scripted hostile model that starts the flipper from its own ``bash``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from app.agent.manus import Manus
from app.config import AppConfig, LLMSettings, SandboxSettings, config
from app.exceptions import ToolError
from app.testing import ScriptedLLMServer, call, tool_calls
from app.tool.str_replace_editor import StrReplaceEditor
from tests.sandbox_utils import BACKENDS, make_sandbox, processes_under

pytestmark = pytest.mark.e2e

MARKER = "HOST-ONLY-CONTENT-5e1f"

# Flips d <-> symlink to the host dir and f.txt <-> symlink to the host file, forever;
# counts rounds in ./flips (the test checks the flipper really ran during the calls).
FLIPPER = r"""
import os, sys
outside = sys.argv[1]
n = 0
while True:
    for a, b in (("d", "d.real"), ("f.txt", "f.real")):
        try:
            os.rename(a, b)
            os.symlink(outside if a == "d" else outside + "/host.txt", a)
        except OSError:
            pass
    for a, b in (("d", "d.real"), ("f.txt", "f.real")):
        try:
            os.unlink(a)
            os.rename(b, a)
        except OSError:
            pass
    n += 1
    if n % 50 == 0:
        with open("flips.tmp", "w") as fh:
            fh.write(str(n))
        os.replace("flips.tmp", "flips")
"""


def _layout(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    outside = tmp_path / "host"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    (outside / "host.txt").write_text(f"{MARKER}\nroot:x:0:0\n")
    (outside / "inner.txt").write_text(f"{MARKER} inner\n")
    (ws / "d" / "inner.txt").write_text("inside inner\n")
    (ws / "f.txt").write_text("alpha\nbeta\n")
    (ws / "flipper.py").write_text(FLIPPER)
    return ws, outside


def _snapshot(outside: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(outside.iterdir())}


def _calls(round_no: int) -> list[dict[str, object]]:
    return [
        {"command": "view", "path": "f.txt"},
        {"command": "view", "path": "d/inner.txt"},
        {"command": "view", "path": "d"},
        {"command": "create", "path": f"d/new{round_no}.txt", "file_text": "new\n"},
        {"command": "create", "path": "d/inner.txt", "file_text": f"pwned {round_no}\n"},
        {"command": "str_replace", "path": "f.txt", "old_str": "beta", "new_str": "BETA"},
        {"command": "str_replace", "path": "d/inner.txt", "old_str": "inner", "new_str": "X"},
        {"command": "insert", "path": "f.txt", "insert_line": 0, "new_str": "top"},
        {"command": "undo_edit", "path": "f.txt"},
        {"command": "undo_edit", "path": "d/inner.txt"},
    ]


def _flips(ws: Path) -> int:
    try:
        return int((ws / "flips").read_text() or 0)
    except (OSError, ValueError):
        return 0


@pytest.mark.parametrize("resolver", ["openat2", "walk"])
@pytest.mark.parametrize("backend", BACKENDS)
async def test_symlink_flipping_never_reaches_the_host(
    backend: str, resolver: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if resolver == "walk":
        monkeypatch.setenv("OPENMANUS_NO_OPENAT2", "1")
    ws, outside = _layout(tmp_path)
    before = _snapshot(outside)
    editor = StrReplaceEditor(sandbox=make_sandbox(backend, ws))
    flipper = await asyncio.create_subprocess_exec(
        sys.executable, "flipper.py", str(outside), cwd=ws
    )
    outputs: list[str] = []
    refused = 0
    try:
        rounds = 0
        while rounds < 60 or _flips(ws) < 100:
            for arguments in _calls(rounds):
                try:
                    outputs.append(str(await editor.execute(**arguments)))
                except ToolError as e:
                    outputs.append(e.message)
                    refused += 1
            rounds += 1
            assert rounds < 2000, "the flipper never got going"
    finally:
        flipper.kill()
        await flipper.wait()
    assert _flips(ws) >= 100
    assert refused > 0  # the flips were seen, and refused
    assert not any(MARKER in text for text in outputs)
    assert _snapshot(outside) == before  # nothing changed, nothing created


def test_policy_and_handle_agree_on_roots(tmp_path: Path) -> None:
    from app.sandbox.files import FileAccessPolicy

    ws, _ = _layout(tmp_path)
    nested = ws / "d"
    handle = FileAccessPolicy.create(ws, [nested]).locate("d/inner.txt")
    assert handle.root == nested and handle.parts == ("inner.txt",)
    assert handle.read_bytes() == b"inside inner\n"


@pytest.fixture
def kill_leftovers(tmp_path: Path):  # type: ignore[no-untyped-def]
    yield
    for pid in processes_under(tmp_path):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_hostile_model_flipping_symlinks_from_its_own_bash(
    backend: str, tmp_path: Path, kill_leftovers: None
) -> None:
    ws, outside = _layout(tmp_path)
    before = _snapshot(outside)
    config_file = tmp_path / "config.toml"
    config_file.write_text(f'[llm]\nmodel = "m"\napi_key = "{MARKER}"\n')
    start = (
        f"python3 flipper.py {outside} > /dev/null 2>&1 & "
        "until [ -s flips ]; do :; done; echo started"
    )
    edits = [call("str_replace_editor", args) for n in range(4) for args in _calls(n)]
    script = [tool_calls(call("bash", {"command": start}))]
    script += [tool_calls(*edits) for _ in range(6)]
    script.append(tool_calls(call("bash", {"command": "cat flips"})))
    with ScriptedLLMServer() as server:
        settings = LLMSettings(
            model="m", base_url=server.base_url, api_key="k", max_retries=0, timeout=20
        )
        config.use(
            AppConfig(
                llm=settings,
                workspace_root=ws,
                sandbox=SandboxSettings(backend=backend, memory_limit="256m"),
            )
        )
        try:
            server.push(*script, tool_calls(call("terminate", {"status": "success"})))
            agent = await Manus.create(workspace=ws, max_steps=len(script) + 2)
            result = await agent.run("flip")
            await agent.cleanup()
        finally:
            config.reset()
        per_request = [
            [m["content"] for m in r.body["messages"] if m["role"] == "tool"]
            for r in server.requests
        ]
    assert result.state.value == "FINISHED", str(result)
    assert "started" in per_request[1][-1]
    assert int(per_request[-1][-1].split()[-1]) > 50  # the flipper ran all along
    tool_texts = [text for texts in per_request for text in texts]
    assert not any(MARKER in text for text in tool_texts)
    assert sum("Error:" in text for text in tool_texts) > 5  # the flips were met, and refused
    assert _snapshot(outside) == before
