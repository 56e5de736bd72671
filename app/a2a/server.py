"""The A2A server: Manus's agent card, the JSON-RPC endpoint (A2A 1.0, and 0.3's
``message/send`` / ``message/stream`` names), push notifications, each caller's tasks in a
bounded store, all behind the guard (Host, Origin, tokens, body size: :mod:`app.a2a.guard`);
``python -m protocol.a2a.app.main`` (:mod:`app.a2a.cli`) starts it.

The card is public at ``/.well-known/agent-card.json`` (and upstream's older
``/.well-known/agent.json``) so a client can learn how to authenticate; with tokens set
(``OPENMANUS_A2A_TOKEN``, ``--tokens-file``) every other request needs
``Authorization: Bearer <token>``, and the token says which caller it is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes
from a2a.server.tasks import BasePushNotificationSender
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

from app import __version__, own_servers
from app.a2a import EXIT_CONFIG, TOKEN_ENV, say
from app.a2a.executor import ContextFromTask, ManusExecutor, manus_factory
from app.a2a.guard import DEFAULT_MAX_BODY, AccessGuard
from app.a2a.identity import DEFAULT_CALLER, Caller, Callers, CallerUser
from app.a2a.jsonrpc import jsonrpc_route
from app.a2a.push import PushConfigStore, PushTargets, TargetRule, push_client
from app.a2a.store import BoundedTaskStore, StoreLimits
from app.config import config
from app.exceptions import ConfigError
from app.logger import define_log_level, register_secret
from app.tool.ask_human import CallbackInputProvider, set_input_provider
from app.web.security import AccessPolicy

#: Where upstream's a2a-sdk 0.2 served the card (its README's ``curl``); still answered.
LEGACY_CARD_PATH = "/.well-known/agent.json"
CARD_PATHS = (AGENT_CARD_WELL_KNOWN_PATH, LEGACY_CARD_PATH)
MIB = 1 << 20
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


def create_app(
    executor: ManusExecutor,
    card: AgentCard,
    policy: AccessPolicy,
    callers: Callers,
    *,
    tasks: BoundedTaskStore,
    targets: PushTargets,
    max_body: int = DEFAULT_MAX_BODY,
) -> tuple[Any, DefaultRequestHandler]:
    """The ASGI app (behind the guard) and its request handler."""
    webhooks = push_client(targets)
    push_configs = PushConfigStore()

    async def drop_push_configs(owner: str, task_id: str) -> None:
        caller = Caller(owner, owner) if owner else DEFAULT_CALLER
        call = ServerCallContext(user=CallerUser(caller))
        await push_configs.delete_info(task_id, call)

    tasks.on_drop = drop_push_configs
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=tasks,
        agent_card=card,
        push_config_store=push_configs,
        # Where a webhook may go is checked when it is set (a clear error) and again, by the
        # client's transport, at every connection.
        push_sender=BasePushNotificationSender(webhooks, push_configs),
        push_url_validator=targets.validate,
        request_context_builder=ContextFromTask(tasks),
    )
    routes = [
        *create_agent_card_routes(card),
        *create_agent_card_routes(card, card_url=LEGACY_CARD_PATH),
        jsonrpc_route(handler, "/"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        reapers = [
            asyncio.create_task(executor.reap_forever(), name="a2a-reaper"),
            asyncio.create_task(tasks.trim_forever(), name="a2a-task-trimmer"),
        ]
        try:
            yield
        finally:
            for reaper in reapers:
                reaper.cancel()
            await executor.close()
            with contextlib.suppress(Exception):
                await handler.aclose()
            await webhooks.aclose()

    app = Starlette(routes=routes, lifespan=lifespan)
    guard = AccessGuard(app, policy, callers, public_paths=CARD_PATHS, max_body=max_body)
    return guard, handler


def _settings(
    args: argparse.Namespace, token: str | None
) -> tuple[Callers, PushTargets, StoreLimits, int]:
    """The options that need the extra to check: the callers, the webhook rules, the store's
    bounds and the body limit (``ConfigError`` saying what is wrong)."""
    callers = Callers.load(token, args.tokens_file)
    try:
        rules = [TargetRule.parse(text) for text in args.allow_push_target]
    except ValueError as e:
        raise ConfigError(f"--allow-push-target: {e}") from None
    pinned = {}
    for text in args.push_resolve:
        name, _, address = text.partition("=")
        try:
            pinned[name] = str(ipaddress.ip_address(address.strip("[]")))
        except ValueError:
            raise ConfigError(f"--push-resolve {text!r}: expected HOST=ADDRESS") from None
    for option, value in (
        ("--max-body", args.max_body),
        ("--max-tasks", args.max_tasks),
        ("--task-memory", args.task_memory),
        ("--task-ttl", args.task_ttl),
    ):
        if not value > 0:
            raise ConfigError(f"{option} must be more than 0")
    limits = StoreLimits(
        max_tasks=args.max_tasks, max_bytes=int(args.task_memory * MIB), max_age=args.task_ttl
    )
    return callers, PushTargets(rules, pinned), limits, int(args.max_body * MIB)


def serve(args: argparse.Namespace, token: str | None) -> int:
    """Run the server ``app.a2a.cli`` was asked for, until it is stopped."""
    define_log_level(print_level="INFO", name="openmanus_a2a", compact=True)
    try:
        callers, targets, limits, max_body = _settings(args, token)
        config.load(args.config)
        config.llm  # noqa: B018 - the LLM section is checked now, with one clear message
    except ConfigError as e:
        say(f"error: {e}")
        return EXIT_CONFIG
    host, port = args.host, args.port
    for caller in callers.callers:
        register_secret(caller.token)
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
    policy = AccessPolicy(host=host, port=port)
    tasks = BoundedTaskStore(limits)
    executor = ManusExecutor(
        workspace / "a2a",
        manus_factory(args.max_steps),
        idle_timeout=args.idle_timeout,
        tasks=tasks,
    )
    card = agent_card(url, token=callers.required)
    app, _ = create_app(
        executor, card, policy, callers, tasks=tasks, targets=targets, max_body=max_body
    )
    print(f"OpenManus A2A agent: {url}", flush=True)
    if not callers.required:
        say(f"note: no {TOKEN_ENV}: any program on this machine can send tasks")
    elif len(callers) > 1:
        say(f"callers: {', '.join(c.name for c in callers.callers)}")
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
