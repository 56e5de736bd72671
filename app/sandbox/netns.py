"""The network of a bubblewrap sandbox with ``network_enabled``: user-mode, never the host's
(whose loopback serves DevTools, the web UI, model servers). The launcher hands bwrap its
``--info-fd``/``--block-fd``/``--sync-fd`` pipes and forks a helper (its own session, not a
sandbox process) that plugs ``slirp4netns --disable-host-loopback`` into the new namespace,
blocks the instance metadata addresses there (:mod:`.netblock`) and releases it; a failure of
either kills the sandbox before the command runs."""

from __future__ import annotations

import os
import shutil

from app.exceptions import SandboxUnavailableError
from app.sandbox import netblock

#: Descriptor numbers bwrap gets for its ``--info-fd``, ``--block-fd`` and ``--sync-fd``.
INFO_FD, BLOCK_FD, SYNC_FD = 60, 61, 62
#: Seconds slirp4netns may take to bring the interface up before the run is abandoned.
READY_TIMEOUT = 20.0

_HELPER = r"""
import fcntl, select, subprocess, time
net = opts["network"]
info_fd, block_fd, sync_fd = net["fds"]
info_r, info_w = os.pipe()
block_r, block_w = os.pipe()
sync_r, sync_w = os.pipe()
for mine, theirs in ((info_w, info_fd), (block_r, block_fd), (sync_w, sync_fd)):
    os.dup2(mine, theirs)  # inheritable: bwrap gets them across exec
    os.close(mine)

def say(message):
    os.write(2, ("sandbox network: " + message + "\n").encode(errors="replace"))

def helper():
    os.setsid()
    for fd in (info_fd, block_fd, sync_fd):
        os.close(fd)
    data = b""
    info = None
    while info is None:
        chunk = os.read(info_r, 4096)
        if not chunk:
            os._exit(0)  # bwrap failed before starting the sandbox: it says why itself
        data += chunk
        try:
            info = json.loads(data)
        except ValueError:
            pass
    child = int(info["child-pid"])
    deadline = time.monotonic() + net["timeout"]
    # bwrap's child brings its loopback up over netlink right after it is started; slirp4netns
    # configuring tap0 at the same time can make that fail. Wait for lo's 127.0.0.0/8 route,
    # which the kernel adds once lo is up (bwrap's last netlink request).
    while not lo_is_up(child):
        if time.monotonic() > deadline:
            say("the sandbox's loopback did not come up")
            kill(child)
        time.sleep(0.002)
    try:
        net_ns = os.open(f"/proc/{child}/ns/net", os.O_RDONLY)
        user_ns = fcntl.ioctl(net_ns, 0xB701)  # NS_GET_USERNS: the one owning it, not the child's
    except OSError as exc:
        say(f"cannot open the sandbox's namespaces: {exc.strerror}")
        kill(child)
    ready_r, ready_w = os.pipe()
    err_r, err_w = os.pipe()
    # --enable-sandbox (empty mount namespace, no capabilities) needs root; it is the root case
    # that matters: as a normal user slirp4netns has no privileges to drop.
    confine = ["--enable-sandbox"] if os.geteuid() == 0 else []
    cmd = [net["slirp4netns"], "--configure", "--mtu=65520", "--disable-host-loopback",
           *confine, "--enable-seccomp", f"--ready-fd={ready_w}",
           f"--exit-fd={sync_r}", f"--userns-path=/proc/self/fd/{user_ns}",
           "--netns-type=path", f"/proc/self/fd/{net_ns}", "tap0"]
    try:
        slirp = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err_w, pass_fds=(ready_w, sync_r, user_ns, net_ns))
    except OSError as exc:
        say(f"cannot start slirp4netns: {exc.strerror or exc}")
        kill(child)
    for fd in (ready_w, err_w, sync_r):
        os.close(fd)
    errors = b""
    ready = False
    while not ready:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        readable, _, _ = select.select([ready_r, err_r], [], [], left)
        if err_r in readable:
            errors += os.read(err_r, 4096)
        if ready_r in readable:
            if not os.read(ready_r, 1):
                break  # slirp4netns exited before the network was up
            ready = True
    if not ready:
        slirp.kill()
        slirp.wait()
        errors += os.read(err_r, 65536) if select.select([err_r], [], [], 0)[0] else b""
        tail = errors.decode(errors="replace").strip().splitlines()[-3:]
        say("slirp4netns could not set up the network: " + (" / ".join(tail) or "timed out"))
        kill(child)
    # Before the command runs: the instance metadata addresses are unreachable (netblock).
    problem = block_metadata(user_ns, net_ns)
    for fd in (user_ns, net_ns):
        os.close(fd)
    if problem:
        slirp.kill()
        slirp.wait()
        say("cannot block the instance metadata addresses: " + problem)
        kill(child)
    os.write(block_w, b"1")
    os.close(block_w)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while os.read(err_r, 65536):  # its chatter, until it exits with the sandbox
        pass
    slirp.wait()
    os._exit(0)

def block_metadata(user_ns, net_ns):
    # The blocking routes, added by a child that enters the sandbox's namespaces (their
    # owner has every capability there); "" or why not.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        problem = "failed"
        try:
            os.close(read_end)
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            for fd, kind, name in ((user_ns, 0x10000000, "user"), (net_ns, 0x40000000, "net")):
                if libc.setns(fd, kind) != 0:
                    raise OSError(ctypes.get_errno(), f"entering the {name} namespace")
            problem = add_blocking_routes([tuple(b) for b in net["blocked"]]) or "ok"
        except BaseException as exc:
            problem = f"{exc}"
        finally:
            os.write(write_end, problem.encode(errors="replace")[:4096])
            os._exit(0)
    os.close(write_end)
    answer = b""
    while chunk := os.read(read_end, 4096):
        answer += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    text = answer.decode(errors="replace")
    return "" if text == "ok" else (text or "the helper died")

def lo_is_up(child):
    try:
        with open(f"/proc/{child}/net/fib_trie") as f:
            lines = f.read().splitlines()
    except OSError:
        return True  # gone: the caller finds out when it opens the namespaces
    return any(a.strip().endswith("127.0.0.0") and "/8 host LOCAL" in b
               for a, b in zip(lines, lines[1:]))

def kill(child):
    try:
        os.kill(child, signal.SIGKILL)
    except OSError:
        pass
    os._exit(1)

if os.fork() == 0:
    try:
        helper()
    finally:
        os._exit(1)
for fd in (info_r, block_w, sync_r):
    os.close(fd)
"""

#: Launcher code (:mod:`.launcher`) run first, before it joins the cgroup, when
#: ``opts["network"]`` is set: the pipes bwrap inherits, and the helper.
SETUP = netblock.ROUTES + _HELPER


def find_slirp4netns() -> str:
    """Absolute path of ``slirp4netns``, or a clear error saying how to get it."""
    found = shutil.which("slirp4netns")
    if not found:
        raise SandboxUnavailableError(
            "network_enabled = true on the bubblewrap backend needs slirp4netns (user-mode "
            "networking that keeps sandboxed code away from the host's 127.0.0.1), which is "
            "not installed. Install it (Debian/Ubuntu: apt-get install slirp4netns), set "
            'network_enabled = false, or use backend = "docker".'
        )
    return os.path.realpath(found)


#: bwrap options the pipes of :data:`SETUP` are for.
BWRAP_OPTIONS = [
    "--info-fd", str(INFO_FD),
    "--block-fd", str(BLOCK_FD),
    "--sync-fd", str(SYNC_FD),
]  # fmt: skip


def launch_settings(slirp4netns: str) -> dict[str, object]:
    """``opts["network"]`` of the launcher for a sandbox networked through ``slirp4netns``."""
    return {
        "fds": [INFO_FD, BLOCK_FD, SYNC_FD],
        "slirp4netns": slirp4netns,
        "timeout": READY_TIMEOUT,
        "blocked": [list(item) for item in netblock.BLOCKED],
    }
