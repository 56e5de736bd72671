"""What one endpoint and model refused or honours, learned in this process or remembered from
an earlier one (``app.llm.endpoint_memory``), and what that means for the next request."""

from __future__ import annotations

import asyncio

from app.llm.endpoint_memory import EndpointMemories, EndpointMemory
from app.logger import logger


class Refusals:
    """The refused features of one endpoint and model, kept in ``memories`` (the file at the
    current cache path) or, with ``memories`` None, in this process only."""

    def __init__(self, base_url: str, model: str, memories: EndpointMemories | None) -> None:
        self.base_url = base_url
        self.model = model
        self.memories = memories
        self._features: set[str] | None = None  # loaded from the memory on first use
        self._frozen: frozenset[str] | None = None
        self._choices: dict[str, str] | None = None

    @property
    def features(self) -> frozenset[str]:
        frozen = self._frozen
        if frozen is None:  # asked several times per turn: built once per change
            if self._features is None:
                self._features = set()
                memory = self._memory()
                if memory is not None:
                    self._features |= memory.refused(self.base_url, self.model)
            frozen = self._frozen = frozenset(self._features)
        return frozen

    def _memory(self) -> EndpointMemory | None:
        return None if self.memories is None else self.memories.at()

    async def refuse(self, feature: str, why: str, *, say: bool = True) -> None:
        """Remember that the endpoint refused ``feature`` (and say why, once, unless the
        caller says it itself: ``say=False``)."""
        if feature in self.features:
            return
        assert self._features is not None
        self._features.add(feature)
        self._frozen = None
        memory = self._memory()
        if memory is not None:  # locks and fsyncs a file: off the event loop
            await asyncio.to_thread(memory.remember, self.base_url, self.model, feature)
        if say:
            logger.info(
                f"Model '{self.model}' ({self.base_url}) refused {feature} ({why}); "
                "remembered for this endpoint"
            )

    def choice(self, key: str) -> str | None:
        """What the endpoint was found to honour for ``key`` (``"constrained"``: the field)."""
        if self._choices is None:
            memory = self._memory()
            self._choices = memory.choices(self.base_url, self.model) if memory else {}
        return self._choices.get(key)

    async def choose(self, key: str, value: str | None) -> None:
        """Remember what the endpoint honours for ``key`` (None: forget it)."""
        if self.choice(key) == value:
            return
        assert self._choices is not None
        if value is None:
            self._choices.pop(key, None)
        else:
            self._choices[key] = value
        memory = self._memory()
        if memory is not None:
            await asyncio.to_thread(memory.remember_choice, self.base_url, self.model, key, value)

    def may_stream(self, *, tools: bool, allowed: bool) -> bool:
        """Whether a turn (with tools or not) may be streamed, ``allowed`` by the profile."""
        refused = self.features
        return allowed and "stream" not in refused and not (tools and "stream_tools" in refused)
