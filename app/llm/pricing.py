"""What tokens cost: prices per model from the config's ``[pricing]`` table.

```toml
[pricing."gpt-4o"]
input = 2.50          # per million prompt tokens
output = 10.00        # per million completion tokens
cached_input = 1.25   # per million cached prompt tokens (default: the input price)
cache_write = 3.75    # per million prompt tokens written to the cache (default: the input price)

[pricing."claude-*"]  # a trailing * matches every model name starting with "claude-"
input = 3.0
output = 15.0
```

Prompt tokens the provider served from its cache are charged at ``cached_input``, those it
wrote to its cache at ``cache_write``; the rest at ``input``. Models without a price have no
cost (``None``), never a made-up one.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from app.config import ModelPrice
from app.llm.usage import Usage

_MILLION = 1_000_000


def price_for(model: str, table: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of ``model``: an exact entry (any case), else the longest ``prefix*`` entry.

    ``table`` defaults to the active config's ``[pricing]`` (none if no config is loaded, so
    a library that builds its LLM in code never triggers a config read).
    """
    if table is None:
        # A config module never imported was never loaded (and this runs at every turn,
        # where an import statement alone costs more than the lookup).
        active = sys.modules.get("app.config")
        if active is None or not active.config.is_loaded:
            return None
        table = active.config.app_config.pricing
    if not table:
        return None
    if model in table:
        return table[model]
    lowered = model.lower()
    best: tuple[int, ModelPrice] | None = None
    for key, price in table.items():
        name = key.lower()
        if name == lowered:
            return price
        if name.endswith("*") and lowered.startswith(name[:-1]):
            if best is None or len(name) > best[0]:
                best = (len(name), price)
    return best[1] if best else None


def cost_of(usage: Usage, price: ModelPrice) -> float:
    """The cost of ``usage`` at ``price``."""
    cached = min(max(usage.cached_tokens, 0), usage.prompt_tokens)
    written = min(max(usage.cache_write_tokens, 0), usage.prompt_tokens - cached)
    cached_price = price.input if price.cached_input is None else price.cached_input
    write_price = price.input if price.cache_write is None else price.cache_write
    return (
        (usage.prompt_tokens - cached - written) * price.input
        + cached * cached_price
        + written * write_price
        + usage.completion_tokens * price.output
    ) / _MILLION


def priced(usage: Usage, price: ModelPrice | None) -> Usage:
    """``usage`` with its cost filled in (unchanged when there is no price)."""
    if price is not None:
        usage.cost = cost_of(usage, price)
    return usage
