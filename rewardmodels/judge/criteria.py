"""Rubric criteria in scored rows: reading them, and the running tally eval's summary and the viewer report.

A rubric reward source (Rubrics as Rewards: a judge checks each criterion of a per-prompt rubric) puts its
verdicts in a row's ``details``::

    details["criteria"] = [{"criterion": str, "weight": float,
                            "category": "essential" | "important" | "optional" | "pitfall" | "",
                            "gate": bool, "met": bool | None, "probability": float | None,
                            "verdict_text": str}, ...]
    details["aggregation"] = "explicit" | "implicit"
    details["rubric_score"] = float

:class:`CriteriaTally` turns such rows into what a person reads first: the mean rubric score, and per
category the *mean share met*: for each row, the share of its criteria of that category that were met
among those with a verdict; then the mean over the rows that have a criterion of that category with a
verdict (every row weighs the same, whatever its rubric's length). A criterion without a verdict
(``met`` not a boolean: the judge's answer did not parse) is left out of the share and counted apart; a
row with an error (the judge failed, or eval counted the sample wrong: cut off at the length limit) is
left out and counted. A ``pitfall`` criterion is "met" when the response made the mistake (the rubric
source asks the judge whether it did): its share met is the share of pitfalls fallen into, lower is better.

Plain Python (no numpy): ``rewardlab score`` (through :meth:`RubricSource.summary_tallies`), ``rewardlab eval
--completions`` and ``rewardlab view`` all use it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from rewardlab.rewardmodels.judge.rubric import CATEGORIES  # RaR's, in the order summaries list them

NO_CATEGORY = "(no category)"
"""How a criterion without a category is listed."""
MET, NOT_MET, NO_VERDICT = "met", "not met", "no verdict"


def row_criteria(details: Any) -> list[dict[str, Any]] | None:
    """The criteria of a row's ``details`` (the entries that are objects), or ``None`` when it has no list of
    criteria."""
    if not isinstance(details, dict) or not isinstance(details.get("criteria"), list):
        return None
    return [c for c in details["criteria"] if isinstance(c, dict)]


def verdict_of(criterion: dict[str, Any]) -> str:
    """``met``, ``not met``, or ``no verdict`` (``met`` is not a boolean: ``None``, or something else)."""
    met = criterion.get("met")
    if not isinstance(met, bool):
        return NO_VERDICT
    return MET if met else NOT_MET


def category_of(criterion: dict[str, Any]) -> str:
    """The criterion's category as summaries list it (:data:`NO_CATEGORY` when it has none)."""
    category = criterion.get("category")
    return category.strip() if isinstance(category, str) and category.strip() else NO_CATEGORY


def number(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` (booleans are no numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def ordered_categories(names: Any) -> list[str]:
    """Rubrics as Rewards' categories first, in their order, then the others sorted, no category last."""
    names = set(names)
    known = [c for c in CATEGORIES if c in names]
    others = sorted(n for n in names if n not in CATEGORIES and n != NO_CATEGORY)
    return known + others + ([NO_CATEGORY] if NO_CATEGORY in names else [])


class CriteriaTally:
    """Running rubric summaries over rows (see the module docstring), fed one row at a time.

    ``add(row)`` takes a dict with ``details`` and ``error`` (a ``rewardlab score`` output row, an eval
    sample, an RL ``rollouts.jsonl`` row); rows without criteria and without an error are not counted.
    ``to_dict()`` is ``{}`` and ``format()`` is ``""`` until a row with criteria was added.
    """

    def __init__(self) -> None:
        self.samples = 0
        self.errors = 0
        self.score_sum = 0.0
        self.scored = 0
        self.share_sum: dict[str, float] = defaultdict(float)
        self.share_rows: dict[str, int] = defaultdict(int)
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: {MET: 0, NOT_MET: 0, NO_VERDICT: 0})

    def add(self, row: dict[str, Any]) -> None:
        details = row.get("details")
        criteria = row_criteria(details)
        if row.get("error") not in (None, ""):
            self.errors += 1
            return
        if criteria is None:
            return
        self.samples += 1
        score = number(details.get("rubric_score"))
        if score is not None:
            self.score_sum += score
            self.scored += 1
        verdicts: dict[str, list[str]] = defaultdict(list)
        for criterion in criteria:
            verdicts[category_of(criterion)].append(verdict_of(criterion))
        for category, found in verdicts.items():
            for verdict in found:
                self.counts[category][verdict] += 1
            judged = [v for v in found if v != NO_VERDICT]
            if judged:
                self.share_sum[category] += judged.count(MET) / len(judged)
                self.share_rows[category] += 1

    def to_dict(self) -> dict[str, Any]:
        """``samples`` (rows with criteria and no error), ``errors`` (rows with an error, left out),
        ``mean_rubric_score`` over the ``rubric_scored`` rows that report one, and per category
        ``mean_share_met`` over its ``samples``, with the totals of its ``criteria``: ``met``, ``not_met``,
        ``no_verdict``."""
        if not self.samples:
            return {}
        categories = {}
        for category in ordered_categories(self.counts):
            counts = self.counts[category]
            rows = self.share_rows.get(category, 0)
            categories[category] = {
                "mean_share_met": self.share_sum[category] / rows if rows else None,
                "samples": rows,
                "criteria": sum(counts.values()),
                "met": counts[MET],
                "not_met": counts[NOT_MET],
                "no_verdict": counts[NO_VERDICT],
            }
        return {
            "samples": self.samples,
            "errors": self.errors,
            "mean_rubric_score": self.score_sum / self.scored if self.scored else None,
            "rubric_scored": self.scored,
            "categories": categories,
        }

    def format(self) -> str:
        """Human-readable lines (``""`` when no row had criteria)."""
        return format_summary(self.to_dict())


def format_summary(summary: dict[str, Any]) -> str:
    """The lines of a :meth:`CriteriaTally.to_dict` (``""`` for an empty one)."""
    if not summary:
        return ""
    score = summary["mean_rubric_score"]
    head = f"rubric       {summary['samples']} samples with criteria"
    if summary["errors"]:
        head += f" ({summary['errors']} with an error left out)"
    if score is not None:
        head += f", mean rubric score {score:.4f}"
        if summary["rubric_scored"] < summary["samples"]:
            head += f" (over {summary['rubric_scored']})"
    lines = [head, "  criteria met, mean share per sample:"]
    for category, entry in summary["categories"].items():
        share = entry["mean_share_met"]
        cell = "n/a" if share is None else f"{100 * share:.1f}%"
        extra = f", {entry['no_verdict']} without a verdict" if entry["no_verdict"] else ""
        lines.append(
            f"  {category:<12} {cell:>6}  ({entry['samples']} samples, {entry['criteria']} criteria{extra})"
        )
    return "\n".join(lines)


__all__ = [
    "CATEGORIES",
    "MET",
    "NOT_MET",
    "NO_CATEGORY",
    "NO_VERDICT",
    "CriteriaTally",
    "category_of",
    "format_summary",
    "number",
    "ordered_categories",
    "row_criteria",
    "verdict_of",
]
