"""Aggregating step scores into one solution score: ``min``, ``prod``, ``last``, ``mean``.

``min`` and ``prod`` follow Lightman et al. (2023) ("Let's Verify Step by Step": the solution is right only
if every step is, so its probability is the product, or the weakest step); ``last`` is the score of the
final step, which a PRM trained on Monte Carlo labels reads as the chance the whole solution succeeds
(Wang et al., 2024, Math-Shepherd, compare min with it); ``mean`` is the plain average.
Non-finite scores (steps the model could not read, e.g. past its context window) are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence


def _finite(scores: Sequence[float]) -> list[float]:
    return [float(s) for s in scores if s is not None and math.isfinite(s)]


def agg_min(scores: Sequence[float]) -> float:
    """``min_t r_t``."""
    return min(scores)


def agg_prod(scores: Sequence[float]) -> float:
    """``prod_t r_t``."""
    return math.prod(scores)


def agg_last(scores: Sequence[float]) -> float:
    """``r_T``."""
    return scores[-1]


def agg_mean(scores: Sequence[float]) -> float:
    """``(1/T) sum_t r_t``."""
    return sum(scores) / len(scores)


AGGREGATIONS: dict[str, Callable[[Sequence[float]], float]] = {
    "min": agg_min,
    "prod": agg_prod,
    "product": agg_prod,
    "last": agg_last,
    "mean": agg_mean,
}


def aggregate(scores: Sequence[float], how: str = "min") -> float:
    """Aggregates step scores into one score with ``how`` (``min``, ``prod``/``product``, ``last``,
    ``mean``). Raises ``ValueError`` for an unknown name or when no finite score is left."""
    try:
        fn = AGGREGATIONS[how]
    except KeyError:
        raise ValueError(f"unknown aggregation {how!r} (known: {', '.join(sorted(AGGREGATIONS))})") from None
    values = _finite(scores)
    if not values:
        raise ValueError("no step scores to aggregate")
    return float(fn(values))


__all__ = ["AGGREGATIONS", "aggregate"]
