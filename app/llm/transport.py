"""Sending a ready-made chat request through the openai client's own connection pool.

The SDK's request path (options models, header merging, URL building, idempotency keys) costs
more per call than the HTTP exchange itself on a local server. For a plain API-key client none
of it changes between calls, so it is done once: the URL and headers are taken from the SDK
client when the transport is built, and each call is one request on the SDK's HTTP client.
Failures come out as the SDK's own exception types, built by the SDK from the response, so
error handling upstream of here is the same as on the SDK's path.

Anything unusual (Azure routing, a key provider callable, an SDK without the hooks used here)
goes through the SDK's ``post`` instead: correct first, fast where it is safe.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ChatTransport", "fast_transport"]


class ChatTransport:
    """POSTs JSON bytes to one URL with fixed headers; returns the response body."""

    __slots__ = ("_client", "_headers", "_http", "_url")

    def __init__(self, client: Any, http: Any, url: str, headers: dict[str, str]) -> None:
        self._client = client
        self._http = http
        self._url = url
        self._headers = headers

    async def post(self, body: bytes, timeout: float) -> bytes:
        """One attempt. Raises ``openai.APITimeoutError`` / ``APIConnectionError`` /
        ``APIStatusError`` exactly as the SDK would."""
        import httpx2
        import openai

        request = self._http.build_request(
            "POST", self._url, content=body, headers=self._headers, timeout=timeout
        )
        try:
            response = await self._http.send(request)
        except httpx2.TimeoutException as e:
            raise openai.APITimeoutError(request=request) from e
        except (httpx2.RequestError, OSError) as e:
            raise openai.APIConnectionError(request=request) from e
        if response.status_code >= 400:
            raise self._client._make_status_error_from_response(response)
        return response.content


def fast_transport(client: Any, path: str) -> ChatTransport | None:
    """A transport for ``client`` when it is a plain API-key OpenAI client, else None."""
    import openai

    if type(client) is not openai.AsyncOpenAI:  # Azure and subclasses route differently
        return None
    http = getattr(client, "_client", None)
    if not (
        isinstance(getattr(client, "api_key", None), str)
        and callable(getattr(client, "_make_status_error_from_response", None))
        and callable(getattr(client, "_auth_headers", None))
        and callable(getattr(http, "build_request", None))
        and callable(getattr(http, "send", None))
        and not getattr(client, "custom_auth", None)
        and not getattr(client, "default_query", None)
    ):
        return None
    try:
        # The SDK's telemetry headers (X-Stainless-*) are left out: every header costs parsing
        # and validation on both sides of every request, and they serve no purpose here.
        headers = {
            k: v for k, v in client.default_headers.items()
            if isinstance(v, str) and not k.lower().startswith("x-stainless")
        }
        headers.update(client._auth_headers({"bearer_auth": True}))
        base = str(client.base_url)
    except Exception:  # an SDK whose internals moved: use its public path
        return None
    url = base.rstrip("/") + "/" + path.lstrip("/")
    return ChatTransport(client, http, url, headers)
