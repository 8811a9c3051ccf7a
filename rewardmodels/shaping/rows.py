"""Row-level shaping transforms: each sample's shaped reward from that sample's row alone, in plain Python.

A :class:`RowShaping` declares one per-row function, :meth:`RowShaping.shape_row`. Applied to a tensor
:class:`~.pipeline.ShapingBatch` (an RL run, ``pipeline(batch)``) it reads the batch as rows and writes the
values back; :func:`.results.shape_results` calls the same function on scored rows without building a
batch, so a pipeline made only of row-level transforms (``rewardlab score --shape repetition_penalty``)
needs no torch, and both paths give the same bits: rewards are kept in float32 between steps, as the
batch keeps them (:func:`to_float32`).

Row-level: ``repetition_penalty`` and ``cosine_length`` (open-r1's formulas, plain Python in
:mod:`rewardlab.verifiers.shaping.formulas`). ``clamp``, ``scale`` and ``binarize`` are not: they also act on
per-step rewards and components, and ``scale`` and ``binarize`` compute in the batch's float32.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rewardlab.verifiers.shaping.formulas import (
    check_repetition_settings,
    cosine_length_value,
    ngram_repetition_penalty,
    repetition_tokens,
)

from .specs import Shaping, register

if TYPE_CHECKING:
    from .pipeline import ShapingBatch


def to_float32(value: float) -> float:
    """``value`` rounded to the nearest float32 (overflowing to +-inf), as a Python float: what a value
    becomes in a float32 tensor."""
    return ctypes.c_float(value).value


@dataclass(frozen=True)
class ShapingRow:
    """One sample as a row-level transform reads it.

    Attributes:
        reward: The current reward, a float32 value (a :class:`~.pipeline.ShapingBatch` keeps its rewards in
            float32).
        text: The completion text (``repetition_penalty`` reads it), or ``None``.
        length: The completion length (tokens, or characters when no tokenizer), or ``None``.
        correct: Whether the answer is right, when the reward source said so; ``None``: transforms that need
            it threshold the reward (:meth:`correct_or`).
    """

    reward: float
    text: str | None = None
    length: float | None = None
    correct: bool | None = None

    def correct_or(self, threshold: float) -> bool:
        """``correct``, else ``reward >= threshold`` compared as torch compares a float32 reward with a Python
        number: the threshold rounded to float32 (``ShapingBatch.correct_or`` on a batch)."""
        if self.correct is not None:
            return self.correct
        return self.reward >= to_float32(threshold)


class RowShaping(Shaping):
    """Base class of row-level transforms: :meth:`shape_row` gives one sample's new reward from its row.

    ``reads`` names the :class:`~.pipeline.ShapingBatch` fields the transform needs besides the rewards
    (``texts``, ``lengths``); a batch without one of them is refused, naming it.
    """

    row_level: ClassVar[bool] = True
    reads: ClassVar[tuple[str, ...]] = ()

    def shape_row(self, row: ShapingRow) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        rows = batch.rows(self.reads, self.name)
        return batch.with_rewards([self.shape_row(row) for row in rows])


def shape_row(transforms: Sequence[Shaping], row: ShapingRow) -> float:
    """``row``'s reward after the row-level ``transforms`` in turn, kept in float32 after each as a
    :class:`~.pipeline.ShapingBatch` keeps it: the same value the tensor pipeline gives that sample."""
    for transform in transforms:
        if not isinstance(transform, RowShaping):
            raise TypeError(f"shaping transform {transform.name!r} is not row-level")
        row = dataclasses.replace(row, reward=to_float32(transform.shape_row(row)))
    return row.reward


@register("cosine_length")
@dataclass
class CosineLength(RowShaping):
    """open-r1's cosine length-scaled reward (``get_cosine_scaled_reward``; Yeo et al., 2025), replacing the
    reward: correct from ``max_value_correct`` at length 0 down to ``min_value_correct`` at ``max_len``, wrong
    from ``min_value_wrong`` up to ``max_value_wrong``; ``exceed`` (a number) past ``max_len``, ``None``:
    open-r1's cosine continues. Lengths are the batch's (characters in ``rewardlab score`` as open-r1 counts
    them, tokens in an RL run). Correct = ``batch.correct`` or ``r >= correct_threshold``."""

    renamed: ClassVar[dict[str, str]] = {
        "correct_at_zero": "max_value_correct",
        "correct_at_max": "min_value_correct",
        "wrong_at_zero": "min_value_wrong",
        "wrong_at_max": "max_value_wrong",
    }
    reads: ClassVar[tuple[str, ...]] = ("lengths",)
    max_len: int = 1000
    min_value_wrong: float = -1.0
    max_value_wrong: float = -0.5
    min_value_correct: float = 0.5
    max_value_correct: float = 1.0
    exceed: float | None = None
    correct_threshold: float = 0.5

    def __post_init__(self) -> None:
        if self.max_len <= 0:
            raise ValueError(f"cosine_length needs max_len > 0, got {self.max_len}")

    def shape_row(self, row: ShapingRow) -> float:
        return cosine_length_value(
            row.length,
            row.correct_or(self.correct_threshold),
            self.max_len,
            min_value_correct=self.min_value_correct,
            max_value_correct=self.max_value_correct,
            min_value_wrong=self.min_value_wrong,
            max_value_wrong=self.max_value_wrong,
            exceed=self.exceed,
        )


@register("repetition_penalty")
@dataclass
class RepetitionPenalty(RowShaping):
    """open-r1's n-gram repetition penalty (``get_repetition_penalty_reward``; Yeo et al., 2025, App. C.2)
    added to the reward: ``weight * max_penalty * (1 - distinct n-grams / n-grams)`` of each completion's
    text, split by ``unit`` (``words``: open-r1's, lower case and whitespace; ``chars``; ``mixed``: see
    :data:`rewardlab.verifiers.shaping.formulas.REPETITION_UNITS`)."""

    reads: ClassVar[tuple[str, ...]] = ("texts",)
    ngram_size: int = 3
    max_penalty: float = -1.0
    unit: str = "words"
    weight: float = 1.0

    def __post_init__(self) -> None:
        check_repetition_settings(self.ngram_size, self.max_penalty, self.unit)

    def shape_row(self, row: ShapingRow) -> float:
        tokens = repetition_tokens(row.text, self.unit)
        return row.reward + self.weight * ngram_repetition_penalty(tokens, self.ngram_size, self.max_penalty)


__all__ = ["CosineLength", "RepetitionPenalty", "RowShaping", "ShapingRow", "shape_row", "to_float32"]
