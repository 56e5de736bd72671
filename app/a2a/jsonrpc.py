"""The A2A JSON-RPC endpoint: the SDK's dispatcher, told who calls and which protocol
version they speak, and lenient where upstream's server was.

* **Caller.** The SDK scopes its stores by the call's user: here the caller the guard
  (:mod:`app.a2a.guard`) matched by token, so each caller sees only its own tasks.
* **Version.** The SDK reads a request without an ``A2A-Version`` header as 0.3 and refuses
  1.0's method names (``SendMessage``...) with -32009. Those names exist only in 1.0, so a
  request using one speaks 1.0 (the a2a-tck sends them without the header).
* **An empty ``messageId``** (upstream's README example sends ``""``) gets a generated id,
  as upstream's server accepted it.
"""

from __future__ import annotations

import uuid
from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import PROTOCOL_VERSION_1_0, VERSION_HEADER
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.a2a.guard import caller_of
from app.a2a.identity import CallerUser

#: 1.0's JSON-RPC method names (0.3's are ``message/send``, ``tasks/get``...).
METHODS_1_0 = frozenset(JsonRpcDispatcher.METHOD_TO_MODEL)
#: Where the endpoint notes, in ``scope["state"]``, the version a request's method implies.
_IMPLIED_VERSION = "a2a_implied_version"


class CallerContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, with the guard's caller as its user and the version a 1.0
    method name implies when no header says one."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        implied = request.scope.get("state", {}).get(_IMPLIED_VERSION)
        headers = context.state.get("headers")
        if implied and isinstance(headers, dict) and VERSION_HEADER.lower() not in headers:
            headers[VERSION_HEADER.lower()] = implied
        return context

    def build_user(self, request: Request) -> User:
        caller = caller_of(request.scope)
        if caller is None:  # the app is always wrapped in the guard (server.create_app)
            raise RuntimeError("an A2A request reached the SDK without the access guard")
        return CallerUser(caller)


def jsonrpc_route(handler: RequestHandler, path: str = "/") -> Route:
    """The JSON-RPC endpoint (1.0's and 0.3's method names) at ``path``."""
    dispatcher = JsonRpcDispatcher(
        request_handler=handler,
        context_builder=CallerContextBuilder(),
        enable_v0_3_compat=True,
    )

    async def endpoint(request: Request) -> Response:
        try:
            # Parsed once: Starlette keeps it for the dispatcher, which reads the same object.
            body = await request.json()
        except (ValueError, RecursionError):
            body = None  # the dispatcher answers with the JSON-RPC error
        if isinstance(body, dict):
            _adjust(request, body)
        return await dispatcher.handle_requests(request)

    return Route(path, endpoint, methods=["POST"])


def _adjust(request: Request, body: dict[str, Any]) -> None:
    if body.get("method") in METHODS_1_0 and VERSION_HEADER not in request.headers:
        request.scope.setdefault("state", {})[_IMPLIED_VERSION] = PROTOCOL_VERSION_1_0
    params = body.get("params")
    message = params.get("message") if isinstance(params, dict) else None
    if isinstance(message, dict):
        key = "message_id" if "message_id" in message else "messageId"
        if key in message and message[key] in ("", None):
            message[key] = str(uuid.uuid4())
