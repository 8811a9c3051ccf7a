"""Synthetic preference data with a learnable signal, for tests, demos and benchmarks (no downloads).

Completions are random strings over ``VOWELS + CONSONANTS``; a completion's quality is its share of
vowels. In a pair the chosen completion is drawn with vowel share ``good`` and the rejected one with
``bad`` (lengths independent), so the preference is visible in the text's character statistics, which a
tiny character-level model learns in a few hundred steps. Pointwise rows label the two kinds 1 and 0.
"""

from __future__ import annotations

import random
from typing import Any

VOWELS = "aeiou"
CONSONANTS = "bcdfghklmnprstvwxz"
SUBSETS = ("short", "long")


def _completion(rng: random.Random, share: float, length: int) -> str:
    return "".join(
        rng.choice(VOWELS) if rng.random() < share else rng.choice(CONSONANTS) for _ in range(length)
    )


def synthetic_preferences(
    n: int,
    *,
    seed: int = 0,
    good: float = 0.65,
    bad: float = 0.25,
    min_len: int = 8,
    max_len: int = 24,
    kind: str = "pairwise",
) -> list[dict[str, Any]]:
    """``n`` rows in the RewardBench layout (``prompt, chosen, rejected, subset``) or, with
    ``kind="pointwise"``, ``n`` rows ``prompt, completion, label, subset``. ``subset`` is ``short`` or
    ``long`` by the chosen (or only) completion's length, so per-category metrics have two categories."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        prompt = f"Q{rng.randint(0, 99)}: "
        if kind == "pairwise":
            lc, lr = rng.randint(min_len, max_len), rng.randint(min_len, max_len)
            rows.append(
                {
                    "prompt": prompt,
                    "chosen": _completion(rng, good, lc),
                    "rejected": _completion(rng, bad, lr),
                    "subset": SUBSETS[lc > (min_len + max_len) // 2],
                }
            )
        elif kind == "pointwise":
            label = i % 2
            length = rng.randint(min_len, max_len)
            rows.append(
                {
                    "prompt": prompt,
                    "completion": _completion(rng, good if label else bad, length),
                    "label": label,
                    "subset": SUBSETS[length > (min_len + max_len) // 2],
                }
            )
        else:
            raise ValueError(f"kind must be 'pairwise' or 'pointwise', got {kind!r}")
    return rows
