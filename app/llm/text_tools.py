"""Tool calling in plain text: tools rendered into the prompt, calls parsed from the answer in
the formats open models use (docs/local-models.md lists them).

Explicit markers (``<tool_call>``, ``[TOOL_CALLS]``, ``<|python_tag|>``, ``<function=...>``)
leave no doubt, so their calls are kept even when broken: the agent tells the model what was
wrong. Implicit formats (fenced or bare JSON, a call-shaped object in prose) need a known tool
name and the strict call shape, so ordinary JSON stays text. Parsing never raises and its work
is bounded; callers strip ``<think>`` first (:func:`split_reasoning`).
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import secrets
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from app.prompt.text_tools import (
    TOOL_LIST_HEADER,
    TOOL_PROMPT_INTRO,
    TOOL_RESULT_CLOSE,
    TOOL_RESULT_OPEN,
)
from app.schema import Function, ToolCall

#: More calls than this in one answer are left as text (no model needs more in one step).
MAX_CALLS = 64
_MAX_CANDIDATES = 32  # call-shaped objects tried inside prose
_CAP = MAX_CALLS + 2  # markers of one kind looked at

_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input")
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_SHAPE_KEYS = frozenset((*_ARG_KEYS, *_NAME_KEYS, "type", "id"))

#: Returned when a text holds no value (``None`` is a valid JSON value).
_MISSING: Any = object()
_SCAN_WINDOW = 200_000  # characters a bracket scan may cover from its start
_SCAN_BUDGET = 400_000  # bracket-scan tokens for one whole answer
#: Texts longer than this get no lenient (slower) repair, only strict JSON.
_REPAIR_LIMIT = 64_000
_NAMELESS_KEEP = 300  # characters of a nameless call's text kept as its arguments
_MAX_DEPTH = 64  # nesting accepted from Python-literal syntax


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_DOTTED = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")


def _literal(node: ast.AST, depth: int = 0) -> Any:
    """A Python/JSON literal from an AST node (``true``/``null`` spellings included)."""
    if depth > _MAX_DEPTH:
        raise ValueError("too deep")
    if isinstance(node, ast.Constant) and isinstance(
        node.value, str | int | float | bool | type(None)
    ):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMED:
        return _NAMED[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _literal(node.operand, depth + 1)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise ValueError("dict unpacking")
            out[str(_literal(k, depth + 1))] = _literal(v, depth + 1)
        return out
    raise ValueError("not a literal")


_NAMED = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def _loads_lenient(text: str) -> Any:
    """JSON, forgiving trailing commas and single quotes on short texts; ``_MISSING`` if not."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    if len(text) > _REPAIR_LIMIT:
        return _MISSING
    try:
        return json.loads(_TRAILING_COMMA.sub(r"\1", text))
    except (ValueError, RecursionError):
        pass
    try:
        return _literal(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return _MISSING


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return str(value)


def _arguments_text(args: Any) -> str:
    """Arguments as JSON text; text that is not JSON is kept verbatim for the agent to report."""
    if args is _MISSING or args is None:
        return "{}"
    if isinstance(args, str):
        stripped = args.strip()
        if not stripped:
            return "{}"
        value = _loads_lenient(stripped)
        return args if value is _MISSING else _dumps(value)
    return _dumps(args)


def _python_calls(body: str) -> list[tuple[str, Any]] | None:
    """Calls written as Python (``bash(command="ls")``, Gemma's ``print(default_api.x(...))``,
    Llama's ``brave_search.call(query=...)``); None unless every statement is such a call."""
    if len(body) > _REPAIR_LIMIT:
        return None
    try:
        tree = ast.parse(body.strip())
        out: list[tuple[str, Any]] = []
        for stmt in tree.body:
            if not isinstance(stmt, ast.Expr):
                return None
            node = stmt.value
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
                and len(node.args) == 1
                and not node.keywords
            ):
                node = node.args[0]
            if not isinstance(node, ast.Call):
                return None
            name = ast.unparse(node.func)
            if not _DOTTED.fullmatch(name):
                return None
            name = name.removesuffix(".call")
            if node.args:
                if len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Dict):
                    return None
                args: Any = _literal(node.args[0])
            else:
                if any(kw.arg is None for kw in node.keywords):
                    return None
                args = {kw.arg: _literal(kw.value) for kw in node.keywords}
            out.append((name, args))
        return out or None
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


@dataclass(frozen=True)
class TextToolParse:
    """A model answer split into its text and the tool calls found in it."""

    content: str
    calls: list[ToolCall]


def _type_text(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "|".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {_type_text(schema.get('items'))}"
    if kind == "object" and schema.get("properties"):
        return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            return "|".join(_type_text(s) for s in schema[union])
    return str(kind or "any")


_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


def _describe(text: Any, brief: bool) -> str:
    """A description on one line; only its first sentence when ``brief``."""
    raw = str(text or "").strip()
    if brief:
        end = _SENTENCE_END.search(raw)
        raw = raw[: end.start()] if end else raw
    return " ".join(raw.split())


def render_tool(tool: dict[str, Any], brief: bool = False) -> str:
    """One tool for a prompt: ``- name: description``, then its arguments, one a line."""
    fn = tool.get("function", tool) if isinstance(tool, dict) else {}
    name = str(fn.get("name", ""))
    description = _describe(fn.get("description"), brief)
    lines = [f"- {name}: {description}" if description else f"- {name}"]
    params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
    required = set(params.get("required") or ())
    properties = params.get("properties") or {}
    if not isinstance(properties, dict):
        properties = {}
    for key, schema in properties.items():
        mark = "*" if key in required else ""
        text = f"  {key}{mark} ({_type_text(schema)})"
        desc = schema.get("description") if isinstance(schema, dict) else None
        if desc:
            text += ": " + _describe(desc, brief)
        lines.append(text)
    if not properties:
        lines.append("  (no arguments)")
    return "\n".join(lines)


def render_tool_prompt(tools: list[dict[str, Any]], *, brief: bool = False) -> str:
    """The text to append to the system prompt: how to call tools, then the tools.

    Arguments are a terse list (``name* (type): description``), a quarter fewer tokens than
    JSON schema and easier for small models. ``brief`` keeps only first sentences (2k-4k
    windows).
    """
    body = "\n".join(render_tool(t, brief) for t in tools)
    return f"{TOOL_PROMPT_INTRO}\n\n{TOOL_LIST_HEADER}\n{body}"


def render_tool_result(name: str, call_id: str, content: str) -> str:
    """A tool's result as text for the model; a closing tag inside it is defused, so tool
    output cannot end the block early and pose as the user or as a new call."""
    safe_name = json.dumps(name, ensure_ascii=False)[1:-1]
    safe_id = json.dumps(call_id, ensure_ascii=False)[1:-1]
    opener = TOOL_RESULT_OPEN.format(name=safe_name, call_id=safe_id)
    body = _CLOSE_RESULT.sub("</tool_response >", content or "")
    return f"{opener}\n{body}\n{TOOL_RESULT_CLOSE}"


_CLOSE_RESULT = re.compile(r"</tool_response\s*>", re.IGNORECASE)


_THINK_OPEN = re.compile(r"\A\s*<(think|thinking|reasoning)>", re.IGNORECASE)
_THINK_CLOSE_ANY = re.compile(r"</(?:think|thinking|reasoning)>", re.IGNORECASE)
_CALL_MARKERS = re.compile(r"<tool_call>|\[TOOL_CALLS\]|<\|python_tag\|>|<function=", re.IGNORECASE)


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` from an answer that may start with ``<think>`` blocks.

    An unterminated block ends at a tool-call marker (so its call still runs); a lone
    ``</think>`` (DeepSeek-R1 distills) closes a block the template opened.
    """
    if not isinstance(text, str) or ("think" not in text.lower() and "reasoning" not in text):
        return None, text if isinstance(text, str) else ""
    parts: list[str] = []
    rest = text
    found = False
    while True:
        opened = _THINK_OPEN.match(rest)
        if opened is None:
            break
        found = True
        close = re.compile(rf"</{opened.group(1)}>", re.IGNORECASE).search(rest, opened.end())
        if close is None:
            inner = rest[opened.end() :]
            marker = _CALL_MARKERS.search(inner)
            cut = marker.start() if marker else len(inner)
            parts.append(inner[:cut])
            rest = inner[cut:]
            break
        parts.append(rest[opened.end() : close.start()])
        rest = rest[close.end() :]
    if not found:
        close = _THINK_CLOSE_ANY.search(text)
        if close is None or re.search(r"<(think|thinking|reasoning)>", text[: close.start()], re.I):
            return None, text
        parts.append(text[: close.start()])
        rest = text[close.end() :]
    reasoning = "\n\n".join(p.strip() for p in parts if p.strip())
    return (reasoning or None), rest.strip()


class _Names:
    """Resolves a model's spelling of a tool name to the real one."""

    def __init__(self, names: Collection[str]) -> None:
        self.exact = frozenset(n for n in names if isinstance(n, str))
        loose: dict[str, str | None] = {}
        for name in self.exact:
            key = self._key(name)
            loose[key] = None if key in loose and loose[key] != name else name
        self.loose = loose

    @staticmethod
    def _key(name: str) -> str:
        return name.strip().lower().replace("-", "_").replace(" ", "_")

    def resolve(self, name: str) -> str | None:
        if name in self.exact:
            return name
        candidates = [name.strip()]
        for prefix in ("functions.", "default_api.", "tools.", "tool."):
            if name.strip().lower().startswith(prefix):
                candidates.append(name.strip()[len(prefix) :])
        for candidate in candidates:
            if candidate in self.exact:
                return candidate
            found = self.loose.get(self._key(candidate))
            if found:
                return found
        return None


def _shape(obj: Any, strict: bool) -> tuple[str, Any] | None:
    """``(name, arguments)`` when ``obj`` looks like a call; strict also wants the arguments
    key and no foreign keys (so ``{"name": "bash", "description": ...}`` is not a call)."""
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        if strict and not set(obj) <= _SHAPE_KEYS:
            return None
        args = next((fn[k] for k in _ARG_KEYS if k in fn), _MISSING)
        if args is _MISSING:
            args = next((obj[k] for k in _ARG_KEYS if k in obj), _MISSING)
        if strict and args is _MISSING and len(fn) > 1:
            return None
        return fn["name"], args
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if not name or not name.strip():
        return None
    args = next((obj[k] for k in _ARG_KEYS if k in obj), _MISSING)
    if strict and (args is _MISSING or not set(obj) <= _SHAPE_KEYS):
        return None
    return name, args


def _call(name: str, args: Any) -> ToolCall:
    call_id = f"call_{secrets.token_hex(12)}"  # the OpenAI style: call_ + 24 hex digits
    return ToolCall(id=call_id, function=Function(name=name, arguments=_arguments_text(args)))


_TOOL_CALL_OPEN = re.compile(r"<tool_call>", re.IGNORECASE)
_TOOL_CALL_CLOSE = re.compile(r"</tool_call>", re.IGNORECASE)
_FUNCTION_OPEN = re.compile(r"<function=\s*[\"']?([^>\"'\s]{1,200})[\"']?\s*>", re.IGNORECASE)
_FUNCTION_CLOSE = re.compile(r"</function>", re.IGNORECASE)
_PARAMETER = re.compile(
    r"<parameter=\s*[\"']?([^>\"'\s]{1,200})[\"']?\s*>(.*?)(?:</parameter>|(?=<parameter=)|\Z)",
    re.IGNORECASE | re.DOTALL,
)
_MISTRAL = re.compile(r"\[TOOL_CALLS\]")
_MISTRAL_V11 = re.compile(r"\s*([A-Za-z_][\w.\-]{0,200})\s*\[ARGS\]\s*")
_PYTHON_TAG = re.compile(r"<\|python_tag\|>")
_PYTHON_TAG_END = re.compile(r"<\|(?:eom_id|eot_id)\|>")
_FENCE = re.compile(r"```")
_FENCE_LANG = re.compile(r"[\w\-]*")
_CANDIDATE = re.compile(
    r"""\{\s*["'](?:name|tool|tool_name|function|arguments|parameters)["']\s*:"""
)
_RECOVER_NAME = re.compile(
    r"""["']?(?:name|tool|tool_name|function)["']?\s*:\s*["']([^"'\n]{1,200})["']"""
)
_RECOVER_ARGS = re.compile(r"""["']?(?:arguments|parameters|args)["']?\s*:\s*""")
_LEADING_NAME = re.compile(r"\A([A-Za-z_][\w.\-]{0,200})\s*[:(]?\s*(?=[{(])")
_LEFTOVER = re.compile(r"</tool_call>|<\|(?:eom_id|eot_id|python_tag)\|>", re.IGNORECASE)
_BLANK_RUNS = re.compile(r"\n{3,}")
_JSON_FENCES = frozenset(("", "json", "json5", "javascript"))
_CALL_FENCES = frozenset(("tool_call", "tool_calls", "toolcall", "tool_code", "function_call"))
_SPECIAL_VALUE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")


def _param_value(raw: str) -> Any:
    """A ``<parameter=...>`` value: JSON for objects, lists, numbers, booleans; else text."""
    value = raw.strip("\n")
    stripped = value.strip()
    if stripped[:1] in ("{", "[") or _SPECIAL_VALUE.fullmatch(stripped):
        parsed = _loads_lenient(stripped)
        if parsed is not _MISSING:
            return parsed
    return value


def _lang_end(fenced: str) -> int:
    """Where the language tag after a fence's backticks ends (0 when there is none)."""
    match = _FENCE_LANG.match(fenced)  # always matches: the tag may be empty
    return match.end() if match is not None else 0


class _Parser:
    def __init__(self, text: str, names: _Names) -> None:
        self.text = text
        self.names = names
        self.budget = _SCAN_BUDGET  # bracket-scan tokens left, so hostile input stays linear
        self.spans: list[tuple[int, int, list[tuple[str, Any]]]] = []
        self.fences: list[tuple[int, int]] = []
        self.count = 0

    def taken(self, pos: int, fences: bool = False) -> bool:
        if any(s <= pos < e for s, e, _ in self.spans):
            return True
        return fences and any(s <= pos < e for s, e in self.fences)

    def add(self, start: int, end: int, calls: list[tuple[str, Any]]) -> bool:
        if self.count + len(calls) > MAX_CALLS or len(self.spans) >= 2 * MAX_CALLS:
            return False
        self.spans.append((start, end, calls))
        self.count += len(calls)
        return True

    def decode_at(self, text: str, start: int) -> tuple[Any, int] | None:
        """The (lenient) JSON value starting at ``start`` and its end, or None."""
        try:
            return _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            pass
        depth = 0
        for token in _TOKEN.finditer(text, start, min(len(text), start + _SCAN_WINDOW)):
            self.budget -= 1
            if self.budget <= 0:
                return None
            if token.group() in "{[":
                depth += 1
            elif token.group() in "}]":
                depth -= 1
                if depth == 0:
                    value = _loads_lenient(text[start : token.end()])
                    return None if value is _MISSING else (value, token.end())
        return None

    def explicit_name(self, name: str) -> str:
        return self.names.resolve(name) or name.strip()

    def shaped(self, value: Any, strict: bool | None) -> list[tuple[str, Any]] | None:
        """The calls in ``value`` (one or a list). ``strict`` None: inside an explicit marker,
        any name; else a known name and only call keys (strict: the arguments key too)."""
        items = value if isinstance(value, list) else [value]
        if not items or (strict is not None and len(items) > MAX_CALLS):
            return None
        calls = []
        for item in items[: MAX_CALLS + 1]:
            shape = _shape(item, strict=bool(strict))
            if shape is None or (strict is False and not set(item) <= _SHAPE_KEYS):
                return None
            name = self.explicit_name(shape[0]) if strict is None else self.names.resolve(shape[0])
            if name is None:
                return None
            calls.append((name, shape[1]))
        return calls

    def sequence(self, body: str) -> list[Any] | None:
        """Several JSON values in a row, separated by blanks, commas or semicolons."""
        values: list[Any] = []
        pos = 0
        while len(values) <= MAX_CALLS:
            while pos < len(body) and body[pos] in " \t\r\n,;":
                pos += 1
            if pos >= len(body):
                return values or None
            decoded = self.decode_at(body, pos)
            if decoded is None:
                return None
            values.append(decoded[0])
            pos = decoded[1]
        return None

    def explicit_body(self, body: str) -> list[tuple[str, Any]]:
        text = body.strip()
        if text.startswith("```"):
            text = text[3:]
            text = text[_lang_end(text) :].strip()
            text = text.removesuffix("```").strip()
        if not text:
            return []
        if text[:10].lower().startswith("<function="):
            tagged = _tagged(text, _FUNCTION_OPEN, _FUNCTION_CLOSE)
            return [c for o, end, _ in tagged for c in self.function_call(text, o, end)]
        value = _loads_lenient(text) if text[0] in "{[" else _MISSING
        if value is not _MISSING:
            calls = self.shaped(value, None)
            if calls:
                return calls
        if text[0] in "{[":
            values = self.sequence(text)
            if values:
                shaped = [self.shaped(v, None) for v in values]
                if all(shaped):
                    return [c for group in shaped if group for c in group]
        python = _python_calls(text)
        if python:
            return [(self.explicit_name(n), a) for n, a in python]
        return [self.recover(text)]

    def recover(self, text: str) -> tuple[str, Any]:
        """A broken call: the name if it can be found, the arguments verbatim."""
        name_match = _RECOVER_NAME.search(text)
        if name_match:
            name = name_match.group(1)
            args_match = _RECOVER_ARGS.search(text, name_match.end()) or _RECOVER_ARGS.search(text)
            if args_match:
                args = text[args_match.end() :].rstrip()
                if text.lstrip().startswith("{") and args.endswith("}"):
                    args = args[:-1].rstrip()
                return self.explicit_name(name), args or text
            return self.explicit_name(name), text
        leading = _LEADING_NAME.match(text)
        if leading:
            args = text[leading.end() :].strip()
            if args.startswith("(") and args.endswith(")"):
                args = args[1:-1].strip()
            return self.explicit_name(leading.group(1)), args
        # No name: answered as an unknown tool; the text (often the rest of the answer,
        # after an echoed tag) is kept short, since it goes back in every later request.
        return "", text if len(text) <= _NAMELESS_KEEP else text[:_NAMELESS_KEEP] + "…"

    # Readers of explicit blocks: the calls between the opener and the body's end.
    def body_calls(self, text: str, opened: re.Match[str], body_end: int) -> list[Any]:
        return self.explicit_body(text[opened.end() : body_end])

    def function_call(self, text: str, opened: re.Match[str], body_end: int) -> list[Any]:
        """``<function=name>`` with ``<parameter=...>`` blocks or a JSON body."""
        body = text[opened.end() : body_end]
        stripped = body.strip()
        args: Any
        if re.search(r"<parameter=", body, re.IGNORECASE):
            args = {
                m.group(1): _param_value(m.group(2))
                for m in islice(_PARAMETER.finditer(body), 4 * MAX_CALLS)
            }
        else:
            value = _loads_lenient(stripped) if stripped else {}
            args = stripped if value is _MISSING else value
        return [(self.explicit_name(opened.group(1)), args)]

    def mistral(self, text: str, opened: re.Match[str], limit: int) -> tuple[list[Any], int]:
        """``[TOOL_CALLS]`` then a JSON call list, or ``name[ARGS]{...}`` (v11); no closer."""
        pos = opened.end()
        while pos < limit and text[pos].isspace():
            pos += 1
        v11 = _MISTRAL_V11.match(text, pos, limit)
        if v11:
            name = self.explicit_name(v11.group(1))
            decoded = self.decode_at(text[:limit], v11.end())
            if decoded:
                return [(name, decoded[0])], decoded[1]
            return [(name, text[v11.end() : limit].strip())], limit
        decoded = self.decode_at(text[:limit], pos) if text[pos : pos + 1] in ("[", "{") else None
        value_calls = self.shaped(decoded[0], None) if decoded else None
        if decoded and value_calls:
            return value_calls, decoded[1]
        return self.explicit_body(text[pos:limit]), limit

    def explicit(self) -> None:
        """Every explicit marker, one kind after the other, skipping those already inside a
        block (a marker quoted in a call's arguments)."""
        text = self.text
        for opener, closer, read in (
            (_TOOL_CALL_OPEN, _TOOL_CALL_CLOSE, self.body_calls),
            (_FUNCTION_OPEN, _FUNCTION_CLOSE, self.function_call),
            (_MISTRAL, None, None),
            (_PYTHON_TAG, _PYTHON_TAG_END, self.body_calls),
        ):
            for opened, body_end, span_end in _tagged(text, opener, closer):
                if self.taken(opened.start()):
                    continue
                if read is None:
                    calls, span_end = self.mistral(text, opened, body_end)
                else:
                    calls = read(text, opened, body_end)
                if not self.add(opened.start(), span_end, calls):
                    return

    def fenced(self) -> None:
        text = self.text
        ticks = [
            m.start()
            for m in islice(_FENCE.finditer(text), 8 * MAX_CALLS)
            if not self.taken(m.start())
        ]
        for a, b in zip(ticks[::2], ticks[1::2], strict=False):
            self.fences.append((a, b + 3))
            inner = text[a + 3 : b]
            lang_end = _lang_end(inner)
            lang = inner[:lang_end].lower()
            body = inner[lang_end:].strip()
            if (lang not in _JSON_FENCES and lang not in _CALL_FENCES) or not body:
                continue
            value = _loads_lenient(body) if body[0] in "{[" else _MISSING
            calls = None
            if value is not _MISSING:
                calls = self.shaped(value, strict=lang not in _CALL_FENCES)
            if calls is None and lang in _CALL_FENCES:
                python = [{"name": n, "arguments": a} for n, a in _python_calls(body) or ()]
                calls = self.shaped(python, strict=True)
            if calls and not self.add(a, b + 3, calls):
                return

    def whole(self) -> None:
        stripped = self.text.strip()
        if not stripped or stripped[0] not in "{[" or stripped[-1] not in "}]":
            return
        value = _loads_lenient(stripped)
        calls = self.shaped(value, strict=False) if value is not _MISSING else None
        if calls:
            self.add(0, len(self.text), calls)

    def embedded(self) -> None:
        tried = 0
        for match in _CANDIDATE.finditer(self.text):
            if tried >= _MAX_CANDIDATES or self.budget <= 0:
                return
            start = match.start()
            if self.taken(start, fences=True):
                continue
            tried += 1
            decoded = self.decode_at(self.text, start)
            if decoded is None:
                continue
            calls = self.shaped(decoded[0], strict=True)
            if calls and not self.add(start, decoded[1], calls):
                return

    def run(self) -> TextToolParse:
        self.explicit()
        if self.count == 0:
            self.fenced()
            if not self.spans:
                self.whole()
            if self.count == 0:
                self.embedded()
        self.spans.sort(key=lambda span: span[0])
        pieces, pos = [], 0
        calls: list[ToolCall] = []
        for start, end, found in self.spans:
            pieces.append(self.text[pos:start])
            pos = max(pos, end)
            calls.extend(_call(name, args) for name, args in found)
        pieces.append(self.text[pos:])
        content = "".join(pieces)
        if calls:
            content = _BLANK_RUNS.sub("\n\n", _LEFTOVER.sub("", content))
        return TextToolParse(content=content.strip(), calls=calls)


def _json_then_close(text: str, pos: int, close: re.Pattern[str]) -> tuple[int, int] | None:
    """Body end and span end when a well-formed JSON value follows ``pos`` and then ``close``."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if text[pos : pos + 1] not in ("{", "["):
        return None
    try:
        end = _DECODER.raw_decode(text, pos)[1]
    except (ValueError, RecursionError):
        return None
    gap = end
    while gap < len(text) and gap - end < 64 and text[gap].isspace():
        gap += 1
    closed = close.match(text, gap)
    return (closed.start(), closed.end()) if closed else None


_DECODER = json.JSONDecoder()


def _tagged(
    text: str, opener: re.Pattern[str], closer: re.Pattern[str] | None
) -> Iterator[tuple[re.Match[str], int, int]]:
    """Each opener with its body end and span end: its closer (one after well-formed JSON
    wins, so a closing tag inside a JSON string does not end the block), else the next
    opener or the end."""
    opens = list(islice(opener.finditer(text), _CAP))
    closes = (
        [(m.start(), m.end()) for m in islice(closer.finditer(text), 4 * MAX_CALLS)]
        if closer
        else []
    )
    starts = [start for start, _ in closes]
    for i, opened in enumerate(opens[: MAX_CALLS + 1]):
        whole = _json_then_close(text, opened.end(), closer) if closer else None
        if whole is not None:
            yield opened, *whole
            continue
        next_open = opens[i + 1].start() if i + 1 < len(opens) else len(text)
        j = bisect.bisect_left(starts, opened.end())
        if j < len(closes) and starts[j] < next_open:
            yield opened, *closes[j]
        else:
            yield opened, next_open, next_open


def parse_tool_calls(text: str, tool_names: Collection[str]) -> TextToolParse:
    """The tool calls in a model's answer and the answer without them. Never raises."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if not tool_names or not text:
        return TextToolParse(content=text.strip(), calls=[])
    try:
        return _Parser(text, _Names(tool_names)).run()
    except (RecursionError, MemoryError, ValueError, TypeError):  # a last guard, not a path
        return TextToolParse(content=text.strip(), calls=[])
