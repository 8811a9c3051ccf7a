"""Math answers grouped for majority voting (``rewardlab eval``'s maj@k): :func:`equivalent`, one way, and
:func:`group_answers`, classes of equivalent answers.

``equivalent(a, b)`` is the math verifier's verdict on answer ``b`` against gold ``a`` (default settings):
its decision policy applies, so it is not symmetric where the policy is not. ``50`` against gold ``50\\%``
is accepted, while ``50\\%`` against gold ``50`` counts only as 0.5: ``equivalent("50\\%", "50")`` holds,
``equivalent("50", "50\\%")`` does not (math-verify's own ``verify`` accepts both). :func:`group_answers`
compares each new answer, as ``b``, with the first answer of each class, as ``a``.

TTRL's vote (:func:`rewardlab.rl.label_free.math_equivalent`, a floor above) asks for the verdict both
ways instead, so that a vote does not depend on which answer was sampled first, and keys no numbers by
value: ``50\\%`` and ``50`` are two answers there. Eval keeps the rule its maj@k figures were computed
with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import math_verify

from rewardlab.types import Record
from rewardlab.verifiers.math.normalize import normalize_answer, parse_number
from rewardlab.verifiers.math.verifier import MathVerifier

Equivalence = Callable[[str, str], bool]

_CACHE_SIZE = 100_000
_PAIR_CACHE: dict[tuple[Any, str, str], bool] = {}
_VALUE_CACHE: dict[str, complex | None] = {}


@functools.lru_cache(maxsize=1)
def _verifier() -> MathVerifier:
    return MathVerifier()


def equivalent(a: str, b: str) -> bool:
    """Whether answer ``b`` is the same mathematical object as gold answer ``a``: the math verifier's
    verdict on ``\\boxed{b}`` with reference ``a`` (one way: see the module docstring). Never raises."""
    if a == b:
        return True
    result = _verifier().score(Record(completion=f"\\boxed{{{b}}}", reference=a))
    return result.error is None and result.reward >= 1.0


def group_answers(answers: Sequence[str | None], equivalence: Equivalence | None = None) -> list[int | None]:
    """Equivalence classes of extracted answers, ids in order of first appearance (deterministic).

    Answers are first keyed cheaply: plain numbers by value (rounded to 6 decimals, as the math verifier
    compares decimals; a percent sign aside, so ``50\\%`` and ``50`` are one class), anything else by its normalised string. A new non-numeric key is then compared
    with the existing classes: pairs whose numeric values (when both evaluate to numbers) clearly differ
    are told apart at once, the rest by ``equivalence(first answer of the class, new answer)``
    (:func:`equivalent` by default, cached per pair), so 100 samples cost a handful of symbolic checks.
    """
    same = equivalence or equivalent
    representatives: list[tuple[str, complex | None]] = []
    class_of: dict[Any, int] = {}
    class_of_raw: dict[str, int] = {}
    out: list[int | None] = []
    for answer in answers:
        if answer is None:
            out.append(None)
            continue
        if answer not in class_of_raw:
            class_of_raw[answer] = _class_of(answer, same, representatives, class_of)
        out.append(class_of_raw[answer])
    return out


def _class_of(
    answer: str,
    same: Equivalence,
    representatives: list[tuple[str, complex | None]],
    class_of: dict[Any, int],
) -> int:
    """The class of one answer not seen before as written, a new class when it matches none."""
    normalized = normalize_answer(answer)
    number = parse_number(normalized)
    key: Any = ("number", round(number.value, 6)) if number is not None else ("text", normalized)
    if key in class_of:
        return class_of[key]
    match = None
    if number is None:
        value = _numeric_value(normalized)
        for cls, (rep, rep_value) in enumerate(representatives):
            if not _clearly_different(value, rep_value) and _cached_equivalent(same, rep, normalized):
                match = cls
                break
    if match is None:
        match = len(representatives)
        value = complex(float(number.value)) if number is not None else _numeric_value(normalized)
        representatives.append((normalized, value))
    class_of[key] = match
    return match


def _cached_equivalent(same: Equivalence, a: str, b: str) -> bool:
    key = (same, a, b)
    if key not in _PAIR_CACHE:
        if len(_PAIR_CACHE) > _CACHE_SIZE:
            _PAIR_CACHE.clear()
        _PAIR_CACHE[key] = bool(same(a, b))
    return _PAIR_CACHE[key]


def _numeric_value(text: str) -> complex | None:
    """The value of a closed-form answer (``\\sqrt{2}``, ``2\\pi``) when it is a number, else None."""
    if text in _VALUE_CACHE:
        return _VALUE_CACHE[text]
    value = None
    try:
        parsed = math_verify.parse(f"${text}$", parsing_timeout=None)
        if parsed and getattr(parsed[0], "is_number", False):
            value = complex(parsed[0].evalf())
    except Exception:
        value = None
    if len(_VALUE_CACHE) > _CACHE_SIZE:
        _VALUE_CACHE.clear()
    _VALUE_CACHE[text] = value
    return value


def _clearly_different(a: complex | None, b: complex | None) -> bool:
    if a is None or b is None:
        return False
    return abs(a - b) > 1e-4 * max(1.0, abs(a), abs(b))
