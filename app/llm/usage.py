"""Token usage as the API reports it, per call and summed over a run or an LLM's lifetime."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["Usage"]


class Usage(BaseModel):
    """Tokens spent. ``estimated`` is set when any part was counted locally, not reported."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    requests: int = 0
    estimated: bool = False

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        self.cached_tokens += other.cached_tokens
        self.requests += other.requests
        self.estimated = self.estimated or other.estimated

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
            requests=self.requests - other.requests,
            estimated=self.estimated,
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
        return (
            f"{self.prompt_tokens} prompt + {self.completion_tokens} completion = "
            f"{self.total_tokens} tokens in {self.requests} request(s){mark}"
        )
