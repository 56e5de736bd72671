"""Agents a batch task can name: ``manus`` (the default), ``swe``, ``toolcall``, those added
with ``register_agent``, or any importable ``"package.module:Name"`` factory or class, which
Ray workers in other processes can resolve too (a run-time registration does not reach them).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from app.agent.base import BaseAgent
from app.agent.manus import Manus
from app.agent.swe import SWEAgent
from app.agent.toolcall import ToolCallAgent
from app.exceptions import ConfigError

#: ``factory(workspace=..., max_steps=...)`` returns an agent, or an awaitable of one.
AgentFactory = Callable[..., "BaseAgent | Awaitable[BaseAgent]"]

DEFAULT_AGENT = "manus"


async def _manus(**kwargs: Any) -> BaseAgent:
    return await Manus.create(**kwargs)


def _swe(**kwargs: Any) -> BaseAgent:
    return SWEAgent(**kwargs)


def _toolcall(**kwargs: Any) -> BaseAgent:
    kwargs.pop("workspace", None)  # its tools do not touch files
    return ToolCallAgent(**kwargs)


_REGISTRY: dict[str, AgentFactory] = {"manus": _manus, "swe": _swe, "toolcall": _toolcall}


def register_agent(name: str, factory: AgentFactory) -> None:
    """Make ``name`` (case-insensitive) usable as a task's ``agent``."""
    if not name.strip() or ":" in name:
        raise ValueError(f"agent names must be non-empty and contain no ':' ({name!r})")
    _REGISTRY[name.strip().lower()] = factory


def _resolve(name: str) -> AgentFactory:
    key = name.strip()
    factory = _REGISTRY.get(key.lower())
    if factory is not None:
        return factory
    if ":" not in key:
        known = ", ".join(sorted(_REGISTRY))
        raise ConfigError(
            f"unknown agent {name!r}; known agents: {known} (or 'package.module:Factory')"
        )
    module_name, _, attribute = key.partition(":")
    try:
        module = importlib.import_module(module_name)
        target = getattr(module, attribute)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"agent {name!r} cannot be imported: {e}") from e
    if not callable(target):
        raise ConfigError(f"agent {name!r} is not a class or a function")
    return _class_factory(target) if inspect.isclass(target) else target


def _class_factory(cls: type) -> AgentFactory:
    """An agent class: its async ``create`` when it has one, else the constructor; keyword
    arguments it has no field for are left out."""
    fields = getattr(cls, "model_fields", None)

    async def build(**kwargs: Any) -> Any:
        if fields is not None:
            kwargs = {k: v for k, v in kwargs.items() if k in fields}
        create = getattr(cls, "create", None)
        if create is not None and inspect.iscoroutinefunction(create):
            return await create(**kwargs)
        return cls(**kwargs)

    return build


def check_agent_name(name: str | None) -> None:
    """Raise ``ConfigError`` now, before a batch starts, if ``name`` cannot be resolved."""
    _resolve(name or DEFAULT_AGENT)


async def build_agent(
    name: str | None, *, workspace: Path, max_steps: int | None = None
) -> BaseAgent:
    """A fresh agent instance for one task, working in ``workspace``."""
    factory = _resolve(name or DEFAULT_AGENT)
    kwargs: dict[str, Any] = {"workspace": workspace}
    if max_steps is not None:
        kwargs["max_steps"] = max_steps
    agent = factory(**kwargs)
    if inspect.isawaitable(agent):
        agent = await agent
    return agent
