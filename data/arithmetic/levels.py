r"""Leveled arithmetic with worked column solutions: four sources of increasing difficulty for curricula.

Level ``d`` (source ``f"digits{d}"``, ``difficulty`` ``float(d)``) adds or subtracts two operands of exactly
``d`` digits (``0``-``9`` at level 1); a subtraction never goes negative. From level 2 on, every other problem
of a level is drawn to need a carry or a borrow, so at least half do: the levels then differ in the work they
take, not only in length.

Each problem is a row ``{"id", "prompt", "reference", "completion", "solution", "difficulty", "source"}``:
the prompt is ``"347+285="``, the reference the gold answer (``"632"``), and ``completion`` (= ``solution``)
the worked solution of :func:`worked_solution`, which the supervised warm start imitates. Its format, one
line per column from the ones column up, then the answer:

* addition: ``x+y=s``, with ``+1`` after ``y`` when a carry comes in, and `` c1`` when ``s >= 10`` (the
  column writes ``s - 10`` and carries 1; the last column's carry is the answer's leading 1);
* subtraction: ``x-y=r``, with ``-1`` after ``y`` when a borrow comes in; when the column must borrow, ``x``
  is written with the borrowed ten (``12`` for ``2``) and the line ends in `` b1``;
* the last line: ``\boxed{<value>}``, without leading zeros.

``347+285=``::

    7+5=12 c1
    4+8+1=13 c1
    3+2+1=6
    \boxed{632}

``52-17=``::

    12-7=5 b1
    5-1-1=3
    \boxed{35}

A column that borrows while a borrow comes in reads ``10-1-1=8 b1`` (the tens of ``502-17``); an operand with
fewer digits than the other has 0 in its missing columns.

The held-out problems (:func:`heldout_levels`) are drawn with a fixed seed, and :func:`generate_levels` never
produces one of their prompts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from rewardlab.data.arithmetic import _no_carry  # the package's own carry test, so both agree on "carry"

LEVELS = (1, 2, 3, 4)
LEVEL_SOURCES = tuple(f"digits{d}" for d in LEVELS)
HELDOUT_SEED = 24680
HELDOUT_PER_LEVEL = 50
_OPS = "+-"


def _digits(n: int, width: int) -> list[int]:
    """``n``'s digits from the ones column up, padded with zeros to ``width`` columns."""
    return [(n // 10**i) % 10 for i in range(width)]


def _addition_lines(a: int, b: int) -> list[str]:
    width = max(len(str(a)), len(str(b)))
    lines, carry = [], 0
    for x, y in zip(_digits(a, width), _digits(b, width), strict=True):
        total = x + y + carry
        lines.append(f"{x}+{y}{'+1' if carry else ''}={total}{' c1' if total >= 10 else ''}")
        carry = int(total >= 10)
    return lines


def _subtraction_lines(a: int, b: int) -> list[str]:
    width = len(str(a))  # a >= b: a has the most digits
    lines, borrow = [], 0
    for x, y in zip(_digits(a, width), _digits(b, width), strict=True):
        out = int(x - y - borrow < 0)  # a borrow out of the column: it gets ten more
        top = x + 10 * out
        lines.append(f"{top}-{y}{'-1' if borrow else ''}={top - y - borrow}{' b1' if out else ''}")
        borrow = out
    return lines


def worked_solution(a: int, op: str, b: int) -> str:
    r"""The column solution of ``a op b`` (format in the module docstring), ending in ``\boxed{value}``.

    ``worked_solution(52, "-", 17)`` is ``"12-7=5 b1\n5-1-1=3\n\boxed{35}"``, and ``worked_solution(7, "+", 5)``
    is ``"7+5=12 c1\n\boxed{12}"``.

    Raises:
        ValueError: ``op`` is not ``+`` or ``-``, an operand is negative, or a subtraction would go negative.
    """
    if op not in _OPS or len(op) != 1:
        raise ValueError(f"worked solutions are for '+' and '-', got {op!r}")
    if a < 0 or b < 0 or (op == "-" and b > a):
        raise ValueError(f"worked solutions need non-negative operands and results, got {a}{op}{b}")
    lines = _addition_lines(a, b) if op == "+" else _subtraction_lines(a, b)
    value = a + b if op == "+" else a - b
    return "\n".join([*lines, f"\\boxed{{{value}}}"])


def _operand_range(digits: int) -> tuple[int, int]:
    if digits < 1:
        raise ValueError(f"digits must be 1 or more, got {digits}")
    return (0, 9) if digits == 1 else (10 ** (digits - 1), 10**digits - 1)


def make_level_problem(
    rng: random.Random, digits: int, ops: str = _OPS, *, carry: bool | None = None
) -> dict[str, Any]:
    """One problem of level ``digits``: prompt, reference, completion, solution, difficulty, source (no id).

    ``carry=True`` draws only problems that need a carry or a borrow, ``False`` only ones that need none,
    ``None`` either.
    """
    if not ops or set(ops) - set(_OPS):
        raise ValueError(f"ops must be made of '+' and '-', got {ops!r}")
    low, high = _operand_range(digits)
    while True:
        op = rng.choice(ops)
        a, b = rng.randint(low, high), rng.randint(low, high)
        if op == "-" and b > a:
            a, b = b, a
        if carry is None or carry != _no_carry(a, b, op):
            break
    solution = worked_solution(a, op, b)
    return {
        "prompt": f"{a}{op}{b}=",
        "reference": str(a + b if op == "+" else a - b),
        "completion": solution,
        "solution": solution,
        "difficulty": float(digits),
        "source": f"digits{digits}",
    }


def _level_carry(digits: int, index: int) -> bool | None:
    # every other problem from level 2 on needs a carry (or borrow): at least half of any level's rows do
    return True if digits >= 2 and index % 2 == 0 else None


def _level_stream(
    digits: int, ops: str, seed: str, banned: set[str], unique: bool
) -> Iterator[dict[str, Any]]:
    """Problems of one level, forever (``unique``: each prompt once); a seed of its own per level, so a
    level's problems do not depend on which other levels are drawn."""
    rng = random.Random(seed)
    seen: set[str] = set()
    index = 0
    while True:
        row = make_level_problem(rng, digits, ops, carry=_level_carry(digits, index))
        if row["prompt"] in banned or (unique and row["prompt"] in seen):
            continue
        seen.add(row["prompt"])
        index += 1
        yield row


def _space_size(digits: int, ops: str) -> int:
    """How many distinct prompts a level has: ``n * n`` additions and ``n * (n + 1) / 2`` subtractions."""
    low, high = _operand_range(digits)
    n = high - low + 1
    return sum(n * n if op == "+" else n * (n + 1) // 2 for op in set(ops))


def _interleave(
    streams: dict[int, Iterator[dict[str, Any]]], counts: dict[int, int], id_of: Callable[[int, int], str]
) -> list[dict[str, Any]]:
    """Rows taken from the levels' streams in turn, so any prefix of the list has every level."""
    rows: list[dict[str, Any]] = []
    taken = dict.fromkeys(streams, 0)
    while any(taken[d] < counts[d] for d in streams):
        for d, stream in streams.items():
            if taken[d] < counts[d]:
                rows.append({"id": id_of(d, taken[d]), **next(stream)})
                taken[d] += 1
    return rows


def heldout_levels(
    n_per_level: int = HELDOUT_PER_LEVEL, *, ops: str = _OPS, levels: tuple[int, ...] = LEVELS
) -> list[dict[str, Any]]:
    """The held-out problems: distinct prompts per level, drawn with a fixed seed, levels interleaved.

    At most a quarter of a level's possible prompts is held out (level 1 with ``+-`` has 155, so 38), so that
    training keeps enough. A level's first ``k`` held-out problems are the same whatever ``n_per_level``.
    """
    streams = {d: _level_stream(d, ops, f"levels-heldout-{HELDOUT_SEED}-{d}", set(), True) for d in levels}
    counts = {d: min(n_per_level, _space_size(d, ops) // 4) for d in levels}
    return _interleave(streams, counts, lambda d, i: f"heldout-lv{d}-{i}")


def generate_levels(
    n_per_level: int, *, seed: int = 0, ops: str = _OPS, levels: tuple[int, ...] = LEVELS
) -> list[dict[str, Any]]:
    """``n_per_level`` training problems per level (seeded), levels interleaved (``digits1``, ``digits2``,
    ... in turn), never a prompt of :func:`heldout_levels` (its default size). Prompts may repeat: level 1
    has only 117 that are not held out."""
    banned = {row["prompt"] for row in heldout_levels(ops=ops, levels=levels)}
    streams = {d: _level_stream(d, ops, f"levels-train-{seed}-{d}", banned, False) for d in levels}
    return _interleave(streams, dict.fromkeys(levels, n_per_level), lambda d, i: f"lv{d}-{seed}-{i}")
