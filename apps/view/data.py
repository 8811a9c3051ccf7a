"""What each page of the viewer shows, as plain data: table pages, a row, an eval run's problems, an RL run's
curves and samples. The web layer (``app.py``) only turns these into JSON (NaN as null, there) and HTML.
"""

from __future__ import annotations

import math
import re
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from rewardlab.eval import metrics as M
from rewardlab.view import flags as F
from rewardlab.view.criteria import criteria_rows, criteria_summary, judge_view
from rewardlab.view.rows import MALFORMED, RUBRIC_SCORE, SCORED_COLUMNS, Column, Query, RowIndex, parse_line
from rewardlab.view.sources import Source, read_json

EVAL_COLUMNS = (
    Column("id", "problem_id"),
    Column("sample", "sample_index", "number"),
    Column("reward", "reward", "number"),
    Column("error", "error"),
    Column("correct", "correct"),
    Column("answer", "answer"),
    Column("finish_reason", "finish_reason"),
    Column("completion_chars", "completion", "length"),
    RUBRIC_SCORE,
)
RL_COLUMNS = (
    Column("step", "step", "number"),
    Column("group", "group", "number"),
    Column("index", "index", "number"),
    Column("reward", "reward", "number"),
    Column("error", "error"),
    Column("completion_chars", "completion", "length"),
    Column("reward_time_s", "reward_time_s", "number"),
    RUBRIC_SCORE,
)
PREVIEW_CHARS = 160
# Entropy collapse, as RL runs log it: percentiles of a step's per-token policy entropies (``entropy/p10``
# ... ``entropy/p90``, nats) and the share of its response tokens below 0.05 nats. The mean alone cannot
# tell every token narrowing a little from a growing share going deterministic while the rest stays wide.
ENTROPY_MEAN = "entropy"
ENTROPY_PERCENTILE = re.compile(r"^entropy/p(\d+)$")
NEAR_DETERMINISTIC = "entropy/near_deterministic"
# A curriculum's state, as RL runs log it (issue 50): which prompts it draws next and why. Scalars by what they
# measure (a difficulty on the data's own scale, shares in 0..1, counts of hinted groups and samples) with
# their legend labels, then per-source families whose keys carry the source's name after the family.
CURRICULUM = "curriculum/"
CURRICULUM_SCALARS = {
    "difficulty": (
        ("curriculum/target_difficulty", "target difficulty"),
        ("curriculum/drawn_difficulty", "drawn difficulty"),
    ),
    "shares": (
        ("curriculum/prefix_fraction", "prefix fraction"),
        ("curriculum/hint_fraction", "hint fraction"),
        ("curriculum/hint_solved", "hint solved"),
        ("curriculum/high_p_share", "high-p share"),
    ),
    "hints": (("curriculum/hint_groups", "hinted groups"), ("curriculum/hint_samples", "hinted samples")),
}
CURRICULUM_FAMILY = re.compile(r"^curriculum/(p|score|drawn)/(.+)$")


# ----------------------------------------------------------------------------------------------------------
# One source's data
# ----------------------------------------------------------------------------------------------------------
@dataclass
class Fields:
    """Which row fields hold the prompt, completion and reference (``score --field`` renames them)."""

    prompt: str = "prompt"
    completion: str = "completion"
    reference: str = "reference"


class SourceData:
    """A source's rows (a lazily built, refreshed ``RowIndex``) and its run files."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._index: RowIndex | None = None
        self._problems: tuple[int, list[dict]] | None = None
        self._criteria: tuple[int, dict[str, Any]] | None = None
        self.fields = Fields()
        self.default_verifier: str | None = None
        if source.kind == "scored":
            record = read_json(source.path.with_name(source.path.name + ".run.json"))
            fmap = record.get("field_map") or {}
            self.fields = Fields(**{k: fmap[k] for k in ("prompt", "completion", "reference") if k in fmap})
            self.default_verifier = record.get("source")

    @property
    def rows_path(self):
        folder = self.source.path
        return {"scored": folder, "eval": folder / "samples.jsonl", "rl": folder / "rollouts.jsonl"}[
            self.source.kind
        ]

    def _columns(self) -> tuple[Column, ...]:
        if self.source.kind == "eval":
            return EVAL_COLUMNS
        if self.source.kind == "rl":
            return RL_COLUMNS
        return tuple(
            Column(c.name, self.fields.completion, c.kind) if c.name == "completion_chars" else c
            for c in SCORED_COLUMNS
        )

    def index(self) -> RowIndex | None:
        """The rows, refreshed (new lines of a run in progress); ``None`` while the file does not exist."""
        with self._lock:
            if self._index is None:
                if not self.rows_path.is_file():
                    return None
                default = {"verifier": self.default_verifier} if self.default_verifier else {}
                self._index = RowIndex(self.rows_path, self._columns(), default, background=True)
            else:
                self._index.refresh()
            return self._index

    # -- table pages ---------------------------------------------------------------------------------------
    def page(self, query: Query, page: int, size: int) -> dict[str, Any]:
        """One page of a table, as Tabulator's remote pagination reads it."""
        index = self.index()
        if index is None:
            return {"last_page": 1, "last_row": 0, "data": []}
        rows = index.query(query)
        size = max(1, min(size, 500))
        last_page = max(1, math.ceil(len(rows) / size))
        chosen = rows[(page - 1) * size : page * size]
        return {
            "last_page": last_page,
            "last_row": len(rows),
            "total": len(index),
            "data": [self._table_row(index, int(i)) for i in chosen],
        }

    def _table_row(self, index: RowIndex, i: int) -> dict[str, Any]:
        """A table row's cells, read from its line (a page is shown before the columns are indexed)."""
        row = index.row(i)
        out = index.cells(row)
        out["row"] = i
        out["line"] = int(index.line_numbers[i])
        out["error"] = out["error"] or None
        out["id"] = out.get("id") if out.get("id") is not None else f"line {out['line']}"
        text = (
            row.get("_line") if row.get("_malformed") else F.completion_text(row.get(self.fields.completion))
        )
        out["preview"] = (text or "")[:PREVIEW_CHARS]
        return out

    def facets(self) -> dict[str, Any]:
        """The filter menus' counts (error kinds, verifiers) and ``columns``: how many rows have a value in
        each optional column (``rubric_score``: the table shows it when some rows have one)."""
        index = self.index()
        if index is None:
            return {"error": {}, "verifier": {}, "columns": {}}
        present = {RUBRIC_SCORE.name: int(np.isfinite(index.column(RUBRIC_SCORE.name)).sum())}
        return {**index.facets(), "columns": present}

    def criteria(self) -> dict[str, Any]:
        """The rubric summary of every row carrying criteria, and of each RL step's (cached until the
        file changes): :func:`rewardlab.view.criteria.criteria_summary`."""
        index = self.index()
        if index is None:
            return {"summary": {}, "steps": {}}
        index.error_kinds()  # the columns first: their arrival is a change of the index
        if self._criteria and self._criteria[0] == index.generation:
            return self._criteria[1]
        generation = index.generation
        out = criteria_summary(index, by_step=self.source.kind == "rl")
        self._criteria = (generation, out)
        return out

    # -- a row's page --------------------------------------------------------------------------------------
    def row_view(self, i: int) -> dict[str, Any] | None:
        """Everything a row's page shows: its fields, the answer's place, test output, instruction verdicts."""
        index = self.index()
        if index is None or not 0 <= i < len(index):
            return None
        row = index.row(i)
        if row.get("_malformed"):
            return {"malformed": True, "line": int(index.line_numbers[i]), "raw": row["_line"], "row": i}
        return self._describe(row, i, int(index.line_numbers[i]))

    def _describe(self, row: dict[str, Any], i: int, line: int) -> dict[str, Any]:
        completion = F.completion_text(row.get(self.fields.completion))
        details = row.get("details") if isinstance(row.get("details"), dict) else {}
        span = F.answer_span(row.get(self.fields.completion), details)
        prompt = row.get(self.fields.prompt)
        reference = row.get(self.fields.reference)
        if self.source.kind == "eval":
            problem = self.problem_record(str(row.get("problem_id")))
            prompt = problem.get("prompt", prompt)
            reference = problem.get("reference", details.get("gold", reference))
        known = {
            self.fields.prompt,
            self.fields.completion,
            self.fields.reference,
            "details",
            "reward",
            "error",
        }
        return {
            "malformed": False,
            "row": i,
            "line": line,
            "id": row.get("id", row.get("problem_id", row.get("key"))),
            "reward": row.get("reward"),
            "error": row.get("error"),
            "verifier": row.get("verifier") or self.default_verifier,
            "prompt": F.completion_text(prompt) if prompt is not None else None,
            "completion": completion,
            "parts": _split(completion, span),
            "extracted": details.get("extracted"),
            "reference": reference,
            "details": details,
            "cases": details.get("cases") if isinstance(details.get("cases"), list) else None,
            "instructions": details.get("instructions")
            if isinstance(details.get("instructions"), list)
            else None,
            "criteria": criteria_rows(details),
            "judge": judge_view(details),
            "flags": F.sample_flags(
                {**row, "completion": row.get(self.fields.completion), "details": details}
            ),
            "other": {k: v for k, v in row.items() if k not in known},
        }

    # -- eval runs -----------------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        return read_json(self.source.path / "summary.json")

    def problem_record(self, problem_id: str) -> dict[str, Any]:
        """The problem's line of ``problems.jsonl`` (prompt, reference), ``{}`` in runs without one."""
        path = self.source.path / "problems.jsonl"
        if not path.is_file():
            return {}
        with path.open("rb") as handle:
            for raw in handle:
                row = parse_line(raw)
                if row and str(row.get("problem_id")) == problem_id:
                    return row
        return {}

    def problems(self) -> list[dict[str, Any]]:
        """Per problem: samples, correct, pass@k and maj@k for the run's ks (cached until the file grows)."""
        index = self.index()
        if index is None:
            return []
        if self._problems and self._problems[0] == len(index):
            return self._problems[1]
        out = problem_metrics(index, self.summary().get("ks") or [1])
        self._problems = (len(index), out)
        return out

    # -- RL runs -------------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """``metrics.jsonl`` as series: ``steps`` and, per numeric key, one value (or ``None``) per step."""
        path = self.source.path / "metrics.jsonl"
        rows: list[dict] = []
        malformed = 0
        if path.is_file():
            with path.open("rb") as handle:
                for raw in handle:
                    if raw.strip():
                        row = parse_line(raw)
                        if row is None or not isinstance(row.get("step"), int | float):
                            malformed += 1
                        elif not row.get("event"):
                            rows.append(row)
        return metric_series(rows, malformed)

    def steps(self) -> list[int]:
        """Steps with logged samples."""
        index = self.index()
        if index is None:
            return []
        steps = index.column("step")
        return sorted({int(s) for s in steps[~np.isnan(steps)]})

    def step_samples(self, step: int, *, slowest_first: bool = False) -> list[dict[str, Any]]:
        """The logged samples of ``step``, grouped, each with its hack flags and answer place;
        ``slowest_first``: ordered by reward time instead, slowest first (untimed ones last)."""
        index = self.index()
        if index is None:
            return []
        rows = index.query(Query(equals={"step": str(step)}))
        samples = [index.row(int(i)) for i in rows]
        groups: dict[Any, list[dict]] = defaultdict(list)
        for s in samples:
            groups[s.get("group")].append(s)
        out = []
        for group in groups.values():
            for sample, found in zip(group, F.group_flags(group), strict=True):
                out.append(self._rl_sample(sample, found))
        if slowest_first:  # flags first: they compare a sample with its group
            out.sort(key=lambda s: -_seconds(s.get("reward_time_s")))
        return out

    def _rl_sample(self, sample: dict[str, Any], found: list[str]) -> dict[str, Any]:
        if sample.get("_malformed"):
            return {"malformed": True, "raw": sample["_line"], "flags": [], "parts": []}
        text = F.completion_text(sample.get("completion"))
        span = F.answer_span(sample.get("completion"), sample.get("details"))
        keep = {k: v for k, v in sample.items() if k not in ("details", "completion")}
        return {**keep, "flags": found, "parts": _split(text, span)}


def _seconds(value: Any) -> float:
    """A row's reward time for sorting (``-inf``, last when slowest first, where it has none)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else -math.inf


def _split(text: str, span: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The completion in pieces, the answer's piece marked, for the page to highlight."""
    if span is None:
        return [{"text": text, "answer": False}]
    start, end = span
    pieces = [(text[:start], False), (text[start:end], True), (text[end:], False)]
    return [{"text": t, "answer": a} for t, a in pieces if t]


def problem_metrics(index: RowIndex, ks: list[int]) -> list[dict[str, Any]]:
    """pass@k and maj@k of every problem of an eval run's samples (the run's own metric functions)."""
    # lazy: math-verify and sympy take seconds to import; only this page groups answers
    from rewardlab.verifiers.math import group_answers

    ids = index.column("id")
    correct = np.array([c == "true" for c in index.column("correct")], dtype=bool)
    answers = index.column("answer")
    by_problem: dict[str, list[int]] = defaultdict(list)
    for i, pid in enumerate(ids.tolist()):
        by_problem[str(pid)].append(i)
    pids = list(by_problem)
    n = np.array([len(by_problem[p]) for p in pids])
    c = np.array([int(correct[by_problem[p]].sum()) for p in pids])
    usable = [k for k in ks if k <= n.max()] if len(n) else []
    pass_k = M.pass_at_k_matrix(n, c, usable) if usable else np.zeros((len(pids), 0))
    classes = [group_answers([answers[i] for i in by_problem[p]]) for p in pids]
    good = [
        {k for k, i in zip(cl, by_problem[p], strict=True) if k is not None and correct[i]}
        for cl, p in zip(classes, pids, strict=True)
    ]
    maj_k = M.maj_at_k_matrix(classes, good, usable) if usable else np.zeros((len(pids), 0))
    return [
        {
            "id": p,
            "samples": int(n[j]),
            "correct": int(c[j]),
            **{f"pass@{k}": float(pass_k[j, m]) for m, k in enumerate(usable)},
            **{f"maj@{k}": float(maj_k[j, m]) for m, k in enumerate(usable)},
        }
        for j, p in enumerate(pids)
    ]


def metric_series(rows: list[dict[str, Any]], malformed: int = 0) -> dict[str, Any]:
    """Rows of ``metrics.jsonl`` as aligned series, one per numeric key."""
    steps = [row["step"] for row in rows]
    keys = sorted({k for row in rows for k, v in row.items() if k != "step" and _is_number(v)})
    series = {k: [float(r[k]) if _is_number(r.get(k)) else None for r in rows] for k in keys}
    return {
        "steps": steps,
        "series": series,
        "malformed": malformed,
        "entropy": entropy_panel(keys),
        "curriculum": curriculum_panel(keys),
    }


def entropy_panel(keys: list[str]) -> dict[str, Any] | None:
    """Which series the RL page's entropy panel plots: the percentiles (``key`` and ``p``, lowest first), the
    mean and the near-deterministic share (``None`` when not logged). ``None`` for a run that logged neither
    percentiles nor the share (one from before they were logged: its mean is one of the curves already)."""
    found = sorted((int(m.group(1)), k) for k in keys if (m := ENTROPY_PERCENTILE.match(k)))
    near = NEAR_DETERMINISTIC if NEAR_DETERMINISTIC in keys else None
    if not found and near is None:
        return None
    return {
        "percentiles": [{"key": k, "p": p} for p, k in found],
        "mean": ENTROPY_MEAN if ENTROPY_MEAN in keys else None,
        "near_deterministic": near,
    }


def curriculum_panel(keys: list[str]) -> dict[str, Any] | None:
    """Which series the RL page's curriculum panel plots: the scalars logged, each group a list of ``key`` and
    ``label`` (``difficulty``: AdaRFT's target and the drawn prompts' mean, on the data's scale; ``shares``:
    prefix fraction, hint fraction, share of hinted groups solved, high-p share, in 0..1; ``hints``: hinted groups and samples, counts), and
    the per-source families ``p`` (sampling probability), ``score`` (the bandit's score) and ``drawn`` (share
    of the step's prompts), each a list of ``key`` and ``source`` sorted by source. ``None`` for a run that
    logged no ``curriculum/`` key (no curriculum, or one from before they were logged)."""
    present = set(keys)
    if not any(k.startswith(CURRICULUM) for k in present):
        return None
    panel: dict[str, Any] = {
        group: [{"key": k, "label": label} for k, label in pairs if k in present]
        for group, pairs in CURRICULUM_SCALARS.items()
    }
    families: dict[str, list[tuple[str, str]]] = {"p": [], "score": [], "drawn": []}
    for k in present:
        if m := CURRICULUM_FAMILY.match(k):
            families[m.group(1)].append((m.group(2), k))
    for family, found in families.items():
        panel[family] = [{"key": k, "source": source} for source, k in sorted(found)]
    return panel


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = ["MALFORMED", "SourceData", "curriculum_panel", "entropy_panel", "metric_series", "problem_metrics"]
