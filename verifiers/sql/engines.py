"""Read-only, time-bounded query execution on SQLite (standard library) and DuckDB.

Defence in depth, because predicted SQL is untrusted:

SQLite
    * the file is opened through a ``file:...?mode=ro`` URI: the connection cannot write to it at all;
    * ``PRAGMA query_only = 1`` (also covers in-memory databases built from DDL);
    * ``SQLITE_LIMIT_ATTACHED = 0``: ``ATTACH`` (and ``VACUUM INTO``, which attaches its target) fails;
    * an authorizer that allows only reading (SELECT, column reads, functions, recursive CTEs) and denies
      every write, PRAGMA, ATTACH/DETACH, transaction and ``load_extension`` call;
    * extension loading stays disabled (Python's default);
    * ``SQLITE_LIMIT_LENGTH`` bounds any string/blob a query can build;
    * a progress handler aborts the query at the deadline (cartesian joins, endless recursive CTEs);
    * results are fetched in chunks and cut at ``max_rows``.

DuckDB
    * files open with ``read_only=True``; ``enable_external_access = false`` (no reading/writing other
      files, no ATTACH, no COPY), extension auto-install/auto-load off, the configuration locked;
    * only ``SELECT`` statements (checked with DuckDB's own parser, ``duckdb.extract_statements``);
    * ``memory_limit`` and ``threads`` bounded; a timer thread calls ``interrupt()`` at the deadline.
      DuckDB holds one instance per file and process, so the first engine to open a file sets its
      memory limit; later engines share that instance through their own cursors.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

# Only these authorizer actions are allowed for predicted (and gold) queries.
_SQLITE_ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
_SQLITE_DENIED_FUNCTIONS = {"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"}
# Error messages of SQLite's parser (as opposed to binding/runtime errors such as "no such column").
_SQLITE_SYNTAX_MARKERS = ("syntax error", "incomplete input", "unrecognized token", 'near "')


class QueryError(Exception):
    """A query did not produce a result. ``kind`` is one of ``timeout``, ``syntax``, ``error``,
    ``unsafe``, ``too large``; the message is the engine's (first line)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class QueryOutput:
    """Columns (names from the cursor description) and rows of a result."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    seconds: float = 0.0


@dataclass(frozen=True)
class Database:
    """One database instance: a file on disk, or a setup script (DDL + INSERTs) built in memory.

    ``key`` identifies the instance's content for caching: the path plus size and modification time
    (a rebuilt file invalidates cached gold results), or a hash of the setup script.
    """

    path: str | None = None
    setup_sql: str | None = None
    key: str = field(default="", compare=False)

    @classmethod
    def file(cls, path: str) -> Database:
        path = os.path.abspath(path)
        st = os.stat(path)
        return cls(path=path, key=f"file:{path}:{st.st_size}:{st.st_mtime_ns}")

    @classmethod
    def script(cls, setup_sql: str) -> Database:
        digest = hashlib.sha256(setup_sql.encode()).hexdigest()[:16]
        return cls(setup_sql=setup_sql, key=f"setup:{digest}")

    @property
    def label(self) -> str:
        return os.path.basename(self.path) if self.path else self.key


def _sqlite_authorizer(action: int, arg1: Any, arg2: Any, dbname: Any, source: Any) -> int:
    if action in _SQLITE_ALLOWED:
        if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _SQLITE_DENIED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _decode(raw: bytes) -> str:
    # Spider databases hold some invalid UTF-8; Spider decodes with errors ignored, we keep a marker.
    return raw.decode("utf-8", errors="replace")


def fetch_bounded(cursor: Any, max_rows: int) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of an executed DB-API cursor, fetched in chunks so that a result of more than
    ``max_rows`` rows stops early with ``QueryError("too large")`` instead of filling memory."""
    columns = [d[0] for d in cursor.description or []]
    rows: list[tuple[Any, ...]] = []
    while True:
        chunk = cursor.fetchmany(1000)
        if not chunk:
            break
        rows.extend(chunk)
        if len(rows) > max_rows:
            raise QueryError("too large", f"result too large: more than {max_rows} rows")
    return columns, rows


class SQLiteEngine:
    """Runs queries on SQLite databases; one instance per thread (connections are cached per database)."""

    name = "sqlite"

    def __init__(self, *, max_rows: int, max_value_bytes: int, cache_size: int = 16) -> None:
        self.max_rows = max_rows
        self.max_value_bytes = max_value_bytes
        self.cache_size = cache_size
        self._conns: dict[str, sqlite3.Connection] = {}
        self._deadline = 0.0

    def _open(self, db: Database) -> sqlite3.Connection:
        conn = self._conns.pop(db.key, None)
        if conn is None:
            if db.path is not None:
                uri = "file:" + urllib.parse.quote(db.path) + "?mode=ro"
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            else:
                conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                conn.executescript(db.setup_sql or "")
            conn.text_factory = _decode
            conn.execute("PRAGMA query_only = 1")
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.max_value_bytes)
            conn.set_authorizer(_sqlite_authorizer)
            conn.set_progress_handler(self._progress, 1000)
            while len(self._conns) >= self.cache_size:
                self._conns.pop(next(iter(self._conns))).close()
        self._conns[db.key] = conn  # most recently used last
        return conn

    def _progress(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def run(self, db: Database, sql: str, timeout: float) -> QueryOutput:
        conn = self._open(db)
        start = time.monotonic()
        self._deadline = start + timeout
        cur = None
        try:
            cur = conn.execute(sql)
            columns, rows = fetch_bounded(cur, self.max_rows)
            return QueryOutput(columns, rows, time.monotonic() - start)
        except sqlite3.Error as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if time.monotonic() > self._deadline or message == "interrupted":
                raise QueryError("timeout", "timeout") from None
            lowered = message.lower()
            if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in lowered:
                raise QueryError("unsafe", "more than one statement") from None
            if any(
                m in lowered
                for m in ("not authorized", "authorization denied", "attempt to write", "too many attached")
            ):
                raise QueryError("unsafe", message) from None
            if "string or blob too big" in lowered:
                raise QueryError("too large", f"result too large: {message}") from None
            if any(marker in lowered for marker in _SQLITE_SYNTAX_MARKERS):
                raise QueryError("syntax", message) from None
            raise QueryError("error", message) from None
        except MemoryError:
            raise QueryError("too large", "out of memory") from None
        finally:
            self._deadline = 0.0
            if cur is not None:
                cur.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


_DUCKDB_INSTANCES: dict[tuple[int, str], Any] = {}
_DUCKDB_LOCK = threading.Lock()


class DuckDBEngine:
    """Runs queries on DuckDB databases (``.duckdb`` files opened read-only, or setup scripts in memory)."""

    name = "duckdb"

    def __init__(self, *, max_rows: int, memory_limit_mb: int, threads: int = 1, cache_size: int = 8) -> None:
        import duckdb  # optional at import time of the package; installed as a dependency

        self._duckdb = duckdb
        self.max_rows = max_rows
        self.config = {
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "memory_limit": f"{int(memory_limit_mb)}MB",
            "threads": int(threads),
        }
        self.cache_size = cache_size
        self._conns: dict[str, Any] = {}

    def _open(self, db: Database) -> Any:
        conn = self._conns.pop(db.key, None)
        if conn is None:
            duckdb = self._duckdb
            if db.path is not None:
                # DuckDB allows one database instance per file and process (a second connect with another
                # configuration fails), so file instances are shared process-wide and each engine (one per
                # thread) takes its own cursor, which has its own interrupt().
                key = (os.getpid(), db.key)
                with _DUCKDB_LOCK:
                    base = _DUCKDB_INSTANCES.get(key)
                    if base is None:
                        base = duckdb.connect(db.path, read_only=True, config=dict(self.config))
                        base.execute("SET lock_configuration = true")
                        _DUCKDB_INSTANCES[key] = base
                conn = base.cursor()
            else:
                conn = duckdb.connect(":memory:", config=dict(self.config))
                conn.execute(db.setup_sql or "")
                conn.execute("SET lock_configuration = true")
            while len(self._conns) >= self.cache_size:
                self._conns.pop(next(iter(self._conns))).close()
        self._conns[db.key] = conn
        return conn

    def check(self, sql: str) -> None:
        """Raises QueryError unless ``sql`` is exactly one SELECT statement (by DuckDB's parser)."""
        duckdb = self._duckdb
        try:
            statements = duckdb.extract_statements(sql)
        except duckdb.Error as exc:
            raise QueryError("syntax", str(exc).splitlines()[0]) from None
        if len(statements) != 1:
            raise QueryError("unsafe", f"{len(statements)} statements, expected one")
        if statements[0].type != duckdb.StatementType.SELECT:
            raise QueryError("unsafe", f"only SELECT statements are allowed, got {statements[0].type.name}")

    def run(self, db: Database, sql: str, timeout: float) -> QueryOutput:
        duckdb = self._duckdb
        self.check(sql)
        conn = self._open(db)
        start = time.monotonic()
        timed_out = threading.Event()

        def stop() -> None:
            timed_out.set()
            conn.interrupt()

        timer = threading.Timer(timeout, stop)
        timer.daemon = True
        timer.start()
        try:
            cur = conn.execute(sql)
            columns, rows = fetch_bounded(cur, self.max_rows)
            if timed_out.is_set():
                raise QueryError("timeout", "timeout")
            return QueryOutput(columns, rows, time.monotonic() - start)
        except duckdb.Error as exc:
            if timed_out.is_set() or isinstance(exc, duckdb.InterruptException):
                raise QueryError("timeout", "timeout") from None
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if isinstance(exc, duckdb.ParserException):
                raise QueryError("syntax", message) from None
            if isinstance(exc, duckdb.PermissionException):
                raise QueryError("unsafe", message) from None
            if isinstance(exc, duckdb.OutOfMemoryException):
                raise QueryError("too large", message) from None
            raise QueryError("error", message) from None
        finally:
            timer.cancel()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
