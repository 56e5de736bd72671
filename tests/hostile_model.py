"""A hostile scripted model for the redaction tests: it knows the API key and echoes it in
every place a reply has (its text, streamed in two halves; tool-call arguments; call ids; a
tool's name; the finish reason), raw and encoded (JSON-escaped, base64 at each alignment,
URL-encoded). ``leaks`` names every form of the key a text still holds.

The key has a quote, a backslash, a slash and a plus, so its JSON, repr, URL and base64 forms
all differ from it, and it is not shaped like any credential the redactor knows on sight:
only its registration (the LLM registers its ``api_key``) can catch it.
"""

from __future__ import annotations

import base64
import json
import shlex
import urllib.parse
from pathlib import Path

from app.logger import MIN_SECRET_LENGTH, secret_forms
from app.testing import ToolCallsReply, call, tool_calls

__all__ = [
    "KEY",
    "PROMPT_WORDS",
    "encoded",
    "final_turn",
    "hostile_config",
    "hostile_turn",
    "leaks",
]

KEY = 'hostile-Key/x+"q"\\tail-0123456789'
#: Words of the user's prompt that a model server's error echoes back.
PROMPT_WORDS = "Zanzibar Widgets quarterly numbers"
#: Every form of the key the redactor is meant to catch.
FORMS = sorted(f for f in secret_forms(KEY) if len(f) >= MIN_SECRET_LENGTH)


def leaks(text: str | bytes) -> list[str]:
    """The forms of the key found in ``text`` (none, for a channel that holds)."""
    if isinstance(text, bytes):
        return [f for f in FORMS if f.encode() in text]
    return [f for f in FORMS if f in text]


def encoded() -> str:
    """The key in every encoding a model might use to smuggle it out."""
    raw = KEY.encode()
    b64 = [base64.b64encode(b"x" * shift + raw).decode() for shift in range(3)]
    url = base64.urlsafe_b64encode(raw).decode()
    return (
        f"JSON {json.dumps(KEY)}, base64 {' '.join(b64)} (url-safe {url}), "
        f"URL {urllib.parse.quote(KEY, safe='')}, repr {KEY!r}"
    )


def hostile_turn() -> ToolCallsReply:
    """Text that is the key alone (so the stream splits it in two), three tool calls
    carrying it in a tool name, an id and arguments, and the key as the finish reason."""
    return tool_calls(
        call(KEY, {"note": KEY}, id="named"),
        call("str_replace_editor", {"command": "view", "path": f"/nonexistent/{KEY}"}, id=KEY),
        call("bash", {"command": f"echo {shlex.quote(KEY + encoded())}"}, id=f"c-{KEY}"),
        content=KEY,
        finish_reason=KEY,
        usage={"prompt_tokens": 100, "completion_tokens": 20},
    )


def final_turn() -> ToolCallsReply:
    """The answer: the key in every encoding, then ``terminate`` (the call id is the key)."""
    return tool_calls(
        call("terminate", {"status": "success"}, id=f"end-{KEY}"),
        content=f"The key is {KEY}; also {encoded()}.",
        finish_reason=KEY,
        usage={"prompt_tokens": 150, "completion_tokens": 30},
    )


def hostile_config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    """A config whose model's API key is :data:`KEY` (so the program registers it)."""
    path = tmp_path / "config.toml"
    lines = [
        "[llm]",
        'model = "gpt-4o-mini"',
        f'base_url = "{base_url}"',
        f"api_key = {json.dumps(KEY)}",
        "max_retries = 0",
        "timeout = 30",
    ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path
