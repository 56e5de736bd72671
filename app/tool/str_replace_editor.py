"""``str_replace_editor``: upstream's file commands, confined to the workspace.

Files are written back exactly as edited, atomically, beneath a descriptor of the workspace
(``app.sandbox.files``); undo also undoes a create. Behaviour: docs/tools.md."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Literal, get_args

from pydantic import Field, PrivateAttr

from app.exceptions import ToolError
from app.sandbox.files import ConfinedPath, FileAccessPolicy
from app.tool.base import BaseTool, CLIResult
from app.tool.declared import ToolArgs
from app.tool.file_scan import displayable, list_dir, scan_file

#: Characters of tool output the model gets before the clip marker.
MAX_OUTPUT_CHARS = 16_000
#: Context lines shown around an edit.
SNIPPET_LINES = 4
#: Files above this size are viewable (streamed) but not editable: edits hold the whole file.
DEFAULT_MAX_EDIT_BYTES = 10 * 1024 * 1024

_SNIFF_BYTES = 8192
_MAX_DIR_ENTRIES = 1000
_MAX_LISTED_LINES = 20

_DESCRIPTION = """\
View, create and edit text files.
* view: show a file with numbered lines (like `cat -n`); `view_range` [start, end] limits it to \
those lines, end -1 meaning to the end of the file. On a directory, lists its entries two levels \
deep, leaving hidden ones out.
* create: write `file_text` to `path`, creating missing parent directories. An existing file is \
replaced; undo_edit brings the old content back.
* str_replace: replace `old_str` with `new_str` (omit or leave empty to delete). `old_str` must \
match exactly one place in the file, character for character, whitespace and indentation \
included; add surrounding lines to make it unique.
* insert: insert `new_str` after line `insert_line` (0 puts it at the top of the file).
* undo_edit: revert the most recent change this tool made to `path`.
Paths may be absolute or relative to the workspace; locations outside the workspace (and any \
extra allowed directories) are refused. Long output is clipped with a marker: use `view_range` \
to read further.\
"""


# Upstream's name for the commands (kept for code importing it).
Command = Literal["view", "create", "str_replace", "insert", "undo_edit"]


class StrReplaceEditorArgs(ToolArgs):
    command: Command = Field(
        description="What to do: view, create, str_replace, insert or undo_edit."
    )
    path: str = Field(description="File or directory path, absolute or relative to the workspace.")
    file_text: str | None = Field(
        None, description="create only: the full content of the new file."
    )
    old_str: str | None = Field(
        None, description="str_replace only: the exact text to replace; must occur once."
    )
    new_str: str | None = Field(
        None,
        description="str_replace: the replacement (empty deletes old_str). "
        "insert: the text to insert.",
    )
    insert_line: int | None = Field(
        None, description="insert only: new_str goes after this line (0 = top of file)."
    )
    view_range: list[int] | None = Field(
        None,
        description="view only, on files: [start, end] line numbers, 1-based and "
        "inclusive; end -1 means to the end of the file.",
    )


def clip_output(text: str, limit: int = MAX_OUTPUT_CHARS, hint: str = "") -> str:
    """Cut ``text`` to ``limit`` characters with a visible marker saying how much was left."""
    if len(text) <= limit:
        return text
    marker = f"\n<output clipped: {len(text) - limit} more characters not shown"
    marker += f"; {hint}>" if hint else ">"
    return text[:limit] + marker


# Upstream's names for the same things (kept for code importing them).
MAX_RESPONSE_LEN = MAX_OUTPUT_CHARS
#: How a clipped output ends (followed by the count of characters left out).
TRUNCATED_MESSAGE = "<output clipped: "


def maybe_truncate(content: str, truncate_after: int | None = MAX_RESPONSE_LEN) -> str:
    """``content`` clipped to ``truncate_after`` characters (None: unclipped)."""
    return content if not truncate_after else clip_output(content, truncate_after)


def _looks_binary(sample: bytes) -> bool:
    """NUL bytes, or mostly undecodable bytes, mean a binary file."""
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    decoded = sample.decode("utf-8", "replace")
    # A multi-byte character cut at the end of the sample costs at most one replacement.
    bad = decoded.count("\ufffd") - 1
    return bad > max(8, len(sample) // 10)


def _split_lines(text: str) -> list[str]:
    """Lines with their ``\\n``; a final newline ends the last line rather than starting one."""
    parts = text.split("\n")
    last = parts.pop()
    lines = [p + "\n" for p in parts]
    if last:
        lines.append(last)
    return lines


def _number(lines: list[str], first_no: int) -> str:
    """``cat -n`` style numbering, tabs kept as they are."""
    return "".join(
        f"{no:6}\t{displayable(line.rstrip(chr(10)).removesuffix(chr(13)))}\n"
        for no, line in enumerate(lines, start=first_no)
    )


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise ToolError(f"`{name}` must be an integer, not {value!r}.")


def _parse_view_range(value: Any) -> tuple[int, int | None] | None:
    """``[start, end]`` (1-based, inclusive, end -1 = to the end) -> (start, end or None)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ToolError(
            "`view_range` must be a list of two integers [start, end], e.g. [10, 40]; "
            "use -1 as end to read to the end of the file."
        )
    start = _as_int(value[0], "view_range[0]")
    end = _as_int(value[1], "view_range[1]")
    if start < 1:
        raise ToolError(f"`view_range` start must be 1 or more (lines count from 1), got {start}.")
    if end == -1:
        return start, None
    if end < start:
        raise ToolError(
            f"`view_range` end ({end}) is before its start ({start}); "
            "give an end >= start, or -1 for the end of the file."
        )
    return start, end


@dataclass
class _Snapshot:
    """A file's state before one edit: its bytes (None = it did not exist) and dirs we made."""

    previous: bytes | None
    created_dirs: list[Path] = field(default_factory=list)


@dataclass
class _Doc:
    """A text file loaded for editing, newlines normalized to ``\\n`` when it uses CRLF."""

    path: Path
    raw: bytes
    text: str
    newline: str

    def normalize(self, fragment: str) -> str:
        return fragment.replace("\r\n", "\n") if self.newline == "\r\n" else fragment

    def encode(self, text: str) -> bytes:
        if self.newline == "\r\n":
            text = text.replace("\n", "\r\n")
        try:
            return text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise ToolError(f"The new text cannot be written as UTF-8: {exc.reason}.") from exc


class StrReplaceEditor(BaseTool):
    """The file viewing/editing tool, with per-path undo and workspace confinement; failures
    (I/O errors translated) are raised as ``ToolError`` for the model."""

    COMMANDS: ClassVar[tuple[str, ...]] = get_args(Command)

    name: str = "str_replace_editor"
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = StrReplaceEditorArgs

    workspace: Path | None = None
    allowed_paths: list[Path] = Field(default_factory=list)
    max_output_chars: int = MAX_OUTPUT_CHARS
    max_edit_bytes: int = DEFAULT_MAX_EDIT_BYTES
    max_undo_depth: int = 20
    sandbox: Any = Field(
        default=None,
        description="An app.sandbox.Sandbox: its workspace is used and paths are taken as the "
        "sandbox sees them (e.g. /workspace/... in Docker).",
    )

    _history: dict[Path, list[_Snapshot]] = PrivateAttr()  # set in model_post_init (cheaper)
    _lock: asyncio.Lock | None = PrivateAttr(default=None)
    _lock_loop: asyncio.AbstractEventLoop | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._history = {}

    def is_concurrency_safe(self, arguments: dict[str, Any]) -> bool:
        """``view`` only reads; every other command edits."""
        return arguments.get("command") == "view"

    def policy(self) -> FileAccessPolicy:
        """The confinement policy in force (resolved at call time, so config changes apply)."""
        if self.sandbox is not None:
            return self.sandbox.policy(self.allowed_paths)
        return FileAccessPolicy.create(self.workspace, self.allowed_paths)

    def _get_lock(self) -> asyncio.Lock:
        # Edits are read-modify-write: serialize them. One lock per event loop, since a tool
        # object may outlive the loop it was first used in.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def execute(
        self,
        *,
        command: str | None = None,
        path: str | None = None,
        file_text: str | None = None,
        view_range: list[int] | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
        **kwargs: Any,
    ) -> CLIResult:
        """Run one command; unknown extra arguments are ignored."""
        if command is None:
            raise ToolError(f"`command` is required: one of {', '.join(self.COMMANDS)}.")
        if command not in self.COMMANDS:
            raise ToolError(f"Unknown command {command!r}. Use one of: {', '.join(self.COMMANDS)}.")
        if path is None:
            raise ToolError(f"`path` is required for {command}.")
        if self.sandbox is not None and isinstance(path, str):
            path = self.sandbox.to_host_path(path)
        target = self.policy().locate(path)
        real = target.real
        # A view only reads, so it does not wait for (or hold up) the edit lock: several views
        # of one message run at the same time (see is_concurrency_safe).
        async with nullcontext() if command == "view" else self._get_lock():
            try:
                if command == "view":
                    output = await self._view(target, view_range)
                elif command == "create":
                    output = await self._create(target, file_text)
                elif command == "str_replace":
                    output = await self._str_replace(target, old_str, new_str)
                elif command == "insert":
                    output = await self._insert(target, insert_line, new_str)
                else:
                    output = await self._undo(target)
            except ToolError:
                raise
            except OSError as exc:
                reason = exc.strerror or str(exc)
                unchanged = "" if command == "view" else " The file was left as it was."
                raise ToolError(f"{command} failed on {real}: {reason}.{unchanged}") from exc
        if self.sandbox is not None:
            output = self.sandbox.to_sandbox_path(output)
        return CLIResult(output=clip_output(output, self.max_output_chars))

    async def _view(self, target: ConfinedPath, view_range: Any) -> str:
        real = target.real
        kind = await asyncio.to_thread(target.kind)
        if kind == "missing":
            raise ToolError(
                f"Nothing exists at {real}. Check the path, or view the directory above it "
                "to see what is there."
            )
        if kind == "dir":
            if view_range is not None:
                raise ToolError(
                    f"{real} is a directory; `view_range` only applies to files. "
                    "Call view without it to list the directory."
                )
            rows, truncated = await asyncio.to_thread(self._list, target)
            header = f"Entries of {real} up to 2 levels deep (hidden ones excluded):\n"
            if not rows:
                return header + "(no visible entries)\n"
            body = "\n".join(rows) + "\n"
            if truncated:
                body += (
                    f"<listing stopped after {_MAX_DIR_ENTRIES} entries; "
                    "view a subdirectory to see more>\n"
                )
            return clip_output(header + body, self.max_output_chars, "view a subdirectory")
        rng = _parse_view_range(view_range)
        first, last = rng if rng else (1, None)
        budget = max(self.max_output_chars - 400, 200)

        def read(fd: int) -> Any:
            with os.fdopen(fd, "rb") as fh:
                self._require_text_file(real, fh)
                return scan_file(fh, first, last, budget)

        scan = await asyncio.to_thread(lambda: read(target.open_read()))
        total = scan.total
        if total == 0:
            if rng:
                raise ToolError(f"{real} is empty, so there are no lines for `view_range`.")
            return f"{real} is empty.\n"
        if first > total:
            raise ToolError(
                f"`view_range` start {first} is past the end of {real}, which has {total} "
                f"lines; use a start between 1 and {total}."
            )
        if last is not None and last > total:
            raise ToolError(
                f"`view_range` end {last} is past the end of {real}, which has {total} lines; "
                f"use an end between {first} and {total}, or -1 for the end of the file."
            )
        header = (
            f"{real} (lines {scan.first_shown}-{scan.last_shown} of {total}), "
            "numbered like `cat -n`:\n"
        )
        text = header + scan.text
        if scan.clipped_at is not None and scan.clipped_at <= total:
            text += (
                f"<output clipped at line {scan.clipped_at} to stay within "
                f"{self.max_output_chars} characters; use view_range [{scan.clipped_at}, -1] "
                "or a narrower range to read on>\n"
            )
        return text

    @staticmethod
    def _list(target: ConfinedPath) -> tuple[list[str], bool]:
        fd = target.open_dir()
        try:
            return list_dir(target.real, fd, 2, _MAX_DIR_ENTRIES)
        finally:
            os.close(fd)

    @staticmethod
    def _require_text_file(real: Path, fh: BinaryIO) -> os.stat_result:
        """``fh``'s stat, after checking that it is a text file; ``fh`` is left at its start."""
        st = os.fstat(fh.fileno())
        sample = fh.read(_SNIFF_BYTES)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{real} is not a regular file (a device, socket or pipe).")
        if _looks_binary(sample):
            raise ToolError(
                f"{real} is a binary file ({st.st_size} bytes); this tool only views and edits "
                "text. Inspect it with a program instead (e.g. python_execute)."
            )
        fh.seek(0)
        return st

    def _load_sync(self, target: ConfinedPath) -> _Doc:
        real = target.real
        kind = target.kind()
        if kind == "missing":
            raise ToolError(f"{real} does not exist. Use create to make a new file.")
        if kind == "dir":
            raise ToolError(f"{real} is a directory; this command needs a file.")
        with os.fdopen(target.open_read(), "rb") as fh:
            st = self._require_text_file(real, fh)
            if st.st_size > self.max_edit_bytes:
                raise ToolError(
                    f"{real} is {st.st_size} bytes, over the {self.max_edit_bytes}-byte editing "
                    "limit; view it with view_range, and edit it with a script instead."
                )
            raw = fh.read(self.max_edit_bytes + 1)
        text = raw.decode("utf-8", "surrogateescape")
        newline = "\n"
        crlf = text.count("\r\n")
        if crlf and crlf == text.count("\n"):
            newline = "\r\n"
            text = text.replace("\r\n", "\n")
        return _Doc(real, raw, text, newline)

    def _remember(self, real: Path, snapshot: _Snapshot) -> None:
        history = self._history.setdefault(real, [])
        history.append(snapshot)
        del history[: max(0, len(history) - self.max_undo_depth)]

    def _snippet(self, text: str, first_line: int, last_line: int) -> str:
        """Numbered lines around an edited region, for the model to check its work."""
        lines = _split_lines(text)
        start = max(1, first_line - SNIPPET_LINES)
        end = min(len(lines), max(last_line, first_line) + SNIPPET_LINES)
        return _number(lines[start - 1 : end], start)

    async def _write(
        self, target: ConfinedPath, data: bytes, snapshot: _Snapshot | None, **kw: Any
    ) -> None:
        """One atomic write, then the undo history; a failed write leaves both as they were
        (and removes the directories made for it)."""
        try:
            await asyncio.to_thread(target.write_atomic, data, **kw)
        except BaseException:
            if snapshot is not None and snapshot.created_dirs:
                await asyncio.to_thread(target.remove_empty_dirs, snapshot.created_dirs)
            raise
        if snapshot is None:
            self._history.pop(target.real, None)
        else:
            self._remember(target.real, snapshot)

    async def _create(self, target: ConfinedPath, file_text: Any) -> str:
        if file_text is None:
            raise ToolError("create needs `file_text`: the full content of the file.")
        if not isinstance(file_text, str):
            raise ToolError("`file_text` must be a string.")
        real = target.real
        kind = await asyncio.to_thread(target.kind)
        if kind == "dir":
            raise ToolError(f"{real} is a directory; give a file path to create.")
        if kind == "other":
            raise ToolError(f"{real} exists and is not a regular file; refusing to overwrite it.")
        try:
            data = file_text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise ToolError(f"`file_text` cannot be written as UTF-8: {exc.reason}.") from exc

        def before() -> _Snapshot | None:
            if kind == "missing":
                return _Snapshot(None, target.missing_parents())
            with os.fdopen(target.open_read(), "rb") as fh:
                if os.fstat(fh.fileno()).st_size > self.max_edit_bytes:
                    return None  # too big to keep: the history is cleared after the write
                return _Snapshot(fh.read())

        snapshot = await asyncio.to_thread(before)
        await self._write(target, data, snapshot, make_parents=kind == "missing")
        lines = len(_split_lines(file_text))
        if snapshot is None:
            return (
                f"Overwrote {real} ({lines} lines). The old file was too large to keep a copy, "
                "so this cannot be undone.\n"
            )
        if kind == "file":
            return (
                f"Overwrote the existing file {real} with {lines} lines; "
                "undo_edit restores its previous content.\n"
            )
        return f"Created {real} ({lines} lines).\n"

    async def _str_replace(self, target: ConfinedPath, old_str: Any, new_str: Any) -> str:
        real = target.real
        if old_str is None:
            raise ToolError("str_replace needs `old_str`: the exact text to replace.")
        if not isinstance(old_str, str) or not isinstance(new_str, str | None):
            raise ToolError("`old_str` and `new_str` must be strings.")
        if old_str == "":
            raise ToolError(
                "`old_str` is empty; give the exact text to replace (to add text, use insert)."
            )
        doc = await asyncio.to_thread(self._load_sync, target)
        old = doc.normalize(old_str)
        new = doc.normalize(new_str or "")
        text = doc.text
        positions = [match.start() for match in re.finditer(re.escape(old), text)]
        if not positions:
            raise ToolError(
                f"`old_str` was not found in {real}. It must match the file exactly, whitespace "
                f"and indentation included{self._mismatch_hint(text, old)}; view the file and "
                "copy the text from it."
            )
        if len(positions) > 1:
            line_nos = [text.count("\n", 0, p) + 1 for p in positions]
            shown = ", ".join(str(n) for n in line_nos[:_MAX_LISTED_LINES])
            if len(line_nos) > _MAX_LISTED_LINES:
                shown += ", ..."
            raise ToolError(
                f"`old_str` occurs {len(positions)} times in {real} (starting on lines {shown}); "
                "it must be unique. Include more surrounding lines in old_str so that it "
                "matches only the place you mean."
            )
        if old == new:
            raise ToolError("`old_str` and `new_str` are identical; nothing would change.")
        pos = positions[0]
        new_text = text[:pos] + new + text[pos + len(old) :]
        await self._write(target, doc.encode(new_text), _Snapshot(doc.raw))
        first_line = text.count("\n", 0, pos) + 1
        last_line = first_line + new.count("\n")
        return (
            f"Edited {real}. The changed region now reads:\n"
            f"{self._snippet(new_text, first_line, last_line)}"
            "Check that this is what you intended; undo_edit reverts it.\n"
        )

    @staticmethod
    def _mismatch_hint(text: str, old: str) -> str:
        """A pointer at the usual cause of a near miss."""
        file_tabs = "\n\t" in "\n" + text
        file_spaces = "\n " in "\n" + text
        old_tabs = "\n\t" in "\n" + old
        old_spaces = "\n " in "\n" + old
        if file_tabs and old_spaces and not old_tabs:
            return " (the file indents with tabs, but old_str uses spaces)"
        if file_spaces and old_tabs and not file_tabs:
            return " (the file indents with spaces, but old_str uses tabs)"
        stripped = old.strip()
        if stripped and stripped != old and stripped in text:
            return " (it does occur once leading/trailing whitespace is ignored)"
        return ""

    async def _insert(self, target: ConfinedPath, insert_line: Any, new_str: Any) -> str:
        real = target.real
        if insert_line is None:
            raise ToolError("insert needs `insert_line`: the line after which to insert (0 = top).")
        line = _as_int(insert_line, "insert_line")
        if new_str is None:
            raise ToolError("insert needs `new_str`: the text to insert.")
        if not isinstance(new_str, str):
            raise ToolError("`new_str` must be a string.")
        doc = await asyncio.to_thread(self._load_sync, target)
        lines = _split_lines(doc.text)
        count = len(lines)
        if not 0 <= line <= count:
            raise ToolError(
                f"`insert_line` {line} is out of range: {real} has {count} lines, so it must be "
                f"between 0 (before the first line) and {count} (after the last line)."
            )
        block = doc.normalize(new_str)
        ends_open = bool(lines) and not lines[-1].endswith("\n")
        if line == count and ends_open:
            # The file has no final newline: keep it that way, after the inserted text.
            new_text = doc.text + "\n" + block.removesuffix("\n")
        else:
            if not block.endswith("\n"):
                block += "\n"
            new_text = "".join(lines[:line]) + block + "".join(lines[line:])
        await self._write(target, doc.encode(new_text), _Snapshot(doc.raw))
        added = max(1, len(_split_lines(block)))
        return (
            f"Inserted {added} line(s) into {real} after line {line}. The region now reads:\n"
            f"{self._snippet(new_text, line + 1, line + added)}"
            "Check the result (indentation, no duplicated lines); undo_edit reverts it.\n"
        )

    async def _undo(self, target: ConfinedPath) -> str:
        real = target.real
        history = self._history.get(real)
        if not history:
            raise ToolError(
                f"There is no edit to undo for {real}: this tool has not changed it (or every "
                "change was already undone)."
            )
        snapshot = history[-1]

        def work() -> bool:
            if snapshot.previous is None:
                removed = target.unlink()
                target.remove_empty_dirs(snapshot.created_dirs)  # deepest first
                return removed
            target.write_atomic(snapshot.previous, make_parents=True)
            return True

        done = await asyncio.to_thread(work)  # on failure the snapshot stays for a retry
        history.pop()
        if not history:
            self._history.pop(real, None)
        if snapshot.previous is None:
            if not done:
                return f"Undid the creation of {real}; the file was already gone.\n"
            return f"Undid the creation of {real}: the file was removed.\n"
        text = snapshot.previous.decode("utf-8", "surrogateescape")
        lines = _split_lines(text.replace("\r\n", "\n"))
        body = _number(lines, 1) if lines else "(the file is empty)\n"
        return clip_output(
            f"Reverted the last edit of {real}. Its content is now:\n{body}",
            self.max_output_chars,
            "use view with view_range to read the rest",
        )
