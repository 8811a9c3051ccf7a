"""Several reward sources as one: the project's one combined-source type.

:class:`CombinedSource` scores a batch with every part (verifiers, reward models, Python reward functions,
anything with ``score_batch`` and ``name``) and combines each record's part rewards by a ``mode``:

* ``sum``: ``r = sum_k w_k r_k`` (R1's accuracy + format, a weighted mix of verifiers, the RL loop's
  ``reward.sources``);
* ``gate``: the last part's ``w_K r_K``, counted only when every earlier part scores 1 ("format and
  correct");
* ``product``: ``prod_k r_k^{w_k}`` (0 for ``r_k <= 0``: a soft gate);
* ``min``: ``min_k r_k``.

The missing-reward contract, in every mode: a part returning ``Result(reward=None)`` (or NaN) with no
error has no reward for that record, so the combined reward is ``None`` (an RL step excludes the sample);
a part's error is reward 0 (or the reward it reported) with the error kept. It is used by the offline
scorer (``rewardlab score``, ``format_and_correct``), by shaping (``WeightedSumSource`` is this type) and
by the RL loop (:class:`rewardlab.rl.rewards.RewardSources` reads its per-part results). It imports no
torch, so the format verifier's workers stay light.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.types import Record, Result, result_reward
from rewardlab.verifiers import get_source
from rewardlab.verifiers.base import Verifier

COMBINE_MODES = ("sum", "gate", "product", "min")


def resolve_part(source: Any, config: dict[str, Any] | None = None) -> Any:
    """A source name (a verifier or ``http:URL``, built with ``config``) or a reward source, checked for
    ``score_batch``."""
    if isinstance(source, str):
        return get_source(source, **(config or {}))
    if not callable(getattr(source, "score_batch", None)):
        raise TypeError(f"not a reward source (needs score_batch and name): {source!r}")
    return source


def combine_rewards(
    values: Sequence[Sequence[float | None]], weights: Sequence[float], mode: str
) -> list[float | None]:
    """Each record's combined reward from each part's rewards (``values[k][i]``: part ``k``, record ``i``;
    see the module docstring for the modes); ``None`` where any part's is missing."""
    if mode == "sum":
        # Part by part, in order, as a running sum: r_i = 0 + w_1 r_1i + w_2 r_2i + ...
        total: list[float | None] = [0.0] * (len(values[0]) if values else 0)
        for w, part in zip(weights, values, strict=True):
            total = [None if t is None or r is None else t + w * r for t, r in zip(total, part, strict=True)]
        return total
    return [_combine_one(column, weights, mode) for column in zip(*values, strict=True)]


def _combine_one(rewards: Sequence[float | None], weights: Sequence[float], mode: str) -> float | None:
    if None in rewards:
        return None
    if mode == "product":
        total = 1.0
        for w, r in zip(weights, rewards, strict=True):
            total *= r**w if r > 0 else 0.0
        return total
    if mode == "min":
        return min(rewards)
    # gate: every earlier part must be fully satisfied
    return weights[-1] * rewards[-1] if all(r >= 1.0 for r in rewards[:-1]) else 0.0


def _unique(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        while name in out:
            name += "_"
        out.append(name)
    return out


@dataclass
class PartScores:
    """One batch scored by every part of a :class:`CombinedSource`."""

    rewards: list[float | None]
    """The combined reward of each record (``None``: some part had no reward)."""
    results: dict[str, list[Result]]
    """Each part's results, by part name, as the part returned them."""
    values: dict[str, list[float | None]]
    """Each part's rewards as combined (:func:`rewardlab.types.result_reward`)."""


class CombinedSource(Verifier):
    """Several reward sources as one.

    Args:
        sources: The parts: a mapping ``name -> source`` or a sequence of sources; each is an instance with
            ``score_batch`` or a registered verifier name.
        weights: ``name -> weight`` (unnamed parts weigh 1) or one weight per part, in order.
        mode: ``sum``, ``gate``, ``product`` or ``min`` (see the module docstring).
        answer_from: Index of a format verifier among the parts whose extracted answer
            (``extract_answer``) replaces the completion for the other parts (``None``: every part sees the
            full completion).
        names: Labels of a sequence of parts (default: each part's ``name``; repeats get a ``_`` suffix).

    ``details`` of each result: ``mode``, ``rewards`` (each part's reward as combined) and ``components``
    (each part's ``reward``, ``weight``, ``error`` and ``details``). ``error``: the first failing part's, as
    ``"name: error"``. A part that raises scores every record as a ``source error``, never crashes the batch.
    """

    def __init__(
        self,
        sources: Mapping[str, Any] | Sequence[Any],
        weights: Mapping[str, float] | Sequence[float] | None = None,
        *,
        mode: str = "sum",
        answer_from: int | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(mode=mode, answer_from=answer_from)
        if mode not in COMBINE_MODES:
            raise ValueError(f"mode must be one of {COMBINE_MODES}, got {mode!r}")
        if not sources:
            raise ValueError("a combined source needs at least one source")
        if isinstance(sources, Mapping):
            self.names = list(sources)
            self.sources = [resolve_part(s) for s in sources.values()]
        else:
            self.sources = [resolve_part(s) for s in sources]
            default = [getattr(s, "name", f"source{i}") for i, s in enumerate(self.sources)]
            self.names = _unique(list(names) if names else default)
        self.weights = self._weights(weights)
        self.mode = mode
        self.answer_from = answer_from
        self.config.update(weights=list(self.weights), names=list(self.names))
        self.name = self._describe()

    def _weights(self, weights: Mapping[str, float] | Sequence[float] | None) -> list[float]:
        if isinstance(weights, Mapping):
            unknown = set(weights) - set(self.names)
            if unknown:
                raise ValueError(f"weights for unknown sources {sorted(unknown)}")
            return [float(weights.get(name, 1.0)) for name in self.names]
        out = [float(w) for w in weights] if weights else [1.0] * len(self.sources)
        if len(out) != len(self.sources):
            raise ValueError(f"{len(out)} weights for {len(self.sources)} sources")
        return out

    def _describe(self) -> str:
        if self.mode == "sum":
            return "+".join(f"{w:g}*{n}" for n, w in zip(self.names, self.weights, strict=True))
        return f"{self.mode}({','.join(self.names)})"

    @property
    def runs_in_process(self) -> bool:  # type: ignore[override]
        """In the scoring engine's process when any part must be (a reward model); else in its worker pool
        (rule verifiers, with per-item timeouts)."""
        return any(getattr(src, "runs_in_process", not isinstance(src, Verifier)) for src in self.sources)

    def verify(self, record: Record) -> Result:
        return self.score_batch([record])[0]

    def score_parts(self, records: Sequence[Record]) -> PartScores:
        """Scores each part on the whole batch (batched parts stay batched) and combines per record."""
        records = list(records)
        results: list[list[Result]] = [[] for _ in self.sources]
        answer_records = records
        if self.answer_from is not None:
            results[self.answer_from] = self._score(self.answer_from, records)
            answer_records = self._answer_records(records)
        for k in range(len(self.sources)):
            if k != self.answer_from:
                results[k] = self._score(k, answer_records)
        values = [[result_reward(res) for res in part] for part in results]
        combined = combine_rewards(values, self.weights, self.mode)
        return PartScores(
            combined, dict(zip(self.names, results, strict=True)), dict(zip(self.names, values, strict=True))
        )

    def _answer_records(self, records: list[Record]) -> list[Record]:
        """The records with the completion replaced by the answer the ``answer_from`` part extracts."""
        fmt = self.sources[self.answer_from]
        out = []
        for record in records:
            answer = fmt.extract_answer(record.completion_text)
            out.append(dataclasses.replace(record, completion=answer if answer is not None else ""))
        return out

    def _score(self, k: int, records: list[Record]) -> list[Result]:
        try:
            out = list(self.sources[k].score_batch(records))
            if len(out) != len(records):
                raise ValueError(f"returned {len(out)} results for {len(records)} records")
            return out
        except Exception as exc:  # a broken part scores 0 with the reason, never crashes the run
            return [Result.failure(f"source error: {self.names[k]}: {exc}") for _ in records]

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        scores = self.score_parts(records)
        return [self._result(scores, i) for i in range(len(scores.rewards))]

    def _result(self, scores: PartScores, i: int) -> Result:
        components: dict[str, Any] = {}
        error = None
        for name, weight in zip(self.names, self.weights, strict=True):
            res = scores.results[name][i]
            components[name] = {
                "reward": res.reward,
                "weight": weight,
                "error": res.error,
                "details": res.details,
            }
            if res.error is not None and error is None:
                error = f"{name}: {res.error}"
        rewards = {name: scores.values[name][i] for name in self.names}
        details = {"mode": self.mode, "rewards": rewards, "components": components}
        return Result(reward=scores.rewards[i], details=details, error=error)

    def close(self) -> None:
        """Closes the parts that hold resources (scoring pools, engines)."""
        for source in self.sources:
            with contextlib.suppress(Exception):
                if callable(getattr(source, "close", None)):
                    source.close()
