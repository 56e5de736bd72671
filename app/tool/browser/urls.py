"""Which addresses the browser may open: the web, never the host's files nor this program's
own servers, in any spelling (encoded schemes, wrappers such as ``view-source:``, names that
resolve to them): the list is in docs/sandbox.md."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from app import own_servers
from app.exceptions import ToolError
from app.own_servers import OwnServer

ALLOWED_SCHEMES = frozenset({"http", "https", "data"})
_WRAPPERS = frozenset({"view-source", "filesystem", "blob", "jar"})
#: Schemes refused even without ``//`` (``file:/etc/passwd``, ``javascript:...``).
_LOCAL = frozenset(
    {
        "file",
        "javascript",
        "vbscript",
        "chrome",
        "chrome-extension",
        "chrome-untrusted",
        "devtools",
        *_WRAPPERS,
    }
)
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")


def _scheme_and_rest(url: str) -> tuple[str | None, str]:
    # WHATWG: strip leading/trailing C0 controls and spaces, drop tabs and newlines anywhere.
    text = _TAB_NEWLINE.sub("", url.strip(_C0_AND_SPACE))
    for _ in range(5):  # %66ile: and doubly encoded forms
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    match = _SCHEME.match(text)
    if match is None:
        return None, text
    return match.group(1).lower(), text[match.end() :]


def _unwrapped(url: str) -> tuple[str | None, str, int]:
    """(scheme, rest, how many wrappers such as ``view-source:`` were taken off)."""
    scheme, rest = _scheme_and_rest(url)
    depth = 0
    while scheme in _WRAPPERS and depth < 5:
        scheme, rest = _scheme_and_rest(rest)
        depth += 1
    return scheme, rest, depth


def is_blocked(url: str) -> bool:
    """Whether ``url`` (in any spelling) is something other than the web."""
    scheme, rest, depth = _unwrapped(url)
    if scheme is None:
        # A wrapper around something that is not a URL; without one: https://<text>.
        return depth > 0
    if scheme == "about":
        return rest.split("#", 1)[0].split("?", 1)[0].lower() not in ("blank", "srcdoc")
    if scheme in ("http", "https"):
        host = (urlsplit(f"{scheme}:{rest}").hostname or "").lower()
        return host == ""
    return scheme not in ALLOWED_SCHEMES or depth > 0


def _web_authority(url: str) -> tuple[str, int] | None:
    """(host, port) an ``http``/``https`` URL connects to, parsed as a browser does: wrappers
    unwrapped, backslashes as slashes, any number of slashes, user info dropped, default
    ports filled in. None for other schemes and unparsable ports."""
    scheme, rest, _ = _unwrapped(url)
    if scheme is None:
        scheme, rest = "https", "//" + rest
    if scheme not in ("http", "https"):
        return None
    authority = re.split(r"[/?#]", rest.replace("\\", "/").lstrip("/"), maxsplit=1)[0]
    authority = authority.rsplit("@", 1)[-1]
    if authority.startswith("["):
        host, _, tail = authority[1:].partition("]")
        host = f"[{host}]"
        port_text = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port_text = authority.partition(":")
    if port_text == "":
        return host, 443 if scheme == "https" else 80
    if not port_text.isdigit() or int(port_text) > 65535:
        return None
    return host, int(port_text)


def own_server(url: str) -> OwnServer | None:
    """The registered server of this program that ``url`` would reach (no DNS asked)."""
    authority = _web_authority(url)
    return own_servers.match(*authority) if authority else None


async def own_server_resolved(url: str) -> OwnServer | None:
    """``own_server``, also following DNS for names on one of our servers' ports."""
    authority = _web_authority(url)
    return await own_servers.resolve_match(*authority) if authority else None


def own_server_refusal(url: str, server: OwnServer) -> str:
    """What the model reads when it (or a page) tried to open one of our servers."""
    return (
        f"{url[:200]!r} is this program's own {server.label} (port {server.port}); the "
        "browser may not open it, under any address or name."
    )


def check_url(url: str) -> str:
    """The address to open (``https://`` added to a bare host such as ``localhost:8000``), or
    a ``ToolError`` for a local file or another non-web address."""
    url = url.strip()
    if not url:
        raise ToolError("The url is empty")
    scheme, _ = _scheme_and_rest(url)
    bare = scheme is None or (
        "://" not in url
        and scheme not in _LOCAL
        and scheme not in ALLOWED_SCHEMES
        and scheme != "about"
    )
    candidate = "https://" + url if bare else url
    if is_blocked(candidate):
        raise ToolError(
            f"The browser only opens web pages (http, https); {url[:200]!r} is refused: local "
            "files and browser-internal addresses are off limits. Read workspace files with "
            "str_replace_editor instead."
        )
    server = own_server(candidate)
    if server is not None:
        raise ToolError(own_server_refusal(url, server))
    return candidate


async def check_url_resolved(url: str) -> str:
    """``check_url``, then DNS for a name on one of our servers' ports (``a name that
    resolves to 127.0.0.1``)."""
    candidate = check_url(url)
    server = await own_server_resolved(candidate)
    if server is not None:
        raise ToolError(own_server_refusal(url, server))
    return candidate
