"""``python -m app.web`` / ``openmanus-web``: start the web UI server (docs/web-ui.md).

127.0.0.1 unless ``--allow-remote``; every bind requires the access token, which the login
address printed at start carries. The agents' browsers may not open it (``app.own_servers``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import socket
import sys
from pathlib import Path
from types import FrameType
from urllib.parse import quote

from app import own_servers
from app.exceptions import ConfigError
from app.web.security import AccessPolicy, is_loopback

EXIT_OK = 0
EXIT_CONFIG = 2
TOKEN_ENV = "OPENMANUS_WEB_TOKEN"
#: A token goes into a URL and a cookie unescaped: letters, digits and ``-._~`` only.
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9._~-]+$")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app.web",
        description="OpenManus web UI: run tasks and watch the agent's computer in a browser.",
    )
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        help="config file (default: $OPENMANUS_CONFIG, else config/config.toml)",
    )
    parser.add_argument("--host", help="address to listen on (default: [web] host, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: [web] port, 8765; 0: any free)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        default=None,
        help="allow a non-loopback --host (anyone who can reach it still needs the token)",
    )
    parser.add_argument(
        "--no-token",
        action="store_true",
        help="do not require the access token (loopback only; any local program, user or "
        "web page can then drive the agent)",
    )
    parser.add_argument(
        "-w", "--workspace", type=Path, help="workspace (sessions go to <workspace>/web/<id>/)"
    )
    parser.add_argument("--max-steps", type=int, help="step budget per task")
    parser.add_argument(
        "--data-analysis",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="give flows the data-analysis agent (default: [runflow] use_data_analysis_agent)",
    )
    level = parser.add_mutually_exclusive_group()
    level.add_argument("-v", "--verbose", action="store_true", help="show debug output")
    level.add_argument("-q", "--quiet", action="store_true", help="show only warnings and errors")
    return parser


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        import uvicorn
    except ImportError:
        _say("error: the web UI needs its extra: pip install -e '.[web]'")
        return EXIT_CONFIG
    # The framework and the web extra's server load once the options are parsed and the extra
    # is there: ``python -m app.web --help`` takes 0.12 s of CPU instead of 0.70 s (measured).
    from app.config import config
    from app.logger import define_log_level, register_secret
    from app.tool.ask_human import CallbackInputProvider, set_input_provider
    from app.web.manager import SessionManager
    from app.web.server import WebOptions, create_app

    level = "DEBUG" if args.verbose else "WARNING" if args.quiet else "INFO"
    log_dir = os.environ.get("OPENMANUS_LOG_DIR") or None
    define_log_level(
        print_level=level,
        name="openmanus_web",
        compact=True,
        log_dir=Path(log_dir) if log_dir else None,
    )
    try:
        config.load(args.config)
        config.llm  # noqa: B018 - the LLM section is checked now, with one clear message
        settings = config.web
    except ConfigError as e:
        _say(f"error: {e}")
        return EXIT_CONFIG
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    allow_remote = settings.allow_remote if args.allow_remote is None else args.allow_remote
    if args.max_steps is not None and args.max_steps < 1:
        _say("error: --max-steps must be at least 1")
        return EXIT_CONFIG
    if not 0 <= port <= 65535:
        _say("error: --port must be between 0 and 65535")
        return EXIT_CONFIG
    if not is_loopback(host) and not allow_remote:
        _say(
            f"error: {host} is not a loopback address; listening there lets other "
            "machines drive your agent. Pass --allow-remote (or [web] allow_remote = "
            "true) to do it anyway; a token will be required."
        )
        return EXIT_CONFIG
    if args.no_token and not is_loopback(host):
        _say("error: --no-token is for loopback addresses only; remote use needs the token")
        return EXIT_CONFIG
    # Read once and removed, so the agents' own processes do not inherit it.
    token: str | None = os.environ.pop(TOKEN_ENV, "") or None
    if token is not None and not _TOKEN_CHARS.match(token):
        _say(f"error: {TOKEN_ENV} may hold only letters, digits and -._~")
        return EXIT_CONFIG
    if args.no_token:
        token = None
    elif token is None:
        token = secrets.token_urlsafe(32)
    if token is not None:
        register_secret(token)
    workspace = config.workspace_root
    if args.workspace is not None:
        workspace = args.workspace.expanduser().absolute()
    use_data = args.data_analysis
    if use_data is None:
        use_data = config.run_flow_config.use_data_analysis_agent
    options = {"max_steps": args.max_steps, "data_analysis": use_data}
    manager = SessionManager(workspace / "web", options=options)
    # ``ask_human`` tools built outside a web session (none should be) get no terminal: a
    # server has nobody at its stdin.
    set_input_provider(CallbackInputProvider(lambda question: None))
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)  # connections made before uvicorn starts wait in the backlog
    except OSError as e:
        _say(f"error: cannot listen on {host}:{port}: {e.strerror or e}")
        sock.close()
        return EXIT_CONFIG
    port = sock.getsockname()[1]
    policy = AccessPolicy(
        host=host, port=port, token=token, allowed_hosts=list(settings.allowed_hosts)
    )
    limit = int(settings.max_upload_mb * 1024 * 1024)
    app = create_app(manager, WebOptions(policy=policy, max_upload_bytes=limit))
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    # The one place the token is shown: the operator's terminal (stdout), never a log.
    print(f"OpenManus web UI: {url}" + (f"?token={quote(token)}" if token else ""), flush=True)
    if token is None:
        _say("warning: --no-token: anything on this machine that can reach the port can use it")
    else:
        _say(
            "Open that address to log in (it sets a cookie); API clients send the token as "
            "'Authorization: Bearer <token>'."
        )

    class _Server(uvicorn.Server):
        """Ends the event streams at once on shutdown, so it does not wait on them."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().call_soon_threadsafe(manager.end_streams)

    server = _Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
            ws="none",
        )
    )
    try:
        with own_servers.listening("web UI", sock):  # the agents' browsers may not open it
            server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return EXIT_OK
