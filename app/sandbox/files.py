"""Race-free file access beneath the workspace: a path is checked once (``realpath`` against
the allowed roots, for a clear message), then every access is made from a descriptor of its
root (``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)``, else one ``O_NOFOLLOW`` component at a
time; ``OPENMANUS_NO_OPENAT2=1`` forces that). A link met is refused, never followed; writes
are atomic. Every file the agent writes where sandboxed code can reach goes through here."""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Self

from app.config import config
from app.exceptions import ToolError

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on x86_64 and the generic table (aarch64, riscv64)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_ESCAPES = (errno.ELOOP, errno.EXDEV, errno.EAGAIN)
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC


class PathChangedError(ToolError):
    """A path component turned into a symlink (or left the root) while it was being used."""


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


def _syscall() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None


def _openat2(dir_fd: int, path: str, flags: int, mode: int = 0) -> int:
    """``openat2`` beneath ``dir_fd``, no symlink followed (``ELOOP``); OSError as ``os.open``."""
    fn = _syscall()
    if fn is None:
        raise OSError(errno.ENOSYS, "openat2 unavailable")
    resolve = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
    how = _OpenHow(flags | _CLOEXEC, mode, resolve)
    for _ in range(8):  # EAGAIN: a concurrent rename raced the lookup; the kernel asks to retry
        fd = fn(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(path or ".")),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err != errno.EAGAIN:
            raise OSError(err, os.strerror(err), path)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)


def openat2_available() -> bool:
    """Whether the kernel has ``openat2`` (probed once) and ``OPENMANUS_NO_OPENAT2`` is not 1."""
    return os.environ.get("OPENMANUS_NO_OPENAT2") != "1" and _probe_openat2()


@lru_cache(maxsize=1)
def _probe_openat2() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    root = os.open("/", _DIR_FLAGS)
    try:
        os.close(_openat2(root, ".", _DIR_FLAGS))
    except OSError:
        return False
    finally:
        os.close(root)
    return True


def default_workspace() -> Path:
    """The configured workspace (the config file is read on first use, not at import)."""
    return Path(config.workspace_root)


def resolve_workspace(workspace: str | os.PathLike[str] | None) -> Path:
    """The directory to work in (given, else the configured one), created if missing."""
    path = Path(workspace).expanduser() if workspace is not None else default_workspace()
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_real(path: str | os.PathLike[str], base: Path) -> Path:
    """Absolute real path of ``path`` (relative ones from ``base``): links followed, even a
    dangling final one (so one pointing outside cannot be written through)."""
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = base / candidate
    return Path(os.path.realpath(candidate))


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or lies below it (both already resolved)."""
    return path == root or path.is_relative_to(root)


@dataclass(frozen=True)
class FileAccessPolicy:
    """Which directories a tool may touch: the workspace plus an optional allow-list."""

    workspace: Path
    extra_roots: tuple[Path, ...] = ()
    #: (uid, gid) given to files and directories created through this policy, when sandboxed
    #: code runs as another user than the agent (bubblewrap as root); None: the agent's own.
    owner: tuple[int, int] | None = None

    @classmethod
    def create(
        cls,
        workspace: Path | None = None,
        allowed_paths: Iterable[Path | str] = (),
        *,
        owner: tuple[int, int] | None = None,
    ) -> FileAccessPolicy:
        """Build a policy; ``workspace=None`` means the configured workspace root."""
        ws = Path(os.path.realpath(workspace if workspace is not None else default_workspace()))
        extra = tuple(Path(os.path.realpath(Path(p).expanduser())) for p in allowed_paths)
        return cls(workspace=ws, extra_roots=extra, owner=owner)

    @property
    def roots(self) -> tuple[Path, ...]:
        """All allowed roots, workspace first, without duplicates."""
        return tuple(dict.fromkeys((self.workspace, *self.extra_roots)))

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The check of :meth:`locate` only (use that to access the file without a race)."""
        return self.locate(path).real

    def locate(self, path: str | os.PathLike[str]) -> ConfinedPath:
        """Check a model-supplied path (a literal file name) and return a handle that accesses
        it beneath its root; ``ToolError`` naming the allowed roots when it lies outside."""
        raw = os.fspath(path) if isinstance(path, str | os.PathLike) else None
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("`path` must be a non-empty string naming a file or directory.")
        if "\x00" in raw:
            raise ToolError("The path contains a NUL byte, which no file name can contain.")
        try:
            real = resolve_real(raw, self.workspace)
        except OSError as exc:  # a link removed while realpath read it
            raise _changed(Path(raw)) from exc
        # The deepest root wins, so an allowed directory inside the workspace is its own root.
        roots = sorted((r for r in self.roots if is_within(real, r)), key=lambda r: -len(r.parts))
        if not roots:
            where = "" if str(real) == raw else f" (it resolves to {real})"
            raise ToolError(
                f"Access denied: {raw}{where} is outside the allowed locations: "
                f"{', '.join(map(str, self.roots))}. Use a path inside the workspace "
                f"{self.workspace} (relative paths are taken from there)."
            )
        root = roots[0]
        return ConfinedPath(
            real=real, root=root, parts=real.relative_to(root).parts, owner=self.owner
        )


def _changed(path: Path) -> PathChangedError:
    return PathChangedError(
        f"{path} changed while it was being opened (a symbolic link or a path leaving the "
        "workspace appeared in it), so the access was refused. Use a path whose parts are "
        "ordinary files and directories inside the workspace."
    )


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _first_link(root: Path, parts: Sequence[str]) -> tuple[Path, str] | None:
    """The first component of ``root/parts`` that is a symbolic link now, with its target.

    Only for the error message (the refusal itself never depends on it): best effort, walked
    by descriptor like every access here, None when no link is there (any more).
    """
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return None
    try:
        for i, part in enumerate(parts):
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    return root.joinpath(*parts[: i + 1]), os.readlink(part, dir_fd=fd)
                if not stat.S_ISDIR(st.st_mode):
                    return None
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                return None
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    return None


def _link_error(root: Path, parts: Sequence[str], target: Path) -> PathChangedError:
    """The refusal for a link met on the way to ``target``: names the link when it is found."""
    found = _first_link(root, parts)
    if found is None:
        return _changed(target)
    link, destination = found
    what = "" if link == target else f", on the way to {target},"
    return PathChangedError(
        f"{link} is a symbolic link (to {destination}){what} and nothing is read or written "
        "through links, so the access was refused. Remove the link or use another path "
        "inside the workspace."
    )


def _split_relative(relative: str | os.PathLike[str] | Sequence[str]) -> tuple[str, ...]:
    """Literal parts of a path relative to a root; ``ToolError`` for one that could leave it."""
    if isinstance(relative, str | os.PathLike):
        raw = os.fspath(relative)
        if os.path.isabs(raw):
            raise ToolError(f"{raw!r} is absolute; give a path relative to the workspace.")
        parts = tuple(p for p in raw.split("/") if p not in ("", "."))
    else:
        parts = tuple(relative)
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\x00" in part:
            raise ToolError(
                f"{'/'.join(parts)!r} is not a plain path inside the workspace ('..', empty "
                "parts and NUL bytes are refused)."
            )
    if not parts:
        raise ToolError("Give a file path inside the workspace, not the workspace itself.")
    return parts


def open_directory(
    root: str | os.PathLike[str],
    parts: Sequence[str] = (),
    *,
    create: bool = False,
    mode: int = 0o777,
    owner: tuple[int, int] | None = None,
    target: Path | None = None,
) -> int:
    """A descriptor of the directory ``root/parts`` (``root`` trusted and resolved), reached
    through no link: a link raises :class:`PathChangedError` naming it (``target``: the path
    it was for). With ``create`` missing directories are made one at a time (``mode``, then
    ``owner``); ``FileNotFoundError``/``NotADirectoryError`` propagate as from ``os.open``."""
    base = Path(root)
    parts = tuple(parts)
    about = target if target is not None else base.joinpath(*parts)
    root_fd = os.open(base, _DIR_FLAGS)
    if not parts:
        return root_fd
    if not create and openat2_available():
        try:
            return _openat2(root_fd, "/".join(parts), _DIR_FLAGS)
        except OSError as exc:
            # O_DIRECTORY on a final link is ENOTDIR: a link all the same
            if exc.errno in _ESCAPES or (
                exc.errno == errno.ENOTDIR and _first_link(base, parts) is not None
            ):
                raise _link_error(base, parts, about) from exc
            raise
        finally:
            os.close(root_fd)
    fd = root_fd
    try:
        for i, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, mode, dir_fd=fd)
                except FileExistsError:
                    pass
                else:
                    if owner is not None:  # a link swapped in meanwhile: lchown, harmless
                        os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EXDEV) or _is_link(part, fd):
                    raise _link_error(base, parts[: i + 1], about) from exc
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def confined_path(
    root: str | os.PathLike[str],
    relative: str | os.PathLike[str] | Sequence[str],
    *,
    owner: tuple[int, int] | None = None,
) -> ConfinedPath:
    """``root/relative`` taken literally (never absolute, no ``..``, nothing resolved), for a
    name the agent chose (a chart, a copy): a link met when it is used is refused."""
    base = Path(os.path.realpath(root))
    parts = _split_relative(relative)
    return ConfinedPath(real=base.joinpath(*parts), root=base, parts=parts, owner=owner)


def write_confined(
    root: str | os.PathLike[str],
    relative: str | os.PathLike[str] | Sequence[str],
    data: bytes,
    *,
    make_parents: bool = True,
    owner: tuple[int, int] | None = None,
    mode: int = 0o666,
) -> Path:
    """Write ``data`` as ``root/relative`` atomically beneath ``root``: the one writer for files
    the agent puts where sandboxed code can reach (``owner`` gets what is created)."""
    target = confined_path(root, relative, owner=owner)
    return target.write_atomic(data, make_parents=make_parents, mode=mode)


class AtomicWrite:
    """A file being replaced: written under a temporary name beside it, then renamed over it
    (on leaving a ``with`` block normally; an exception drops the new content)."""

    def __init__(self, target: ConfinedPath, dir_fd: int, mode: int) -> None:
        """Takes ownership of ``dir_fd`` (closed on commit or abort, or here on an error)."""
        self.path = target.real
        self.size = 0
        self._target = target
        self._dir_fd = dir_fd
        self._fd: int | None = None
        try:
            self._old = self._existing()
            self._tmp = f".{target.name[:64]}.{secrets.token_hex(4)}.tmp"
            self._fd = os.open(self._tmp, _TMP_FLAGS, mode, dir_fd=dir_fd)
        except BaseException:
            os.close(dir_fd)
            raise

    def _existing(self) -> os.stat_result | None:
        try:
            old = os.stat(self._target.name, dir_fd=self._dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(old.st_mode):
            raise _link_error(self._target.root, self._target.parts, self.path)
        if not stat.S_ISREG(old.st_mode):
            raise ToolError(f"{self.path} exists and is not a regular file.")
        return old

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` to the new content."""
        if self._fd is None:
            raise ValueError(f"the write of {self.path} is already finished")
        view = memoryview(data).cast("B")
        self.size += len(view)
        while view:
            view = view[os.write(self._fd, view) :]

    def _settle(self, fd: int) -> None:
        """Mode and owner: the old file's (when it is this file alone, not a hard link to one
        elsewhere, and without set-id bits), else the default and ``owner``."""
        old, owner = self._old, self._target.owner
        if old is not None and old.st_nlink == 1:
            os.fchmod(fd, stat.S_IMODE(old.st_mode) & 0o777)
            if os.geteuid() == 0 and (old.st_uid, old.st_gid) != (0, 0):
                with suppress(OSError):
                    os.fchown(fd, old.st_uid, old.st_gid)
        elif owner is not None:
            os.fchown(fd, *owner)

    def commit(self) -> Path:
        """``fsync`` and rename over the target (a name, never followed); returns its path."""
        fd, self._fd = self._fd, None
        if fd is None:
            raise ValueError(f"the write of {self.path} is already finished")
        try:
            try:
                self._settle(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            name = self._target.name
            os.rename(self._tmp, name, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
        except BaseException:
            self._discard()
            raise
        with suppress(OSError):
            os.fsync(self._dir_fd)
        os.close(self._dir_fd)
        return self.path

    def abort(self) -> None:
        """Drop the new content; the old file stays as it was."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
            self._discard()

    def _discard(self) -> None:
        with suppress(OSError):
            os.unlink(self._tmp, dir_fd=self._dir_fd)
        os.close(self._dir_fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


@dataclass(frozen=True)
class ConfinedPath:
    """A checked path: its real location, its allowed root and its parts below it. Every
    method opens from a descriptor of ``root`` and refuses a symlink met (blocking calls)."""

    real: Path
    root: Path
    parts: tuple[str, ...]
    #: Owner of what is created here (see ``FileAccessPolicy.owner``).
    owner: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    def _open_dir(self, parts: tuple[str, ...], *, create: bool = False) -> int:
        """A descriptor of the directory ``root/parts`` (missing ones created if asked)."""
        return open_directory(self.root, parts, create=create, owner=self.owner, target=self.real)

    @contextmanager
    def parent(self, *, create: bool = False) -> Iterator[int]:
        """The containing directory's descriptor (created, with missing parents, if asked)."""
        fd = self._open_dir(self.parts[:-1], create=create)
        try:
            yield fd
        finally:
            os.close(fd)

    def missing_parents(self) -> list[Path]:
        """The parent directories that do not exist yet, deepest first (for undo of create)."""
        missing: list[Path] = []
        parts = self.parts[:-1]
        while parts:
            try:
                fd = self._open_dir(parts)
            except FileNotFoundError:
                missing.append(self.root.joinpath(*parts))
                parts = parts[:-1]
                continue
            os.close(fd)
            break
        return missing

    def lstat(self) -> os.stat_result | None:
        """The final name's status without following it; None when nothing is there."""
        if not self.parts:
            return os.stat(self.root)
        try:
            with self.parent() as dir_fd:
                st = os.stat(self.name, dir_fd=dir_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(st.st_mode):
            raise _link_error(self.root, self.parts, self.real)
        return st

    def kind(self) -> str:
        """missing, dir, file or other (device, socket, pipe)."""
        st = self.lstat()
        if st is None:
            return "missing"
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return "file" if stat.S_ISREG(st.st_mode) else "other"

    def open_read(self) -> int:
        """A read descriptor of the regular file (no blocking on a pipe; never a link)."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
        with self.parent() as dir_fd:
            try:
                fd = os.open(self.name, flags, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _link_error(self.root, self.parts, self.real) from exc
                raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ToolError(f"{self.real} is not a regular file (a device, socket or pipe).")
        os.set_blocking(fd, True)
        return fd

    def read_bytes(self) -> bytes:
        with os.fdopen(self.open_read(), "rb") as fh:
            return fh.read()

    def open_dir(self) -> int:
        """A descriptor of this directory (for listing with ``os.scandir``)."""
        return self._open_dir(self.parts)

    def open_atomic(self, *, make_parents: bool = False, mode: int = 0o666) -> AtomicWrite:
        """Start replacing the file (see :class:`AtomicWrite`); a link in its place or on the
        way is refused, naming it, as is a name that is not a regular file."""
        if not self.parts:
            raise ToolError(f"{self.real} is a directory; give a file path.")
        dir_fd = self._open_dir(self.parts[:-1], create=make_parents)
        return AtomicWrite(self, dir_fd, mode)

    def write_atomic(self, data: bytes, *, make_parents: bool = False, mode: int = 0o666) -> Path:
        """Replace the file's content all at once (see :class:`AtomicWrite`); its path."""
        with self.open_atomic(make_parents=make_parents, mode=mode) as out:
            out.write(data)
        return self.real

    def unlink(self) -> bool:
        """Remove the file (or a link in its place); False when nothing was there."""
        try:
            with self.parent() as dir_fd:
                os.unlink(self.name, dir_fd=dir_fd)
        except FileNotFoundError:
            return False
        return True

    def remove_empty_dirs(self, directories: Iterable[Path]) -> None:
        """Remove directories below the root (deepest first) up to one not empty or not there."""
        for directory in directories:
            if not is_within(directory, self.root) or directory == self.root:
                break
            rel = directory.relative_to(self.root).parts
            other = ConfinedPath(real=directory, root=self.root, parts=rel)
            try:
                with other.parent() as dir_fd:
                    os.rmdir(other.name, dir_fd=dir_fd)
            except OSError:
                break
