"""The launch stub every backend on this host uses (``python -I -S -c``, started in ``/``, then
``exec``): joins the sandbox's cgroup, sets rlimits, as root stages the bound directories in a
private mount namespace and drops to ``user``, resets signals, dies with the agent
(PDEATHSIG) and enters the program's working directory."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from app.sandbox import netns
from app.sandbox.hostside import python_argv

_HEAD = r"""
import json, os, signal, sys
opts = json.loads(sys.argv[1])
argv = sys.argv[2:]
"""
_LAUNCHER = r"""
def fail(what, err):
    reason = os.strerror(err) if isinstance(err, int) else err
    sys.stderr.write(f"sandbox launcher: {what}: {reason}\n")
    os._exit(126)
if opts.get("cgroup"):
    try:
        with open(opts["cgroup"], "w") as f:
            f.write("0")
    except OSError as exc:
        fail("cannot join the sandbox's cgroup", exc.strerror or exc)
import resource
for name, value in opts.get("limits", {}).items():
    which = getattr(resource, name, None)
    if which is None:
        continue
    try:
        _, hard = resource.getrlimit(which)
        new_hard = value + 1 if name == "RLIMIT_CPU" else value
        if hard != resource.RLIM_INFINITY:
            new_hard = min(new_hard, hard)
        resource.setrlimit(which, (min(value, new_hard), new_hard))
    except (OSError, ValueError):
        pass
stage = opts.get("stage")
if stage:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    root = opts["stage_root"].encode()
    if libc.unshare(0x00020000) != 0:  # CLONE_NEWNS
        fail("unshare(CLONE_NEWNS)", ctypes.get_errno())
    if libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None) != 0:  # MS_REC | MS_PRIVATE
        fail("making mounts private", ctypes.get_errno())
    fds = []  # opened in the new namespace: a bind source must be one of its mounts
    for index, source in stage:
        try:
            fds.append(os.open(source, os.O_PATH | os.O_CLOEXEC))
        except OSError as exc:
            fail(f"cannot open {source}", exc.strerror or exc)
    if libc.mount(b"tmpfs", root, b"tmpfs", 0, b"mode=0755") != 0:
        fail("mounting the staging tmpfs", ctypes.get_errno())
    for number, ((index, source), fd) in enumerate(zip(stage, fds)):
        target = opts["stage_root"] + "/" + str(number)
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.mkdir(target)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        src = f"/proc/self/fd/{fd}".encode()
        if libc.mount(src, target.encode(), None, 0x1000 | 0x4000, None) != 0:  # MS_BIND|MS_REC
            fail(f"staging {source}", ctypes.get_errno())
        os.close(fd)
        argv[index] = target
user = opts.get("user")
if user:
    try:
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
    except OSError as exc:
        fail("dropping privileges", exc.strerror or exc)
    if os.getuid() == 0 or os.geteuid() == 0:
        fail("dropping privileges", "still root")
for name in ("SIGINT", "SIGQUIT", "SIGTERM", "SIGHUP", "SIGPIPE", "SIGXFSZ", "SIGTSTP",
             "SIGTTIN", "SIGTTOU"):
    if hasattr(signal, name):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_SETMASK, ())
parent = opts.get("parent")
if parent and sys.platform.startswith("linux"):
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the agent died before the line above took
        os._exit(126)
if opts.get("cwd"):
    try:
        os.chdir(opts["cwd"])
    except OSError as exc:
        fail(f"cannot enter {opts['cwd']}", exc.strerror or exc)
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.stderr.write(f"cannot run {argv[0]}: {exc.strerror or exc}\n")
    os._exit(127)
"""


@dataclass(frozen=True)
class LaunchOptions:
    """What the stub does before ``exec`` (see the module docstring)."""

    rlimits: dict[str, int] = field(default_factory=dict)
    cgroup: str | None = None
    user: tuple[int, int] | None = None
    #: (index in argv, host path) pairs to stage below ``stage_root`` (root only).
    stage: tuple[tuple[int, str], ...] = ()
    stage_root: str | None = None
    #: Die with this process (the agent: the default); 0 for no parent-death signal.
    parent: int | None = None
    #: slirp4netns, for a bubblewrap sandbox with a network of its own (:mod:`.netns`).
    network: str | None = None
    #: The directory to run the program in, entered just before ``exec`` (the stub itself
    #: starts outside the workspace); None: where the stub was started.
    cwd: str | None = None


def launcher_argv(argv: list[str], options: LaunchOptions) -> list[str]:
    """``argv`` prefixed with the stub."""
    settings: dict[str, object] = {"limits": options.rlimits}
    parent = os.getpid() if options.parent is None else options.parent
    if parent:
        settings["parent"] = parent
    if options.cgroup:
        settings["cgroup"] = options.cgroup
    if options.user is not None:
        settings["user"] = list(options.user)
    if options.cwd:
        settings["cwd"] = options.cwd
    if options.stage:
        settings["stage"] = [list(item) for item in options.stage]
        settings["stage_root"] = options.stage_root
    code = _HEAD + _LAUNCHER
    if options.network:
        settings["network"] = netns.launch_settings(options.network)
        code = _HEAD + netns.SETUP + _LAUNCHER
    return python_argv("-S", "-c", code, json.dumps(settings), *argv)
