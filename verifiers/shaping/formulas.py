"""open-r1's shaping formulas in plain Python: the n-gram repetition penalty and the cosine length scaling.

The one home of both formulas. The reward sources of the same names (:mod:`.verifier`), the shaping
transforms (``rewardlab.rewardmodels.shaping``, whose tensor ``cosine_length_reward`` is these values in a
float64 tensor) and the torch-free ``rewardlab score --shape`` path all call these functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

REPETITION_UNITS = ("words", "chars", "mixed")
"""How :func:`repetition_tokens` splits a text: ``words`` is open-r1's ``language="en"`` (lower case, split
on whitespace), ``chars`` every non-space character (scripts written without spaces, with no segmenter to
install), ``mixed`` words, with each character of a script written without spaces a word of its own."""

_UNSPACED_SCRIPTS = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0002fa1f]"
)
"""Thai, Lao, Myanmar, Khmer, kana and CJK ideographs: scripts that do not separate words by spaces."""


def repetition_tokens(text: str, unit: str = "words") -> list[str]:
    """The tokens of ``text`` whose n-grams :func:`ngram_repetition_penalty` counts (see
    :data:`REPETITION_UNITS`)."""
    if unit == "words":
        return text.lower().split()
    if unit == "chars":
        return [c for c in text.lower() if not c.isspace()]
    if unit == "mixed":
        return _UNSPACED_SCRIPTS.sub(lambda m: f" {m.group(0)} ", text.lower()).split()
    raise ValueError(f"unknown repetition unit {unit!r} (known: {', '.join(REPETITION_UNITS)})")


def check_repetition_settings(ngram_size: int, max_penalty: float, unit: str = "words") -> None:
    """Raises ``ValueError`` for settings open-r1 refuses (a positive penalty) or that mean nothing."""
    if max_penalty > 0:
        raise ValueError(f"max_penalty must not be positive, got {max_penalty}")
    if ngram_size < 1:
        raise ValueError(f"ngram_size must be at least 1, got {ngram_size}")
    if unit not in REPETITION_UNITS:
        raise ValueError(f"unknown repetition unit {unit!r} (known: {', '.join(REPETITION_UNITS)})")


def ngram_repetition_penalty(tokens: Sequence[Any], ngram_size: int, max_penalty: float) -> float:
    """open-r1's ``get_repetition_penalty_reward`` (after Yeo et al., 2025, Appendix C.2):
    ``max_penalty * (1 - distinct n-grams / n-grams)``, 0 for fewer than ``ngram_size`` tokens.
    ``max_penalty <= 0``; ``tokens`` from :func:`repetition_tokens` (or token ids)."""
    check_repetition_settings(ngram_size, max_penalty)
    total = len(tokens) - ngram_size + 1
    if total <= 0:
        return 0.0
    distinct = {tuple(tokens[i : i + ngram_size]) for i in range(total)}
    return (1 - len(distinct) / total) * max_penalty


def cosine_length_value(
    length: float,
    correct: bool,
    max_len: float,
    *,
    min_value_correct: float = 0.5,
    max_value_correct: float = 1.0,
    min_value_wrong: float = -1.0,
    max_value_wrong: float = -0.5,
    exceed: float | None = None,
) -> float:
    """Cosine length-scaled reward of one sample: open-r1's ``get_cosine_scaled_reward``
    (``src/open_r1/rewards.py``), after Yeo et al., 2025 ("Demystifying Long Chain-of-Thought Reasoning").

    ``reward = lo + 0.5 * (hi - lo) * (1 + cos(pi * len / max_len))`` moves from ``hi`` at length 0 to
    ``lo`` at ``max_len``: a correct sample goes from ``max_value_correct`` down to ``min_value_correct``
    (short correct > long correct), a wrong one from ``min_value_wrong`` up to ``max_value_wrong`` (long
    wrong > short wrong: keep thinking when unsure). Defaults are open-r1's. ``exceed=None`` is open-r1's
    formula as written, whose cosine goes on past ``max_len`` (it turns back up); a number is Yeo et al.'s
    ``r_e``, given to every sample longer than ``max_len``. Yeo et al.'s values: ``max_len=4096``, correct
    2 -> 1, wrong -10 -> 0, ``exceed=-10``. In float64 (``math.cos``, as open-r1 computes it); this
    *replaces* the correctness reward.
    """
    length = float(length)
    if exceed is not None and length > max_len:
        return float(exceed)
    hi, lo = (max_value_correct, min_value_correct) if correct else (min_value_wrong, max_value_wrong)
    hi, lo = float(hi), float(lo)
    cosine = math.cos(math.pi * (length / max_len))
    return lo + 0.5 * (hi - lo) * (1.0 + cosine)


__all__ = [
    "REPETITION_UNITS",
    "check_repetition_settings",
    "cosine_length_value",
    "ngram_repetition_penalty",
    "repetition_tokens",
]
