"""Shaping applied to scored rows (``rewardlab score --shape ...``), and weighted sums of reward sources.

:func:`shape_results` runs a pipeline over ``(records, results)`` and writes the shaped reward back, keeping
the raw one in ``details["shaping"]``. A pipeline made only of row-level transforms (:mod:`.rows`:
``repetition_penalty``, ``cosine_length``) runs on the rows in plain Python, without torch; any other
builds a :class:`~.pipeline.ShapingBatch` (torch) and runs on it. Both give the same rewards. Context comes
from the rows:

* group: ``metadata["group"]`` (or ``group_id`` / ``prompt_id`` / ``uid``), else the prompt text;
* length: ``metadata["num_tokens"]`` / ``metadata["length"]``, else tokens of ``tokenizer`` if given,
  else characters of the completion;
* truncated: ``metadata["truncated"]`` or ``metadata["finish_reason"] == "length"``;
* correct: ``details["correct"]`` of the result if present (else the transforms threshold the reward);
* per-step rewards: ``details["step_rewards"]`` (or ``step_scores``) of the result;
* texts: the completion text of each row (``repetition_penalty``);
* components: ``details["components"]`` (``{name: {"reward": x, ...}}`` or ``{name: x}``), as written by
  :class:`WeightedSumSource` (:class:`rewardlab.verifiers.combine.CombinedSource`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rewardlab.types import INVALID_LINE_KINDS, Record, Result, as_reward, error_kind, jsonable
from rewardlab.verifiers.combine import CombinedSource

from .rows import ShapingRow, shape_row, to_float32
from .specs import ShapingPipeline, build_pipeline

if TYPE_CHECKING:
    from .pipeline import ShapingBatch

GROUP_KEYS = ("group", "group_id", "prompt_id", "uid")
LENGTH_KEYS = ("num_tokens", "length", "completion_tokens")
STEP_KEYS = ("step_rewards", "step_scores")


def _group_ids(records: Sequence[Record]) -> list[int]:
    ids: dict[Any, int] = {}
    out = []
    for rec in records:
        meta = rec.metadata or {}
        key = next((("m", repr(meta[k])) for k in GROUP_KEYS if k in meta), None)
        if key is None:
            key = ("p", rec.prompt_text)
        out.append(ids.setdefault(key, len(ids)))
    return out


def _lengths(records: Sequence[Record], tokenizer: Any | None) -> list[float]:
    out = []
    for rec in records:
        meta = rec.metadata or {}
        value = next((meta[k] for k in LENGTH_KEYS if isinstance(meta.get(k), (int, float))), None)
        if value is None:
            text = rec.completion_text
            value = len(tokenizer(text, add_special_tokens=False)["input_ids"]) if tokenizer else len(text)
        out.append(float(value))
    return out


def _truncated(records: Sequence[Record]) -> list[bool]:
    out = []
    for rec in records:
        meta = rec.metadata or {}
        out.append(bool(meta.get("truncated", False)) or meta.get("finish_reason") == "length")
    return out


def _components(results: Sequence[Result]) -> dict[str, list[float]]:
    names: list[str] = []
    for res in results:
        for name in (res.details or {}).get("components", {}) or {}:
            if name not in names:
                names.append(name)
    comps = {}
    for name in names:
        values = []
        for res in results:
            part = ((res.details or {}).get("components") or {}).get(name, 0.0)
            values.append(_reward_or_zero(part["reward"] if isinstance(part, Mapping) else part))
        comps[name] = values
    return comps


def _correct(results: Sequence[Result]) -> list[bool] | None:
    """Each result's ``details["correct"]`` when every result has one, else ``None``."""
    if results and all(isinstance((r.details or {}).get("correct"), bool) for r in results):
        return [r.details["correct"] for r in results]
    return None


def _step_rows(results: Sequence[Result]) -> list[list[float]]:
    rows = []
    for i, res in enumerate(results):
        key = next((k for k in STEP_KEYS if k in (res.details or {})), None)
        if key is None and res.error is None:
            raise ValueError(
                f"row {i}: per-step shaping needs details['step_rewards'] from the reward source"
            )
        rows.append([float(x) for x in (res.details.get(key) or [])] if key else [])
    return rows


def _reward_or_zero(value: Any) -> float:
    """A reward for the shaping batch: a missing one (``None``, NaN) enters as 0, as an error does."""
    return as_reward(value) or 0.0


def results_to_batch(
    records: Sequence[Record], results: Sequence[Result], *, tokenizer: Any | None = None, steps: bool = False
) -> ShapingBatch:
    """The :class:`ShapingBatch` of scored rows (see the module docstring for where each field comes from)."""
    # lazy: torch (the rl extra); scored rows shaped only by row-level transforms never build a batch
    import torch

    from .functional import pad_steps
    from .pipeline import ShapingBatch

    if len(records) != len(results):
        raise ValueError(f"{len(records)} records but {len(results)} results")
    correct = _correct(results)
    step_rewards = step_mask = None
    if steps:
        step_rewards, step_mask = pad_steps(_step_rows(results))
    return ShapingBatch(
        rewards=torch.tensor([_reward_or_zero(r.reward) for r in results], dtype=torch.float32),
        group=torch.tensor(_group_ids(records), dtype=torch.long),
        lengths=torch.tensor(_lengths(records, tokenizer), dtype=torch.float32),
        correct=None if correct is None else torch.tensor(correct, dtype=torch.bool),
        truncated=torch.tensor(_truncated(records), dtype=torch.bool),
        step_rewards=step_rewards,
        step_mask=step_mask,
        components={k: torch.tensor(v, dtype=torch.float32) for k, v in _components(results).items()},
        texts=[rec.completion_text for rec in records],
    )


def _shape_rows(
    records: Sequence[Record], results: Sequence[Result], pipeline: ShapingPipeline, tokenizer: Any | None
) -> list[tuple[float, dict[str, Any]]]:
    """``(shaped reward, shaping info)`` of each row under a row-level pipeline: plain Python, no torch. The
    inputs are rounded to float32 as :func:`results_to_batch` stores them, so the rewards are the batch's."""
    if len(records) != len(results):
        raise ValueError(f"{len(records)} records but {len(results)} results")
    reads = {attr for transform in pipeline.transforms for attr in getattr(transform, "reads", ())}
    lengths = _lengths(records, tokenizer) if "lengths" in reads else [None] * len(records)
    correct = _correct(results) or [None] * len(results)
    out = []
    for rec, res, length, hit in zip(records, results, lengths, correct, strict=True):
        row = ShapingRow(
            reward=to_float32(_reward_or_zero(res.reward)),
            text=rec.completion_text,
            length=None if length is None else to_float32(length),
            correct=hit,
        )
        out.append((shape_row(pipeline.transforms, row), {}))
    return out


def _shape_batch(
    records: Sequence[Record], results: Sequence[Result], pipeline: ShapingPipeline, tokenizer: Any | None
) -> list[tuple[float, dict[str, Any]]]:
    """``(shaped reward, shaping info)`` of each row, the pipeline run on the rows' :class:`ShapingBatch`."""
    # lazy: torch (the rl extra), only for pipelines with a transform that is not row-level
    from .functional import unpad_steps

    batch = results_to_batch(records, results, tokenizer=tokenizer, steps=pipeline.has_step_transforms)
    out = pipeline(batch)
    steps = unpad_steps(out.step_rewards, out.step_mask) if out.step_rewards is not None else None
    shaped = []
    for i in range(len(results)):
        info: dict[str, Any] = {}
        if steps is not None:
            info["step_rewards"] = steps[i]
        if out.loss_mask is not None:
            info["loss_mask"] = float(out.loss_mask[i])
        shaped.append((float(out.rewards[i]), info))
    return shaped


def shape_results(
    records: Sequence[Record],
    results: Sequence[Result],
    pipeline: ShapingPipeline | Sequence[str | dict] | str | None,
    *,
    tokenizer: Any | None = None,
) -> list[Result]:
    """Applies a shaping pipeline to scored rows; returns new results (the inputs are not changed).

    Each result gets the shaped ``reward`` and ``details["shaping"] = {"raw_reward", "pipeline",
    ["step_rewards"], ["loss_mask"]}``. Errors are kept: a failed row enters the pipeline with its
    reward of 0 (so group statistics see it, as an RL loop would) and keeps its ``error``; so does a row
    whose reward is missing (``None``), which stays ``None``. A pipeline of row-level transforms only runs
    without torch.
    """
    if not isinstance(pipeline, ShapingPipeline):
        pipeline = build_pipeline(pipeline)
    if not len(pipeline) or not results:
        return list(results)
    run = _shape_rows if pipeline.row_level else _shape_batch
    specs = pipeline.specs()
    shaped = []
    for res, (reward, extra) in zip(results, run(records, results, pipeline, tokenizer), strict=True):
        info: dict[str, Any] = {"raw_reward": res.reward, "pipeline": specs, **extra}
        details = {**(res.details or {}), "shaping": info}
        kept = None if as_reward(res.reward) is None else reward
        shaped.append(Result(reward=kept, details=details, error=res.error))
    return shaped


WeightedSumSource = CombinedSource
"""A weighted sum of named reward sources, ``CombinedSource({name: source}, {name: weight})``: the one
combined-source type (:class:`rewardlab.verifiers.combine.CombinedSource`) under its shaping name. Each
result's ``details["components"]`` is what :func:`results_to_batch` reads back."""


def shape_jsonl(
    path: str,
    specs: ShapingPipeline | Sequence[str | dict] | str,
    *,
    output: str | None = None,
    field_map: dict[str, str] | None = None,
    tokenizer: Any | None = None,
) -> list[float]:
    """Shapes a scored JSONL file (rows with ``reward``, ``details``, ``error``, as ``rewardlab score``
    writes them) in place, or into ``output``; returns the shaped rewards of the scored rows.

    This is how ``rewardlab score --shape ...`` works: scoring streams rows to the file, then shaping runs
    over all of them at once (group statistics need every sample of a group). Rows that are not scored
    records (invalid input lines: ``invalid JSON`` / ``invalid UTF-8`` errors) are copied unchanged.
    """
    import json
    import os
    import tempfile

    pipeline = specs if isinstance(specs, ShapingPipeline) else build_pipeline(specs)
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    scored = [
        i
        for i, row in enumerate(rows)
        if "reward" in row and error_kind(row.get("error")) not in INVALID_LINE_KINDS
    ]
    records, results = [], []
    for i in scored:
        row = dict(rows[i])
        result = Result(
            reward=float(row.pop("reward") or 0.0), details=row.pop("details") or {}, error=row.pop("error")
        )
        record = Record.from_dict(row, field_map=field_map)
        if record.id is None:
            record.id = i
        records.append(record)
        results.append(result)
    shaped = shape_results(records, results, pipeline, tokenizer=tokenizer)
    for i, result in zip(scored, shaped, strict=True):
        rows[i].update(reward=result.reward, details=result.details, error=result.error)
    target = output or path
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(jsonable(row), ensure_ascii=False) + "\n")
    os.replace(tmp, target)
    return [r.reward for r in shaped]
