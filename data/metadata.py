"""Prompt metadata for curricula: a record's ``difficulty`` (a number) and ``source`` (a string).

A curriculum orders or weights prompts by how hard they are and where they come from, but datasets name and
spell these differently: MATH has ``"level": "Level 3"`` and ``"type": "Algebra"``, others a numeric
``difficulty`` or a ``data_source`` column. :func:`with_prompt_metadata` reads them into two fixed keys of
:attr:`rewardlab.types.Record.metadata`:

* ``metadata["difficulty"]``: a float (``"Level 3"`` -> ``3.0``), absent when the row has none;
* ``metadata["source"]``: a string, absent when the row has none.

Each is read from a named column (``difficulty_field=``, ``source_field=``) or else from the first of the
default columns (:data:`DIFFICULTY_COLUMNS`, :data:`SOURCE_COLUMNS`) that the row has a value in.
:func:`rewardlab.data.loaders.load_records` applies it to every record it reads.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from typing import Any

from rewardlab.types import Record

DIFFICULTY_COLUMNS = ("difficulty", "level")
SOURCE_COLUMNS = ("source", "data_source", "category")

_LEVEL = re.compile(r"level\s*(.*)", re.IGNORECASE)  # MATH writes "Level 3"
_SHOWN = 60  # characters of a bad value an error message shows, so it stays one short line


def parse_difficulty(value: Any) -> float | None:
    """A difficulty as a float: a number, a numeric string (``"2.5"``) or MATH's ``"Level 3"``.

    ``None`` and ``""`` (a row without one) give ``None``.

    Raises:
        ValueError: anything else (``"Level ?"``, ``"hard"``, NaN, infinity, a bool), naming the value.
    """
    if _empty(value):
        return None
    # bool is an int subclass, but True is not a difficulty: a bool column is most likely a flag
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        number = _parse_text(value)
    else:
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"difficulty must be a finite number or 'Level N', got {_shown(value)}")
    return number


def _parse_text(text: str) -> float:
    """The number in ``"3"`` or ``"Level 3"``; NaN when there is none (the caller reports it)."""
    text = text.strip()
    match = _LEVEL.fullmatch(text)
    try:
        return float(match.group(1) if match else text)
    except ValueError:
        return math.nan


def _shown(value: Any) -> str:
    text = repr(value)  # repr escapes newlines: the message stays on one line
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def with_prompt_metadata(
    record: Record, *, difficulty_field: str | None = None, source_field: str | None = None
) -> Record:
    """A copy of ``record`` whose metadata has ``"difficulty"`` (float) and ``"source"`` (str) when it has them.

    Args:
        record: The record; its metadata holds the row's extra columns (:meth:`Record.from_dict`).
        difficulty_field: The metadata key holding the difficulty; ``None`` takes the first of
            :data:`DIFFICULTY_COLUMNS` with a value.
        source_field: The metadata key holding the source; ``None`` takes the first of :data:`SOURCE_COLUMNS`
            with a value. Values are turned into strings.

    A row without a value leaves the key absent. Other metadata keys are kept as they are; ``record`` itself
    is not changed.

    Raises:
        ValueError: a named field is not in the row, or its difficulty is not a number (naming the row id).
            A usual column whose value is not a number (``"level": "hard"``) leaves the difficulty absent.
    """
    metadata = dict(record.metadata)
    column, difficulty = _column_value(record, difficulty_field, DIFFICULTY_COLUMNS, "difficulty_field")
    try:
        _set_or_drop(metadata, "difficulty", parse_difficulty(difficulty))
    except ValueError as exc:
        if difficulty_field is not None:
            raise ValueError(f"row id {record.id!r}, column {column!r}: {exc}") from None
        # a column found by its usual name may hold words ("easy"): not a difficulty, and no reason to fail
        metadata.pop("difficulty", None)
    _, source = _column_value(record, source_field, SOURCE_COLUMNS, "source_field")
    _set_or_drop(metadata, "source", None if _empty(source) else str(source))
    return dataclasses.replace(record, metadata=metadata)


def _empty(value: Any) -> bool:
    """No value: ``None`` or a blank string (a CSV's or a merged table's empty cell)."""
    return value is None or (isinstance(value, str) and not value.strip())


def _column_value(
    record: Record, field: str | None, defaults: tuple[str, ...], arg: str
) -> tuple[str | None, Any]:
    """(column, value): the named column (which must exist), or the first default column with a value."""
    if field is not None:
        if field not in record.metadata:
            raise ValueError(f"row id {record.id!r} has no column {field!r} ({arg})")
        return field, record.metadata[field]
    # "with a value": tables that merge several datasets hold None in the columns a row lacks
    column = next((c for c in defaults if not _empty(record.metadata.get(c))), None)
    return column, record.metadata.get(column) if column else None


def _set_or_drop(metadata: dict[str, Any], key: str, value: Any) -> None:
    # absent, never None: a curriculum then tells "no difficulty" by ``key in metadata`` alone
    if value is None:
        metadata.pop(key, None)
    else:
        metadata[key] = value
