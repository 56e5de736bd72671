"""Addresses sandboxed code never reaches, even with a network: the cloud instance metadata
services. ``169.254.169.254`` hands a machine's IAM role credentials to anything that asks
(ECS's ``169.254.170.2`` a task's), so all of IPv4 link-local goes, and AWS's IPv6
``fd00:ec2::254``.

They get ``prohibit`` routes inside the sandbox's own network namespace (a connect fails at
once with ``EACCES``, in any spelling of the address), added before the model's first command
by a process that holds ``CAP_NET_ADMIN`` there, which the model's code never does: the helper
that plugs slirp4netns into a bubblewrap sandbox (:mod:`.netns`), and on docker a one-off
container that joins the new container's network namespace. The code is a string run by those
processes (``python -I -S``), with nothing but the standard library.

A socket bound to an interface (``SO_BINDTODEVICE``, ``IP_UNICAST_IF``) is not held by a
``prohibit`` route: when its lookup fails the kernel takes the address to be on that link and
asks for it by ARP, and on a Docker bridge the host (or a neighbour) answers for addresses it
holds, a metadata proxy's among them. On docker the blocked IPv4 ranges therefore also get a
rule for sockets bound to each interface: their lookup goes to a table of our own whose route
leads to a permanent neighbour at the interface's own MAC address, so the frames go nowhere
and no ARP request is ever sent (``sink``). slirp4netns's link needs none: it answers ARP for
its own virtual addresses alone, and would forward whatever reached it.
"""

from __future__ import annotations

import ipaddress

#: (address, prefix length) of every blocked range.
BLOCKED: tuple[tuple[str, int], ...] = (("169.254.0.0", 16), ("fd00:ec2::254", 128))
#: The routing table and rule priority of the bound sockets' sink, and the neighbour its route
#: leads to (inside the blocked range, so nothing real ever has it).
SINK_TABLE = 169
SINK_PRIORITY = 100
SINK_GATEWAY = "169.254.0.1"

#: Defines ``add_blocking_routes(blocked) -> str``: the routes added in the current network
#: namespace through rtnetlink, and ``add_bound_sinks(blocked, table, priority, gateway) ->
#: str``: the bound sockets' rules (module docstring); each "" or why not. An IPv6 route
#: that cannot be added where the namespace has no IPv6 at all is no problem (nothing to
#: reach it by).
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
        for address, length in blocked:
            family = _socket.AF_INET6 if ":" in address else _socket.AF_INET
            destination = _socket.inet_pton(family, address)
            # rtmsg: family, dst_len, src_len, tos, table MAIN, protocol STATIC, scope
            # UNIVERSE, type PROHIBIT, flags; then the RTA_DST attribute.
            body = _struct.pack("=BBBBBBBBI", family, length, 0, 0, 254, 4, 0, 8, 0)
            body += _attribute(1, destination)
            error = _request(sock, 24, 0x100 | 0x400, body)  # RTM_NEWROUTE, REPLACE|CREATE
            if error and not (family == _socket.AF_INET6 and not _has_ipv6()):
                problems.append(f"{address}/{length}: {_os.strerror(error)}")
    return "; ".join(problems)

def _request(sock, kind, flags, body):
    # One rtnetlink request (REQUEST | ACK | flags); 0 or the errno it was answered with.
    sock.send(_struct.pack("=IHHII", 16 + len(body), kind, 0x1 | 0x4 | flags, 0, 0) + body)
    reply = sock.recv(65536)
    if _struct.unpack_from("=H", reply, 4)[0] != 2:  # NLMSG_ERROR carries the ack
        return 0
    return -_struct.unpack_from("=i", reply, 16)[0]

def _attribute(kind, value):
    data = _struct.pack("=HH", 4 + len(value), kind) + value
    return data + b"\0" * (-len(data) % 4)

def add_bound_sinks(blocked, table, priority, gateway):
    # Sockets bound to an interface skip the prohibit routes (their failed lookup means "on
    # this link", then ARP): for each interface but lo, a rule sends their lookups for the
    # blocked IPv4 ranges to ``table``, whose route leads to a permanent neighbour at the
    # interface's own MAC address, where the bridge drops the frames. "" or why not.
    import fcntl as _fcntl
    problems = []
    via = _socket.inet_aton(gateway)
    ranges = [(a, n) for a, n in blocked if ":" not in a]
    with _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, 0) as sock, \
            _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM) as probe:
        sock.bind((0, 0))
        for index, name in _socket.if_nameindex():
            request = _struct.pack("=16s16x", name.encode())
            try:
                answer = _fcntl.ioctl(probe, 0x8927, request)  # SIOCGIFHWADDR
            except OSError as exc:
                problems.append(f"{name}: {exc.strerror or exc}")
                continue
            kind, mac = _struct.unpack_from("=H", answer, 16)[0], answer[18:24]
            if kind != 1 or not any(mac):  # ARP is Ethernet's (not lo's, not a tunnel's)
                continue
            # ndmsg: family, pad, ifindex, state PERMANENT, flags, type; NDA_DST, NDA_LLADDR
            neighbour = _struct.pack("=BxxxiHBB", _socket.AF_INET, index, 0x80, 0, 0)
            neighbour += _attribute(1, via) + _attribute(2, mac)
            error = _request(sock, 28, 0x100 | 0x400, neighbour)  # RTM_NEWNEIGH, REPLACE|CREATE
            for address, length in ranges:
                if error:
                    break
                destination = _socket.inet_aton(address)
                # rtmsg: table, protocol STATIC, scope UNIVERSE, type UNICAST, flag ONLINK
                route = _struct.pack("=BBBBBBBBI", _socket.AF_INET, length, 0, 0, table, 4, 0, 1, 4)
                route += _attribute(1, destination) + _attribute(5, via)
                route += _attribute(4, _struct.pack("=i", index))  # RTA_OIF
                error = _request(sock, 24, 0x100 | 0x400, route)  # RTM_NEWROUTE
                if error:
                    break
                # fib_rule_hdr: dst_len, table, action TO_TBL; FRA_DST, FRA_OIFNAME, priority
                rule = _struct.pack("=BBBBBBBBI", _socket.AF_INET, length, 0, 0, table, 0, 0, 1, 0)
                rule += _attribute(1, destination) + _attribute(17, name.encode() + b"\0")
                rule += _attribute(6, _struct.pack("=I", priority))
                error = _request(sock, 32, 0x400 | 0x200, rule)  # RTM_NEWRULE, CREATE|EXCL
                if error == _errno.EEXIST:
                    error = 0
            if error:
                problems.append(f"{name}: {_os.strerror(error)}")
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


def block_program(*, sink: bool = False) -> str:
    """A ``python -c`` program that adds the routes where it runs (and with ``sink`` the bound
    sockets' rules: for a bridge whose other end may answer ARP); exits 1 saying why not."""
    sinks = (
        f"problem = problem or add_bound_sinks({BLOCKED!r}, {SINK_TABLE}, {SINK_PRIORITY}, "
        f"{SINK_GATEWAY!r})\n"
        if sink
        else ""
    )
    return (
        ROUTES
        + "import sys\n"
        + f"problem = add_blocking_routes({BLOCKED!r})\n"
        + sinks
        + "if problem:\n    sys.stderr.write(problem + '\\n')\n    sys.exit(1)\n"
    )
