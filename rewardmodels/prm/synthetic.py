"""Synthetic multi-step arithmetic with a planted wrong step: PRM data with a known answer, for tests and demos.

A problem is a start number and a list of additions and subtractions; a solution writes one step per
operation (``"4+3=7"``) and ends with ``"The answer is 6."``. In a flawed solution one step's result is
wrong and the following steps carry the wrong value on, so every step from the planted one on leads to a
wrong final answer: exactly the labels Monte Carlo estimation would give (Math-Shepherd's hard labels),
with ``after_error="unlabelled"`` giving ProcessBench's labelling instead (nothing after the first error).

Numbers stay in 0..9 (or a smaller range) so that a tiny character-level model can learn the whole table quickly.

The shipped PRM tour data (``arithmetic_train.jsonl``, ``arithmetic_processbench.jsonl``; see
:func:`write_samples`) uses :data:`TOUR_TABLE`, the small 0..4 table with +-1 steps, ProcessBench labels
(nothing after the first error is labelled), 80% flawed training solutions and test problems held out from
training by :func:`held_out_problem`: what a tiny random-weight model learns in ~160 optimiser steps. Any one
of the full 0..9 table, Monte Carlo labels (every step from the error on labelled wrong, right-looking ones
and the final answer included) or 50% flawed solutions (only ~12% of labelled steps wrong, so no score falls
below 0.5) keeps its ProcessBench F1 under 0.1 after that many steps.
"""

from __future__ import annotations

import random
import zlib

from rewardlab.rewardmodels.prm.data import StepExample, write_step_examples
from rewardlab.rewardmodels.prm.steps import MATH_SHEPHERD_TAG

TOUR_TABLE = {"max_value": 4, "max_delta": 1, "max_ops": 6}
"""The arithmetic of the shipped PRM tour data: numbers 0..4, +-1, 2 to 6 operations."""


def held_out_problem(prompt: str) -> bool:
    """Whether a problem belongs to the test side of the shipped data (about a quarter of all prompts, by
    hash): no test problem's solution is ever seen in training, so a PRM must check the arithmetic."""
    return zlib.crc32(prompt.encode()) % 4 == 0


def make_problem(
    rng: random.Random, n_ops: int, max_value: int = 9, max_delta: int = 3
) -> tuple[int, list[tuple[str, int]]]:
    """A start value and ``n_ops`` operations ``(op, d)``, ``1 <= d <= max_delta``, keeping every running
    value within ``0..max_value``."""
    value = rng.randint(0, max_value)
    start = value
    ops: list[tuple[str, int]] = []
    deltas = range(1, max_delta + 1)
    for _ in range(n_ops):
        choices = [("+", d) for d in deltas if value + d <= max_value] + [
            ("-", d) for d in deltas if value - d >= 0
        ]
        op, d = rng.choice(choices)
        value = value + d if op == "+" else value - d
        ops.append((op, d))
    return start, ops


def prompt_text(start: int, ops: list[tuple[str, int]]) -> str:
    return f"Compute {start}{''.join(f'{op}{d}' for op, d in ops)}."


def solve(
    start: int,
    ops: list[tuple[str, int]],
    wrong_at: int = -1,
    rng: random.Random | None = None,
    max_value: int = 9,
):
    """The steps of a solution, the step results, and the final value; ``wrong_at >= 0`` plants an error."""
    rng = rng or random.Random(0)
    value = start
    steps: list[str] = []
    for i, (op, d) in enumerate(ops):
        result = value + d if op == "+" else value - d
        if i == wrong_at:
            result = rng.choice([v for v in range(max_value + 1) if v != result])
        steps.append(f"{value}{op}{d}={result}")
        value = result
    steps.append(f"The answer is {value}.")
    return steps, value


def make_arithmetic_examples(
    n: int,
    *,
    seed: int = 0,
    min_ops: int = 2,
    max_ops: int = 4,
    error_rate: float = 0.5,
    after_error: str = "wrong",
    max_value: int = 9,
    max_delta: int = 3,
) -> list[StepExample]:
    """``n`` solutions, about ``error_rate`` of them with one planted wrong step.

    Args:
        n: Number of examples.
        seed: Random seed.
        min_ops: Fewest operations per problem.
        max_ops: Most operations per problem.
        error_rate: Fraction of solutions with a planted error.
        after_error: ``"wrong"`` labels every step from the error on 0 (Monte Carlo labels: none of them can
            reach the right answer); ``"unlabelled"`` leaves the steps after the first error unlabelled
            (ProcessBench).
        max_value: Largest number in a problem (0..max_value; a smaller table is faster to learn).
        max_delta: Largest number added or subtracted per step.
    """
    if after_error not in ("wrong", "unlabelled"):
        raise ValueError("after_error must be 'wrong' or 'unlabelled'")
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        start, ops = make_problem(rng, rng.randint(min_ops, max_ops), max_value, max_delta)
        wrong_at = rng.randrange(len(ops)) if rng.random() < error_rate else -1
        steps, _ = solve(start, ops, wrong_at, rng, max_value)
        _, answer = solve(start, ops, max_value=max_value)
        if wrong_at < 0:
            labels: list[float | None] = [1.0] * len(steps)
        elif after_error == "wrong":
            labels = [1.0] * wrong_at + [0.0] * (len(steps) - wrong_at)
        else:
            labels = [1.0] * wrong_at + [0.0] + [None] * (len(steps) - wrong_at - 1)
        examples.append(
            StepExample(
                prompt=prompt_text(start, ops),
                steps=steps,
                labels=labels,
                reference=str(answer),
                id=f"arith-{seed}-{i}",
                metadata={"first_error": wrong_at},
            )
        )
    return examples


def _math_shepherd_row(ex: StepExample) -> dict:
    steps = [f"Step {i + 1}: {s}" for i, s in enumerate(ex.steps)]
    marks = ["+" if (y is not None and y >= 0.5) else "-" for y in ex.labels or []]
    return {
        "input": ex.prompt + " " + "\n".join(f"{s} {MATH_SHEPHERD_TAG}" for s in steps),
        "label": ex.prompt + " " + "\n".join(f"{s} {m}" for s, m in zip(steps, marks, strict=True)),
        "task": "arithmetic",
    }


def _prm800k_row(ex: StepExample) -> dict:
    steps = []
    for s, y in zip(ex.steps, ex.labels or [], strict=True):
        rating = 1 if y is not None and y >= 0.5 else -1
        steps.append(
            {"completions": [{"text": s, "rating": rating, "flagged": False}], "chosen_completion": 0}
        )
        if rating < 0:
            break
    return {
        "question": {"problem": ex.prompt, "ground_truth_answer": ex.reference},
        "label": {"steps": steps, "finish_reason": "found_error" if ex.first_error() >= 0 else "solution"},
    }


def write_samples(folder: str) -> dict[str, int]:
    """Writes the shipped ``data/prm`` samples (reproducible: fixed seeds); returns rows per file."""
    import json
    from pathlib import Path

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    # The tour's training and test data (TOUR_TABLE; test problems never appear in training).
    pool = make_arithmetic_examples(1600, seed=11, error_rate=0.8, after_error="unlabelled", **TOUR_TABLE)
    train = [ex for ex in pool if not held_out_problem(ex.prompt)]
    write_step_examples(train, out / "arithmetic_train.jsonl")
    pool = make_arithmetic_examples(800, seed=12, after_error="unlabelled", **TOUR_TABLE)
    test = [ex for ex in pool if held_out_problem(ex.prompt)][:100]
    rows = [
        {
            "id": ex.id,
            "generator": "synthetic",
            "problem": ex.prompt,
            "steps": ex.steps,
            "final_answer_correct": ex.first_error() < 0,
            "label": ex.first_error(),
            "reference": ex.reference,
        }
        for ex in test
    ]
    files = {
        "arithmetic_processbench.jsonl": rows,
        "arithmetic_math_shepherd.jsonl": [
            _math_shepherd_row(ex) for ex in make_arithmetic_examples(50, seed=13)
        ],
        "arithmetic_prm800k.jsonl": [_prm800k_row(ex) for ex in make_arithmetic_examples(50, seed=14)],
        "arithmetic_records.jsonl": [
            {"id": ex.id, "prompt": ex.prompt, "completion": "\n".join(ex.steps), "reference": ex.reference}
            for ex in make_arithmetic_examples(200, seed=16, **TOUR_TABLE)
            if held_out_problem(ex.prompt)
        ][:20],
        "arithmetic_unlabelled.jsonl": [
            {"id": ex.id, "prompt": ex.prompt, "completions": ex.steps, "reference": ex.reference}
            for ex in make_arithmetic_examples(20, seed=15)
        ],
    }
    for name, rows in files.items():
        with open(out / name, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        counts[name] = len(rows)
    counts["arithmetic_train.jsonl"] = len(train)
    return counts


if __name__ == "__main__":  # python -m rewardlab.rewardmodels.prm.synthetic data/prm
    import sys

    print(write_samples(sys.argv[1] if len(sys.argv) > 1 else "data/prm"))
__all__ = [
    "TOUR_TABLE",
    "held_out_problem",
    "make_arithmetic_examples",
    "make_problem",
    "prompt_text",
    "solve",
    "write_samples",
]
