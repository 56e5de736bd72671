"""str_replace_editor against a real temporary workspace: every command, bad input, confinement."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from app.exceptions import ToolError
from app.sandbox.files import FileAccessPolicy
from app.tool.base import CLIResult
from app.tool.str_replace_editor import StrReplaceEditor, clip_output


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("TOP SECRET\n")
    return path


@pytest.fixture
def editor(ws: Path) -> StrReplaceEditor:
    return StrReplaceEditor(workspace=ws)


async def run(tool: StrReplaceEditor, **kwargs: object) -> str:
    result = await tool.execute(**kwargs)
    assert isinstance(result, CLIResult)
    assert result.error is None
    return result.output


async def fails(tool: StrReplaceEditor, **kwargs: object) -> str:
    with pytest.raises(ToolError) as info:
        await tool.execute(**kwargs)
    return str(info.value)


# --- schema and dispatch ---------------------------------------------------------------------


def test_schema_matches_upstream_names(editor: StrReplaceEditor) -> None:
    param = editor.to_param()["function"]
    assert param["name"] == "str_replace_editor"
    props = param["parameters"]["properties"]
    assert props["command"]["enum"] == ["view", "create", "str_replace", "insert", "undo_edit"]
    assert set(props) == {
        "command",
        "path",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "view_range",
    }
    assert props["insert_line"]["type"] == "integer"
    assert props["view_range"] == {**props["view_range"], "type": "array"}
    assert props["view_range"]["items"] == {"type": "integer"}
    assert param["parameters"]["required"] == ["command", "path"]
    # Instances share one schema, derived once from the Args model, and nobody can edit it.
    assert StrReplaceEditor(workspace=editor.workspace).parameters is editor.parameters
    with pytest.raises(TypeError, match="assign a new dict"):
        props["path"]["type"] = "integer"
    assert props["path"]["type"] == "string"


async def test_unknown_and_missing_command(editor: StrReplaceEditor) -> None:
    assert "Unknown command 'delete'" in await fails(editor, command="delete", path="a.txt")
    assert "`command` is required" in await fails(editor, path="a.txt")


async def test_missing_or_bad_path(editor: StrReplaceEditor) -> None:
    assert "`path` is required" in await fails(editor, command="view")
    assert "non-empty string" in await fails(editor, command="view", path="")
    assert "non-empty string" in await fails(editor, command="view", path=42)
    assert "NUL" in await fails(editor, command="view", path="a\x00b")


# --- create ----------------------------------------------------------------------------------


async def test_create_makes_parent_dirs_and_view_numbers_lines(
    editor: StrReplaceEditor, ws: Path
) -> None:
    out = await run(editor, command="create", path="pkg/sub/mod.py", file_text="one\ntwo\nthree\n")
    target = ws / "pkg" / "sub" / "mod.py"
    assert target.read_bytes() == b"one\ntwo\nthree\n"
    assert "Created" in out and str(target) in out
    view = await run(editor, command="view", path=str(target))
    assert "     1\tone\n     2\ttwo\n     3\tthree\n" in view
    assert "of 3" in view


async def test_create_requires_file_text_and_refuses_directories(
    editor: StrReplaceEditor, ws: Path
) -> None:
    assert "needs `file_text`" in await fails(editor, command="create", path="x.txt")
    assert not (ws / "x.txt").exists()
    (ws / "d").mkdir()
    assert "is a directory" in await fails(editor, command="create", path="d", file_text="x")


async def test_create_over_existing_file_is_undoable(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"old\r\ncontent\r\n")
    out = await run(editor, command="create", path="f.txt", file_text="new\n")
    assert "Overwrote" in out and "undo_edit" in out
    assert (ws / "f.txt").read_bytes() == b"new\n"
    await run(editor, command="undo_edit", path="f.txt")
    assert (ws / "f.txt").read_bytes() == b"old\r\ncontent\r\n"


async def test_create_where_a_parent_is_a_file_is_a_tool_error(
    editor: StrReplaceEditor, ws: Path
) -> None:
    (ws / "plain").write_text("x")
    message = await fails(editor, command="create", path="plain/child.txt", file_text="y")
    assert "create failed" in message and "plain" in message


# --- view ------------------------------------------------------------------------------------


async def test_view_missing_path(editor: StrReplaceEditor, ws: Path) -> None:
    message = await fails(editor, command="view", path="nope/never.txt")
    assert "Nothing exists" in message and str(ws / "nope" / "never.txt") in message


async def test_view_directory_two_levels_hidden_excluded(
    editor: StrReplaceEditor, ws: Path, outside: Path
) -> None:
    (ws / "a" / "b" / "c").mkdir(parents=True)
    (ws / "a" / "b" / "c" / "deep.txt").write_text("x")
    (ws / "a" / "top.txt").write_text("x")
    (ws / ".hidden").mkdir()
    (ws / ".hidden" / "inside.txt").write_text("x")
    (ws / "a" / ".secret").write_text("x")
    (ws / "root.txt").write_text("x")
    (ws / "link").symlink_to(outside)
    out = await run(editor, command="view", path=".")
    lines = out.splitlines()
    assert f"{ws}/a/" in lines
    assert f"{ws}/a/b/" in lines
    assert f"{ws}/a/top.txt" in lines
    assert f"{ws}/root.txt" in lines
    assert f"{ws}/link@" in lines  # listed, never followed
    assert "deep.txt" not in out and "/c/" not in out
    assert ".hidden" not in out and ".secret" not in out
    assert "secret.txt" not in out


async def test_view_empty_directory(editor: StrReplaceEditor) -> None:
    assert "no visible entries" in await run(editor, command="view", path=".")


async def test_view_range(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await run(editor, command="view", path="f.txt", view_range=[3, 5])
    assert "     3\tline 3\n     4\tline 4\n     5\tline 5\n" in out
    assert "line 2\n" not in out and "line 6" not in out
    assert "lines 3-5 of 10" in out
    out = await run(editor, command="view", path="f.txt", view_range=[9, -1])
    assert "     9\tline 9\n    10\tline 10\n" in out and "line 8" not in out
    out = await run(editor, command="view", path="f.txt", view_range=[10, 10])
    assert "    10\tline 10\n" in out


@pytest.mark.parametrize(
    ("view_range", "expected"),
    [
        ([11, 12], "start 11 is past the end"),
        ([2, 11], "end 11 is past the end"),
        ([0, 3], "must be 1 or more"),
        ([5, 3], "before its start"),
        ([1], "list of two integers"),
        ([1, 2, 3], "list of two integers"),
        ("lines 1-3", "list of two integers"),
        ([1.5, 3], "must be an integer"),
        ([True, 3], "must be an integer"),
    ],
)
async def test_view_range_errors(
    editor: StrReplaceEditor, ws: Path, view_range: object, expected: str
) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    message = await fails(editor, command="view", path="f.txt", view_range=view_range)
    assert expected in message
    if "past the end" in expected:
        assert "10 lines" in message


async def test_view_range_on_directory_and_empty_file(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "d").mkdir()
    assert "only applies to files" in await fails(
        editor, command="view", path="d", view_range=[1, 2]
    )
    (ws / "empty.txt").write_text("")
    assert "is empty" in await run(editor, command="view", path="empty.txt")
    assert "is empty" in await fails(editor, command="view", path="empty.txt", view_range=[1, 1])


async def test_view_range_accepts_json_string(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\nc\n")
    out = await run(editor, command="view", path="f.txt", view_range="[2, 3]")
    assert "     2\tb\n     3\tc\n" in out and "\ta\n" not in out


async def test_view_last_line_without_newline_is_counted(
    editor: StrReplaceEditor, ws: Path
) -> None:
    (ws / "f.txt").write_text("a\nb")
    out = await run(editor, command="view", path="f.txt")
    assert "     1\ta\n     2\tb\n" in out and "of 2" in out


async def test_binary_file_is_refused_cleanly(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    assert "binary file" in await fails(editor, command="view", path="img.png")
    assert "binary file" in await fails(
        editor, command="str_replace", path="img.png", old_str="PNG", new_str="GIF"
    )
    assert "binary file" in await fails(
        editor, command="insert", path="img.png", insert_line=0, new_str="x"
    )


async def test_fifo_is_refused_without_hanging(editor: StrReplaceEditor, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    assert "not a regular file" in await fails(editor, command="view", path="pipe")
    assert "not a regular file" in await fails(editor, command="create", path="pipe", file_text="x")


async def test_huge_file_view_is_clipped_and_view_range_reaches_the_end(
    editor: StrReplaceEditor, ws: Path
) -> None:
    count = 200_000
    (ws / "big.log").write_text("".join(f"entry {i:06d}\n" for i in range(1, count + 1)))
    out = await run(editor, command="view", path="big.log")
    assert len(out) <= editor.max_output_chars + 200
    assert "     1\tentry 000001\n" in out
    assert f"of {count})" in out
    assert "output clipped at line" in out and "view_range" in out
    tail = await run(editor, command="view", path="big.log", view_range=[count - 2, -1])
    assert f"{count - 2}\tentry {count - 2:06d}\n" in tail
    assert f"{count}\tentry {count:06d}\n" in tail
    assert "<output clipped" not in tail
    mid = await run(editor, command="view", path="big.log", view_range=[150_000, 150_001])
    assert "150000\tentry 150000\n150001\tentry 150001\n" in mid
    assert "149999" not in mid and "150002" not in mid


async def test_huge_single_line_is_clipped(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "one.txt").write_text("x" * 3_000_000 + "\nsecond\n")
    out = await run(editor, command="view", path="one.txt")
    assert len(out) <= editor.max_output_chars + 200
    assert "<line clipped>" in out
    assert "of 2" in out
    second = await run(editor, command="view", path="one.txt", view_range=[2, 2])
    assert "     2\tsecond\n" in second


async def test_files_over_the_edit_limit_are_not_edited(ws: Path) -> None:
    tool = StrReplaceEditor(workspace=ws, max_edit_bytes=1000)
    (ws / "big.txt").write_text("needle\n" + "y" * 2000 + "\n")
    message = await fails(
        tool, command="str_replace", path="big.txt", old_str="needle", new_str="n"
    )
    assert "editing limit" in message
    assert (ws / "big.txt").read_text().startswith("needle\n")
    assert "1\tneedle" in await run(tool, command="view", path="big.txt", view_range=[1, 1])


async def test_output_is_clipped_with_marker(ws: Path) -> None:
    tool = StrReplaceEditor(workspace=ws, max_output_chars=300)
    for i in range(60):
        (ws / f"file_{i:03d}.txt").write_text("x")
    out = await run(tool, command="view", path=".")
    assert "clipped" in out
    assert len(out) < 450
    assert clip_output("abc", 10) == "abc"
    assert clip_output("a" * 20, 10).startswith("a" * 10 + "\n<output clipped: 10 more")


# --- str_replace -----------------------------------------------------------------------------


async def test_str_replace_happy_path_shows_numbered_snippet(
    editor: StrReplaceEditor, ws: Path
) -> None:
    (ws / "f.py").write_text("".join(f"x{i} = {i}\n" for i in range(1, 21)))
    out = await run(
        editor, command="str_replace", path="f.py", old_str="x10 = 10", new_str="x10 = 99"
    )
    assert "x10 = 99\n" in (ws / "f.py").read_text()
    assert "    10\tx10 = 99\n" in out
    assert "     6\tx6 = 6\n" in out and "    14\tx14 = 14\n" in out
    assert "x5 = 5" not in out and "x15" not in out


async def test_str_replace_zero_occurrences(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.py").write_text("a = 1\n")
    message = await fails(editor, command="str_replace", path="f.py", old_str="b = 2", new_str="c")
    assert "not found" in message
    assert (ws / "f.py").read_text() == "a = 1\n"


async def test_str_replace_several_occurrences_lists_lines(
    editor: StrReplaceEditor, ws: Path
) -> None:
    (ws / "f.py").write_text("x = 1\nprint(x)\ny = 2\nprint(x)\n\nprint(x)\n")
    message = await fails(
        editor, command="str_replace", path="f.py", old_str="print(x)", new_str="pass"
    )
    assert "3 times" in message and "lines 2, 4, 6" in message
    assert (ws / "f.py").read_text().count("print(x)") == 3


async def test_str_replace_argument_errors(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.py").write_text("a = 1\n")
    assert "needs `old_str`" in await fails(editor, command="str_replace", path="f.py")
    assert "`old_str` is empty" in await fails(
        editor, command="str_replace", path="f.py", old_str="", new_str="x"
    )
    assert "identical" in await fails(
        editor, command="str_replace", path="f.py", old_str="a = 1", new_str="a = 1"
    )
    assert "does not exist" in await fails(
        editor, command="str_replace", path="missing.py", old_str="a", new_str="b"
    )
    assert "is a directory" in await fails(
        editor, command="str_replace", path=".", old_str="a", new_str="b"
    )


async def test_str_replace_without_new_str_deletes(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.py").write_text("keep\ndrop me\nkeep too\n")
    await run(editor, command="str_replace", path="f.py", old_str="drop me\n")
    assert (ws / "f.py").read_text() == "keep\nkeep too\n"


async def test_tabs_are_preserved_byte_for_byte(editor: StrReplaceEditor, ws: Path) -> None:
    original = "def f():\n\tif x:\n\t\treturn 'a\tb'\n\treturn None\n"
    await run(editor, command="create", path="t.py", file_text=original)
    assert (ws / "t.py").read_bytes() == original.encode()
    view = await run(editor, command="view", path="t.py")
    assert "     3\t\t\treturn 'a\tb'\n" in view
    await run(
        editor, command="str_replace", path="t.py", old_str="\treturn None", new_str="\treturn 0"
    )
    assert (ws / "t.py").read_bytes() == original.replace("None", "0").encode()
    await run(editor, command="insert", path="t.py", insert_line=1, new_str="\t# note\t!")
    expected = "def f():\n\t# note\t!\n\tif x:\n\t\treturn 'a\tb'\n\treturn 0\n"
    assert (ws / "t.py").read_bytes() == expected.encode()


async def test_tab_mismatch_gets_a_hint(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "t.py").write_text("def f():\n\treturn 1\n")
    message = await fails(
        editor, command="str_replace", path="t.py", old_str="def f():\n    return 1", new_str="x"
    )
    assert "indents with tabs" in message


async def test_crlf_files_keep_their_newlines(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"first\r\nsecond\r\nthird\r\n")
    await run(
        editor, command="str_replace", path="w.txt", old_str="first\nsecond", new_str="1\n2\n2b"
    )
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\n2b\r\nthird\r\n"
    await run(editor, command="insert", path="w.txt", insert_line=4, new_str="end")
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\n2b\r\nthird\r\nend\r\n"
    view = await run(editor, command="view", path="w.txt")
    assert "\r" not in view and "     5\tend\n" in view


async def test_undecodable_bytes_survive_an_edit(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9 au lait\nchange me\n")
    view = await run(editor, command="view", path="latin.txt")
    assert "caf\ufffd au lait" in view
    await run(editor, command="str_replace", path="latin.txt", old_str="change me", new_str="ok")
    assert (ws / "latin.txt").read_bytes() == b"caf\xe9 au lait\nok\n"


async def test_concurrent_edits_of_one_file_are_not_lost(
    editor: StrReplaceEditor, ws: Path
) -> None:
    (ws / "f.txt").write_text("".join(f"v{i}\n" for i in range(20)))
    await asyncio.gather(
        *(
            editor.execute(
                command="str_replace", path="f.txt", old_str=f"v{i}\n", new_str=f"w{i}\n"
            )
            for i in range(20)
        )
    )
    assert (ws / "f.txt").read_text() == "".join(f"w{i}\n" for i in range(20))


# --- insert ----------------------------------------------------------------------------------


async def test_insert_at_top_middle_and_end(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\nc\n")
    out = await run(editor, command="insert", path="f.txt", insert_line=0, new_str="top")
    assert (ws / "f.txt").read_text() == "top\na\nb\nc\n"
    assert "     1\ttop\n" in out and "     2\ta\n" in out
    await run(editor, command="insert", path="f.txt", insert_line=2, new_str="m1\nm2\n")
    assert (ws / "f.txt").read_text() == "top\na\nm1\nm2\nb\nc\n"
    await run(editor, command="insert", path="f.txt", insert_line=6, new_str="end")
    assert (ws / "f.txt").read_text() == "top\na\nm1\nm2\nb\nc\nend\n"


async def test_insert_at_end_of_file_without_final_newline(
    editor: StrReplaceEditor, ws: Path
) -> None:
    (ws / "f.txt").write_text("a\nb")
    await run(editor, command="insert", path="f.txt", insert_line=2, new_str="c")
    assert (ws / "f.txt").read_text() == "a\nb\nc"
    (ws / "e.txt").write_text("")
    await run(editor, command="insert", path="e.txt", insert_line=0, new_str="only")
    assert (ws / "e.txt").read_text() == "only\n"


@pytest.mark.parametrize("line", [-1, 4, 100])
async def test_insert_out_of_range(editor: StrReplaceEditor, ws: Path, line: int) -> None:
    (ws / "f.txt").write_text("a\nb\nc\n")
    message = await fails(editor, command="insert", path="f.txt", insert_line=line, new_str="x")
    assert f"`insert_line` {line} is out of range" in message
    assert "between 0" in message and "and 3" in message
    assert (ws / "f.txt").read_text() == "a\nb\nc\n"


async def test_insert_argument_errors(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.txt").write_text("a\n")
    assert "needs `insert_line`" in await fails(editor, command="insert", path="f.txt", new_str="x")
    assert "needs `new_str`" in await fails(editor, command="insert", path="f.txt", insert_line=1)
    assert "must be an integer" in await fails(
        editor, command="insert", path="f.txt", insert_line="one", new_str="x"
    )
    await run(editor, command="insert", path="f.txt", insert_line="1", new_str="b")
    assert (ws / "f.txt").read_text() == "a\nb\n"


# --- undo_edit -------------------------------------------------------------------------------


async def test_undo_without_history(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "f.txt").write_text("a\n")
    assert "no edit to undo" in await fails(editor, command="undo_edit", path="f.txt")
    assert (ws / "f.txt").read_text() == "a\n"


async def test_undo_after_create_removes_file_and_created_dirs(
    editor: StrReplaceEditor, ws: Path
) -> None:
    (ws / "kept").mkdir()
    await run(editor, command="create", path="kept/new/deeper/f.txt", file_text="x\n")
    assert (ws / "kept/new/deeper/f.txt").is_file()
    out = await run(editor, command="undo_edit", path="kept/new/deeper/f.txt")
    assert "removed" in out
    assert not (ws / "kept" / "new").exists()
    assert (ws / "kept").is_dir()
    assert "no edit to undo" in await fails(
        editor, command="undo_edit", path="kept/new/deeper/f.txt"
    )


async def test_undo_steps_back_through_history(editor: StrReplaceEditor, ws: Path) -> None:
    await run(editor, command="create", path="f.txt", file_text="v1\n")
    await run(editor, command="str_replace", path="f.txt", old_str="v1", new_str="v2")
    await run(editor, command="insert", path="f.txt", insert_line=1, new_str="v3")
    out = await run(editor, command="undo_edit", path="f.txt")
    assert (ws / "f.txt").read_text() == "v2\n"
    assert "     1\tv2\n" in out
    await run(editor, command="undo_edit", path="f.txt")
    assert (ws / "f.txt").read_text() == "v1\n"
    await run(editor, command="undo_edit", path="f.txt")
    assert not (ws / "f.txt").exists()


async def test_history_is_per_path_and_shared_by_path_spellings(
    editor: StrReplaceEditor, ws: Path
) -> None:
    await run(editor, command="create", path="a.txt", file_text="a\n")
    await run(editor, command="create", path="b.txt", file_text="b\n")
    await run(editor, command="undo_edit", path=str(ws / "sub" / ".." / "a.txt"))
    assert not (ws / "a.txt").exists()
    assert (ws / "b.txt").exists()


# --- confinement -----------------------------------------------------------------------------


async def test_dotdot_escape_is_refused(editor: StrReplaceEditor, ws: Path, outside: Path) -> None:
    message = await fails(editor, command="view", path="../outside/secret.txt")
    assert "Access denied" in message and str(ws) in message
    assert "TOP SECRET" not in message
    await fails(editor, command="create", path="sub/../../outside/new.txt", file_text="x")
    assert not (outside / "new.txt").exists()


async def test_absolute_outside_path_is_refused(
    editor: StrReplaceEditor, ws: Path, outside: Path
) -> None:
    message = await fails(editor, command="view", path=str(outside / "secret.txt"))
    assert "outside the allowed locations" in message and str(ws) in message
    await fails(editor, command="create", path=str(outside / "x.txt"), file_text="x")
    assert not (outside / "x.txt").exists()
    await fails(editor, command="view", path="/etc/passwd")


async def test_symlink_pointing_outside_is_refused(
    editor: StrReplaceEditor, ws: Path, outside: Path
) -> None:
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "door").symlink_to(outside)
    (ws / "dangling.txt").symlink_to(outside / "will_be_created.txt")
    for path in ("leak.txt", "door/secret.txt"):
        message = await fails(editor, command="view", path=path)
        assert "Access denied" in message and "TOP SECRET" not in message
    await fails(editor, command="str_replace", path="leak.txt", old_str="TOP", new_str="NO")
    await fails(editor, command="create", path="door/new.txt", file_text="x")
    await fails(editor, command="create", path="dangling.txt", file_text="x")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_symlink_staying_inside_is_allowed(editor: StrReplaceEditor, ws: Path) -> None:
    (ws / "real.txt").write_text("inside\n")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    assert "     1\tinside\n" in await run(editor, command="view", path="alias.txt")


async def test_shell_metacharacters_are_literal_names(
    editor: StrReplaceEditor, ws: Path, tmp_path: Path
) -> None:
    names = ["$(touch pwned)", "a; rm -rf b", "`touch pwned2`", "x && echo hi > y", "q'uote\"s"]
    (ws / "b").mkdir()
    for name in names:
        await run(editor, command="create", path=name, file_text=f"{name}\n")
        assert (ws / name).read_text() == f"{name}\n"
    listing = await run(editor, command="view", path=".")
    for name in names:
        assert f"{ws}/{name}" in listing
        assert name in await run(editor, command="view", path=name)
    await run(editor, command="create", path="d $(touch pwned)/inner.txt", file_text="x")
    assert "inner.txt" in await run(editor, command="view", path="d $(touch pwned)")
    assert (ws / "b").is_dir()
    for root in (tmp_path, ws, Path.cwd()):
        assert not (root / "pwned").exists() and not (root / "pwned2").exists()
        assert not (root / "y").exists()


async def test_allow_list_grants_extra_roots(ws: Path, outside: Path) -> None:
    refused = StrReplaceEditor(workspace=ws)
    assert "Access denied" in await fails(refused, command="view", path=str(outside))
    tool = StrReplaceEditor(workspace=ws, allowed_paths=[outside])
    assert "TOP SECRET" in await run(tool, command="view", path=str(outside / "secret.txt"))
    await run(tool, command="create", path=str(outside / "extra" / "n.txt"), file_text="n\n")
    assert (outside / "extra" / "n.txt").read_text() == "n\n"
    # Relative paths still start from the workspace, and other places stay closed.
    await run(tool, command="create", path="rel.txt", file_text="r\n")
    assert (ws / "rel.txt").exists()
    message = await fails(tool, command="view", path="/etc/hostname")
    assert str(ws) in message and str(outside) in message


async def test_relative_and_absolute_paths_inside_workspace(
    editor: StrReplaceEditor, ws: Path
) -> None:
    await run(editor, command="create", path="rel/f.txt", file_text="x\n")
    assert "     1\tx\n" in await run(editor, command="view", path=str(ws / "rel" / "f.txt"))
    assert "     1\tx\n" in await run(editor, command="view", path="./rel/../rel/f.txt")


def test_file_access_policy_unit(ws: Path, outside: Path) -> None:
    policy = FileAccessPolicy.create(ws, [outside, outside])
    assert policy.roots == (ws.resolve(), outside.resolve())
    assert policy.resolve("a/b") == ws.resolve() / "a" / "b"
    assert policy.resolve(outside / "secret.txt") == (outside / "secret.txt").resolve()
    with pytest.raises(ToolError, match="Access denied"):
        policy.resolve(ws.parent)
    # The workspace itself is allowed (e.g. to list it).
    assert policy.resolve(ws) == ws.resolve()
