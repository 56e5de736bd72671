"""What one endpoint and model refused, learned in this process or remembered from an earlier
one (``app.llm.endpoint_memory``), and what that means for the next request."""

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

    async def refuse(self, feature: str, why: str) -> None:
        """Remember that the endpoint refused ``feature`` (and say why, once)."""
        if feature in self.features:
            return
        assert self._features is not None
        self._features.add(feature)
        self._frozen = None
        memory = self._memory()
        if memory is not None:  # locks and fsyncs a file: off the event loop
            await asyncio.to_thread(memory.remember, self.base_url, self.model, feature)
        logger.info(
            f"Model '{self.model}' ({self.base_url}) refused {feature} ({why}); "
            "remembered for this endpoint"
        )

    def may_stream(self, *, tools: bool, allowed: bool) -> bool:
        """Whether a turn (with tools or not) may be streamed, ``allowed`` by the profile."""
        refused = self.features
        return allowed and "stream" not in refused and not (tools and "stream_tools" in refused)
