"""The page's file browser: list, read and upload beneath one session's workspace.

Every path goes through the editor's policy (``FileAccessPolicy.locate``): it is resolved
once for a clear message, then opened relative to a descriptor of the workspace without
following links, so neither ``..``, an absolute path, a NUL byte nor a symlink the model
planted can reach outside. Absolute paths are refused outright here: the page only ever
sends paths relative to the workspace. Uploads are streamed to a temporary file beside
the target and renamed into place; past the size limit the upload is aborted and removed.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import secrets
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.exceptions import ToolError
from app.sandbox.files import ConfinedPath, FileAccessPolicy, PathChangedError

__all__ = [
    "FileProblem",
    "Workspace",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 16
_MAX_LIST = 2000
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


@dataclass
class FileProblem(Exception):
    """A request the file API refuses: HTTP ``status`` with ``message``."""

    status: int
    message: str

    def __str__(self) -> str:
        return self.message


class Workspace:
    """One session's workspace as the page sees it."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.policy = FileAccessPolicy.create(root)

    def locate(self, raw: str | None, *, allow_root: bool = False) -> ConfinedPath:
        text = "." if raw in (None, "") and allow_root else raw
        if not isinstance(text, str) or not text.strip():
            raise FileProblem(400, "`path` is required (a path relative to the workspace).")
        if "\x00" in text:
            raise FileProblem(400, "The path contains a NUL byte.")
        if text.startswith(("/", "\\")) or (len(text) > 1 and text[1] == ":"):
            raise FileProblem(400, f"{text!r} is absolute; give a path relative to the workspace.")
        if ".." in Path(text).parts:
            raise FileProblem(403, f"{text!r} leaves the workspace ('..' is not allowed).")
        try:
            return self.policy.locate(text)
        except PathChangedError as e:
            raise FileProblem(403, str(e)) from e
        except ToolError as e:
            raise FileProblem(403, str(e)) from e

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
            raise FileProblem(404, f"No directory {self.relative(located) or '.'}") from e
        except NotADirectoryError as e:
            raise FileProblem(400, f"{self.relative(located)} is not a directory") from e
        except PathChangedError as e:
            raise FileProblem(403, str(e)) from e
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
                    kind = (
                        "dir"
                        if stat.S_ISDIR(st.st_mode)
                        else "file"
                        if stat.S_ISREG(st.st_mode)
                        else "link"
                        if stat.S_ISLNK(st.st_mode)
                        else "other"
                    )
                    path = "/".join((*located.parts, entry.name))
                    entries.append(
                        {
                            "name": entry.name,
                            "path": path,
                            "kind": kind,
                            "size": st.st_size,
                            "mtime": st.st_mtime,
                        }
                    )
        finally:
            os.close(fd)
        entries.sort(key=lambda e: (e["kind"] != "dir", e["name"].lower()))
        return {"path": self.relative(located), "entries": entries}

    # ---- reading -----------------------------------------------------------------------------

    async def open(self, raw: str | None) -> tuple[int, int, str, str]:
        """(descriptor, size, media type, name) of a regular file; the caller closes it."""
        located = self.locate(raw)
        try:
            fd = await asyncio.to_thread(located.open_read)
        except (FileNotFoundError, NotADirectoryError) as e:
            raise FileProblem(404, f"No file {self.relative(located)}") from e
        except IsADirectoryError as e:
            raise FileProblem(400, f"{self.relative(located)} is a directory") from e
        except ToolError as e:
            raise FileProblem(403 if isinstance(e, PathChangedError) else 400, str(e)) from e
        size = os.fstat(fd).st_size
        media = mimetypes.guess_type(located.name)[0] or "application/octet-stream"
        return fd, size, media, located.name

    @staticmethod
    def inline_type(media: str, head: bytes) -> str:
        """What a preview is served as: known inline types as themselves, text-like as
        plain text, anything else as a download."""
        if media in _INLINE:
            return media
        if media.startswith("text/") or media in (
            "application/json",
            "application/xml",
            "application/javascript",
        ):
            return "text/plain; charset=utf-8"
        if b"\x00" not in head[:4096]:
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
        """Stream ``body`` into the file ``raw`` (parents created), at most ``limit`` bytes."""
        located = self.locate(raw)
        if not located.parts:
            raise FileProblem(400, "Give a file name to upload to.")
        if declared is not None and declared > limit:
            raise FileProblem(
                413,
                f"The file is {declared} bytes; uploads are limited to "
                f"{limit} bytes ([web] max_upload_mb).",
            )
        try:
            dir_fd, tmp = await asyncio.to_thread(self._begin_upload, located)
        except (NotADirectoryError, FileExistsError) as e:
            raise FileProblem(400, f"Cannot create {self.relative(located)}: {e}") from e
        except ToolError as e:
            raise FileProblem(403, str(e)) from e
        total, done = 0, False
        try:
            fd = os.open(tmp, os.O_WRONLY | _CLOEXEC, dir_fd=dir_fd)
            try:
                buffer = bytearray()
                async for chunk in body:
                    total += len(chunk)
                    if total > limit:
                        raise FileProblem(
                            413,
                            f"The upload is larger than {limit} bytes "
                            "([web] max_upload_mb); it was discarded.",
                        )
                    buffer += chunk
                    if len(buffer) >= _CHUNK * 16:
                        await asyncio.to_thread(_write_all, fd, bytes(buffer))
                        buffer.clear()
                if buffer:
                    await asyncio.to_thread(_write_all, fd, bytes(buffer))
            finally:
                os.close(fd)
            await asyncio.to_thread(self._finish_upload, located, dir_fd, tmp)
            done = True
        finally:
            if not done:
                try:
                    os.unlink(tmp, dir_fd=dir_fd)
                except OSError:
                    pass
            os.close(dir_fd)
        return {"path": self.relative(located), "size": total}

    def _begin_upload(self, located: ConfinedPath) -> tuple[int, str]:
        missing_ok = located.kind()
        if missing_ok not in ("missing", "file"):
            raise FileProblem(400, f"{self.relative(located)} exists and is not a file.")
        with located.parent(create=True) as parent_fd:
            dir_fd = os.dup(parent_fd)
        tmp = f".upload-{secrets.token_hex(6)}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
        os.close(os.open(tmp, flags, 0o644, dir_fd=dir_fd))
        return dir_fd, tmp

    @staticmethod
    def _finish_upload(located: ConfinedPath, dir_fd: int, tmp: str) -> None:
        try:
            old = os.stat(located.name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise FileProblem(400, f"{located.name} exists and is not a regular file.")
        os.rename(tmp, located.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
