"""``ReActAgent``: a step is *think* (decide) then *act* (carry it out)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from app.agent.base import BaseAgent


class ReActAgent(BaseAgent, ABC):
    @abstractmethod
    async def think(self) -> bool:
        """Decide the next action; False when there is nothing to do."""

    @abstractmethod
    async def act(self) -> str:
        """Carry out the decided action; returns a line for the step log."""

    async def step(self) -> str:
        if not await self.think():
            return "Thinking complete - no action needed"
        return await self.act()
