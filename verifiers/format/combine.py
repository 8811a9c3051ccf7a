"""Combining reward sources: "format and correct" rewards of R1-style RL, and weighted sums.

DeepSeek-R1 adds an accuracy reward and a format reward; many RLVR recipes instead gate correctness on the
format (a right answer outside ``<answer>`` tags scores 0), which stops the policy from dropping the format
once it is correct. :class:`CombinedVerifier` does both, over any reward sources (verifiers, reward models,
anything with ``score_batch`` and ``name``), and :func:`format_and_correct` builds the usual pairing: the
format verifier, plus a correctness verifier scored on the text inside the answer block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from rewardkit.types import Record, Result
from rewardkit.verifiers.base import RewardSource, Verifier

COMBINE_MODES = ("sum", "gate", "product", "min")


def _resolve(source: Any, config: dict[str, Any] | None = None) -> Any:
    if isinstance(source, str):
        from rewardkit.verifiers import get_verifier

        return get_verifier(source, **(config or {}))
    if not hasattr(source, "score_batch"):
        raise TypeError(f"not a reward source (needs score_batch and name): {source!r}")
    return source


class CombinedVerifier(Verifier):
    """Several reward sources as one.

    Args:
        sources: Reward sources (instances, or registered verifier names), in order.
        weights: One weight per source (default 1 each).
        mode: ``sum`` (weighted sum, R1's accuracy + format), ``gate`` (the last source's reward, counted
            only when every earlier source scores 1: "format and correct"), ``product`` (weighted
            product of rewards: a soft gate) or ``min``.
        answer_from: Index of a :class:`FormatVerifier` among ``sources`` whose extracted answer replaces
            the completion for the other sources (None: every source sees the full completion).
        names: Labels of the sources in ``details`` (default: each source's ``name``).
    """

    name = "combined"

    def __init__(
        self,
        sources: Sequence[RewardSource | str],
        *,
        weights: Sequence[float] | None = None,
        mode: str = "sum",
        answer_from: int | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(weights=list(weights) if weights else None, mode=mode, answer_from=answer_from)
        if mode not in COMBINE_MODES:
            raise ValueError(f"mode must be one of {COMBINE_MODES}, got {mode!r}")
        self.sources = [_resolve(s) for s in sources]
        if not self.sources:
            raise ValueError("CombinedVerifier needs at least one source")
        self.weights = [float(w) for w in weights] if weights else [1.0] * len(self.sources)
        if len(self.weights) != len(self.sources):
            raise ValueError(f"{len(self.weights)} weights for {len(self.sources)} sources")
        self.mode = mode
        self.answer_from = answer_from
        self.names = (
            list(names) if names else [getattr(s, "name", f"source{i}") for i, s in enumerate(self.sources)]
        )

    def verify(self, record: Record) -> Result:
        return self.score_batch([record])[0]

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """Scores each source on the whole batch (so batched sources stay batched), then combines."""
        records = list(records)
        per_source: list[list[Result]] = [[] for _ in self.sources]
        answer_records = records
        if self.answer_from is not None:
            fmt = self.sources[self.answer_from]
            per_source[self.answer_from] = fmt.score_batch(records)
            answers = [fmt.extract_answer(r.completion_text) for r in records]
            answer_records = [
                dataclasses.replace(r, completion=a if a is not None else "")
                for r, a in zip(records, answers, strict=True)
            ]
        for i, source in enumerate(self.sources):
            if i == self.answer_from:
                continue
            try:
                per_source[i] = list(source.score_batch(answer_records))
            except Exception as exc:  # a broken source scores 0 with the reason, never crashes the run
                per_source[i] = [Result.failure(f"source error: {self.names[i]}: {exc}")] * len(records)
        return [self._combine([res[j] for res in per_source]) for j in range(len(records))]

    def _combine(self, results: list[Result]) -> Result:
        rewards = [float(r.reward) for r in results]
        if self.mode == "sum":
            reward = sum(w * r for w, r in zip(self.weights, rewards, strict=True))
        elif self.mode == "product":
            reward = 1.0
            for w, r in zip(self.weights, rewards, strict=True):
                reward *= r**w if r > 0 else 0.0
        elif self.mode == "min":
            reward = min(rewards)
        else:  # gate: every earlier source must be fully satisfied
            gates_open = all(r >= 1.0 for r in rewards[:-1])
            reward = self.weights[-1] * rewards[-1] if gates_open else 0.0
        details = {
            "mode": self.mode,
            "rewards": dict(zip(self.names, rewards, strict=True)),
            "components": {n: r.to_dict() for n, r in zip(self.names, results, strict=True)},
        }
        # The last (correctness) source's error is the interesting one; earlier ones are in components.
        error = next((r.error for r in reversed(results) if r.error), None)
        return Result(reward=reward, details=details, error=error)


def format_and_correct(
    correct: RewardSource | str,
    *,
    correct_config: dict[str, Any] | None = None,
    mode: str = "gate",
    format_weight: float = 1.0,
    correct_weight: float = 1.0,
    score_answer_only: bool = True,
    **format_config: Any,
) -> CombinedVerifier:
    """The R1 pairing: a :class:`FormatVerifier` and a correctness verifier.

    Args:
        correct: The correctness source (a verifier instance or a registered name such as ``"math"``).
        correct_config: Config for ``correct`` when it is a name.
        mode: ``gate`` (default: correct counts only with the right format), ``sum`` (``format_weight *
            format + correct_weight * correct``), ``product`` or ``min``.
        score_answer_only: The correctness verifier sees only the text inside the answer block.
        **format_config: Options of the format verifier (tags, strictness...).
    """
    from rewardkit.verifiers.format.verifier import FormatVerifier

    fmt = FormatVerifier(**format_config)
    source = _resolve(correct, correct_config)
    return CombinedVerifier(
        [fmt, source],
        weights=[format_weight, correct_weight],
        mode=mode,
        answer_from=0 if score_answer_only else None,
        names=["format", getattr(source, "name", "correct")],
    )
