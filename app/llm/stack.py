"""The model stack a profile gets, built in one place.

A request from ``LLM`` goes down this stack, each layer a :class:`~app.llm.Model` wrapping
the next::

    TextToolCalls          tools in the prompt when the endpoint is in text mode
      OpenAIChatModel      wire format, streaming choice, refusals learned
        per attempt:       retries (RetryPolicy), in-flight bound, rate-limit gate,
                           timer, recording tape, then the transport (HTTP or SDK)

Retries, the rate-limit gate and recording stay inside ``OpenAIChatModel``'s exchange, around
each transport attempt: a retry after a plain request timed out is sent streamed, a
recording keeps the exact wire body, and a gate or timer counts attempts, not turns. A model
of your own (``LLM.from_model``) gets :class:`~app.llm.retry.Retrying` around it instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.llm.model import Model
from app.llm.openai.model import OpenAIChatModel
from app.llm.refusals import Refusals
from app.llm.retry import Retrying
from app.llm.text_mode import TextToolCalls

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.llm.endpoint_memory import EndpointMemories
    from app.llm.openai.transport import Transport

__all__ = ["build_model", "wrap_model"]


def build_model(
    settings: LLMSettings,
    memories: EndpointMemories | None,
    transport: Transport | None = None,
) -> tuple[Model, OpenAIChatModel]:
    """The stack for a profile, and its endpoint model. What the endpoint refuses is kept
    in ``memories`` unless the profile says ``capability_cache = false`` or ``transport`` is
    given in code (a ``FunctionModel`` has no endpoint worth remembering)."""
    remember = settings.capability_cache and transport is None
    refusals = Refusals(settings.base_url or "", settings.model, memories if remember else None)
    endpoint = OpenAIChatModel(settings, refusals, transport)
    return TextToolCalls(endpoint, refusals, settings.tool_calling), endpoint


def wrap_model(model: Model, settings: LLMSettings) -> Model:
    """The stack over a user's own model: its transient errors retried."""
    return Retrying(model, settings)
