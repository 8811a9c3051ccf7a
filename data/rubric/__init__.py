"""Number facts with a rubric per prompt: the task of the rubric-reward demo (``rewardlab.demos.rubric``).

A prompt asks about a three-digit number, ``"Describe 473:"``. A good answer states the number's parity and
gives the numbers after and before it and the number rounded to the nearest ten, in that order:
``"odd, next 474, prev 472, round 470"``
(:func:`reference_answer`). Each prompt carries its own rubric in the form of Rubrics as Rewards (RaR; Gunjal
et al., 2025): a list of ``{"criterion", "weight", "category"}``, with the weights of RaR's rubric-generation
prompt (Essential 5, Important 3, Optional 1, Pitfall -2):

============================================  ==========  ======
criterion (for 473)                           category    weight
============================================  ==========  ======
States that 473 is odd.                       essential      5
Gives the number after 473 (474).             important      3
Gives the number before 473 (472).            important      3
Gives 473 rounded to the nearest ten (470).   optional       1
Claims that 473 is even.                      pitfall       -2
============================================  ==========  ======

Every criterion is one of a few templated forms whose text holds all a judge needs (the number and the
expected value), so a scripted judge (``rewardlab.demos.scripted_judge``) decides each from the criterion's
text and the response alone, as an LLM judge would.

The warm start imitates answers that meet a random part of the rubric (:func:`warm_start_answer`): the
parity, then each further fact with its chance in :data:`CONTINUE` (the first left out ends the answer), and
a misconception: numbers ending in a digit of :data:`MISCONCEIVED_DIGITS` are called by the wrong parity most
of the time (others rarely). So a warm-started model answers greedily with the parity only, and wrongly for
those numbers: room for RL to improve on every criterion.

The held-out numbers (:func:`heldout_numbers`) are fixed, by a hash of each number rather than a seeded draw
(the same on every Python), and :func:`generate` never draws one.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

LOW, HIGH = 100, 999
"""The numbers asked about: every three-digit number."""
HELDOUT_SIZE = 100
"""Numbers held out for evaluation (of the 900)."""
CONTINUE = (0.3, 0.85, 0.85)
"""Chances that a warm-start answer goes on, after the parity, to the next number, then to the previous one,
then to the rounded one (the first fact left out ends it). The first is under one half, so a warm-started
model answering greedily stops after the parity; the others are high, so each fact is in enough
demonstrations (30%, 26%, 22%) to be learned."""
MISCONCEIVED_DIGITS = (5,)
"""Last digits of the numbers a warm-start answer usually calls by the wrong parity."""
WRONG_PARITY = {"misconceived": 0.7, "other": 0.1}
"""Chance that a warm-start answer states the wrong parity: for a misconceived number, for any other."""

WEIGHTS = {"essential": 5.0, "important": 3.0, "optional": 1.0, "pitfall": -2.0}
"""RaR's rubric-generation weights by category (Essential 5, Important 3-4, Optional 1-2, Pitfall -1 or -2)."""
SEPARATOR = ", "


def prompt_text(n: int) -> str:
    """The question about ``n``."""
    return f"Describe {n}:"


def parity(n: int) -> str:
    return "odd" if n % 2 else "even"


def other_parity(n: int) -> str:
    return "even" if n % 2 else "odd"


def rounded(n: int) -> int:
    """``n`` rounded to the nearest ten, halves up (``475`` -> ``480``)."""
    return (n + 5) // 10 * 10


def rubric(n: int) -> list[dict[str, Any]]:
    """The rubric of the question about ``n`` (RaR's form; the judge reads only ``criterion``)."""
    items = [
        ("essential", f"States that {n} is {parity(n)}."),
        ("important", f"Gives the number after {n} ({n + 1})."),
        ("important", f"Gives the number before {n} ({n - 1})."),
        ("optional", f"Gives {n} rounded to the nearest ten ({rounded(n)})."),
        ("pitfall", f"Claims that {n} is {other_parity(n)}."),
    ]
    return [{"criterion": text, "weight": WEIGHTS[cat], "category": cat} for cat, text in items]


def clauses(n: int) -> list[str]:
    """The facts of a full answer about ``n``, in the order an answer gives them."""
    return [parity(n), f"next {n + 1}", f"prev {n - 1}", f"round {rounded(n)}"]


def reference_answer(n: int) -> str:
    """An answer that meets every criterion of ``rubric(n)`` and makes no pitfall."""
    return SEPARATOR.join(clauses(n))


def warm_start_answer(n: int, rng: random.Random) -> str:
    """A warm-start demonstration: the parity (wrong with :data:`WRONG_PARITY`'s chance), then each further
    fact with its chance in :data:`CONTINUE`, up to the first one left out."""
    misconceived = n % 10 in MISCONCEIVED_DIGITS
    wrong = rng.random() < WRONG_PARITY["misconceived" if misconceived else "other"]
    parts = [other_parity(n) if wrong else parity(n)]
    for fact, chance in zip(clauses(n)[1:], CONTINUE, strict=True):
        if rng.random() >= chance:
            break
        parts.append(fact)
    return SEPARATOR.join(parts)


def _heldout_rank(n: int) -> bytes:
    return hashlib.sha256(f"rewardlab-rubric-heldout-{n}".encode()).digest()


def heldout_numbers() -> list[int]:
    """The :data:`HELDOUT_SIZE` held-out numbers, ascending: the first by a hash of each number (fixed)."""
    return sorted(sorted(range(LOW, HIGH + 1), key=_heldout_rank)[:HELDOUT_SIZE])


def training_numbers() -> list[int]:
    """Every number that is not held out, ascending."""
    held = set(heldout_numbers())
    return [n for n in range(LOW, HIGH + 1) if n not in held]


def row(n: int, row_id: str, completion: str | None = None) -> dict[str, Any]:
    """The task row of ``n``: ``{"id", "prompt", "number", "rubric", "completion"}`` (``completion``: the
    warm-start target, the reference answer by default)."""
    return {
        "id": row_id,
        "prompt": prompt_text(n),
        "number": n,
        "rubric": rubric(n),
        "completion": reference_answer(n) if completion is None else completion,
    }


def generate(count: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` training rows (numbers drawn with ``seed``, never a held-out one), each with a warm-start
    answer (:func:`warm_start_answer`) as ``completion``."""
    rng = random.Random(seed)
    pool = training_numbers()
    rows = []
    for i in range(count):
        n = rng.choice(pool)
        rows.append(row(n, f"train-{seed}-{i}", warm_start_answer(n, rng)))
    return rows


def heldout() -> list[dict[str, Any]]:
    """The held-out rows (reference answers as ``completion``)."""
    return [row(n, f"heldout-{n}") for n in heldout_numbers()]


__all__ = [
    "CONTINUE",
    "HELDOUT_SIZE",
    "MISCONCEIVED_DIGITS",
    "WEIGHTS",
    "WRONG_PARITY",
    "clauses",
    "generate",
    "heldout",
    "heldout_numbers",
    "other_parity",
    "parity",
    "prompt_text",
    "reference_answer",
    "rounded",
    "rubric",
    "row",
    "training_numbers",
    "warm_start_answer",
]
