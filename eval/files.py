"""An evaluation's result (:class:`EvalReport`) and its run folder: ``samples.jsonl``, ``problems.jsonl``,
``summary.json``, ``report.md`` and ``pass_at_k.png`` (``generations.jsonl`` is the sampler's:
:mod:`.generate`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.eval.benchmarks import Problem
from rewardlab.eval.report import plot_pass_at_k, render_markdown
from rewardlab.eval.samples import Sample
from rewardlab.types import jsonable


@dataclass
class EvalReport:
    """What an evaluation produced (also written to the run folder)."""

    summary: dict[str, Any]
    samples: list[Sample]
    run_dir: str | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)
    """``problems.jsonl``'s rows (:func:`problem_rows`)."""


def problem_rows(problems: Sequence[Problem], prompts: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per problem for ``problems.jsonl`` (so a viewer can show what ``samples.jsonl``'s
    ``problem_id`` was asked): ``prompts`` holds the text sent to the model, else the problem's own prompt."""
    rows = []
    for p in problems:
        row: dict[str, Any] = {
            "problem_id": p.id,
            "prompt": (prompts or {}).get(p.id, p.prompt),
            "reference": p.reference,
        }
        if "subset" in p.metadata:
            row["subset"] = p.metadata["subset"]
        if p.metadata:
            row["metadata"] = p.metadata
        rows.append(row)
    return rows


def write_run(report: EvalReport, run_dir: Path) -> None:
    """Writes the run folder's files (``samples.jsonl``, ``problems.jsonl``, summary, report, plot)."""

    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "samples.jsonl").open("w") as handle:
        for sample in report.samples:
            handle.write(json.dumps(jsonable(asdict(sample))) + "\n")
    with (run_dir / "problems.jsonl").open("w") as handle:
        handle.writelines(json.dumps(jsonable(row)) + "\n" for row in report.problems)
    (run_dir / "summary.json").write_text(json.dumps(jsonable(report.summary), indent=2) + "\n")
    (run_dir / "report.md").write_text(render_markdown(report.summary))
    plot_pass_at_k(report.summary, run_dir / "pass_at_k.png")
