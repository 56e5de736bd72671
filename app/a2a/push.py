"""Where push notifications may go, and how they get there (docs/a2a.md#push-notifications).

A webhook is a URL a caller gives; the server POSTs to it. Left open, that is a way for a
remote caller to reach what only the host can: its loopback services, the private network,
a cloud's metadata address. So a webhook's host is resolved once, every address it resolves
to must be public (or allowed by the operator's ``--allow-push-target``), and the connection
goes to the address that was checked, never through a second lookup (:class:`PinnedTransport`:
the URL's host stays in the ``Host`` header and the TLS server name). Redirects are not
followed, and a webhook's answer is read up to a small limit.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

import httpx
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryPushNotificationConfigStore
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: Resolves a host name and port to addresses (the event loop's resolver by default).
Resolver = Callable[[str, int], Awaitable[list[str]]]

#: The longest webhook answer read (the answer is not used: only its status).
MAX_ANSWER_BYTES = 64 << 10
#: Push configurations one task may have (each is a POST per update).
MAX_CONFIGS_PER_TASK = 10
#: Well-known NAT64 prefix: its addresses carry an IPv4 address in their last 32 bits.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True)
class TargetRule:
    """One ``--allow-push-target``: a network (an address is a one-address network) and,
    optionally, the only port allowed on it."""

    network: IPNetwork
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> TargetRule:
        """``ADDRESS[/PREFIX][:PORT]``; an IPv6 address in brackets when a port follows
        (``[::1]:8080``, ``[fd00::]/8``)."""
        spec, port = text.strip(), None
        if spec.startswith("["):
            address, _, rest = spec[1:].partition("]")
            prefix, _, port_text = rest.partition(":")
            spec = address + prefix
            if port_text:
                port = _port(port_text, text)
        elif spec.count(":") == 1:
            spec, port_text = spec.split(":")
            port = _port(port_text, text)
        try:
            network = ipaddress.ip_network(spec, strict=False)
        except ValueError as e:
            raise ValueError(f"{text!r} is not ADDRESS[/PREFIX][:PORT]: {e}") from None
        return cls(network, port)

    def allows(self, address: IPAddress, port: int) -> bool:
        if self.port is not None and port != self.port:
            return False
        return address.version == self.network.version and address in self.network


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{whole!r}: the port must be a number from 1 to 65535")
    return int(text)


def not_public(address: IPAddress) -> str | None:
    """Why a webhook may not go to ``address`` ("loopback", "private"...), or None when it is
    public. An IPv6 address carrying an IPv4 one (mapped, compatible, 6to4, Teredo, NAT64)
    is judged by that one too."""
    if isinstance(address, ipaddress.IPv6Address):
        for inner in _embedded_ipv4(address):
            why = not_public(inner)
            if why is not None:
                return f"{why} (as {address})"
    for why, flag in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("not public", not address.is_global),
    ):
        if flag:
            return why
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> Iterable[ipaddress.IPv4Address]:
    if address.ipv4_mapped is not None:
        yield address.ipv4_mapped
    value = int(address)
    if value >> 32 == 0 and value > 1:  # IPv4-compatible ::a.b.c.d (not :: and ::1 themselves)
        yield ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _NAT64:
        yield ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address.sixtofour is not None:
        yield address.sixtofour
    if address.teredo is not None:
        yield from address.teredo


@dataclass(frozen=True)
class Verdict:
    """Where to connect for a webhook's host (``address``), or why not (``reason``)."""

    address: str | None
    reason: str = ""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (the loop's resolver: nothing blocks)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class PushTargets:
    """The operator's rules for webhooks: public addresses, plus ``rules``; ``pinned`` names
    answer without DNS (``--push-resolve HOST=ADDRESS``, as curl's ``--resolve``)."""

    def __init__(
        self,
        rules: Iterable[TargetRule] = (),
        pinned: Mapping[str, str] | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.rules = tuple(rules)
        self.pinned = {k.lower().rstrip("."): v for k, v in (pinned or {}).items()}
        self.resolver = resolver

    async def check(self, host: str, port: int) -> Verdict:
        """Resolve ``host`` once; every address must be allowed, the first is where to go."""
        host = host.strip("[]").lower().rstrip(".")
        try:
            addresses = await self._resolve(host, port)
        except (OSError, UnicodeError) as e:
            return Verdict(None, f"{host} cannot be resolved ({e.__class__.__name__})")
        if not addresses:
            return Verdict(None, f"{host} resolves to no address")
        for text in addresses:
            try:
                address = ipaddress.ip_address(text)
            except ValueError:
                return Verdict(None, f"{host} resolves to {text!r}, not an address")
            if any(rule.allows(address, port) for rule in self.rules):
                continue
            why = not_public(address)
            if why is not None:
                shown = host if host == text else f"{host} ({text})"
                return Verdict(None, f"{shown} is {why}")
        return Verdict(addresses[0])

    async def _resolve(self, host: str, port: int) -> list[str]:
        if host in self.pinned:
            return [self.pinned[host]]
        try:
            return [str(ipaddress.ip_address(host))]
        except ValueError:
            return await self.resolver(host, port)

    async def validate(self, url: str) -> bool:
        """The SDK's ``push_url_validator``: True, or an ``InvalidParamsError`` saying why (the
        caller learns what to change; the operator what to allow)."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as e:
            raise InvalidParamsError(message=f"The push notification URL is invalid: {e}") from e
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise InvalidParamsError(message="Push notifications go to http(s) URLs only.")
        verdict = await self.check(parsed.host, _port_of(parsed))
        if verdict.address is None:
            raise InvalidParamsError(
                message=f"This push notification URL is refused: {verdict.reason} (webhooks go "
                "to public addresses; the server's operator can allow others with "
                "--allow-push-target)."
            )
        return True


def _port_of(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


class PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to the address :class:`PushTargets` checked for its host (one
    lookup; redirects are the client's, which does not follow them); reads at most
    ``max_answer`` bytes of the answer."""

    def __init__(self, targets: PushTargets, max_answer: int = MAX_ANSWER_BYTES) -> None:
        self.targets = targets
        self.max_answer = max_answer
        self.inner = httpx.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        verdict = await self.targets.check(url.host, _port_of(url))
        if verdict.address is None:
            raise httpx.ConnectError(f"push target refused: {verdict.reason}", request=request)
        extensions = dict(request.extensions)
        if url.scheme == "https":
            extensions["sni_hostname"] = url.host  # the certificate is checked against it
        pinned = httpx.Request(
            request.method,
            url.copy_with(host=verdict.address),
            headers=request.headers,  # Host: the URL's own
            stream=request.stream,
            extensions=extensions,
        )
        response = await self.inner.handle_async_request(pinned)
        assert isinstance(response.stream, httpx.AsyncByteStream)  # an async transport's
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self.max_answer, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, limit: int, request: httpx.Request) -> None:
        self.stream = stream
        self.limit = limit
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.stream:
            seen += len(chunk)
            if seen > self.limit:
                raise httpx.ReadError("the webhook's answer is too long", request=self.request)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


def push_client(targets: PushTargets) -> httpx.AsyncClient:
    """The client the server's push notifications go out with."""
    return httpx.AsyncClient(
        transport=PinnedTransport(targets), timeout=10, follow_redirects=False, trust_env=False
    )


class PushConfigStore(InMemoryPushNotificationConfigStore):
    """The SDK's store (each caller's configurations its own), with at most
    ``MAX_CONFIGS_PER_TASK`` per task: each is a POST per update."""

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        known = await self.get_info(task_id, context)
        config_id = notification_config.id or task_id  # the SDK's default id
        replaces = any(c.id == config_id for c in known)
        if len(known) >= MAX_CONFIGS_PER_TASK and not replaces:
            raise InvalidParamsError(
                message=f"A task has at most {MAX_CONFIGS_PER_TASK} push notification configs; "
                "delete one first."
            )
        return await super().set_info(task_id, notification_config, context)
