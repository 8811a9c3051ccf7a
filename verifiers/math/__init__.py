"""Math answers: extraction (boxed, "the answer is", ``####``, last number, ``<answer>`` tags, strict)
and equivalence on top of math-verify and sympy; ``equivalent`` and ``group_answers`` for majority votes.
See ``docs/math.md``."""

from __future__ import annotations

from rewardlab.verifiers.math.answer import extract_answer, read_answer
from rewardlab.verifiers.math.extract import EXTRACTORS, MODES
from rewardlab.verifiers.math.grouping import equivalent, group_answers
from rewardlab.verifiers.math.normalize import normalize_answer, parse_number
from rewardlab.verifiers.math.verifier import MathConfig, MathVerifier

__all__ = [
    "EXTRACTORS",
    "MODES",
    "MathConfig",
    "MathVerifier",
    "equivalent",
    "extract_answer",
    "group_answers",
    "normalize_answer",
    "parse_number",
    "read_answer",
]
