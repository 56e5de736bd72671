"""``BaseFlow``: a named group of agents with a primary one, and the flow types."""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any

from pydantic import ConfigDict, PrivateAttr, model_validator

from app.agent.base import BaseAgent
from app.events import EventBus, EventStream
from app.strict import StrictModel


class FlowType(str, Enum):
    PLANNING = "planning"


class BaseFlow(StrictModel, ABC):
    """Agents by key. Accepts one agent (key ``"default"``), a list (keys ``agent_0``,
    ``agent_1``...) or a dict; the primary agent is the first unless ``primary_agent_key``
    names another."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", defer_build=True)

    agents: dict[str, BaseAgent]
    tools: list[Any] | None = None
    primary_agent_key: str | None = None

    _events: EventBus = PrivateAttr()  # set below: a default factory is inspected per instance

    def model_post_init(self, context: Any, /) -> None:
        self._events = EventBus()

    def __init__(
        self, agents: BaseAgent | list[BaseAgent] | dict[str, BaseAgent], **data: Any
    ) -> None:
        super().__init__(agents=_as_dict(agents), **data)

    @model_validator(mode="after")
    def _check_primary(self) -> BaseFlow:
        if not self.agents:
            raise ValueError("a flow needs at least one agent")
        if self.primary_agent_key is None:
            self.primary_agent_key = next(iter(self.agents))
        elif self.primary_agent_key not in self.agents:
            known = ", ".join(self.agents)
            raise ValueError(
                f"primary_agent_key '{self.primary_agent_key}' is not one of the agents: {known}"
            )
        return self

    @property
    def primary_agent(self) -> BaseAgent:
        assert self.primary_agent_key is not None
        return self.agents[self.primary_agent_key]

    def get_agent(self, key: str) -> BaseAgent | None:
        return self.agents.get(key)

    def add_agent(self, key: str, agent: BaseAgent) -> None:
        self.agents[key] = agent

    @abstractmethod
    async def execute(self, input_text: str) -> str:
        """Work through ``input_text`` with the agents; returns the flow's report."""

    @property
    def events(self) -> EventBus:
        """The flow's events: its own (plan changes) and, while it runs, its agents'."""
        return self._events

    def run_stream(self, input_text: str) -> EventStream:
        """``execute(input_text)``, yielding the events of the flow and its agents."""
        return EventStream(self._events, self.execute(input_text))


def _as_dict(
    agents: BaseAgent | list[BaseAgent] | dict[str, BaseAgent],
) -> dict[str, BaseAgent]:
    if isinstance(agents, BaseAgent):
        return {"default": agents}
    if isinstance(agents, list | tuple):
        return {f"agent_{i}": agent for i, agent in enumerate(agents)}
    if isinstance(agents, dict):
        return dict(agents)
    raise TypeError(
        f"agents must be an agent, a list of agents or a dict of them, not {type(agents).__name__}"
    )
