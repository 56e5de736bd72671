"""Addresses sandboxed code never reaches, even with a network: the cloud instance metadata
services. ``169.254.169.254`` hands a machine's IAM role credentials to anything that asks
(ECS's ``169.254.170.2`` a task's), so all of IPv4 link-local goes, and AWS's IPv6
``fd00:ec2::254``.

They get ``prohibit`` routes inside the sandbox's own network namespace (a connect fails at
once with ``EACCES``, in any spelling of the address, bound to an interface or not), added
before the model's first command by a process that holds ``CAP_NET_ADMIN`` there, which the
model's code never does: the helper that plugs slirp4netns into a bubblewrap sandbox
(:mod:`.netns`), and on docker a one-off privileged ``exec`` in the new container. The code
is a string run by those processes (``python -I -S``), with nothing but the standard library.
"""

from __future__ import annotations

import ipaddress

#: (address, prefix length) of every blocked range.
BLOCKED: tuple[tuple[str, int], ...] = (("169.254.0.0", 16), ("fd00:ec2::254", 128))

#: Defines ``add_blocking_routes(blocked) -> str``: the routes added in the current network
#: namespace through rtnetlink; "" or why not. An IPv6 route that cannot be added where the
#: namespace has no IPv6 at all is no problem (nothing to reach it by).
ROUTES = r"""
import errno as _errno, os as _os, socket as _socket, struct as _struct

def add_blocking_routes(blocked):
    try:
        sock = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    except OSError as exc:
        return f"no netlink socket: {exc.strerror or exc}"
    problems = []
    with sock:
        sock.bind((0, 0))
        for seq, (address, length) in enumerate(blocked, 1):
            family = _socket.AF_INET6 if ":" in address else _socket.AF_INET
            destination = _socket.inet_pton(family, address)
            # rtmsg: family, dst_len, src_len, tos, table MAIN, protocol STATIC, scope
            # UNIVERSE, type PROHIBIT, flags; then the RTA_DST attribute.
            body = _struct.pack("=BBBBBBBBI", family, length, 0, 0, 254, 4, 0, 8, 0)
            body += _struct.pack("=HH", 4 + len(destination), 1) + destination
            flags = 0x1 | 0x4 | 0x100 | 0x400  # REQUEST | ACK | REPLACE | CREATE
            sock.send(_struct.pack("=IHHII", 16 + len(body), 24, flags, seq, 0) + body)
            reply = sock.recv(65536)
            kind = _struct.unpack_from("=H", reply, 4)[0]
            error = -_struct.unpack_from("=i", reply, 16)[0] if kind == 2 else 0
            if error and not (family == _socket.AF_INET6 and not _has_ipv6()):
                problems.append(f"{address}/{length}: {_os.strerror(error)}")
    return "; ".join(problems)

def _has_ipv6():
    try:
        with open("/proc/net/if_inet6") as f:
            return any(not line.split()[-1] == "lo" for line in f if line.strip())
    except OSError:
        return False
"""


def blocked_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """:data:`BLOCKED` as networks (for tests and documentation)."""
    return [ipaddress.ip_network(f"{address}/{length}") for address, length in BLOCKED]


def block_program() -> str:
    """A ``python -c`` program that adds the routes where it runs; exits 1 saying why not."""
    return (
        ROUTES
        + "import sys\n"
        + f"problem = add_blocking_routes({BLOCKED!r})\n"
        + "if problem:\n    sys.stderr.write(problem + '\\n')\n    sys.exit(1)\n"
    )
