"""What the viewer shows of rubric and judge rewards: a row's criteria table and judge verdict, and the
summary of criteria met per category over a file's rows (and per RL step).

The criteria's shape and the summary's rule (mean share met per category, criteria without a verdict left
out and counted) are :mod:`rewardlab.rewardmodels.judge.criteria`'s, so that ``rewardlab eval``'s summary and the viewer
agree. Text here comes from a policy's completion and a judge's output: the pages set it as text.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np

from rewardlab.rewardmodels.judge.criteria import CriteriaTally, category_of, number, row_criteria, verdict_of
from rewardlab.view.rows import RowIndex

CRITERIA_NEEDLE = b'"criteria"'
"""Bytes every line with a criteria list holds: only those lines (and rows with an error) are parsed."""
JUDGE_KEYS = ("verdict", "votes", "soft_score", "outputs")
"""``details`` keys of the judge reward source (``LLMJudge``): a row with one of them gets a judge panel."""


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def criteria_rows(details: Any) -> dict[str, Any] | None:
    """A row's criteria as its page's table shows them (``None`` when its details hold no criteria list):
    ``items``, each with ``criterion``, ``category``, ``weight``, ``gate``, ``verdict`` (``met``, ``not
    met``, ``no verdict``), ``probability`` and ``verdict_text``; ``score`` and ``aggregation`` of the
    rubric; ``by_category``: this row's met and judged counts per category."""
    criteria = row_criteria(details)
    if criteria is None:
        return None
    items = [
        {
            "criterion": _text(c.get("criterion")),
            "category": category_of(c),
            "weight": number(c.get("weight")),
            "gate": c.get("gate") is True,
            "verdict": verdict_of(c),
            "probability": number(c.get("probability")),
            "verdict_text": _text(c.get("verdict_text")),
        }
        for c in criteria
    ]
    tally = CriteriaTally()
    tally.add({"details": details})
    return {
        "items": items,
        "score": number(details.get("rubric_score")),
        "aggregation": _text(details.get("aggregation")),
        "by_category": (tally.to_dict() or {}).get("categories", {}),
    }


def judge_view(details: Any) -> dict[str, Any] | None:
    """The judge's verdict, votes, soft score and outputs (each judgment's text), ``None`` for rows of other
    sources."""
    if not isinstance(details, dict) or not any(k in details for k in JUDGE_KEYS):
        return None
    outputs = details.get("outputs")
    return {
        "verdict": _text(details.get("verdict")),
        "votes": [_text(v) for v in details["votes"]] if isinstance(details.get("votes"), list) else [],
        "soft_score": number(details.get("soft_score")),
        "outputs": [_text(o) for o in outputs] if isinstance(outputs, list) else [],
    }


def criteria_summary(index: RowIndex, *, by_step: bool = False) -> dict[str, Any]:
    """The rubric summary (:meth:`rewardlab.rewardmodels.judge.criteria.CriteriaTally.to_dict`, ``{}`` when no row has
    criteria) of the rows of ``index``; with ``by_step`` (an RL run's ``rollouts.jsonl``) also of each
    step's rows, by step. Only lines holding ``"criteria"`` and rows with an error are read."""
    errors = np.flatnonzero(index.error_kinds() != "")
    rows = np.union1d(index.rows_containing(CRITERIA_NEEDLE), errors)
    overall = CriteriaTally()
    steps: dict[str, CriteriaTally] = defaultdict(CriteriaTally)
    for i in rows.tolist():
        row = index.row(int(i))
        overall.add(row)
        if by_step and not row.get("_malformed"):
            steps[str(row.get("step"))].add(row)
    return {
        "summary": overall.to_dict(),
        "steps": {step: summary for step, tally in steps.items() if (summary := tally.to_dict())},
    }


__all__ = ["criteria_rows", "criteria_summary", "judge_view"]
