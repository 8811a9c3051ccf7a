"""Combining reward sources: "format and correct" rewards of R1-style RL.

DeepSeek-R1 adds an accuracy reward and a format reward; many RLVR recipes instead gate correctness on the
format (a right answer outside ``<answer>`` tags scores 0), which stops the policy from dropping the format
once it is correct. :func:`format_and_correct` builds that pairing: the format verifier, plus a correctness
verifier scored on the text inside the answer block, combined by
:class:`rewardkit.verifiers.combine.CombinedSource` (``CombinedVerifier`` here is that type).
"""

from __future__ import annotations

from typing import Any

from rewardkit.verifiers.base import RewardSource
from rewardkit.verifiers.combine import COMBINE_MODES, CombinedSource, resolve_part

CombinedVerifier = CombinedSource
"""The combined-source type under its format-verifier name."""

__all__ = ["COMBINE_MODES", "CombinedVerifier", "format_and_correct"]


def format_and_correct(
    correct: RewardSource | str,
    *,
    correct_config: dict[str, Any] | None = None,
    mode: str = "gate",
    format_weight: float = 1.0,
    correct_weight: float = 1.0,
    score_answer_only: bool = True,
    **format_config: Any,
) -> CombinedSource:
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
    source = resolve_part(correct, correct_config)
    return CombinedSource(
        [fmt, source],
        weights=[format_weight, correct_weight],
        mode=mode,
        answer_from=0 if score_answer_only else None,
        names=["format", getattr(source, "name", "correct")],
    )
