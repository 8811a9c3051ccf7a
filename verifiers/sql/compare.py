"""Comparing two query results the way execution accuracy does (Spider, BIRD), with the knobs made explicit.

A result is a list of rows (tuples). Two results are equal when some permutation of the predicted columns
(only the identity when column order matters) makes the rows equal: as multisets (bags), or as sequences
when row order matters, or as sets when ``distinct`` is on (BIRD's ``set(pred) == set(gold)``). NULLs
(``None``) are equal to each other; ``3`` and ``3.0`` are equal; floats are equal within a relative
tolerance.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

Row = tuple[Any, ...]

#: Upper bound on column permutations tried before giving up (identical columns are collapsed first, so
#: this is only reached by results with many columns holding the same multiset of values in new orders).
MAX_PERMUTATIONS = 5000


def normalize_value(value: Any) -> Any:
    """A hashable, engine-neutral form of one cell: Decimal -> float, bool -> int, lists -> tuples."""
    if value is None or isinstance(value, (int, float, str, bytes)) and not isinstance(value, bool):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return tuple(normalize_value(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((str(k), normalize_value(v)) for k, v in value.items()), key=repr))
    if isinstance(value, Hashable):
        return value
    return repr(value)


def normalize_rows(rows: Sequence[Sequence[Any]]) -> list[Row]:
    return [tuple(normalize_value(v) for v in row) for row in rows]


def _digits(tolerance: float) -> int:
    return max(1, min(17, int(round(-math.log10(tolerance))))) if tolerance > 0 else 17


def _rounded(value: Any, digits: int) -> Any:
    """Hash key of a cell: floats rounded to ``digits`` significant digits (ints of equal value hash alike)."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return value
        return float(f"{value:.{digits}g}")
    return value


def _close(a: Any, b: Any, tolerance: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    numeric = (int, float)
    if isinstance(a, numeric) and isinstance(b, numeric) and (isinstance(a, float) or isinstance(b, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
    return a == b


def _sort_key(row: Row, digits: int) -> tuple:
    # A total order over mixed types: (type rank, value); NULLs first, numbers before text before blobs.
    out = []
    for v in row:
        if v is None:
            out.append((0, 0))
        elif isinstance(v, (int, float)):
            out.append(
                (1, _rounded(float(v), digits) if not (isinstance(v, float) and math.isnan(v)) else math.inf)
            )
        elif isinstance(v, str):
            out.append((2, v))
        elif isinstance(v, bytes):
            out.append((3, v))
        else:
            out.append((4, repr(v)))
    return tuple(out)


def _has_float(rows: Sequence[Row]) -> bool:
    return any(isinstance(v, float) for row in rows for v in row)


def _rows_equal(gold: list[Row], pred: list[Row], *, ordered: bool, tolerance: float, digits: int) -> bool:
    """Rows equal as sequences (``ordered``) or as multisets, floats within ``tolerance``."""
    if len(gold) != len(pred):
        return False
    if ordered:
        return all(
            len(g) == len(p) and all(_close(a, b, tolerance) for a, b in zip(g, p, strict=False))
            for g, p in zip(gold, pred, strict=True)
        )
    gk = Counter(tuple(_rounded(v, digits) for v in row) for row in gold)
    pk = Counter(tuple(_rounded(v, digits) for v in row) for row in pred)
    if gk == pk:
        return True
    if tolerance <= 0 or not (_has_float(gold) or _has_float(pred)):
        return False
    # Two values a hair apart can round to different keys at a rounding boundary: fall back to pairing
    # the rows in a canonical sorted order and comparing them within the tolerance.
    gs = sorted(gold, key=lambda r: _sort_key(r, digits))
    ps = sorted(pred, key=lambda r: _sort_key(r, digits))
    return _rows_equal(gs, ps, ordered=True, tolerance=tolerance, digits=digits)


def _column_candidates(gold: list[Row], pred: list[Row], digits: int, tolerance: float) -> list[list[int]]:
    """For each gold column, the predicted columns holding the same multiset of values."""
    ncols = len(gold[0])

    def column(rows: list[Row], j: int) -> list[Any]:
        return sorted((r[j] for r in rows), key=lambda v: _sort_key((v,), digits))

    gcols = [column(gold, j) for j in range(ncols)]
    pcols = [column(pred, j) for j in range(ncols)]
    return [
        [
            k
            for k in range(ncols)
            if all(_close(a, b, tolerance) for a, b in zip(gcols[j], pcols[k], strict=True))
        ]
        for j in range(ncols)
    ]


@dataclass
class Comparison:
    """The verdict and why: ``reason`` is ``"equal"`` or what differed first."""

    equal: bool
    reason: str
    column_permutation: list[int] | None = None


def compare_results(
    gold: Sequence[Sequence[Any]],
    pred: Sequence[Sequence[Any]],
    *,
    ordered: bool = False,
    ignore_column_order: bool = True,
    distinct: bool = False,
    tolerance: float = 1e-6,
    gold_ncols: int | None = None,
    pred_ncols: int | None = None,
    normalized: bool = False,
) -> Comparison:
    """Execution-accuracy equality of a predicted result against the gold one.

    Args:
        gold, pred: Rows of each result (already normalised with :func:`normalize_rows` or raw).
        ordered: Rows must appear in the same order (the gold query has a top-level ORDER BY).
        ignore_column_order: Accept any permutation of the predicted columns (Spider test-suite); when
            False the columns must be in the gold order (BIRD).
        distinct: Compare as sets, ignoring duplicate rows (BIRD); default compares multisets.
        tolerance: Relative (and absolute, for values near 0) tolerance on floats; 0 for exact.
        gold_ncols, pred_ncols: Column counts (from the cursor description) for empty results.
        normalized: Both row lists are already normalised (:func:`normalize_rows`): skip that step.
    """
    g = list(gold) if normalized else normalize_rows(gold)
    p = list(pred) if normalized else normalize_rows(pred)
    if distinct:
        g = list(dict.fromkeys(g))
        p = list(dict.fromkeys(p))
    if not g and not p:
        # Both empty: equal whatever the columns (Spider and BIRD agree here).
        return Comparison(True, "equal")
    gn = len(g[0]) if g else gold_ncols
    pn = len(p[0]) if p else pred_ncols
    if gn is not None and pn is not None and gn != pn:
        return Comparison(False, f"column count differs: gold {gn}, predicted {pn}")
    if len(g) != len(p):
        return Comparison(False, f"row count differs: gold {len(g)}, predicted {len(p)}")
    digits = _digits(tolerance)
    ncols = len(g[0])
    if not ignore_column_order or ncols <= 1:
        if _rows_equal(g, p, ordered=ordered, tolerance=tolerance, digits=digits):
            return Comparison(True, "equal", list(range(ncols)))
        return Comparison(False, "rows differ" if not ordered else "rows differ (order matters)")

    # The identity permutation first: it is the common case and skips the column analysis.
    if _rows_equal(g, p, ordered=ordered, tolerance=tolerance, digits=digits):
        return Comparison(True, "equal", list(range(ncols)))
    candidates = _column_candidates(g, p, digits, tolerance)
    if any(not c for c in candidates):
        missing = [j for j, c in enumerate(candidates) if not c]
        return Comparison(False, f"no predicted column matches gold column(s) {missing}")
    # Depth-first search over injective assignments gold column -> predicted column, most constrained first.
    order = sorted(range(ncols), key=lambda j: len(candidates[j]))
    tried = 0
    assignment: dict[int, int] = {}

    def search(i: int) -> list[int] | None:
        nonlocal tried
        if i == ncols:
            tried += 1
            perm = [assignment[j] for j in range(ncols)]
            permuted = [tuple(row[k] for k in perm) for row in p]
            return (
                perm
                if _rows_equal(g, permuted, ordered=ordered, tolerance=tolerance, digits=digits)
                else None
            )
        j = order[i]
        used = set(assignment.values())
        for k in candidates[j]:
            if k in used or tried >= MAX_PERMUTATIONS:
                continue
            assignment[j] = k
            found = search(i + 1)
            if found is not None:
                return found
            del assignment[j]
        return None

    perm = search(0)
    if perm is not None:
        return Comparison(True, "equal", perm)
    if tried >= MAX_PERMUTATIONS:
        return Comparison(False, f"rows differ (gave up after {MAX_PERMUTATIONS} column permutations)")
    return Comparison(False, "rows differ" if not ordered else "rows differ (order matters)")
