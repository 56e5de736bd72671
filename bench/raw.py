"""The floor: a bare agent loop that posts the chat JSON with a plain HTTP client.

It imports nothing from ``app`` (the prompts and tool definitions come in a *workload* dict),
so a fresh process running it pays only for Python, ``json`` and the HTTP client: the fair
baseline for what a whole run of ours costs, imports included.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["http_client_name", "new_http_client", "run_raw_http", "run_raw_http_stream"]


def http_client_name() -> str:
    """The plain HTTP client the floor uses: ``httpx2``, the client a bare loop would use (our
    default transport sends through its connection layer, httpcore2, directly: skipping the
    client's layers is part of what the framework does to be cheap)."""
    return "httpx2"


def new_http_client() -> Any:
    """An async client of :func:`http_client_name`'s package (imported here, on demand)."""
    import importlib

    return importlib.import_module(http_client_name()).AsyncClient(timeout=120.0)


def _tool_message(call_id: str, name: str, output: str) -> dict[str, Any]:
    # The same observation text our agent stores, so every loop sends the same bytes.
    return {
        "role": "tool",
        "content": f"Observed output of cmd `{name}` executed:\n{output}",
        "name": name,
        "tool_call_id": call_id,
    }


def _request_body(
    model: str, messages: list[dict[str, Any]], workload: dict[str, Any], stream: bool
) -> str:
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": workload["max_tokens"],
        "temperature": workload["temperature"],
        "tools": workload["tools"],
        "tool_choice": "auto",
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body)


async def run_raw_http_stream(
    http: Any, url: str, model: str, workload: dict[str, Any], steps: int
) -> int:
    """The same loop with every turn streamed, as ours is: the fair floor for a streamed
    turn (the server sends one event per piece, the client reads them line by line)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": workload["system"]},
        {"role": "user", "content": workload["task"]},
    ]
    after = {"role": "user", "content": workload["next"]}
    headers = {
        "Authorization": f"Bearer {workload['api_key']}",
        "Content-Type": "application/json",
    }
    for _ in range(steps):
        body = _request_body(model, [*messages, after], workload, stream=True)
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async with http.stream("POST", url, content=body, headers=headers) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                for choice in json.loads(line[5:]).get("choices") or ():
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        text.append(delta["content"])
                    for part in delta.get("tool_calls") or ():
                        call = calls.setdefault(
                            part["index"],
                            {
                                "id": "",
                                "type": "function",
                                "function": {"name": "", "arguments": ""},
                            },
                        )
                        call["id"] = part.get("id") or call["id"]
                        function = part.get("function") or {}
                        call["function"]["name"] += function.get("name") or ""
                        call["function"]["arguments"] += function.get("arguments") or ""
        found = [calls[i] for i in sorted(calls)]
        messages.append({"role": "assistant", "content": "".join(text), "tool_calls": found})
        for c in found:
            fn = c["function"]
            output = json.loads(fn["arguments"]).get("text", "")  # the echo tool
            messages.append(_tool_message(c["id"], fn["name"], output))
    return steps


async def run_raw_http(
    http: Any, url: str, model: str, workload: dict[str, Any], steps: int
) -> int:
    """``steps`` turns of the conversation in ``workload``, answering ``echo`` calls inline."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": workload["system"]},
        {"role": "user", "content": workload["task"]},
    ]
    after = {"role": "user", "content": workload["next"]}
    headers = {
        "Authorization": f"Bearer {workload['api_key']}",
        "Content-Type": "application/json",
    }
    for _ in range(steps):
        body = _request_body(model, [*messages, after], workload, stream=False)
        response = await http.post(url, content=body, headers=headers)
        response.raise_for_status()
        message = json.loads(response.content)["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        messages.append(
            {"role": "assistant", "content": message.get("content") or "", "tool_calls": calls}
        )
        for c in calls:
            fn = c["function"]
            output = json.loads(fn["arguments"]).get("text", "")  # the echo tool
            messages.append(_tool_message(c["id"], fn["name"], output))
    return steps
