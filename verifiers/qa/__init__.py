"""Short-answer QA verifier (``get_verifier("qa")``): SQuAD v1.1's exact match and token F1, DPR's has-answer.

The answer reader (:func:`read_answer`) is public: search agents in Search-R1's format reuse it.
"""

from rewardlab.verifiers.qa.answer import AnswerReading, Candidate, read_answer
from rewardlab.verifiers.qa.normalize import (
    exact_match,
    f1_score,
    has_answer,
    normalize_answer,
    normalize_unicode,
)
from rewardlab.verifiers.qa.verifier import QAConfig, QAVerifier, gold_aliases

__all__ = [
    "AnswerReading",
    "Candidate",
    "QAConfig",
    "QAVerifier",
    "exact_match",
    "f1_score",
    "gold_aliases",
    "has_answer",
    "normalize_answer",
    "normalize_unicode",
    "read_answer",
]
