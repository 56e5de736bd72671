"""Relay for the docker backend (``python -m app.sandbox.docker_relay``): one ``docker exec``
behind stdin/stdout/stderr pipes, signals forwarded to the command's process group inside the
container, its exit status as ours. A process of its own, so its blocking I/O never touches
the agent's event loop."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import threading

# A ``docker exec`` process already leads its own session and process group inside the
# container: the shell records its pid (= the group) so a signal can reach everything the
# command starts, then becomes the command (through ``prlimit`` when there are rlimits).
_PREFIX = ["sh", "-c", 'echo "$$" > "$0"; exec "$@"']


def prlimit_args(rlimits: dict[str, int]) -> list[str]:
    """``prlimit --data=N:N ... --`` for ``rlimits`` (RLIMIT_CPU gets one more second hard,
    so SIGXCPU comes before SIGKILL, as with the launcher of the other backends)."""
    args = []
    for name, value in sorted(rlimits.items()):
        hard = value + 1 if name == "RLIMIT_CPU" else value
        args.append(f"--{name.removeprefix('RLIMIT_').lower()}={int(value)}:{int(hard)}")
    return ["prlimit", *args, "--"] if args else []


def main(argv: list[str]) -> int:
    """``<container id> <options json> -- <command...>``; returns the exit status."""
    import docker
    from docker.utils.socket import frames_iter

    container_id, options = argv[0], json.loads(argv[1])
    command = argv[3:] if len(argv) > 3 and argv[2] == "--" else argv[2:]
    pidfile = f"/tmp/.openmanus-{secrets.token_hex(8)}.pid"
    api = docker.from_env().api
    user = options.get("user") or ""  # "": the container's own user

    def forward(sig: int) -> None:
        script = f'[ -f "{pidfile}" ] && kill -{int(sig)} -- "-$(cat "{pidfile}")"'
        with contextlib.suppress(Exception):
            exec_id = api.exec_create(container_id, ["sh", "-c", script], user=user)
            api.exec_start(exec_id["Id"])
        if sig == signal.SIGTERM:
            # The tool will SIGKILL us after its grace; do not leave the command behind.
            timer = threading.Timer(0.9, forward, args=(signal.SIGKILL,))
            timer.daemon = True
            timer.start()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: forward(s))

    exec_id = api.exec_create(
        container_id,
        [*_PREFIX, pidfile, *prlimit_args(options.get("rlimits") or {}), *command],
        stdin=True,
        stdout=True,
        stderr=True,
        workdir=options["cwd"],
        environment=options["env"],
        user=user,
    )["Id"]
    stream = api.exec_start(exec_id, socket=True)
    sock: socket.socket = stream._sock if hasattr(stream, "_sock") else stream

    def pump_stdin() -> None:
        try:
            while chunk := os.read(0, 65536):
                sock.sendall(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=pump_stdin, daemon=True).start()
    for stream_id, data in frames_iter(stream, tty=False):
        os.write(2 if stream_id == 2 else 1, data)
    code = api.exec_inspect(exec_id).get("ExitCode")
    with contextlib.suppress(Exception):
        api.exec_start(api.exec_create(container_id, ["rm", "-f", pidfile], user=user)["Id"])
    return int(code) if isinstance(code, int) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
