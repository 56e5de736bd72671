"""Lenient JSON for tool calls in small models' text: trailing commas, single quotes, Python
literals and calls. Never raises; every scan is bounded, so hostile input costs linear time."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

__all__ = ["MISSING", "ScanBudget", "arguments_text", "decode_at", "loads_lenient", "python_calls"]

#: Returned when a text holds no value (``None`` is a valid JSON value).
MISSING: Any = object()
SCAN_WINDOW = 200_000  # characters a bracket scan may cover from its start
SCAN_BUDGET = 400_000  # bracket-scan tokens for one whole answer
#: Texts longer than this get no lenient (slower) repair, only strict JSON.
REPAIR_LIMIT = 64_000
MAX_DEPTH = 64  # nesting accepted from Python-literal syntax


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)


class ScanBudget:
    """Bracket-scan tokens left for one parse, so hostile input cannot make it quadratic."""

    def __init__(self) -> None:
        self.left = SCAN_BUDGET


def _match_end(text: str, start: int, budget: ScanBudget) -> int | None:
    """End (exclusive) of the bracketed value opening at ``start``, skipping strings."""
    depth = 0
    stop = min(len(text), start + SCAN_WINDOW)
    for token in _TOKEN.finditer(text, start, stop):
        budget.left -= 1
        if budget.left <= 0:
            return None
        t = token.group()
        if t in "{[":
            depth += 1
        elif t in "}]":
            depth -= 1
            if depth == 0:
                return token.end()
    return None


def _literal(node: ast.AST, depth: int = 0) -> Any:
    """A Python/JSON literal from an AST node (``true``/``null`` spellings included)."""
    if depth > MAX_DEPTH:
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


def loads_lenient(text: str) -> Any:
    """JSON, forgiving trailing commas and single quotes on short texts; ``MISSING`` if not."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    if len(text) > REPAIR_LIMIT:
        return MISSING
    try:
        return json.loads(_TRAILING_COMMA.sub(r"\1", text))
    except (ValueError, RecursionError):
        pass
    try:
        return _literal(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return MISSING


def decode_at(text: str, start: int, budget: ScanBudget) -> tuple[Any, int] | None:
    """The JSON value starting at ``start`` and its end, or None."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    end = _match_end(text, start, budget)
    if end is None:
        return None
    value = loads_lenient(text[start:end])
    return None if value is MISSING else (value, end)


_DECODER = json.JSONDecoder()


def dumps_safe(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return str(value)


def arguments_text(args: Any) -> str:
    """Arguments as JSON text; text that is not JSON is kept verbatim for the agent to report."""
    if args is MISSING or args is None:
        return "{}"
    if isinstance(args, str):
        stripped = args.strip()
        if not stripped:
            return "{}"
        value = loads_lenient(stripped)
        return args if value is MISSING else dumps_safe(value)
    return dumps_safe(args)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def python_calls(body: str) -> list[tuple[str, Any]] | None:
    """Calls written as Python (``bash(command="ls")``, Gemma's ``print(default_api.x(...))``,
    Llama's ``brave_search.call(query=...)``); None unless every statement is such a call."""
    if len(body) > REPAIR_LIMIT:
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
            name = _dotted(node.func)
            if not name:
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
