"""Jobs: what an item of a scoring run is and what comes back for it.

The engine only schedules, times out and orders; a :class:`Job` turns items into outputs.
:class:`RecordJob` takes Records (or dicts) and gives Results (the Python API, RL runs, the streams);
``scoring.io.RowJob`` takes raw JSONL lines and gives finished output lines (``rewardlab score``), so that
parsing and serialising happen in the workers. Jobs are pickled to the workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rewardlab.scoring.sources import call_score_batch
from rewardlab.types import Record, Result


@dataclass
class Done:
    """What :meth:`Job.prepare` returns for an item whose output is known without scoring (a malformed row)."""

    output: Any


class Job:
    """How the engine turns items into outputs.

    ``prepare`` runs in the calling process and routes an item (the name of its verifier, ``None`` for the
    default, or :class:`Done`); ``run`` scores one item in a worker; ``run_batch`` scores many in the calling
    process (sources with ``runs_in_process``); ``failure`` is the output of an item the engine gave up on
    (``timeout``, ``worker crashed``, ``unknown verifier``).
    """

    def prepare(self, item: Any, index: int) -> tuple[str | None, Any] | Done:
        raise NotImplementedError

    def run(self, source: Any, index: int, payload: Any) -> Any:
        return self.run_batch(source, [(index, payload)])[0]

    def run_batch(self, source: Any, items: list[tuple[int, Any]]) -> list[Any]:
        raise NotImplementedError

    def failure(self, index: int, payload: Any, error: str, **details: Any) -> Any:
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
        return call_score_batch(source, [record for _, record in items])

    def failure(self, index: int, payload: Any, error: str, **details: Any) -> Any:
        return Result.failure(error, **details)


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
