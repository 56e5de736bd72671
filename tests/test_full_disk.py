"""A really full disk (a 64 KiB tmpfs): edits and session records fail cleanly, lose nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.exceptions import ToolError
from app.tool.str_replace_editor import StrReplaceEditor
from tests.disk_utils import fill, small_tmpfs

pytestmark = pytest.mark.e2e

__all__ = ["small_tmpfs"]  # the fixture, used by name


async def test_str_replace_on_a_full_disk_keeps_the_file_and_undo(small_tmpfs: Path) -> None:
    ws = small_tmpfs
    target = ws / "notes.txt"
    original = "".join(f"line {n} of the original text\n" for n in range(100))
    target.write_text(original)
    target.chmod(0o640)
    editor = StrReplaceEditor(workspace=ws)
    await editor.execute(
        command="str_replace", path="notes.txt", old_str="line 1 of", new_str="LINE ONE of"
    )
    edited = target.read_text()
    filler = fill(ws)

    with pytest.raises(ToolError) as failure:
        await editor.execute(
            command="str_replace", path="notes.txt", old_str="line 50 of", new_str="LINE FIFTY of"
        )
    assert "No space left on device" in failure.value.message
    assert "left as it was" in failure.value.message
    assert target.read_text() == edited  # whole: no mix of old and new
    assert sorted(p.name for p in ws.iterdir()) == ["filler.bin", "notes.txt"]  # no temp file
    with pytest.raises(ToolError, match="No space left"):
        await editor.execute(command="create", path="sub/new.txt", file_text="x" * 10_000)
    assert not (ws / "sub").exists()  # the directory made for it is gone again

    filler.unlink()
    undone = await editor.execute(command="undo_edit", path="notes.txt")
    assert "Reverted" in str(undone)
    assert target.read_text() == original  # the failed edit left no history entry behind
    assert target.stat().st_mode & 0o777 == 0o640  # the mode survives the atomic writes
