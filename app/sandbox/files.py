"""Race-free file access beneath the workspace, for tools that touch files for the model.

The model chooses the paths and can run code in the workspace at the same time (a background
loop flipping a directory into a symlink), so checking a path and then opening it again is not
enough. Here a path is checked once (``realpath`` against the allowed roots, for a clear
message) and then every access is made *relative to a directory descriptor of the root*:

* with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` (Linux 5.6+, probed at run time),
  the kernel refuses any resolution that would leave the root;
* elsewhere (or with ``OPENMANUS_NO_OPENAT2=1``, which the tests use to cover this path),
  each component is opened with ``O_NOFOLLOW`` from the previous one's descriptor, so a
  symlink that appears anywhere in the path makes the access fail instead of following it.

The final name is never followed either. Writes are atomic: a temporary file in the same
directory, ``fsync``, then ``rename`` over the old name (its mode kept), so a full disk or a
crash leaves the old content whole, and a hard link to a file elsewhere is never written
through.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from app.exceptions import ToolError

__all__ = [
    "ConfinedPath",
    "FileAccessPolicy",
    "PathChangedError",
    "default_workspace",
    "is_within",
    "openat2_available",
    "resolve_real",
    "resolve_workspace",
]

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on x86_64 and the generic table (aarch64, riscv64)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_ESCAPES = (errno.ELOOP, errno.EXDEV, errno.EAGAIN)


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
    """``openat2`` beneath ``dir_fd``; raises ``OSError`` like ``os.open``."""
    fn = _syscall()
    if fn is None:
        raise OSError(errno.ENOSYS, "openat2 unavailable")
    how = _OpenHow(flags | _CLOEXEC, mode, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
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
    """Whether ``openat2`` with ``RESOLVE_BENEATH`` is used: the kernel has it (probed once)
    and ``OPENMANUS_NO_OPENAT2`` is not ``1``."""
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


# --- the policy: which roots, and the one-time check with a clear message ----------------------


def default_workspace() -> Path:
    """The configured workspace; imported lazily so tools can be built without a config."""
    from app.config import config

    return Path(config.workspace_root)


def resolve_workspace(workspace: str | os.PathLike[str] | None) -> Path:
    """The directory to work in (given, else the configured one), created if missing."""
    path = Path(workspace).expanduser() if workspace is not None else default_workspace()
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_real(path: str | os.PathLike[str], base: Path) -> Path:
    """Absolute real path of ``path`` (relative ones are taken from ``base``).

    Existing components have their symlinks followed (also a dangling final symlink, so a link
    pointing outside cannot be written through); missing components are kept literally.
    """
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
        seen: list[Path] = []
        for root in (self.workspace, *self.extra_roots):
            if root not in seen:
                seen.append(root)
        return tuple(seen)

    def describe_roots(self) -> str:
        """The allowed roots as text for error messages."""
        return ", ".join(str(r) for r in self.roots)

    def allows(self, real_path: Path) -> bool:
        """Whether an already-resolved path lies inside an allowed root."""
        return any(is_within(real_path, root) for root in self.roots)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """Resolve a model-supplied path and enforce confinement (the check only: use
        :meth:`locate` to access the file without a race)."""
        return self.locate(path).real

    def locate(self, path: str | os.PathLike[str]) -> ConfinedPath:
        """Check a model-supplied path and return a handle that accesses it beneath its root.

        Raises ``ToolError`` (with the allowed roots named) for empty paths, NUL bytes and any
        path whose real location is outside the roots. Shell metacharacters are not special:
        the path is only ever used as a literal file name.
        """
        raw = os.fspath(path) if isinstance(path, str | os.PathLike) else None
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("`path` must be a non-empty string naming a file or directory.")
        if "\x00" in raw:
            raise ToolError("The path contains a NUL byte, which no file name can contain.")
        try:
            real = resolve_real(raw, self.workspace)
        except OSError as exc:  # a link removed while realpath read it
            raise _changed(Path(raw), exc) from exc
        # The deepest root wins, so an allowed directory inside the workspace is its own root.
        roots = sorted((r for r in self.roots if is_within(real, r)), key=lambda r: -len(r.parts))
        if not roots:
            where = "" if str(real) == raw else f" (it resolves to {real})"
            raise ToolError(
                f"Access denied: {raw}{where} is outside the allowed locations: "
                f"{self.describe_roots()}. Use a path inside the workspace {self.workspace} "
                "(relative paths are taken from there)."
            )
        root = roots[0]
        return ConfinedPath(
            real=real, root=root, parts=real.relative_to(root).parts, owner=self.owner
        )


# --- access beneath a root ---------------------------------------------------------------------


def _changed(path: Path, exc: OSError | None = None) -> PathChangedError:
    error = PathChangedError(
        f"{path} changed while it was being opened (a symbolic link or a path leaving the "
        "workspace appeared in it), so the access was refused. Use a path whose parts are "
        "ordinary files and directories inside the workspace."
    )
    if exc is not None:
        error.__cause__ = exc
    return error


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class ConfinedPath:
    """A checked path: its real location, the allowed root it lies in, and its parts below it.

    Every method opens from a descriptor of ``root`` and never follows a symlink that would
    leave it; a symlink appearing mid-way raises :class:`PathChangedError`. Methods block:
    call them from a worker thread in async code.
    """

    real: Path
    root: Path
    parts: tuple[str, ...]
    #: Owner of what is created here (see ``FileAccessPolicy.owner``).
    owner: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    # -- descriptors --------------------------------------------------------------------------

    def _root_fd(self) -> int:
        return os.open(self.root, _DIR_FLAGS)

    def _open_dir(self, parts: tuple[str, ...], *, create: bool = False) -> tuple[int, int]:
        """A descriptor of the directory ``root/parts`` and how many parts were created."""
        root_fd = self._root_fd()
        if not parts:
            return root_fd, 0
        if not create and openat2_available():
            try:
                return _openat2(root_fd, "/".join(parts), _DIR_FLAGS), 0
            except OSError as exc:
                if exc.errno in _ESCAPES:
                    raise _changed(self.real, exc) from exc
                raise
            finally:
                os.close(root_fd)
        fd, made = root_fd, 0
        try:
            for part in parts:
                if create:
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                        made += 1
                        if self.owner is not None:
                            os.chown(part, *self.owner, dir_fd=fd, follow_symlinks=False)
                    except FileExistsError:
                        pass
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.EXDEV) or _is_link(part, fd):
                        raise _changed(self.real, exc) from exc
                    raise
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, made

    @contextmanager
    def parent(self, *, create: bool = False) -> Iterator[int]:
        """The containing directory's descriptor (created, with missing parents, if asked)."""
        fd, _ = self._open_dir(self.parts[:-1], create=create)
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
                fd, _ = self._open_dir(parts)
            except FileNotFoundError:
                missing.append(self.root.joinpath(*parts))
                parts = parts[:-1]
                continue
            os.close(fd)
            break
        return missing

    # -- reading ------------------------------------------------------------------------------

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
            raise _changed(self.real)
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
                    raise _changed(self.real, exc) from exc
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
        fd, _ = self._open_dir(self.parts)
        return fd

    # -- writing ------------------------------------------------------------------------------

    def write_atomic(self, data: bytes, *, make_parents: bool = False) -> None:
        """Replace the file's content all at once: a temporary file in the same directory,
        ``fsync``, ``rename``. The old file's mode (and, as root, owner) is kept. On any error
        the temporary file is removed and the old content is untouched."""
        if not self.parts:
            raise ToolError(f"{self.real} is a directory; give a file path.")
        with self.parent(create=make_parents) as dir_fd:
            try:
                old = os.stat(self.name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and stat.S_ISLNK(old.st_mode):
                raise _changed(self.real)
            if old is not None and not stat.S_ISREG(old.st_mode):
                raise ToolError(f"{self.real} exists and is not a regular file.")
            tmp = f".{self.name[:64]}.{secrets.token_hex(4)}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
            fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    if old is not None:
                        os.fchmod(fd, stat.S_IMODE(old.st_mode))
                        if os.geteuid() == 0 and (old.st_uid, old.st_gid) != (0, 0):
                            with suppress(OSError):
                                os.fchown(fd, old.st_uid, old.st_gid)
                    elif self.owner is not None:
                        os.fchown(fd, *self.owner)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.rename(tmp, self.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            with suppress(OSError):
                os.fsync(dir_fd)

    def unlink(self) -> bool:
        """Remove the file (or a link in its place); False when nothing was there."""
        try:
            with self.parent() as dir_fd:
                os.unlink(self.name, dir_fd=dir_fd)
        except FileNotFoundError:
            return False
        return True

    def remove_empty_dirs(self, directories: Iterable[Path]) -> None:
        """Remove directories (deepest first) that lie below this path's root, stopping at the
        first that is not empty or not there."""
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
