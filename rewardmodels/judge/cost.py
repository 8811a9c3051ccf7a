"""What a judge behind a server costs, and the budget that stops it: a price table (USD per million prompt and
completion tokens, by model name), the cost of the tokens a run used, and a per-run budget in USD and/or
tokens.

Prices come from, first to last: a price given for the run (``price_prompt`` / ``price_completion``), a
prices file (JSON or YAML: ``{MODEL: {prompt: USD, completion: USD}}``), or :data:`BUILT_IN_PRICES` (a few
hosted models' list prices of :data:`PRICES_DATE`; check the provider's page before trusting a cost). A model
name matches its own entry, or the longest entry it starts with (a dated snapshot ``gpt-4o-mini-2024-07-18``
is priced as ``gpt-4o-mini``); a ``provider/`` prefix (OpenRouter's ``openai/gpt-4o``) is ignored.

The budget is enforced by :class:`rewardlab.rewardmodels.judge.remote.ChatAPIBackend`: it sends a batch's
requests in chunks of ``concurrency`` and checks :meth:`Budget.exhausted` before each, so a run spends at most
its budget plus one chunk (see that class).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PRICES_DATE = "2025-06"
"""When :data:`BUILT_IN_PRICES` were the providers' list prices."""


@dataclass(frozen=True)
class Price:
    """A model's price.

    Attributes:
        prompt: USD per million prompt (input) tokens.
        completion: USD per million completion (output) tokens.
    """

    prompt: float
    completion: float

    def __post_init__(self) -> None:
        for name in ("prompt", "completion"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"a price's {name} must be a number (USD per 1M tokens), got {value!r:.40}")
            if value < 0:
                raise ValueError(f"a price's {name} must be >= 0, got {value}")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for that many tokens."""
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


BUILT_IN_PRICES: dict[str, Price] = {
    # OpenAI list prices (standard tier, no cached-input discount), USD per 1M tokens, as of PRICES_DATE.
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o3-mini": Price(1.10, 4.40),
    "o4-mini": Price(1.10, 4.40),
}
"""A few hosted models' prices (:data:`PRICES_DATE`); a run's own price or prices file comes first."""


def load_prices(path: str | Path) -> dict[str, Price]:
    """The prices in a JSON or YAML file ``{MODEL: {prompt: USD per 1M, completion: USD per 1M}}``.

    Raises:
        ValueError: an unreadable file or an entry that is not a price (one line naming it).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read the prices file {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"the prices file {path} must map model names to prices")
    prices = {}
    for model, entry in data.items():
        prices[str(model)] = as_price(entry, where=f"{path}: {model}")
    return prices


def as_price(value: Any, where: str = "price") -> Price:
    """A :class:`Price` from ``{"prompt": x, "completion": y}`` (or a Price).

    Raises:
        ValueError: naming ``where``.
    """
    if isinstance(value, Price):
        return value
    if not isinstance(value, dict) or set(value) != {"prompt", "completion"}:
        raise ValueError(
            f"{where}: a price is {{'prompt': USD per 1M tokens, 'completion': USD per 1M tokens}}"
        )
    try:
        return Price(value["prompt"], value["completion"])
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def lookup_price(model: str | None, table: dict[str, Price]) -> Price | None:
    """``model``'s entry in ``table`` (its own name, else the longest name it starts with), or ``None``."""
    if not model:
        return None
    name = model.rsplit("/", 1)[-1]
    if name in table:
        return table[name]
    starts = [key for key in table if name.startswith(key + "-")]
    return table[max(starts, key=len)] if starts else None


def resolve_price(
    model: str | None, price: Price | None = None, prices_file: str | None = None
) -> Price | None:
    """The price of ``model``: ``price`` itself, else the prices file's entry, else the built-in table's."""
    if price is not None:
        return price
    if prices_file:
        found = lookup_price(model, load_prices(prices_file))
        if found is not None:
            return found
    return lookup_price(model, BUILT_IN_PRICES)


@dataclass(frozen=True)
class Budget:
    """A run's spending limit (either or both).

    Attributes:
        usd: Most USD to spend (needs a price).
        tokens: Most tokens (prompt + completion, as the server reports them) to spend.
    """

    usd: float | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        if self.usd is not None and not self.usd > 0:
            raise ValueError(f"budget_usd must be > 0, got {self.usd}")
        if self.tokens is not None and not self.tokens > 0:
            raise ValueError(f"budget_tokens must be > 0, got {self.tokens}")

    def exhausted(self, spent_usd: float | None, spent_tokens: int) -> str | None:
        """The error of a row not sent once the budget is spent (``judge budget exhausted: spent $X of
        $Y``), or ``None`` while some is left."""
        if self.usd is not None and spent_usd is not None and spent_usd >= self.usd:
            return f"{BUDGET_EXHAUSTED}: spent ${spent_usd:.4f} of ${self.usd:.4f}"
        if self.tokens is not None and spent_tokens >= self.tokens:
            return f"{BUDGET_EXHAUSTED}: spent {spent_tokens} of {self.tokens} tokens"
        return None


BUDGET_EXHAUSTED = "judge budget exhausted"
"""How the error of a row that was not sent because the budget was spent begins."""

__all__ = [
    "BUDGET_EXHAUSTED",
    "BUILT_IN_PRICES",
    "PRICES_DATE",
    "Budget",
    "Price",
    "as_price",
    "load_prices",
    "lookup_price",
    "resolve_price",
]
