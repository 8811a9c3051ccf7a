"""Timing shared by the bench scripts (run as ``python bench/NAME.py``, so this folder is on the path)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    """The fastest of ``repeat`` runs of ``fn``, in seconds (the least disturbed by other jobs)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
