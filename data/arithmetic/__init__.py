"""Generated arithmetic problems for the RL demo, with a fixed held-out set.

Each problem is a record ``{"id", "prompt", "reference", "completion"}``: the prompt is ``"37+45="``, the
reference the gold answer as a string (what the math verifier checks), and ``completion`` the target text
``"\\boxed{82}"`` that the supervised warm start imitates. The held-out set of a distribution (operand
range, operators) is drawn with its own fixed seed (the default one is shipped as ``heldout.jsonl``), and
the training generator never produces one of its prompts.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
HELDOUT_PATH = HERE / "heldout.jsonl"
HELDOUT_SEED = 12345
HELDOUT_SIZE = 200


def answer_text(answer: int) -> str:
    """The target completion for a gold answer (the format the warm start teaches)."""
    return f"\\boxed{{{answer}}}"


def _no_carry(a: int, b: int, op: str) -> bool:
    """True when column arithmetic of ``a op b`` needs no carry (``+``) or borrow (``-``)."""
    while a or b:
        da, db = a % 10, b % 10
        if (op == "+" and da + db > 9) or (op == "-" and da < db):
            return False
        a, b = a // 10, b // 10
    return True


def make_problem(
    rng: random.Random, *, max_value: int = 99, ops: str = "+-", min_value: int = 0, carry: bool = True
) -> dict[str, Any]:
    """One problem ``a op b`` with operands in ``[min_value, max_value]``; subtraction never goes negative.

    ``carry=False`` draws only problems that column arithmetic solves without carrying or borrowing.
    """
    while True:
        op = rng.choice(ops)
        a, b = rng.randint(min_value, max_value), rng.randint(min_value, max_value)
        if op == "-" and b > a:
            a, b = b, a
        if carry or op not in "+-" or _no_carry(a, b, op):
            break
    value = a + b if op == "+" else a - b if op == "-" else a * b
    prompt = f"{a}{op}{b}="
    return {"prompt": prompt, "reference": str(value), "completion": answer_text(value)}


def generate(
    n: int,
    *,
    seed: int = 0,
    max_value: int = 99,
    ops: str = "+-",
    min_value: int = 0,
    carry: bool = True,
    exclude_heldout: bool = True,
) -> list[dict[str, Any]]:
    """``n`` training problems (seeded); prompts of the held-out set are skipped when ``exclude_heldout``."""
    rng = random.Random(seed)
    dist = {"max_value": max_value, "ops": ops, "min_value": min_value, "carry": carry}
    banned = {r["prompt"] for r in heldout(**dist)} if exclude_heldout else set()
    rows: list[dict[str, Any]] = []
    while len(rows) < n:
        row = make_problem(rng, **dist)
        if row["prompt"] in banned:
            continue
        row["id"] = f"train-{seed}-{len(rows)}"
        rows.append(row)
    return rows


def load_heldout(limit: int | None = None) -> list[dict[str, Any]]:
    """The shipped held-out problems (first ``limit`` of them)."""
    rows = [json.loads(line) for line in HELDOUT_PATH.read_text().splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def heldout(
    *, max_value: int = 99, ops: str = "+-", min_value: int = 0, carry: bool = True, n: int = HELDOUT_SIZE
) -> list[dict[str, Any]]:
    """The held-out problems of a distribution: distinct prompts drawn with a fixed seed.

    For the default distribution this is the shipped ``heldout.jsonl``; at most a quarter of all possible
    prompts is held out, so small ranges keep enough training problems.
    """
    if (max_value, ops, min_value, carry, n) == (99, "+-", 0, True, HELDOUT_SIZE) and HELDOUT_PATH.exists():
        return load_heldout()
    return _draw_heldout(max_value=max_value, ops=ops, min_value=min_value, carry=carry, n=n)


def _space_size(max_value: int, ops: str, min_value: int, carry: bool) -> int:
    values = range(min_value, max_value + 1)
    if carry:
        return len(ops) * len(values) ** 2
    return sum(
        1
        for op in ops
        for a in values
        for b in values
        if (op != "-" or a >= b) and (op not in "+-" or _no_carry(a, b, op))
    )


def _draw_heldout(
    *, max_value: int = 99, ops: str = "+-", min_value: int = 0, carry: bool = True, n: int = HELDOUT_SIZE
) -> list[dict[str, Any]]:
    n = min(n, _space_size(max_value, ops, min_value, carry) // 4)
    rng = random.Random(HELDOUT_SEED)
    seen: set[str] = set()
    rows = []
    while len(rows) < n:
        row = make_problem(rng, max_value=max_value, ops=ops, min_value=min_value, carry=carry)
        if row["prompt"] in seen:
            continue
        seen.add(row["prompt"])
        row["id"] = f"heldout-{len(rows)}"
        rows.append(row)
    return rows


def write_heldout(path: Path = HELDOUT_PATH, n: int = HELDOUT_SIZE) -> None:
    """Writes the default held-out set (run once by a developer)."""
    rows = _draw_heldout(n=n)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
