"""Token usage as the API reports it, per call and summed over a run or an LLM's lifetime."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_SUMMED = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "requests",
)
_SUMMED_SET = frozenset(_SUMMED)


class Usage(BaseModel):
    """Tokens spent. ``estimated`` is set when any part was counted locally, not reported.

    ``prompt_tokens`` is every input token of the request, cached ones included;
    ``cached_tokens`` of them were read from the provider's prompt cache and
    ``cache_write_tokens`` were written to it (billed at their own prices). ``cost`` is set
    when the model's prices are configured (``[pricing]``); a sum is priced when any of its
    parts was.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    estimated: bool = False
    cost: float | None = None

    def add(self, other: Usage) -> None:
        # On the fields' storage directly: seven validated assignments cost more than the
        # rest of recording a turn's usage (this runs several times per agent step).
        mine, theirs = self.__dict__, other.__dict__
        for name in _SUMMED:
            mine[name] += theirs[name]
        changed = _SUMMED_SET
        if theirs["estimated"] and not mine["estimated"]:
            mine["estimated"] = True
            changed = _SUMMED_SET | {"estimated"}
        if theirs["cost"] is not None:
            mine["cost"] = (mine["cost"] or 0.0) + theirs["cost"]
            changed = changed | {"cost"}
        self.__pydantic_fields_set__.update(changed)

    def __add__(self, other: Usage) -> Usage:
        result = self.model_copy()
        result.add(other)
        return result

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens - other.prompt_tokens,
            completion_tokens=self.completion_tokens - other.completion_tokens,
            total_tokens=self.total_tokens - other.total_tokens,
            cached_tokens=self.cached_tokens - other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens - other.cache_write_tokens,
            requests=self.requests - other.requests,
            estimated=self.estimated,
            cost=None if self.cost is None else self.cost - (other.cost or 0.0),
        )

    @classmethod
    def from_counts(
        cls, *, input: int, output: int, cache_read: int = 0, cache_write: int = 0
    ) -> Usage:
        """One request's usage from counts that keep the cache apart, as Anthropic and Bedrock
        report them: ``input`` is the uncached input only, so the prompt is it plus the tokens
        read from (``cached_tokens``) and written to (``cache_write_tokens``) the cache."""
        prompt = input + cache_read + cache_write
        return cls(
            prompt_tokens=prompt,
            completion_tokens=output,
            total_tokens=prompt + output,
            cached_tokens=cache_read,
            cache_write_tokens=cache_write,
            requests=1,
        )

    @classmethod
    def from_api(cls, data: dict[str, Any] | None) -> Usage | None:
        """Parse the API's ``usage`` object; None when the endpoint reported none."""
        if not data:
            return None
        prompt = int(data.get("prompt_tokens") or 0)
        completion = int(data.get("completion_tokens") or 0)
        details = data.get("prompt_tokens_details") or {}
        return cls(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=int(data.get("total_tokens") or prompt + completion),
            cached_tokens=int(details.get("cached_tokens") or 0),
            requests=1,
        )

    def __str__(self) -> str:
        mark = " (estimated)" if self.estimated else ""
        cached = f", {self.cached_tokens} cached" if self.cached_tokens else ""
        if self.cache_write_tokens:
            cached += f", {self.cache_write_tokens} written to cache"
        cost = f", cost ${self.cost:.4f}" if self.cost is not None else ""
        return (
            f"{self.prompt_tokens} prompt + {self.completion_tokens} completion = "
            f"{self.total_tokens} tokens in {self.requests} request(s){cached}{mark}{cost}"
        )
