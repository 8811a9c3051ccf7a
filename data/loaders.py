"""Reading records: JSONL files, ``datasets`` folders (``save_to_disk``), parquet files, and hub datasets.

JSONL (and a ``.json`` list) is read here, with the standard library; every other input goes through
``datasets``, which comes with the ``data`` extra (``pip install 'rewardlab[data]'``): without it such an input
stops with one line naming the extra (:func:`rewardlab.extras.require`).

:func:`iter_rows` yields the raw rows (dicts) so that a scorer can keep every input field in its output; a
malformed JSONL line is yielded as an :class:`InvalidRow` (one output row per input row, nothing dropped).
:func:`load_records` turns rows into :class:`~rewardlab.types.Record` objects, mapping differently named
columns with ``field_map`` (``{"completion": "response", "reference": "answer"}``), and reads each record's
``difficulty`` and ``source`` into its metadata (:mod:`rewardlab.data.metadata`).
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.data.metadata import with_prompt_metadata
from rewardlab.extras import require
from rewardlab.hub import hub_problem as why_no_hub
from rewardlab.types import Record


@dataclass
class InvalidRow:
    """A JSONL line that is not a JSON object (or not UTF-8): ``line`` is 1-based, ``error`` the message for its
    output row, ``reason`` the parser's."""

    line: int
    text: str
    error: str
    reason: str = ""


def _is_saved_dataset(path: Path) -> bool:
    return path.is_dir() and (
        (path / "dataset_info.json").exists()
        or (path / "state.json").exists()
        or (path / "dataset_dict.json").exists()
    )


def jsonl_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes) of a JSONL file's non-blank lines; a UTF-8 BOM on line 1 is dropped."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if number == 1 and line.startswith(codecs.BOM_UTF8):
                line = line[len(codecs.BOM_UTF8) :]
            if line.strip():  # blank lines are not rows
                yield number, line


def parse_line(number: int, raw: bytes) -> dict[str, Any] | InvalidRow:
    """One JSONL line as a row, or an :class:`InvalidRow` saying why it is not one (bad UTF-8, bad JSON)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        return InvalidRow(number, shown, f"invalid UTF-8 at line {number}", f"byte {exc.start}: {exc.reason}")
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        return InvalidRow(number, text.rstrip("\r\n"), f"invalid JSON at line {number}", exc.msg)
    if not isinstance(row, dict):
        return InvalidRow(number, text.rstrip("\r\n"), f"invalid JSON at line {number}", "not an object")
    return row


def _iter_jsonl(path: Path) -> Iterator[dict[str, Any] | InvalidRow]:
    for number, raw in jsonl_lines(path):
        yield parse_line(number, raw)


def _datasets(what: str) -> Any:
    """The ``datasets`` module, or one line naming the ``data`` extra when it is not installed."""
    return require("datasets", extra="data", what=what)


def _select_split(dataset: Any, split: str | None, where: str) -> Any:
    # lazy: datasets (the data extra); only inputs that are not JSONL reach here
    from datasets import DatasetDict

    if isinstance(dataset, DatasetDict):
        if split is None:
            if len(dataset) == 1:
                return next(iter(dataset.values()))
            raise ValueError(f"{where} has splits {sorted(dataset)}: choose one with split=")
        if split not in dataset:
            raise ValueError(f"{where} has no split {split!r} (splits: {sorted(dataset)})")
        return dataset[split]
    return dataset


_FILE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet", ".csv", ".arrow")


def open_dataset(path_or_name: str, split: str | None = None) -> Any:
    """A ``datasets.Dataset`` from a ``save_to_disk`` folder, a parquet file, a data folder, or a hub name.

    Raises:
        MissingExtraError: ``datasets`` is not installed (the ``data`` extra).
        FileNotFoundError: a local-looking path that does not exist, or a hub name the hub does not have.
    """
    path = Path(path_or_name)
    if _is_saved_dataset(path):
        datasets = _datasets("reading a saved dataset folder")
        return _select_split(datasets.load_from_disk(str(path)), split, str(path))
    if path.is_file() and path.suffix == ".parquet":
        datasets = _datasets("reading parquet files")
        return datasets.load_dataset("parquet", data_files=str(path), split=split or "train")
    if path.is_dir():  # a folder of data files: datasets infers the builder
        datasets = _datasets("reading a folder of data files")
        return _select_split(datasets.load_dataset(str(path)), split, str(path))
    if _looks_local(path_or_name):
        raise FileNotFoundError(f"input not found: {path_or_name}")
    datasets = _datasets(f"reading the hub dataset {path_or_name}")
    hub_problem = why_no_hub(datasets_offline=True)
    if hub_problem:
        raise FileNotFoundError(f"input not found: {path_or_name} is not a local file, and {hub_problem}")
    try:
        dataset = datasets.load_dataset(path_or_name, split=split)
    except Exception as exc:  # the hub's own errors are many and long: one line
        if type(exc).__name__ in ("DatasetNotFoundError", "RepositoryNotFoundError", "FileNotFoundError"):
            raise FileNotFoundError(
                f"input not found: {path_or_name} is neither a local file nor a dataset on the hub"
            ) from exc
        raise
    return _select_split(dataset, split, path_or_name)


def _looks_local(path_or_name: str) -> bool:
    """A path that can't be a hub dataset name (``./x``, ``/x``, ``x.jsonl``)."""
    return path_or_name.startswith((".", "/", "~")) or path_or_name.endswith(_FILE_SUFFIXES)


def iter_rows(
    path_or_name: str | os.PathLike, split: str | None = None
) -> Iterator[dict[str, Any] | InvalidRow]:
    """The rows of a JSONL file (streamed), a saved dataset, a parquet file or a hub dataset, as dicts.

    Raises:
        FileNotFoundError: when a local-looking path does not exist.
    """
    path = Path(path_or_name)
    if path.is_file() and path.suffix != ".parquet":
        yield from _iter_jsonl(path)
        return
    if not path.exists() and _looks_local(str(path_or_name)):
        raise FileNotFoundError(f"input not found: {path_or_name}")
    yield from open_dataset(str(path_or_name), split)


def count_rows(path_or_name: str | os.PathLike, split: str | None = None) -> int | None:
    """Number of rows when cheap to know (JSONL: non-blank lines; datasets: ``len``), else ``None``."""
    path = Path(path_or_name)
    if path.is_file() and path.suffix != ".parquet":
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    return None


def read_rows(
    path_or_name: str | os.PathLike, split: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """All rows of an input as a list, for loaders that need the whole table (training sets, benchmarks).

    Reads what :func:`iter_rows` reads, plus a ``.json`` file (a list of rows, or an object whose ``split``,
    ``"data"``, ``"rows"`` or ``"test"`` entry is the list) and a ``.csv`` file. Unlike :func:`iter_rows`, a
    malformed JSONL line is an error here (``ValueError`` naming the file and line).
    """
    path = Path(path_or_name)
    if path.is_file() and path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            keys = ([split] if split else []) + ["data", "rows", "test"]
            data = next((data[key] for key in keys if key in data), [])
        return data[:limit] if limit is not None else data
    if path.is_file() and path.suffix == ".csv":
        # datasets, not the csv module: it types the columns (numbers stay numbers)
        datasets = _datasets("reading CSV files")
        rows: Any = datasets.load_dataset("csv", data_files=str(path), split="train")
    else:
        rows = iter_rows(path_or_name, split)
    out: list[dict[str, Any]] = []
    for row in rows:
        if limit is not None and len(out) >= limit:
            break
        if isinstance(row, InvalidRow):
            raise ValueError(f"{path_or_name}: {row.error}: {row.reason}")
        out.append(dict(row))
    return out


def load_records(
    path_or_name: str | os.PathLike,
    field_map: dict[str, str] | None = None,
    split: str | None = None,
    *,
    on_invalid: str = "raise",
    difficulty_field: str | None = None,
    source_field: str | None = None,
) -> list[Record]:
    """Records from a JSONL file, a saved ``datasets`` folder, a parquet file, or a hub dataset name.

    Args:
        path_or_name: The input.
        field_map: Record field -> column name, for inputs whose columns are named differently.
        split: Split of a dataset with several (``"train"``, ``"test"``).
        on_invalid: What to do with a malformed JSONL line: ``"raise"`` (ValueError naming the line) or
            ``"skip"``.
        difficulty_field: The column holding a row's difficulty (a number, or MATH's ``"Level 3"``), read into
            ``metadata["difficulty"]`` as a float; ``None`` reads the first of ``difficulty`` and ``level``
            that the row has a value in (:func:`rewardlab.data.metadata.with_prompt_metadata`).
        source_field: The column holding a row's source (MATH's ``"type"``), read into ``metadata["source"]``
            as a string; ``None`` reads the first of ``source``, ``data_source`` and ``category``.

    Rows without an ``id`` get their 0-based position as id. A row without a difficulty or source has no such
    metadata key.

    Raises:
        ValueError: a malformed JSONL line (with ``on_invalid="raise"``), a named field missing from a row, or
            a difficulty that is not a number (naming the input and the 0-based row index).
    """
    records = []
    for index, row in enumerate(iter_rows(path_or_name, split)):
        if isinstance(row, InvalidRow):
            if on_invalid == "skip":
                continue
            raise ValueError(f"{path_or_name}: {row.error}")
        record = Record.from_dict(dict(row), field_map=field_map)
        if record.id is None:
            record.id = index
        try:
            record = with_prompt_metadata(
                record, difficulty_field=difficulty_field, source_field=source_field
            )
        except ValueError as exc:
            raise ValueError(f"{path_or_name}, row {index}: {exc}") from None
        records.append(record)
    return records
