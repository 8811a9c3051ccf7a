"""Step-labelled data for process reward models: one in-memory shape, read from the public layouts.

:class:`StepExample` is a prompt, its solution's steps and one label per step (1.0 = the step is right,
0.0 = wrong, a value in between = a soft label, ``None`` = not labelled). :func:`load_step_examples` reads
JSONL (or a list of dicts) in any of these layouts, detected per row from its keys:

``stepwise`` (TRL's stepwise supervision; what ``rewardlab rm label-steps`` writes)
    ``{"prompt": str, "completions": [step, ...], "labels": [bool | float, ...]}``, optional
    ``reference`` / ``answer`` (the gold final answer) and ``id``.
``math_shepherd`` (Math-Shepherd, Wang et al. 2024)
    ``{"input": "<question> Step 1: ... ки\\nStep 2: ... ки", "label": "<same text with + or - in place of
    each ки>"}``; the question is the text before ``Step 1:`` when present.
``prm800k`` (PRM800K, Lightman et al. 2023)
    ``{"question": {"problem", "ground_truth_answer"}, "label": {"steps": [{"completions": [{"text",
    "rating"}], "chosen_completion": int | null}]}}``; rating 1 is right, -1 wrong, 0 neutral (counted as
    right by default, ``neutral=...`` changes it); the chosen completion of each step is read (the first
    when none was chosen), up to the first wrong step.
``processbench`` (ProcessBench, Zheng et al. 2024)
    ``{"problem": str, "steps": [str, ...], "label": int}`` where ``label`` is the index of the earliest
    wrong step or -1 when all are right; steps after the first wrong one are left unlabelled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.rewardmodels.prm.steps import MATH_SHEPHERD_TAG, split_steps
from rewardlab.types import Record, jsonable

FORMATS = ("stepwise", "math_shepherd", "prm800k", "processbench")


@dataclass
class StepExample:
    """A solution as steps, with a label per step.

    Attributes:
        prompt: The problem statement.
        steps: The solution's steps, in order.
        labels: One label per step: 1.0 right, 0.0 wrong, in between soft (the fraction of rollouts from
            that step that reach the right answer), ``None`` unlabelled. ``None`` for the whole list when
            the example carries no labels (scoring only).
        reference: The gold final answer, when known (needed for Monte Carlo labelling).
        id: The row's identifier.
        metadata: The rest of the row.
    """

    prompt: str
    steps: list[str]
    labels: list[float | None] | None = None
    reference: Any = None
    id: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def first_error(self, threshold: float = 0.5) -> int:
        """Index of the first step labelled below ``threshold``, or -1 when none is (ProcessBench's label)."""
        return first_error(self.labels or [], threshold)

    def to_dict(self) -> dict[str, Any]:
        """The stepwise layout (``prompt``, ``completions``, ``labels``, ``reference``, ``id``)."""
        row: dict[str, Any] = {"prompt": self.prompt, "completions": list(self.steps), "labels": self.labels}
        if self.reference is not None:
            row["reference"] = self.reference
        if self.id is not None:
            row["id"] = self.id
        for key, value in self.metadata.items():
            row.setdefault(key, value)
        return row

    def to_record(self, joiner: str = "\n"):
        """A :class:`~rewardlab.types.Record` whose completion is the steps joined by ``joiner`` and whose
        ``metadata["steps"]`` keeps the exact steps (so no re-splitting is needed)."""

        return Record(
            id=self.id,
            prompt=self.prompt,
            completion=joiner.join(self.steps),
            reference=self.reference,
            metadata={**self.metadata, "steps": list(self.steps), "labels": self.labels},
        )


def first_error(labels: Sequence[float | None], threshold: float = 0.5) -> int:
    """Index of the first label below ``threshold`` (``None`` labels are skipped), or -1."""
    for i, label in enumerate(labels):
        if label is not None and label < threshold:
            return i
    return -1


def _label_value(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("+", "true", "1", "yes", "correct", "positive"):
            return 1.0
        if v in ("-", "false", "0", "no", "incorrect", "negative"):
            return 0.0
        return float(v)
    return float(value)


def detect_format(row: dict[str, Any]) -> str:
    """The layout of one row (one of :data:`FORMATS`); raises ``ValueError`` when none fits."""
    if "completions" in row and "prompt" in row:
        return "stepwise"
    if "input" in row and isinstance(row.get("label"), str):
        return "math_shepherd"
    if isinstance(row.get("question"), dict) and isinstance(row.get("label"), dict):
        return "prm800k"
    if "steps" in row and ("problem" in row or "prompt" in row):
        return "processbench"
    raise ValueError(f"cannot tell the PRM data layout of a row with keys {sorted(row)}")


_STEP1 = re.compile(r"Step\s*1\s*:")


def _from_math_shepherd(row: dict[str, Any]) -> StepExample:
    text, label_text = row["input"], row.get("label") or ""
    tag = MATH_SHEPHERD_TAG
    match = _STEP1.search(text)
    cut = match.start() if match else 0
    prompt, solution = text[:cut].strip(), text[cut:]
    steps = split_steps(solution, step_tag=tag)
    labels: list[float | None] = []
    # The label text is the input with every tag replaced by one character (+ or -): the i-th tag at
    # position p in the input sits at p - i * (len(tag) - 1) in the label text.
    positions = [m.start() for m in re.finditer(re.escape(tag), text)]
    for i, pos in enumerate(positions):
        at = pos - i * (len(tag) - 1)
        char = label_text[at] if 0 <= at < len(label_text) else ""
        labels.append(1.0 if char == "+" else 0.0 if char == "-" else None)
    # Trailing untagged text makes one more (unlabelled) step.
    labels = labels[: len(steps)] + [None] * max(0, len(steps) - len(labels))
    rest = {k: v for k, v in row.items() if k not in ("input", "label")}
    return StepExample(
        prompt=prompt,
        steps=steps.steps,
        labels=labels if label_text else None,
        reference=row.get("reference", row.get("answer")),
        id=row.get("id"),
        metadata=rest,
    )


def _from_prm800k(row: dict[str, Any], neutral: float) -> StepExample:
    question = row["question"]
    steps: list[str] = []
    labels: list[float | None] = []
    for step in row["label"].get("steps") or []:
        completions = step.get("completions") or []
        chosen = step.get("chosen_completion")
        if chosen is None:
            if not completions:
                break
            chosen = 0
        completion = completions[chosen]
        rating = completion.get("rating")
        steps.append(str(completion.get("text", "")).strip())
        labels.append(None if rating is None else 1.0 if rating > 0 else neutral if rating == 0 else 0.0)
        if rating is not None and rating < 0:
            break  # raters stop at the first wrong step
    return StepExample(
        prompt=str(question.get("problem", "")),
        steps=steps,
        labels=labels,
        reference=question.get("ground_truth_answer"),
        id=row.get("id"),
        metadata={"finish_reason": row["label"].get("finish_reason")},
    )


def _from_processbench(row: dict[str, Any]) -> StepExample:
    steps = [str(s) for s in row["steps"]]
    label = row.get("label")
    labels: list[float | None] | None = None
    if label is not None:
        label = int(label)
        if label < 0:
            labels = [1.0] * len(steps)
        else:
            labels = [1.0] * label + [0.0] + [None] * (len(steps) - label - 1)
    rest = {k: v for k, v in row.items() if k not in ("problem", "prompt", "steps", "label", "id")}
    return StepExample(
        prompt=str(row.get("problem", row.get("prompt", ""))),
        steps=steps,
        labels=labels,
        reference=row.get("reference", row.get("answer")),
        id=row.get("id"),
        metadata=rest,
    )


def _from_stepwise(row: dict[str, Any]) -> StepExample:
    steps = [str(s) for s in row["completions"]]
    raw = row.get("labels")
    labels = None if raw is None else [_label_value(v) for v in raw]
    if labels is not None and len(labels) != len(steps):
        raise ValueError(f"row has {len(steps)} steps but {len(labels)} labels")
    prompt = row["prompt"]
    if isinstance(prompt, list):  # chat messages: the text of the user turns
        prompt = "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    rest = {
        k: v
        for k, v in row.items()
        if k not in ("prompt", "completions", "labels", "reference", "answer", "id")
    }
    return StepExample(
        prompt=str(prompt),
        steps=steps,
        labels=labels,
        reference=row.get("reference", row.get("answer")),
        id=row.get("id"),
        metadata=rest,
    )


def example_from_row(row: dict[str, Any], *, fmt: str = "auto", neutral: float = 1.0) -> StepExample:
    """One row of any supported layout as a :class:`StepExample` (``fmt="auto"`` detects the layout)."""
    fmt = detect_format(row) if fmt == "auto" else fmt
    if fmt == "stepwise":
        return _from_stepwise(row)
    if fmt == "math_shepherd":
        return _from_math_shepherd(row)
    if fmt == "prm800k":
        return _from_prm800k(row, neutral)
    if fmt == "processbench":
        return _from_processbench(row)
    raise ValueError(f"unknown PRM data format {fmt!r} (known: auto, {', '.join(FORMATS)})")


def load_step_examples(
    source: str | Path | Iterable[dict[str, Any]], *, fmt: str = "auto", neutral: float = 1.0
) -> list[StepExample]:
    """Reads step-labelled examples from a JSONL file (or a JSON list file, or an iterable of dicts).

    Args:
        source: Path of a ``.jsonl`` / ``.json`` file, or rows.
        fmt: ``"auto"`` (per row) or one of :data:`FORMATS`.
        neutral: The label given to PRM800K's neutral (rating 0) steps.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"no such data file: {path}")
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            rows = json.loads(text)
        else:
            rows = []
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{n}: invalid JSON: {exc}") from exc
    else:
        rows = list(source)
    examples = []
    for i, row in enumerate(rows):
        example = example_from_row(row, fmt=fmt, neutral=neutral)
        if example.id is None:
            example.id = i
        examples.append(example)
    return examples


def write_step_examples(examples: Iterable[StepExample], path: str | Path) -> None:
    """Writes examples as stepwise JSONL (the layout :func:`load_step_examples` reads back)."""

    with open(path, "w", encoding="utf-8") as fh:
        for example in examples:
            fh.write(json.dumps(jsonable(example.to_dict()), ensure_ascii=False) + "\n")


__all__ = [
    "FORMATS",
    "StepExample",
    "detect_format",
    "example_from_row",
    "first_error",
    "load_step_examples",
    "write_step_examples",
]
