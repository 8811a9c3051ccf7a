"""Scoring a file: read rows, score them, write one JSONL row per input row, in order, flushed as they finish.

Every input field is kept and ``reward``, ``details``, ``error`` are added. A malformed JSONL line becomes a
row ``{"line": N, "raw": ..., "reward": 0.0, "details": {...}, "error": "invalid JSON at line N"}``.
With ``resume=True`` the rows already in the output file are kept (a partly written last line is cut) and
scoring continues after them; since rows are written in input order, the finished file equals an
uninterrupted run's.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rewardkit.data.loaders import InvalidRow, count_rows, iter_rows
from rewardkit.scoring.engine import Scorer
from rewardkit.scoring.summary import Summary
from rewardkit.types import Record, Result, jsonable


def output_row(row: dict[str, Any] | InvalidRow, result: Result | None = None) -> dict[str, Any]:
    """The output row of an input row: its fields plus ``reward``, ``details``, ``error``."""
    if isinstance(row, InvalidRow):
        return {
            "line": row.line,
            "raw": row.text[:2000],
            "reward": 0.0,
            "details": {"reason": row.reason},
            "error": row.error,
        }
    assert result is not None
    out = dict(row)
    out.update(reward=result.reward, details=result.details, error=result.error)
    return out


def _dumps(row: dict[str, Any]) -> str:
    try:
        return json.dumps(row, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(jsonable(row), ensure_ascii=False)


def read_done_rows(output: str | os.PathLike, summary: Summary) -> int:
    """Counts the complete rows of an earlier run's output and cuts anything after them (a partial line).

    Each kept row is added to ``summary`` as resumed.
    """
    path = Path(output)
    if not path.exists():
        return 0
    good_bytes = 0
    rows = 0
    with open(path, "rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break  # the run stopped while writing this line
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                break
            if not isinstance(row, dict):
                break
            good_bytes += len(line)
            rows += 1
            summary.add(row.get("reward", 0.0) or 0.0, row.get("error"), new=False)
            summary.observe(row)
    if good_bytes != path.stat().st_size:
        with open(path, "r+b") as handle:
            handle.truncate(good_bytes)
    return rows


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
    progress: bool | None = None,
) -> Summary:
    """Scores a JSONL file or a dataset into a JSONL file and returns the run's :class:`Summary`.

    Args:
        input: JSONL path, ``save_to_disk`` folder, parquet file, or hub dataset name.
        output: JSONL path to write (overwritten unless ``resume``).
        source: Default verifier name / Verifier / reward source; rows may name their own (``verifier``).
        workers, timeout, engine, config, chunk_size: See :class:`~rewardkit.scoring.Scorer`.
        resume: Keep the complete rows of an existing ``output`` and continue after them.
        field_map: Record field -> column name (``{"reference": "answer"}``).
        split: Dataset split.
        progress: Show a progress bar; ``None``: only when stderr is a terminal.

    Raises:
        FileNotFoundError: missing input. UnknownNameError: unknown default verifier.
    """
    # Fail before touching the output: unknown verifier, missing input.
    rows = iter_rows(input, split)
    first = next(rows, None)
    rows = itertools.chain([first] if first is not None else [], rows)
    summary = Summary(tallies=_tallies_for(source))
    with Scorer(
        source if source is not None else _NoDefault(),
        workers=workers,
        timeout=timeout,
        engine=engine,
        config=config,
        chunk_size=chunk_size,
    ) as scorer:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        skip = read_done_rows(output, summary) if resume else 0
        rows = itertools.islice(rows, skip, None)
        if progress is None:
            progress = sys.stderr.isatty()
        bar = None
        if progress:
            from tqdm.auto import tqdm

            total = count_rows(input)
            bar = tqdm(total=None if total is None else max(0, total - skip), unit="row", desc="score")
        seen: deque[dict[str, Any] | InvalidRow] = deque()

        def feed() -> Iterator[Record]:
            for index, row in enumerate(rows, start=skip):
                seen.append(row)
                if isinstance(row, InvalidRow):
                    continue
                record = Record.from_dict(dict(row), field_map=field_map)
                if record.id is None:
                    record.id = index
                yield record

        start = time.perf_counter()
        with open(output, "a" if resume else "w", encoding="utf-8") as handle:

            def write(row: dict[str, Any] | InvalidRow, result: Result | None) -> None:
                out = output_row(row, result)
                handle.write(_dumps(out) + "\n")
                handle.flush()
                summary.add(out["reward"], out["error"])
                summary.observe(out)
                if bar is not None:
                    bar.update(1)

            for result in scorer.iter_scores(feed()):
                while isinstance(seen[0], InvalidRow):
                    write(seen.popleft(), None)
                write(seen.popleft(), result)
            while seen:  # invalid lines after the last valid row
                write(seen.popleft(), None)
        summary.seconds = time.perf_counter() - start
        if bar is not None:
            bar.close()
    return summary


def _tallies_for(source: Any) -> dict[str, Any]:
    """Verifier-specific summaries: IFEval runs also report instruction- and prompt-level accuracy."""
    name = source if isinstance(source, str) else getattr(source, "name", None)
    if name == "ifeval":
        from rewardkit.verifiers.ifeval.summary import IFEvalTally

        return {"ifeval": IFEvalTally()}
    return {}


class _NoDefault:
    """The default source when none is given: every row must name its verifier."""

    name = "none"
    runs_in_process = True

    def score_batch(self, records: list[Record]) -> list[Result]:
        return [
            Result.failure("no verifier: give the row a 'verifier' field or pass --verifier") for _ in records
        ]
