"""The A2A server: Manus's agent card, the JSON-RPC endpoint (A2A 1.0, and 0.3's
``message/send`` / ``message/stream`` names), push notifications, and the same Host, Origin and
token rules as the web UI (:mod:`app.web.security`); ``python -m protocol.a2a.app.main``
(:mod:`app.a2a.cli`) starts it.

The card is public at ``/.well-known/agent-card.json`` (and upstream's older
``/.well-known/agent.json``) so a client can learn how to authenticate; with a token set
(``OPENMANUS_A2A_TOKEN``) every other request needs ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_CURRENT,
)
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from app import __version__, own_servers
from app.a2a import EXIT_CONFIG, TOKEN_ENV, say
from app.a2a.executor import ManusExecutor, manus_factory
from app.config import config
from app.exceptions import ConfigError
from app.logger import define_log_level, register_secret
from app.tool.ask_human import CallbackInputProvider, set_input_provider
from app.web.security import AccessPolicy

#: Where upstream's a2a-sdk 0.2 served the card (its README's ``curl``); still answered.
LEGACY_CARD_PATH = "/.well-known/agent.json"
CARD_PATHS = (AGENT_CARD_WELL_KNOWN_PATH, LEGACY_CARD_PATH)
#: Upstream's content types (``A2AManus.SUPPORTED_CONTENT_TYPES``).
CONTENT_TYPES = ["text", "text/plain"]

# Upstream's skills (ids, names, tags), described in our words.
_SKILLS = (
    (
        "Python Execute",
        "Python Execute Tool",
        "Runs Python code; what it prints is the result.",
        ["Execute Python Code"],
        ["Execute Python code: print('Hello World')"],
    ),
    (
        "Browser use",
        "Browser use Tool",
        "Drives a web browser: opens pages, clicks, types, scrolls and reads their content "
        "(needs the browser extra).",
        ["Use Browser"],
        ["go_to 'https://example.com'"],
    ),
    (
        "Replace String",
        "Str_replace Tool",
        "Views, creates and edits files in the agent's workspace.",
        ["Operate Files"],
        ["Replace 'old' with 'new' in 'file.txt'"],
    ),
    (
        "Ask human",
        "Ask human Tool",
        "Asks the client a question: the task turns input-required until the answer comes.",
        ["Ask human for help"],
        ["Ask human: 'Which format do you want?'"],
    ),
    (
        "terminate",
        "terminate Tool",
        "Ends the task when it is done or cannot go further.",
        ["terminate task"],
        ["terminate"],
    ),
)


def agent_card(url: str, *, token: bool = False) -> AgentCard:
    """Manus's card: upstream's name, skills and content types; streaming (beyond upstream)
    and push notifications; a bearer scheme when a token is required."""
    card = AgentCard(
        name="Manus Agent",
        description=(
            "OpenManus's general agent: it works on a task with Python, a shell, file editing, "
            "a web browser and MCP tools in its own workspace, and reports as it goes."
        ),
        # One endpoint speaks both: 1.0's method names and 0.3's (upstream's clients).
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=version)
            for version in (PROTOCOL_VERSION_CURRENT, PROTOCOL_VERSION_0_3)
        ],
        version=__version__,
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=CONTENT_TYPES,
        default_output_modes=CONTENT_TYPES,
        skills=[
            AgentSkill(id=i, name=n, description=d, tags=t, examples=e) for i, n, d, t, e in _SKILLS
        ],
    )
    if token:
        scheme = HTTPAuthSecurityScheme(scheme="bearer", description=f"the server's {TOKEN_ENV}")
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=scheme))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


class AccessGuard:
    """Refuses a request before the SDK sees it: a Host not naming this server (DNS
    rebinding), a foreign Origin, a cross-site fetch, or (a token set) no valid Bearer token;
    the card alone needs no token."""

    def __init__(self, app: Any, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        refusal = self._refusal(scope) if scope["type"] == "http" else None
        await (refusal or self.app)(scope, receive, send)

    def _refusal(self, scope: Any) -> JSONResponse | None:
        headers, policy = Headers(scope=scope), self.policy
        host = headers.get("host", "")
        if not policy.host_ok(host):
            why = "This server does not answer to that Host name (DNS rebinding protection)."
            return _error(421 if host else 400, why)
        origin = headers.get("origin")
        if origin is not None and not policy.origin_ok(origin, host):
            return _error(403, "Cross-origin requests are refused.")
        if headers.get("sec-fetch-site") == "cross-site":
            return _error(403, "Cross-site requests are refused.")
        if policy.token is None or (scope["method"] == "GET" and scope["path"] in CARD_PATHS):
            return None
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        if not policy.token_ok(token):
            why = f"A valid access token is required: 'Authorization: Bearer <{TOKEN_ENV}>'."
            return _error(401, why, {"www-authenticate": "Bearer"})
        return None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status, headers=headers)


async def _allowed_push_url(url: str) -> bool:
    """Push notifications go to http(s) URLs only. Local receivers are allowed: whoever may
    send tasks already runs code through the agent, so a POST to localhost gives them nothing."""
    return url.startswith(("http://", "https://"))


def create_app(
    executor: ManusExecutor, card: AgentCard, policy: AccessPolicy
) -> tuple[Any, DefaultRequestHandler]:
    """The ASGI app (guarded) and its request handler."""
    push_client = httpx.AsyncClient(timeout=10)
    push_configs = InMemoryPushNotificationConfigStore()
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=push_configs,
        push_sender=BasePushNotificationSender(
            push_client, push_configs, push_url_validator=_allowed_push_url
        ),
        push_url_validator=_allowed_push_url,
    )
    routes = [
        *create_agent_card_routes(card),
        *create_agent_card_routes(card, card_url=LEGACY_CARD_PATH),
        *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        reaper = asyncio.create_task(executor.reap_forever(), name="a2a-reaper")
        try:
            yield
        finally:
            reaper.cancel()
            await executor.close()
            with contextlib.suppress(Exception):
                await handler.aclose()
            await push_client.aclose()

    return AccessGuard(Starlette(routes=routes, lifespan=lifespan), policy), handler


def serve(args: argparse.Namespace, token: str | None) -> int:
    """Run the server ``app.a2a.cli`` was asked for, until it is stopped."""
    define_log_level(print_level="INFO", name="openmanus_a2a", compact=True)
    try:
        config.load(args.config)
        config.llm  # noqa: B018 - the LLM section is checked now, with one clear message
    except ConfigError as e:
        say(f"error: {e}")
        return EXIT_CONFIG
    host, port = args.host, args.port
    if token is not None:
        register_secret(token)
    # A tool built outside a conversation (none should be) gets no terminal: nobody is there.
    set_input_provider(CallbackInputProvider(lambda question: None))
    workspace = config.workspace_root
    if args.workspace is not None:
        workspace = args.workspace.expanduser().absolute()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as e:
        say(f"error: cannot listen on {host}:{port}: {e.strerror or e}")
        sock.close()
        return EXIT_CONFIG
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    policy = AccessPolicy(host=host, port=port, token=token)
    executor = ManusExecutor(
        workspace / "a2a", manus_factory(args.max_steps), idle_timeout=args.idle_timeout
    )
    app, _ = create_app(executor, agent_card(url, token=token is not None), policy)
    print(f"OpenManus A2A agent: {url}", flush=True)
    if token is None:
        say(f"note: no {TOKEN_ENV}: any program on this machine can send tasks")
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    )
    try:
        with own_servers.listening("A2A agent", sock):  # the agents' browsers may not open it
            server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0
