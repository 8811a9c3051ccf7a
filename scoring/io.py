"""Scoring a file: read rows, score them, write one JSONL row per input row, in order, flushed as they finish.

Every input field is kept and ``reward``, ``details``, ``error`` and ``reward_time_s`` are added (``"reward":
null`` with no error: the source gave no reward for the row, see :class:`~rewardlab.types.Result`;
``reward_time_s``: the seconds the row took to score, null for a row that was never scored); an input field of
one of those names is kept as ``input_reward`` (``input_details``, ...; another ``input_`` is prefixed while
the name is taken). A line that is not a row (invalid JSON, invalid UTF-8, not an object) becomes a row with
the record fields (``id``, ``prompt``, ``completion``, ``reference``, under their ``field_map`` names) set
to null, reward 0, ``details`` holding ``line``, ``raw`` and ``reason``, and ``error`` saying what was wrong
and where (``invalid JSON at line 7``). Nothing about one row stops the others.

The output is never the input (any spelling: relative, symlink, hard link); a run record
(``OUTPUT.run.json``) beside the output says which source, settings and input produced it. With
``resume=True`` the rows already in the output are kept (a partly written last line is cut) and scoring
continues after them, but only when the run record matches this run and every kept row is the output of the
input row at its position; since rows are written in input order, the finished file equals an uninterrupted
run's, reward times aside (kept rows are not compared on them: rows written before rows carried one have none).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from rewardlab.data.loaders import InvalidRow, count_rows, iter_rows, jsonl_lines, parse_line
from rewardlab.progress import progress_bar
from rewardlab.progress import wanted as show_progress
from rewardlab.scoring.engine import Scorer
from rewardlab.scoring.jobs import (
    Done,
    Job,
    failed,
    rounded_time,
    timed_score_batch,
    verifier_field_problem,
)
from rewardlab.scoring.summary import Summary
from rewardlab.types import Record, Result, jsonable
from rewardlab.verifiers.sources import source_class

ADDED_FIELDS = ("reward", "details", "error", "reward_time_s")
"""The fields scoring adds to every row."""

RECORD_KEYS = ("id", "prompt", "completion", "reference")
"""The fields a row for a malformed line carries (null), so that every output row has them."""

AFRESH = "run without --resume to start afresh (the output is then overwritten)"
"""How every refused resume ends."""

FLUSH_EVERY_S = 0.1
"""The output is flushed at least this often (a killed run loses at most this much, and resume redoes it)."""


class ScoreError(ValueError):
    """A run that can't start: the output is the input, can't be written, or doesn't belong to this run."""


# ----------------------------------------------------------------------------------------------------------
# Rows
# ----------------------------------------------------------------------------------------------------------
def kept_name(key: str, row: dict[str, Any]) -> str:
    """The output name of input field ``key``: ``input_<key>`` (again prefixed while taken) for added fields."""
    if key not in ADDED_FIELDS:
        return key
    name = f"input_{key}"
    while name in row:
        name = f"input_{name}"
    return name


def input_part(row: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The input fields as written to the output (added-field names moved aside) and which were moved."""
    if not any(key in row for key in ADDED_FIELDS):
        return row, ()
    moved = tuple(key for key in row if key in ADDED_FIELDS)
    return {kept_name(key, row): value for key, value in row.items()}, moved


def output_row(row: dict[str, Any], result: Result) -> dict[str, Any]:
    """The output row of an input row: its fields (added-field names moved aside) plus the result's."""
    return _with_result(input_part(row)[0], result)


def _with_result(kept: dict[str, Any], result: Result) -> dict[str, Any]:
    added = {"reward": result.reward, "details": result.details, "error": result.error}
    return {**kept, **added, "reward_time_s": rounded_time(result.time_s)}


def invalid_output_row(row: InvalidRow, field_map: dict[str, str] | None = None) -> dict[str, Any]:
    """The output row of a line that is not a row: the record fields null, what was wrong in ``details``."""
    out: dict[str, Any] = {(field_map or {}).get(key, key): None for key in RECORD_KEYS}
    details = {"line": row.line, "raw": row.text[:2000], "reason": row.reason}
    out.update(reward=0.0, details=details, error=row.error, reward_time_s=None)
    return out


def row_line(row: dict[str, Any]) -> str:
    """An output row as one JSONL line (newline included)."""
    try:
        return json.dumps(row, ensure_ascii=False) + "\n"
    except (TypeError, ValueError):
        return json.dumps(jsonable(row), ensure_ascii=False) + "\n"


class RowOut(NamedTuple):
    """What a worker sends back for a row: the finished output line and what the summary counts (``id``: the
    row's own id, ``None`` when it has none)."""

    line: str
    reward: float | None
    error: str | None
    moved: tuple[str, ...] = ()
    time_s: float | None = None
    id: Any = None


class RowJob(Job):
    """Input rows in, output lines out. A payload is ``(line number, raw bytes)`` for a JSONL line (parsed in
    the worker) or ``(None, row dict)`` for a dataset row. ``row_verifiers``: a row's ``verifier`` field
    chooses its verifier; else every row goes to the run's source (a reward model or a judge scores them all)."""

    def __init__(self, field_map: dict[str, str] | None = None, row_verifiers: bool = True) -> None:
        self.field_map = field_map or {}
        self.row_verifiers = row_verifiers
        self._needle = json.dumps(self.field_map.get("verifier", "verifier")).encode()

    def parse(self, payload: tuple[int | None, Any]) -> dict[str, Any] | InvalidRow:
        number, raw = payload
        return parse_line(number, raw) if number is not None else raw

    def prepare(self, item: Any, index: int) -> tuple[str | None, Any] | Done:
        number, raw = item
        if not self.row_verifiers or (number is not None and self._needle not in raw):
            return None, item  # the default source: parsing waits for the worker
        row = self.parse(item)
        if isinstance(row, InvalidRow):
            return Done(self._invalid(row))
        name = row.get(self.field_map.get("verifier", "verifier"))
        problem = verifier_field_problem(name)
        if problem:
            return Done(self._out(row, Result.failure(problem)))
        return name, item

    def run(self, source: Any, index: int, payload: Any) -> Any:
        # The one-row path of run_batch, without its lists: workers call this for every row.
        ready = self._ready(index, payload)
        if isinstance(ready, RowOut):
            return ready
        row, record = ready
        return self._out(row, timed_score_batch(source, [record], json_safe=False)[0])

    def run_batch(self, source: Any, items: list[tuple[int, Any]]) -> list[Any]:
        outputs: list[Any] = [self._ready(index, payload) for index, payload in items]
        todo = [k for k, ready in enumerate(outputs) if not isinstance(ready, RowOut)]
        results = timed_score_batch(source, [outputs[k][1] for k in todo], json_safe=False)
        for k, result in zip(todo, results, strict=True):
            outputs[k] = self._out(outputs[k][0], result)
        return outputs

    def _ready(self, index: int, payload: Any) -> RowOut | tuple[dict[str, Any], Record]:
        """The row and its record, ready to score; or the row's output when it can't be scored."""
        row = self.parse(payload)
        if isinstance(row, InvalidRow):
            return self._invalid(row)
        record = self._record(row, index)
        if isinstance(record, Result):
            return self._out(row, record)
        return row, record

    def failure(
        self, index: int, payload: Any, error: str, *, time_s: float | None = None, **details: Any
    ) -> Any:
        row = self.parse(payload)
        if isinstance(row, InvalidRow):
            return self._invalid(row)
        return self._out(row, failed(error, time_s, details))

    def _record(self, row: dict[str, Any], index: int) -> Record | Result:
        try:
            record = Record.from_dict(row, field_map=self.field_map)
        except Exception as exc:  # noqa: BLE001 - a malformed row is a row with an error
            return Result.failure(f"invalid record: {type(exc).__name__}: {exc}")
        if record.id is None:
            record.id = index
        return record

    def _out(self, row: dict[str, Any], result: Result) -> RowOut:
        kept, moved = input_part(row)
        line = row_line(_with_result(kept, result))
        key = row.get(self.field_map.get("id", "id"))
        return RowOut(line, result.reward, result.error, moved, result.time_s, key)

    def _invalid(self, row: InvalidRow) -> RowOut:
        return RowOut(row_line(invalid_output_row(row, self.field_map)), 0.0, row.error)


def input_items(input: str | os.PathLike, split: str | None) -> Iterator[tuple[int | None, Any]]:
    """The input as job payloads: ``(line, bytes)`` for a JSONL file, ``(None, dict)`` for datasets."""
    path = Path(input)
    if path.is_file() and path.suffix != ".parquet":
        return jsonl_lines(path)
    return ((None, row) for row in iter_rows(input, split))


def first_row(input: str | os.PathLike, split: str | None = None) -> dict[str, Any] | None:
    """The input's first row that is a row (malformed lines skipped), or ``None`` when it has none."""
    job = RowJob()
    for item in input_items(input, split):
        row = job.parse(item)
        if not isinstance(row, InvalidRow):
            return row
    return None


# ----------------------------------------------------------------------------------------------------------
# Paths, the run record, resume
# ----------------------------------------------------------------------------------------------------------
def run_record_path(output: str | os.PathLike) -> Path:
    return Path(f"{output}.run.json")


def check_paths(input: str | os.PathLike, output: str | os.PathLike) -> None:
    """Refuses an output that is the input (any spelling), a folder, or under a file, before anything is written."""
    out = Path(output)
    if out.is_dir():
        raise ScoreError(f"output is a folder: {output}")
    if Path(input).exists() and out.exists() and os.path.samefile(input, out):
        raise ScoreError(
            f"output is the input file: {output} (choose another -o; the input is never overwritten)"
        )
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise ScoreError(f"cannot create output {output}: {parent} is a file")


def describe_source(source: Any, config: dict[str, Any] | None) -> dict[str, Any]:
    """What the run record says about the default source."""
    if source is None or isinstance(source, str):
        return {"source": source, "config": config or {}}
    kind = f"{type(source).__module__}.{type(source).__qualname__}"
    return {"source": getattr(source, "name", kind), "class": kind, "config": getattr(source, "config", {})}


def _write_run_record(output: str | os.PathLike, record: dict[str, Any]) -> None:
    path = run_record_path(output)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(record), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def mark_shaped(output: str | os.PathLike, shape: list[str]) -> None:
    """Notes in the run record that the output's rewards were shaped (so a resume would not mix them)."""
    note_run(output, "shaped", list(shape))


NOTED_KEYS = ("input", "shaped", "usage")
"""Run-record keys a resume does not compare: where the input is, and what a run noted after scoring."""


def note_run(output: str | os.PathLike, key: str, value: Any) -> None:
    """Sets ``key`` of the run record after the run (``shaped``; ``usage``: a remote source's request and
    token counts)."""
    path = run_record_path(output)
    record = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    record[key] = value
    _write_run_record(output, record)


def source_usage(source: Any) -> dict[str, Any] | None:
    """What a source that calls a server used (``source.usage()``: requests, retries, failures, tokens...)."""
    usage = getattr(source, "usage", None)
    if not callable(usage):
        return None
    try:
        value = usage()
        return dict(value) if value else None
    except Exception:  # noqa: BLE001 - counts are a report, never a reason to fail a finished run
        return None


def _check_run_record(output: str | os.PathLike, wanted: dict[str, Any]) -> None:
    path = run_record_path(output)
    if not path.exists():
        raise ScoreError(
            f"cannot resume {output}: it has no run record ({path.name}) to check it against; {AFRESH}"
        )
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScoreError(
            f"cannot resume {output}: its run record {path.name} is unreadable ({exc}); {AFRESH}"
        ) from exc
    if found.get("shaped"):
        raise ScoreError(f"cannot resume {output}: its rewards were already shaped (--shape); {AFRESH}")
    for key in sorted(set(wanted) | set(found)):
        if key in NOTED_KEYS:
            continue
        # Compared as written (a tuple is a list in JSON); absent = empty.
        if _canonical(jsonable(found.get(key)) or None) != _canonical(jsonable(wanted.get(key)) or None):
            raise ScoreError(
                f"cannot resume {output}: it was scored with {key}={json.dumps(found.get(key))}, "
                f"this run has {key}={json.dumps(jsonable(wanted.get(key)))}; {AFRESH}"
            )


def _canonical(value: Any) -> str:
    return json.dumps(jsonable(value), sort_keys=True, ensure_ascii=False)


def resume_rows(output: str | os.PathLike, items: Iterator[Any], job: RowJob, summary: Summary) -> int:
    """Checks the complete rows of ``output`` against the input rows they came from, consuming one input item
    per kept row, then cuts anything after them (a partial line). Returns the number of kept rows.

    Raises:
        ScoreError: a kept row is not the output of the input row at its position, or the input has fewer
            rows than the output; the output is left untouched.
    """
    path = Path(output)
    good_bytes = rows = 0
    with open(path, "rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break  # the run stopped while writing this line
            try:
                row = json.loads(line)
            except ValueError:
                break
            if not isinstance(row, dict):
                break
            item = next(items, None)
            if item is None:
                raise ScoreError(
                    f"cannot resume {output}: it has more rows than the input (row {rows + 1}); {AFRESH}"
                )
            _check_kept_row(row, job.parse(item), rows + 1, output, job.field_map)
            good_bytes += len(line)
            rows += 1
            key = row.get(job.field_map.get("id", "id"))
            summary.add(row.get("reward", 0.0), row.get("error"), new=False, time_s=_time(row), id=key)
            summary.observe(row)
    if good_bytes != path.stat().st_size:
        with open(path, "r+b") as handle:
            handle.truncate(good_bytes)
    return rows


def _time(row: dict[str, Any]) -> float | None:
    """A kept row's reward time (``None`` in rows written before rows carried one)."""
    value = row.get("reward_time_s")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _check_kept_row(
    kept: dict[str, Any],
    source: dict[str, Any] | InvalidRow,
    number: int,
    output: str | os.PathLike,
    field_map: dict[str, str],
) -> None:
    if isinstance(source, InvalidRow):
        # Not compared: the time (rows written before rows carried one have none).
        expected = {k: v for k, v in invalid_output_row(source, field_map).items() if k != "reward_time_s"}
        got = {k: v for k, v in kept.items() if k != "reward_time_s"}
    else:
        expected = input_part(source)[0]
        got = {key: value for key, value in kept.items() if key not in ADDED_FIELDS}
    if _canonical(expected) == _canonical(got):
        return
    keys = sorted(set(expected) | set(got), key=str)
    differing = [k for k in keys if _canonical(expected.get(k)) != _canonical(got.get(k))]
    raise ScoreError(
        f"cannot resume {output}: its row {number} does not come from input row {number} "
        f"(fields differ: {', '.join(map(str, differing[:5]))}): the input changed or is another file; {AFRESH}"
    )


# ----------------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------------
def score_file(
    input: str | os.PathLike,
    output: str | os.PathLike,
    source: Any = None,
    *,
    workers: int = 1,
    timeout: float = 10.0,
    resume: bool = False,
    field_map: dict[str, str] | None = None,
    split: str | None = None,
    config: dict[str, Any] | None = None,
    engine: str = "local",
    chunk_size: int = 16,
    batch_size: int = 256,
    limit: int | None = None,
    progress: bool | None = None,
    progress_desc: str = "score",
    run_info: dict[str, Any] | None = None,
    ray_address: str | None = None,
    row_verifiers: bool = True,
    spare_workers: int | None = None,
    wall_timeout: float | None = None,
) -> Summary:
    """Scores a JSONL file or a dataset into a JSONL file and returns the run's :class:`Summary`.

    Args:
        input: JSONL path, ``save_to_disk`` folder, parquet file, or hub dataset name.
        output: JSONL path to write (overwritten unless ``resume``); never the input.
        source: Default verifier name / Verifier / reward source; rows may name their own (``verifier``).
        workers, timeout, engine, config, chunk_size, batch_size, ray_address, spare_workers, wall_timeout:
            See :class:`~rewardlab.scoring.Scorer` (``timeout`` counts a row's CPU time in its worker).
        resume: Keep the complete rows of an existing ``output`` and continue after them (checked: see the
            module docstring).
        field_map: Record field -> column name (``{"reference": "answer"}``).
        split: Dataset split.
        limit: Score the first ``limit`` input rows only (``None``: all).
        progress: Show a progress bar; ``None``: only when stderr is a terminal.
        progress_desc: The bar's label (the command's name).
        run_info: More settings a resume must match (the CLI adds ``--reward-model`` and ``--shape``).
        row_verifiers: A row's ``verifier`` field chooses its verifier (``False``: ``source`` scores every
            row, as a reward model or a judge does).

    Raises:
        FileNotFoundError: missing input. UnknownNameError: unknown default verifier. ScoreError: the output
        is the input, can't be written, or (resume) does not belong to this run.
    """
    check_paths(input, output)
    # Fail before touching the output: unknown verifier, missing input.
    items = input_items(input, split)
    if limit is not None:
        items = itertools.islice(items, max(0, limit))
    first = next(items, None)
    items = itertools.chain([first], items) if first is not None else iter(())
    job = RowJob(field_map, row_verifiers)
    wanted = {
        "input": str(Path(input).resolve()) if Path(input).exists() else str(input),
        **describe_source(source, config),
        "field_map": field_map or {},
        "split": split,
        **(run_info or {}),
    }
    summary = Summary(tallies=_tallies_for(source))
    default = source if source is not None else _NoDefault()
    with Scorer(
        default,
        workers=workers,
        timeout=timeout,
        engine=engine,
        config=config,
        chunk_size=chunk_size,
        batch_size=batch_size,
        ray_address=ray_address,
        spare_workers=spare_workers,
        wall_timeout=wall_timeout,
    ) as scorer:
        skip = 0
        if resume and Path(output).exists() and Path(output).stat().st_size > 0:
            _check_run_record(output, wanted)
            skip = resume_rows(output, items, job, summary)
        try:
            Path(output).parent.mkdir(parents=True, exist_ok=True)
            handle = open(output, "a" if skip else "w", encoding="utf-8")  # noqa: SIM115 - closed below
            _write_run_record(output, wanted)
        except OSError as exc:
            raise ScoreError(f"cannot write output {output}: {exc.strerror or exc}") from exc
        with handle:
            bar = _progress_bar(progress, input, skip, limit, progress_desc)
            try:
                _write_outputs(scorer, items, job, skip, handle, summary, bar)
            finally:
                summary.usage = source_usage(scorer.default.obj)
                if summary.usage is not None:
                    note_run(output, "usage", summary.usage)
    return summary


def _progress_bar(
    progress: bool | None, input: str | os.PathLike, skip: int, limit: int | None, desc: str
) -> Any:
    if not show_progress(progress):
        return None
    total = count_rows(input)
    if limit is not None:
        total = min(total, limit) if total is not None else limit
    return progress_bar(None if total is None else max(0, total - skip), desc, enabled=True)


def _write_outputs(
    scorer: Scorer, items: Iterator[Any], job: RowJob, skip: int, handle: Any, summary: Summary, bar: Any
) -> None:
    start = last_flush = time.perf_counter()
    unflushed = 0
    try:
        # Resumed rows keep their global position (a row's default ``id``).
        for out in scorer.iter_outputs(items, job, first_index=skip):
            handle.write(out.line)
            summary.add(out.reward, out.error, time_s=out.time_s, id=out.id)
            if out.moved:
                summary.moved.update(out.moved)
            if summary.tallies:
                summary.observe(json.loads(out.line))
            unflushed += 1
            if time.perf_counter() - last_flush >= FLUSH_EVERY_S:
                handle.flush()
                if bar is not None:
                    bar.update(unflushed)
                unflushed, last_flush = 0, time.perf_counter()
    finally:
        handle.flush()
        summary.seconds = time.perf_counter() - start
        if bar is not None:
            bar.update(unflushed)
            bar.close()


def _tallies_for(source: Any) -> dict[str, Any]:
    """The default source's own running summaries (its ``summary_tallies`` hook, e.g. IFEval's accuracies, a
    rubric's criteria met per category); a name is asked through the class it builds."""
    if isinstance(source, str):
        source = source_class(source)
    hook = getattr(source, "summary_tallies", None)
    try:
        return dict(hook()) if callable(hook) else {}
    except Exception:  # a summary never stops a run
        return {}


class _NoDefault:
    """The default source when none is given: every row must name its verifier."""

    name = "none"
    runs_in_process = True

    def score_batch(self, records: list[Record]) -> list[Result]:
        return [
            Result.failure("no verifier: give the row a 'verifier' field or pass --verifier") for _ in records
        ]
