"""A JSONL file as a table the viewer can page, filter and sort without holding the file.

``RowIndex`` keeps, per row, only the byte offset of its line and a few columns (id, reward, error, ...);
a page reads its rows' lines back from disk. The line offsets come first (a numpy scan for newlines: about
0.4 s per GB), so the file can be paged at once; the columns of the first index are read by DuckDB's JSON
reader, in a thread when the index is built for the web server (``bench/view_load.py``: about 1.7 s for a
million 1.1 KB rows on two cores); lines appended later (a run in progress) are indexed with orjson, and so is
the whole file whenever DuckDB's reading cannot be matched line by line (a line DuckDB rejects, a file it
cannot read). A line that is not a JSON object is a *malformed* row: it stays in the
table, in its place, with its text.

Nothing here writes anywhere: the viewer never touches the files it shows.
"""

from __future__ import annotations

import mmap
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from rewardlab import types

MALFORMED = "malformed row"
"""The error kind of a line that is not a JSON object."""

_CHUNK = 1 << 24
_BLANK = b" \t\r\n"


@dataclass(frozen=True)
class Column:
    """A column of the index: ``key`` is the row's field (``details.rubric_score``: a field of an object
    field, one level down), ``kind`` one of ``text``, ``number``, ``length`` (the length of the field's
    text, or of its JSON when it is not text; NaN, shown blank, when the row has no such field or it is
    null, so that an empty string's 0 stays apart from a missing field)."""

    name: str
    key: str
    kind: str = "text"


RUBRIC_SCORE = Column("rubric_score", "details.rubric_score", "number")
"""A rubric reward source's score (``details["rubric_score"]``): NaN in rows of other sources."""

SCORED_COLUMNS = (
    Column("id", "id"),
    Column("reward", "reward", "number"),
    Column("error", "error"),
    Column("verifier", "verifier"),
    Column("prompt_chars", "prompt", "length"),
    Column("completion_chars", "completion", "length"),
    Column("reward_time_s", "reward_time_s", "number"),
    RUBRIC_SCORE,
)
"""The columns of ``rewardlab score`` output (also eval ``samples.jsonl``, with ``problem_id`` added)."""


def error_kind(error: Any) -> str:
    """The short kind of an error message, by the rule ``score``'s summary and RL's metrics group errors by
    (:func:`rewardlab.types.error_kind`: the text before the first ``:``), cut to 60 characters for the
    menus; an error that is not text is read as its JSON; ``""`` for no error."""
    if error is None or error == "":
        return ""
    text = error if isinstance(error, str) else orjson.dumps(error).decode()
    return (types.error_kind(text) or "error")[:60]


# ----------------------------------------------------------------------------------------------------------
# Reading lines
# ----------------------------------------------------------------------------------------------------------
def _lines(data: Any, begin: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(starts, ends, line numbers counted from 0) of the non-blank lines of ``data[begin:end]``, which ends
    with a newline, and how many lines (blank ones included) it holds."""
    view = np.frombuffer(data, dtype=np.uint8)
    newlines = [np.flatnonzero(view[s : min(s + _CHUNK, end)] == 10) + s for s in range(begin, end, _CHUNK)]
    ends = np.concatenate(newlines).astype(np.int64) if newlines else np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[begin], ends[:-1] + 1]).astype(np.int64) if len(ends) else ends
    keep = _not_blank(data, starts, ends)
    return starts[keep], ends[keep], np.flatnonzero(keep), len(ends)


def _not_blank(data: Any, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    keep = np.ones(len(starts), dtype=bool)
    for i in np.flatnonzero(ends - starts <= 8):  # only short lines can be blank: check those by hand
        keep[i] = bool(bytes(data[starts[i] : ends[i]]).strip(_BLANK))
    return keep


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _field(row: dict, key: str) -> Any:
    """``row[key]``, or for ``outer.inner`` the field ``inner`` of the object ``row[outer]`` (``None`` where
    either is missing or ``row[outer]`` is not an object)."""
    outer, dot, inner = key.partition(".")
    value = row.get(outer)
    if not dot:
        return value
    return value.get(inner) if isinstance(value, dict) else None


def _cell(row: dict, column: Column) -> Any:
    value = _field(row, column.key)
    if column.kind == "number":  # as DuckDB reads a DOUBLE: numbers, booleans and numeric strings
        try:
            return float(value) if isinstance(value, int | float | str) else np.nan
        except ValueError:
            return np.nan
    if column.kind == "length":
        text = _as_text(value)
        return np.nan if text is None else len(text)
    return _as_text(value)


def parse_line(raw: bytes) -> dict[str, Any] | None:
    """The row of a line, or ``None`` when it is not a JSON object."""
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None


# ----------------------------------------------------------------------------------------------------------
# Columns
# ----------------------------------------------------------------------------------------------------------
@dataclass
class _Columns:
    """Per-row columns; ``malformed`` marks lines that are not JSON objects."""

    values: dict[str, list | np.ndarray]
    malformed: np.ndarray

    @classmethod
    def empty(cls, columns: Sequence[Column]) -> _Columns:
        # lengths are floats so that a missing one is NaN: sorted last either way, sent as null
        dtypes = {"text": object, "number": np.float64, "length": np.float64}
        return cls({c.name: np.zeros(0, dtype=dtypes[c.kind]) for c in columns}, np.zeros(0, dtype=bool))


def _python_columns(data: Any, starts: np.ndarray, ends: np.ndarray, columns: Sequence[Column]) -> _Columns:
    values: dict[str, list] = {c.name: [] for c in columns}
    malformed = np.zeros(len(starts), dtype=bool)
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        row = parse_line(data[s:e])
        malformed[i] = row is None
        for c in columns:
            values[c.name].append(_cell(row or {}, c))
    return _Columns(values, malformed)


_DUCK_TYPES = {"text": "VARCHAR", "number": "DOUBLE", "length": "VARCHAR"}


def _duckdb_columns(
    path: Path, data: Any, starts: np.ndarray, ends: np.ndarray, columns: Sequence[Column]
) -> _Columns | None:
    """The columns read by DuckDB, or ``None`` when its rows cannot be matched to the lines one to one."""
    import duckdb

    keys = _duck_spec(columns)
    if keys is None:
        return None
    spec = "{" + ", ".join(f"'{k}': '{t}'" for k, t in keys.items()) + "}"
    selects = ", ".join(
        f"length({_duck_name(c.key)})" if c.kind == "length" else _duck_name(c.key) for c in columns
    )
    nulls = " and ".join(f'"{k}" is null' for k in keys)
    query = (
        f"select {selects}, ({nulls}) from read_json(?, format='newline_delimited', columns={spec}, "
        "ignore_errors=true)"
    )
    try:
        with duckdb.connect() as con:
            result = con.execute(query, [str(path)]).fetchnumpy()
    except duckdb.Error:
        return None
    arrays = list(result.values())
    if len(arrays[-1]) != len(starts):
        return None
    return _from_duckdb(arrays, data, starts, ends, columns)


def _duck_spec(columns: Sequence[Column]) -> dict[str, str] | None:
    """DuckDB's type of each top-level field the columns read (a struct of the inner fields for
    ``outer.inner`` keys), or ``None`` when a field is read both whole and as an object."""
    flat = {c.key: _DUCK_TYPES[c.kind] for c in columns if "." not in c.key}
    nested: dict[str, dict[str, str]] = {}
    for c in columns:
        outer, dot, inner = c.key.partition(".")
        if dot:
            nested.setdefault(outer, {})[inner] = _DUCK_TYPES[c.kind]
    if set(flat) & set(nested):
        return None
    structs = {k: "STRUCT(" + ", ".join(f'"{f}" {t}' for f, t in v.items()) + ")" for k, v in nested.items()}
    return {**flat, **structs}


def _duck_name(key: str) -> str:
    return ".".join(f'"{part}"' for part in key.split(".", 1))


def _from_duckdb(arrays: list, data: Any, starts: np.ndarray, ends: np.ndarray, columns) -> _Columns:
    values: dict[str, np.ndarray] = {}
    for array, c in zip(arrays, columns, strict=False):
        if c.kind in ("number", "length"):
            values[c.name] = np.ma.filled(np.ma.asarray(array, dtype=np.float64), np.nan)
        else:
            values[c.name] = np.asarray(array.data if np.ma.isMaskedArray(array) else array, dtype=object)
            if np.ma.isMaskedArray(array):
                values[c.name][np.ma.getmaskarray(array)] = None
    malformed = np.zeros(len(starts), dtype=bool)
    # every column null: a malformed line, a row without these fields, or one DuckDB would not read (over
    # its object size limit): orjson decides, and fills the columns of a row it reads
    for i in np.flatnonzero(np.asarray(arrays[-1], dtype=bool)):
        row = parse_line(data[starts[i] : ends[i]])
        malformed[i] = row is None
        for c in columns:
            values[c.name][i] = _cell(row or {}, c)
    return _Columns(values, malformed)


# ----------------------------------------------------------------------------------------------------------
# The index
# ----------------------------------------------------------------------------------------------------------
@dataclass
class Query:
    """What a table view asks for; every field comes from the page's URL query string."""

    reward_min: float | None = None
    reward_max: float | None = None
    error: str | None = None
    """An error kind; ``any``: every row with an error; ``none``: rows without one."""
    verifier: str | None = None
    q: str | None = None
    """Free text, searched case-insensitively in the row's JSON line."""
    equals: dict[str, str] = field(default_factory=dict)
    """Other columns that must equal a value (``problem_id``, ``step``)."""
    sort: str | None = None
    desc: bool = False

    def key(self) -> tuple:
        return (
            self.reward_min, self.reward_max, self.error, self.verifier, self.q,
            tuple(sorted(self.equals.items())), self.sort, self.desc,
        )  # fmt: skip


@dataclass(frozen=True)
class _Snapshot:
    """The index as one query sees it (arrays are replaced on append, never changed in place, so a query
    can run on a snapshot without holding the index's lock)."""

    starts: np.ndarray
    ends: np.ndarray
    values: dict[str, np.ndarray]
    errors: np.ndarray | None


class RowIndex:
    """The rows of one JSONL file: offsets, columns, and the queries over them (see the module docstring).

    Thread-safe: the web server calls it from several threads. ``refresh`` picks up appended lines. With
    ``background``, the first build's columns are read in a thread: rows can be paged at once (``cells``
    reads a row's values from its line), and filters, sorts and facets wait for the columns.
    """

    def __init__(
        self,
        path: str | Path,
        columns: Sequence[Column] = SCORED_COLUMNS,
        default: dict | None = None,
        *,
        background: bool = False,
    ):
        self.path = Path(path)
        self.columns = tuple(columns)
        self.default = dict(default or {})
        """Column values for rows that lack them (``verifier`` of a run's default)."""
        self.background = background
        self._lock = threading.RLock()
        self._results: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._pending: _ColumnBuild | None = None
        self._generation = 0  # counts changes: a query computed on an older index is not cached
        self._reset()
        self.refresh()

    def _reset(self) -> None:
        self._wait()
        self.starts = np.zeros(0, dtype=np.int64)
        self.ends = np.zeros(0, dtype=np.int64)
        self.line_numbers = np.zeros(0, dtype=np.int64)
        self._cols = _Columns.empty(self.columns)
        self._indexed = 0  # bytes indexed (up to the last newline)
        self._seal = b""  # the bytes just before ``_indexed``: unchanged when lines were only appended
        self._lines_before = 0
        self._identity: tuple | None = None
        self._generation += 1
        self._results.clear()
        self._errors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def generation(self) -> int:
        """Counts the index's changes (lines appended, columns added, the file replaced): a summary computed
        at one generation holds until it changes."""
        return self._generation

    # -- building ------------------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Indexes lines appended since the last call; starts over when the file was replaced (another
        inode, or it shrank, or it changed without growing). Returns whether anything changed."""
        with self._lock:
            stat = self.path.stat()
            current = (stat.st_ino, stat.st_dev, stat.st_size, stat.st_mtime_ns)
            previous = self._identity
            if current == previous:
                return False
            self._wait()
            if previous is not None and (
                current[:2] != previous[:2]
                or stat.st_size < self._indexed
                or stat.st_size == previous[2]
                or self._read(self._indexed - len(self._seal), self._indexed) != self._seal
            ):
                self._reset()
            self._identity = current
            if stat.st_size > self._indexed:
                self._index_from(self._indexed, stat.st_size)
            return True

    def _index_from(self, begin: int, size: int) -> None:
        with self.path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            last_newline = data.rfind(b"\n", begin, size)
            end = last_newline + 1 if last_newline >= 0 else begin  # a line still being written waits
            if end == begin:
                return
            starts, ends, numbers, count = _lines(data, begin, end)
            self.starts = np.concatenate([self.starts, starts])
            self.ends = np.concatenate([self.ends, ends])
            self.line_numbers = np.concatenate([self.line_numbers, numbers + self._lines_before + 1])
            self._indexed = end
            self._seal = bytes(data[max(0, end - 256) : end])
            self._lines_before += count
            self._generation += 1
            whole = begin == 0 and end == size  # DuckDB reads whole files only
            if whole and self.background:
                self._pending = _ColumnBuild(self.path, starts, ends, self.columns)
            else:
                self._add_columns(_read_columns(self.path, data, starts, ends, self.columns, duck=whole))

    def _wait(self) -> None:
        """Waits for a background build of columns and adds them."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._add_columns(pending.result())

    def _add_columns(self, cols: _Columns) -> None:
        for c in self.columns:
            new = np.asarray(cols.values[c.name], dtype=object if c.kind == "text" else np.float64)
            if c.kind == "text" and c.name in self.default:
                new[np.equal(new, None)] = self.default[c.name]
            self._cols.values[c.name] = np.concatenate([self._cols.values[c.name], new])
        self._cols.malformed = np.concatenate([self._cols.malformed, cols.malformed])
        self._results.clear()
        self._errors = None
        self._generation += 1

    # -- reading -------------------------------------------------------------------------------------------
    def _read(self, begin: int, end: int) -> bytes:
        with self.path.open("rb") as handle:
            handle.seek(begin)
            return handle.read(end - begin)

    def raw(self, i: int) -> bytes:
        """Row ``i``'s line as bytes."""
        return self._read(int(self.starts[i]), int(self.ends[i]))

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` parsed; a malformed line is ``{"error": "malformed row: ...", "_line": text}``."""
        raw = self.raw(i)
        row = parse_line(raw)
        if row is None:
            return {
                "error": f"{MALFORMED}: not a JSON object",
                "_malformed": True,
                "_line": raw.decode(errors="replace"),
            }
        return row

    def cells(self, row: dict[str, Any]) -> dict[str, Any]:
        """A parsed row's column values, as the index holds them (no need to wait for the columns)."""
        out = {c.name: _cell(row, c) for c in self.columns}
        for name, value in self.default.items():
            if out.get(name) is None:
                out[name] = value
        out["error"] = MALFORMED if row.get("_malformed") else error_kind(row.get("error"))
        return out

    def column(self, name: str) -> np.ndarray:
        """A column as an array (text columns as object arrays, with the defaults filled in)."""
        with self._lock:
            self._wait()
            return self._cols.values[name]

    def error_kinds(self) -> np.ndarray:
        """Each row's error kind (``""``: none); malformed lines are ``malformed row``."""
        with self._lock:
            self._wait()
            if self._errors is None:
                raw = (
                    self._cols.values["error"].tolist()
                    if "error" in self._cols.values
                    else [None] * len(self)
                )
                kinds = {text: error_kind(text) for text in set(raw)}
                errors = np.array([kinds[text] for text in raw], dtype=object)
                errors[self._cols.malformed] = MALFORMED
                self._errors = errors
            return self._errors

    def facets(self) -> dict[str, dict[str, int]]:
        """Counts of each error kind and each verifier (the filter menus)."""
        out = {"error": dict(Counter(self.error_kinds().tolist()).most_common())}
        if "verifier" in self._cols.values:
            out["verifier"] = dict(Counter(v for v in self.column("verifier").tolist() if v).most_common())
        return out

    # -- querying ------------------------------------------------------------------------------------------
    def query(self, query: Query) -> np.ndarray:
        """Row numbers matching ``query``, in its order (cached: paging through a result is slicing). The
        plain file order needs no columns; anything else runs on a snapshot, outside the lock, so one slow
        search does not hold up other pages."""
        if query.key() == Query().key() or query.key() == Query(desc=True).key():
            rows = np.arange(len(self))
            return rows[::-1] if query.desc else rows
        with self._lock:
            self._wait()
            key = query.key()
            if key in self._results:
                self._results.move_to_end(key)
                return self._results[key]
            errors = self.error_kinds() if query.error or query.sort == "error" else None
            snapshot = _Snapshot(self.starts, self.ends, dict(self._cols.values), errors)
            generation = self._generation
        result = _order(snapshot, np.flatnonzero(_mask(snapshot, query, self.path)), query)
        with self._lock:
            if generation == self._generation:
                self._results[key] = result
                while len(self._results) > 16:
                    self._results.popitem(last=False)
        return result

    def rows_containing(self, needle: bytes) -> np.ndarray:
        """Row numbers, in order, of the lines holding ``needle`` as written (case-sensitive): a scan of the
        file (about 1 GB/s) that finds the few rows worth parsing for a summary (``b'"criteria"'``)."""
        with self._lock:
            snapshot = _Snapshot(self.starts, self.ends, {}, None)
        return np.flatnonzero(_scan(snapshot, self.path, [needle], lower=False))


class _ColumnBuild:
    """The columns of a whole file, read in a thread (the first build of a ``background`` index)."""

    def __init__(self, path: Path, starts: np.ndarray, ends: np.ndarray, columns: tuple[Column, ...]) -> None:
        self._args = (path, starts, ends, columns)
        self._cols: _Columns | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rewardlab-view-index", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        path, starts, ends, columns = self._args
        try:
            with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                self._cols = _read_columns(path, data, starts, ends, columns, duck=True)
        except BaseException as exc:  # re-raised in the thread that waits for the columns
            self._error = exc

    def result(self) -> _Columns:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._cols is not None
        return self._cols


def _read_columns(
    path: Path, data: Any, starts: np.ndarray, ends: np.ndarray, columns: Sequence[Column], *, duck: bool
) -> _Columns:
    cols = _duckdb_columns(path, data, starts, ends, columns) if duck else None
    return cols if cols is not None else _python_columns(data, starts, ends, columns)


# ----------------------------------------------------------------------------------------------------------
# Queries on a snapshot
# ----------------------------------------------------------------------------------------------------------
def _mask(s: _Snapshot, query: Query, path: Path) -> np.ndarray:
    mask = np.ones(len(s.starts), dtype=bool)
    if "reward" in s.values and (query.reward_min is not None or query.reward_max is not None):
        with np.errstate(invalid="ignore"):
            if query.reward_min is not None:
                mask &= s.values["reward"] >= query.reward_min
            if query.reward_max is not None:
                mask &= s.values["reward"] <= query.reward_max
    if query.error and s.errors is not None:
        if query.error == "any":
            mask &= s.errors != ""
        else:
            mask &= s.errors == ("" if query.error == "none" else query.error)
    if query.verifier and "verifier" in s.values:
        mask &= s.values["verifier"] == query.verifier
    for name, value in query.equals.items():
        mask &= _equal(s.values[name], value)
    if query.q:
        mask &= _search(s, path, query.q)
    return mask


def _equal(column: np.ndarray, value: str) -> np.ndarray:
    if column.dtype == object:
        return np.array([str(v) for v in column], dtype=object) == value
    try:
        return column == float(value)
    except ValueError:
        return np.zeros(len(column), dtype=bool)


_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_SEARCH_CHUNK = 1 << 26


def _search(s: _Snapshot, path: Path, text: str) -> np.ndarray:
    """Rows whose JSON line contains ``text`` (as written, or JSON-escaped), ignoring ASCII case. The file
    is lowered chunk by chunk and searched with ``bytes.find``, skipping to the next row after a hit."""
    forms = {text.encode(), orjson.dumps(text)[1:-1], _ascii_json(text)}
    # a raw newline never occurs inside a JSON line: a form holding one would match across two rows
    needles = sorted({f.translate(_LOWER) for f in forms if f and b"\n" not in f})
    return _scan(s, path, needles, lower=True)


def _scan(s: _Snapshot, path: Path, needles: Sequence[bytes], *, lower: bool) -> np.ndarray:
    """Rows whose line contains one of ``needles`` (``lower``: in the line with ASCII letters lowered)."""
    hit = np.zeros(len(s.starts), dtype=bool)
    if not len(s.starts) or not needles:
        return hit
    end, overlap = int(s.ends[-1]), max(map(len, needles)) - 1
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for begin in range(0, end, _SEARCH_CHUNK):
            stop = min(begin + _SEARCH_CHUNK, end)
            chunk = data[begin : min(stop + overlap, end)]
            chunk = chunk.translate(_LOWER) if lower else chunk
            for needle in needles:
                _mark_hits(chunk, needle, begin, stop, s, hit)
    return hit


def _mark_hits(chunk: bytes, needle: bytes, begin: int, stop: int, s: _Snapshot, hit: np.ndarray) -> None:
    at = chunk.find(needle)
    while at >= 0 and begin + at < stop:
        row = int(np.searchsorted(s.starts, begin + at, side="right")) - 1
        if row >= 0 and begin + at < s.ends[row]:
            hit[row] = True
            at = chunk.find(needle, int(s.ends[row]) - begin)
        else:  # a blank line between rows
            at = chunk.find(needle, at + 1)


def _order(s: _Snapshot, rows: np.ndarray, query: Query) -> np.ndarray:
    if not query.sort or query.sort == "row":
        return rows[::-1] if query.desc else rows
    column = s.errors if query.sort == "error" else s.values.get(query.sort)
    if column is None:
        return rows
    keys = column[rows]
    if keys.dtype != object:  # NaN (no reward, no prompt) last either way
        return rows[np.argsort(-keys if query.desc else keys, kind="stable")]
    texts = ["" if k is None else str(k) for k in keys.tolist()]
    order = sorted(range(len(texts)), key=texts.__getitem__, reverse=query.desc)
    return rows[np.array(order, dtype=np.int64)]


def _ascii_json(text: str) -> bytes:
    import json

    return json.dumps(text)[1:-1].encode()


def is_row_file(path: Path) -> bool:
    """Whether ``path`` looks like scored rows: a ``.jsonl`` file whose first object has ``reward``."""
    if path.suffix != ".jsonl" or not path.is_file():
        return False
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                row = parse_line(raw)
                return row is not None and "reward" in row
    return False
