"""Jobs: what an item of a scoring run is and what comes back for it.

The engine only schedules, times out and orders; a :class:`Job` turns items into outputs.
:class:`RecordJob` takes Records (or dicts) and gives Results (the Python API, RL runs, the streams);
``scoring.io.RowJob`` takes raw JSONL lines and gives finished output lines (``rewardlab score``), so that
parsing and serialising happen in the workers. Jobs are pickled to the workers.

Every scored item carries its reward time (``Result.time_s``, a row's ``reward_time_s``): measured around the
source's call where the item is scored, so that the slow rows of a run can be named.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.scoring.sources import call_score_batch
from rewardlab.types import Record, Result

TIME_DECIMALS = 4
"""A reward time is written rounded to this many decimals (0.1 ms): ``score``'s rows, ``rollouts.jsonl``."""


@dataclass
class Done:
    """What :meth:`Job.prepare` returns for an item whose output is known without scoring (a malformed row)."""

    output: Any


class Job:
    """How the engine turns items into outputs.

    ``prepare`` runs in the calling process and routes an item (the name of its verifier, ``None`` for the
    default, or :class:`Done`); ``run`` scores one item in a worker; ``run_batch`` scores many in the calling
    process (sources with ``runs_in_process``); ``failure`` is the output of an item the engine gave up on
    (``timeout``, ``worker crashed``, ``unknown verifier``), ``time_s`` the seconds it ran before that
    (``None``: it never ran).
    """

    def prepare(self, item: Any, index: int) -> tuple[str | None, Any] | Done:
        raise NotImplementedError

    def run(self, source: Any, index: int, payload: Any) -> Any:
        return self.run_batch(source, [(index, payload)])[0]

    def run_batch(self, source: Any, items: list[tuple[int, Any]]) -> list[Any]:
        raise NotImplementedError

    def failure(
        self, index: int, payload: Any, error: str, *, time_s: float | None = None, **details: Any
    ) -> Any:
        raise NotImplementedError


class RecordJob(Job):
    """Records (or dicts) in, :class:`Result` objects out: the Python API and RL runs."""

    def prepare(self, item: Any, index: int) -> tuple[str | None, Any] | Done:
        try:
            record = as_record(item, index)
        except TypeError as exc:
            return Done(Result.failure(f"invalid record: {exc}"))
        problem = verifier_field_problem(record.verifier)
        if problem:
            return Done(Result.failure(problem))
        return record.verifier, record

    def run_batch(self, source: Any, items: list[tuple[int, Any]]) -> list[Any]:
        return timed_score_batch(source, [record for _, record in items])

    def failure(
        self, index: int, payload: Any, error: str, *, time_s: float | None = None, **details: Any
    ) -> Any:
        return failed(error, time_s, details)


def timed_score_batch(source: Any, records: Sequence[Record], *, json_safe: bool = True) -> list[Result]:
    """:func:`call_score_batch` with each result's ``time_s`` set: the time the source reported for the
    record, else an equal share of the call's wall time (one record: all of it)."""
    start = time.perf_counter()
    results = call_score_batch(source, records, json_safe=json_safe)
    share = (time.perf_counter() - start) / max(len(results), 1)
    for result in results:  # fresh objects: call_score_batch rebuilds every result
        if result.time_s is None:
            result.time_s = share
    return results


def failed(error: str, time_s: float | None, details: dict[str, Any]) -> Result:
    """The result of an item the engine gave up on, timed: ``time_s`` as the engine measured it; a timeout
    the engine did not time ran at least its limit (``details["timeout_s"]``)."""
    result = Result.failure(error, **details)
    result.time_s = time_s if time_s is not None else _number(details.get("timeout_s"))
    return result


def rounded_time(seconds: float | None) -> float | None:
    """A reward time as a row writes it (``None``: not measured)."""
    return None if seconds is None else round(seconds, TIME_DECIMALS)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def as_record(item: Any, index: int) -> Record:
    """``item`` as a :class:`Record` (dicts through ``Record.from_dict``); a missing id becomes ``index``."""
    if isinstance(item, Record):
        record = item
    elif isinstance(item, dict):
        record = Record.from_dict(item)
    else:
        raise TypeError(f"expected a Record or a dict, got {type(item).__name__}")
    if record.id is None:
        record.id = index
    return record


def verifier_field_problem(value: Any) -> str | None:
    """Why a row's ``verifier`` field can't name a verifier (``None`` when it can, or is absent)."""
    if value is None or (isinstance(value, str) and value):
        return None
    return f"invalid record: 'verifier' must be a verifier name, got {type(value).__name__} {value!r:.80}"
