"""SQuAD v1.1's answer normalisation and its metrics (exact match, token F1), plus DPR's has-answer.

The default normalisation is the official SQuAD v1.1 evaluation script's ``normalize_answer``, step for step:
lower case, drop every character of ``string.punctuation`` (ASCII only), replace the words ``a``/``an``/
``the`` with a space, and join ``str.split()``'s tokens with one space (``str.split`` splits on every Unicode
space: U+00A0, U+2009, U+3000 ...). ``tests/test_qa_references.py`` checks identical figures to the script
on every NQ-open row we build. The figures are floats computed in the script's order, so they are equal to
the bit, not merely close.

``unicode`` normalisation is a deliberate, opt-in departure: NFKC first, ``casefold`` for ``lower``, and
every Unicode punctuation character (categories ``P*``) removed along with ASCII's, so curly quotes, dashes
and full-width letters written by a model match a gold written with ASCII ones.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

NORMALIZATIONS = ("squad", "unicode")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ASCII_PUNCTUATION_SET = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's ``normalize_answer``: lower, remove ASCII punctuation, remove articles, fix spaces."""
    text = text.lower().translate(_ASCII_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def normalize_unicode(text: str) -> str:
    """``normalize_answer`` after NFKC, with ``casefold`` and all Unicode punctuation removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(
        ch for ch in text if ch not in _ASCII_PUNCTUATION_SET and not unicodedata.category(ch).startswith("P")
    )
    return " ".join(_ARTICLES.sub(" ", text).split())


def normalizer(name: str) -> Callable[[str], str]:
    """The normalisation function called ``name`` (:data:`NORMALIZATIONS`)."""
    if name == "squad":
        return normalize_answer
    if name == "unicode":
        return normalize_unicode
    raise ValueError(f"normalization must be one of {', '.join(NORMALIZATIONS)}, got {name!r}")


def token_f1(prediction_tokens: Sequence[str], gold_tokens: Sequence[str]) -> float:
    """SQuAD's token F1 of two normalised token lists (multiset overlap; 0 when nothing is shared)."""
    if not prediction_tokens or set(prediction_tokens).isdisjoint(gold_tokens):
        return 0.0  # nothing shared: the script's num_same == 0 (the Counters would cost most of the time)
    common = Counter(prediction_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def contains_tokens(prediction_tokens: Sequence[str], gold_tokens: Sequence[str]) -> bool:
    """DPR's has-answer: the gold's token sequence occurs contiguously in the prediction's. An empty gold
    occurs nowhere (it would match every answer)."""
    n = len(gold_tokens)
    if n == 0:
        return False
    first = gold_tokens[0]
    return any(
        prediction_tokens[i] == first and list(prediction_tokens[i : i + n]) == list(gold_tokens)
        for i in range(len(prediction_tokens) - n + 1)
    )


@lru_cache(maxsize=65536)
def _cached(normalization: str, text: str) -> str:
    return normalizer(normalization)(text)


def normalized(text: str, normalization: str = "squad") -> str:
    """``text`` normalised, cached (gold aliases repeat across an RL group's samples)."""
    return _cached(normalization, text)


def exact_match(prediction: str, gold: str, normalization: str = "squad") -> bool:
    """SQuAD's ``exact_match_score``: equal after normalisation."""
    return normalized(prediction, normalization) == normalized(gold, normalization)


def f1_score(prediction: str, gold: str, normalization: str = "squad") -> float:
    """SQuAD's ``f1_score``: token F1 after normalisation."""
    return token_f1(normalized(prediction, normalization).split(), normalized(gold, normalization).split())


def has_answer(prediction: str, gold: str, normalization: str = "squad") -> bool:
    """DPR's has-answer on normalised tokens: the gold's tokens occur in the prediction's, in order."""
    return contains_tokens(
        normalized(prediction, normalization).split(), normalized(gold, normalization).split()
    )
