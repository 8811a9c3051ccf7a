"""open-r1's shaping rewards as reward sources: ``repetition_penalty`` and ``cosine_length``.

The formulas are :mod:`.formulas`, which the shaping transforms of the same names
(``rewardlab.rewardmodels.shaping``, a floor above) call too. These are for where a reward *source* is
wanted: an RL run's ``reward.sources`` (``{name: repetition_penalty, weight: 1}`` beside ``math``, as
open-r1 lists its reward functions), ``rewardlab score --verifier cosine_length``, a combined source's part. Both are verifiers (registered by name in ``rewardlab.verifiers``), so they never raise and
run in the scoring engine's workers.

* ``repetition_penalty`` reads only the completion: ``max_penalty * (1 - distinct n-grams / n-grams)``.
* ``cosine_length`` scores correctness with another verifier (``correct``, ``math`` by default, as open-r1
  checks with math-verify), then gives the cosine length-scaled value of that verdict. Length is in
  characters, as open-r1 counts it (``len(content)``), or in tokens of ``tokenizer`` when one is named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import Record, Result, as_reward
from rewardlab.verifiers import get_source
from rewardlab.verifiers.base import Verifier, verifier_error

from . import formulas as F


def _config(cls: type, name: str, config: dict[str, Any]) -> Any:
    """``cls(**config)``, with unknown keys named in a one-line error."""
    unknown = sorted(set(config) - set(cls.__dataclass_fields__))
    if unknown:
        raise ValueError(f"unknown {name} option(s) {unknown} (known: {sorted(cls.__dataclass_fields__)})")
    return cls(**config)


@dataclass
class RepetitionConfig:
    """Settings of ``repetition_penalty``; the defaults are open-r1's recipes' (``repetition_n_grams: 3``,
    ``repetition_max_penalty: -1.0``)."""

    ngram_size: int = 3
    """Length of the n-grams counted."""
    max_penalty: float = -1.0
    """The penalty of a completion made of one repeated n-gram (<= 0)."""
    unit: str = "words"
    """Tokens of the n-grams: ``words`` (open-r1's ``language="en"``: lower case, split on whitespace),
    ``chars`` (every non-space character) or ``mixed`` (words, each character of a script written without
    spaces, such as Chinese or Thai, its own word): see ``formulas.REPETITION_UNITS``."""

    def __post_init__(self) -> None:
        F.check_repetition_settings(self.ngram_size, self.max_penalty, self.unit)


class RepetitionPenaltySource(Verifier):
    """open-r1's n-gram repetition penalty of each completion (0 for none, down to ``max_penalty``)."""

    name = "repetition_penalty"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.cfg = _config(RepetitionConfig, self.name, config)

    def verify(self, record: Record) -> Result:
        cfg = self.cfg
        tokens = F.repetition_tokens(record.completion_text, cfg.unit)
        penalty = F.ngram_repetition_penalty(tokens, cfg.ngram_size, cfg.max_penalty)
        return Result(reward=penalty, details={"penalty": penalty, "tokens": len(tokens), "unit": cfg.unit})


@dataclass
class CosineConfig:
    """Settings of ``cosine_length``; the defaults are open-r1's ``get_cosine_scaled_reward``."""

    correct: str = "math"
    """The verifier that says whether the answer is right (any registered verifier or ``http:`` source)."""
    correct_config: dict[str, Any] = field(default_factory=dict)
    """Settings of the ``correct`` verifier."""
    correct_threshold: float = 1.0
    """A ``correct`` reward at or above this is a right answer."""
    max_len: int = 1000
    """The length at which the cosine reaches its end values."""
    min_value_wrong: float = -1.0
    """A wrong answer's reward at length 0."""
    max_value_wrong: float = -0.5
    """A wrong answer's reward at ``max_len``."""
    min_value_correct: float = 0.5
    """A right answer's reward at ``max_len``."""
    max_value_correct: float = 1.0
    """A right answer's reward at length 0."""
    exceed: float | None = None
    """The reward of any completion longer than ``max_len`` (Yeo et al.'s ``r_e``, -10 in the paper);
    ``None``: open-r1's formula, whose cosine goes on past ``max_len``."""
    tokenizer: str | None = None
    """Count lengths in this tokenizer's tokens (a hub name or local path); ``None``: characters."""

    def __post_init__(self) -> None:
        if self.max_len <= 0:
            raise ValueError(f"max_len must be > 0, got {self.max_len}")


class CosineLengthSource(Verifier):
    """open-r1's cosine length-scaled reward of the ``correct`` verifier's verdict."""

    name = "cosine_length"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.cfg = _config(CosineConfig, self.name, config)
        self._correct = get_source(self.cfg.correct, **self.cfg.correct_config)
        self._tokenizer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])

    def _length(self, text: str) -> int:
        if self.cfg.tokenizer is None:
            return len(text)
        if self._tokenizer is None:
            # lazy: transformers is heavy and only needed when lengths are in tokens
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.cfg.tokenizer)
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        verdicts = self._correct.score_batch(list(records))
        return [
            self._shaped_or_failure(record, verdict)
            for record, verdict in zip(records, verdicts, strict=True)
        ]

    def verify(self, record: Record) -> Result:
        return self.score_batch([record])[0]

    def _shaped_or_failure(self, record: Record, verdict: Result) -> Result:
        try:
            return self._shaped(record, verdict)
        except Exception as exc:  # a source never raises on a completion (a tokenizer that fails to load)
            return verifier_error(exc)

    def _shaped(self, record: Record, verdict: Result) -> Result:
        raw = as_reward(verdict.reward)
        if verdict.error is not None or raw is None:
            return verdict
        cfg = self.cfg
        correct = raw >= cfg.correct_threshold
        length = self._length(record.completion_text)
        reward = F.cosine_length_value(
            length,
            correct,
            cfg.max_len,
            min_value_correct=cfg.min_value_correct,
            max_value_correct=cfg.max_value_correct,
            min_value_wrong=cfg.min_value_wrong,
            max_value_wrong=cfg.max_value_wrong,
            exceed=cfg.exceed,
        )
        inner = verdict.details or {}
        details = {
            "correct": correct,
            "length": length,
            "unit": "tokens" if cfg.tokenizer else "chars",
            "correct_reward": raw,
            "correctness": inner,
            **{k: inner[k] for k in ("extracted", "extracted_span") if k in inner},
        }
        return Result(reward=reward, details=details)


__all__ = ["CosineConfig", "CosineLengthSource", "RepetitionConfig", "RepetitionPenaltySource"]
