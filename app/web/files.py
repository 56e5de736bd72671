"""The page's file browser: list, read and upload beneath one session's workspace.

Every path goes through the editor's policy (``FileAccessPolicy.locate``: beneath the
workspace's descriptor, no link followed; absolute paths refused). Uploads stream through
:meth:`ConfinedPath.open_atomic`, aborted and removed past the size limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException

from app.exceptions import ToolError
from app.sandbox.files import ConfinedPath, FileAccessPolicy, PathChangedError

_CHUNK = 1 << 16
_MAX_LIST = 2000
#: The computer panel's "files written": at most this many, from at most so many entries.
_MAX_RECENT = 40
_MAX_WALK = 20_000
_MAX_DEPTH = 12
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Types a browser may show inline; anything else is sent as plain text or downloaded.
_INLINE = {
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/svg+xml",
    "text/html",
    "application/pdf",
}


_TEXTUAL = ("application/json", "application/xml", "application/javascript")
_KINDS = ((stat.S_ISDIR, "dir"), (stat.S_ISREG, "file"), (stat.S_ISLNK, "link"))


def _entry(name: str, parts: tuple[str, ...], kind: str, st: os.stat_result) -> dict[str, Any]:
    path = "/".join((*parts, name))
    return {"name": name, "path": path, "kind": kind, "size": st.st_size, "mtime": st.st_mtime}


class Workspace:
    """One session's workspace as the page sees it."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.policy = FileAccessPolicy.create(root)

    def locate(self, raw: str | None, *, allow_root: bool = False) -> ConfinedPath:
        text = "." if raw in (None, "") and allow_root else raw
        if not isinstance(text, str) or not text.strip():
            raise HTTPException(400, "`path` is required (a path relative to the workspace).")
        if "\x00" in text:
            raise HTTPException(400, "The path contains a NUL byte.")
        if text.startswith(("/", "\\")) or (len(text) > 1 and text[1] == ":"):
            raise HTTPException(
                400, f"{text!r} is absolute; give a path relative to the workspace."
            )
        if ".." in Path(text).parts:
            raise HTTPException(403, f"{text!r} leaves the workspace ('..' is not allowed).")
        try:
            return self.policy.locate(text)
        except ToolError as e:  # outside the workspace, or a link on the way
            raise HTTPException(403, str(e)) from e

    def relative(self, located: ConfinedPath) -> str:
        return "/".join(located.parts)

    # ---- listing ------------------------------------------------------------------------------

    async def listing(self, raw: str | None) -> dict[str, Any]:
        located = self.locate(raw, allow_root=True)
        return await asyncio.to_thread(self._list, located)

    def _list(self, located: ConfinedPath) -> dict[str, Any]:
        try:
            fd = located.open_dir()
        except FileNotFoundError as e:
            raise HTTPException(404, f"No directory {self.relative(located) or '.'}") from e
        except NotADirectoryError as e:
            raise HTTPException(400, f"{self.relative(located)} is not a directory") from e
        except PathChangedError as e:
            raise HTTPException(403, str(e)) from e
        entries: list[dict[str, Any]] = []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    if len(entries) >= _MAX_LIST:
                        break
                    if entry.name == ".sessions":
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    kind = next((k for test, k in _KINDS if test(st.st_mode)), "other")
                    entries.append(_entry(entry.name, located.parts, kind, st))
        finally:
            os.close(fd)
        entries.sort(key=lambda e: (e["kind"] != "dir", e["name"].lower()))
        return {"path": self.relative(located), "entries": entries}

    async def recent(self, since: float, limit: int = _MAX_RECENT) -> dict[str, Any]:
        """The files changed since ``since`` (epoch seconds), newest first, from the whole
        tree: what the agent wrote, for the computer panel. Links are never followed."""
        located = self.locate(None, allow_root=True)
        return await asyncio.to_thread(self._recent, located, since, limit)

    def _recent(self, located: ConfinedPath, since: float, limit: int) -> dict[str, Any]:
        try:
            root = located.open_dir()
        except (OSError, PathChangedError) as e:
            raise HTTPException(404, f"The workspace cannot be read: {e}") from e
        found: list[dict[str, Any]] = []
        seen = 0
        stack: list[tuple[int, tuple[str, ...]]] = [(root, ())]
        try:
            while stack:
                fd, parts = stack.pop()
                try:
                    with os.scandir(fd) as it:
                        for entry in it:
                            seen += 1
                            if seen > _MAX_WALK:
                                break
                            if not parts and entry.name == ".sessions":
                                continue
                            try:
                                st = entry.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            if stat.S_ISDIR(st.st_mode) and len(parts) < _MAX_DEPTH:
                                with contextlib.suppress(OSError):
                                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                                    stack.append((child, (*parts, entry.name)))
                            elif stat.S_ISREG(st.st_mode) and st.st_mtime >= since:
                                found.append(_entry(entry.name, parts, "file", st))
                finally:
                    os.close(fd)
        finally:
            for fd, _ in stack:
                os.close(fd)
        found.sort(key=lambda e: -e["mtime"])
        return {"since": since, "files": found[:limit], "truncated": seen > _MAX_WALK}

    # ---- reading -----------------------------------------------------------------------------

    async def open(self, raw: str | None) -> tuple[int, int, str, str]:
        """(descriptor, size, media type, name) of a regular file; the caller closes it."""
        located = self.locate(raw)
        try:
            fd = await asyncio.to_thread(located.open_read)
        except (FileNotFoundError, NotADirectoryError) as e:
            raise HTTPException(404, f"No file {self.relative(located)}") from e
        except IsADirectoryError as e:
            raise HTTPException(400, f"{self.relative(located)} is a directory") from e
        except ToolError as e:
            raise HTTPException(403 if isinstance(e, PathChangedError) else 400, str(e)) from e
        size = os.fstat(fd).st_size
        media = mimetypes.guess_type(located.name)[0] or "application/octet-stream"
        return fd, size, media, located.name

    @staticmethod
    def inline_type(media: str, head: bytes) -> str:
        """What a preview is served as: known inline types as themselves, text-like as
        plain text, anything else as a download."""
        if media in _INLINE:
            return media
        textual = media.startswith("text/") or media in _TEXTUAL
        if textual or b"\x00" not in head[:4096]:
            return "text/plain; charset=utf-8"
        return "application/octet-stream"

    @staticmethod
    async def chunks(fd: int) -> AsyncIterator[bytes]:
        try:
            while chunk := await asyncio.to_thread(os.read, fd, _CHUNK):
                yield chunk
        finally:
            os.close(fd)

    # ---- uploading ---------------------------------------------------------------------------

    async def upload(
        self, raw: str | None, body: AsyncIterator[bytes], *, limit: int, declared: int | None
    ) -> dict[str, Any]:
        """Stream ``body`` into the file ``raw`` (parents created), at most ``limit`` bytes,
        through the confined writer (:meth:`ConfinedPath.open_atomic`)."""
        located = self.locate(raw)
        if not located.parts:
            raise HTTPException(400, "Give a file name to upload to.")
        if declared is not None and declared > limit:
            raise HTTPException(
                413,
                f"The file is {declared} bytes; uploads are limited to "
                f"{limit} bytes ([web] max_upload_mb).",
            )
        try:
            out = await asyncio.to_thread(located.open_atomic, make_parents=True, mode=0o644)
        except (NotADirectoryError, FileExistsError) as e:
            raise HTTPException(400, f"Cannot create {self.relative(located)}: {e}") from e
        except PathChangedError as e:
            raise HTTPException(403, str(e)) from e
        except ToolError as e:
            raise HTTPException(400, str(e)) from e
        try:
            buffer = bytearray()
            async for chunk in body:
                if out.size + len(buffer) + len(chunk) > limit:
                    raise HTTPException(
                        413,
                        f"The upload is larger than {limit} bytes "
                        "([web] max_upload_mb); it was discarded.",
                    )
                buffer += chunk
                if len(buffer) >= _CHUNK * 16:
                    await asyncio.to_thread(out.write, bytes(buffer))
                    buffer.clear()
            if buffer:
                await asyncio.to_thread(out.write, bytes(buffer))
        except BaseException:
            await asyncio.to_thread(out.abort)
            raise
        try:
            await asyncio.to_thread(out.commit)
        except IsADirectoryError as e:
            raise HTTPException(400, f"{self.relative(located)} exists and is not a file.") from e
        return {"path": self.relative(located), "size": out.size}
