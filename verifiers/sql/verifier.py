"""``SQLVerifier``: execution accuracy (Spider/BIRD) as a reward, with test-suite accuracy and safety."""

from __future__ import annotations

import functools
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import Record, Result, jsonable
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.sql.compare import compare_results, normalize_rows
from rewardlab.verifiers.sql.engines import Database, DuckDBEngine, QueryError, QueryOutput, SQLiteEngine
from rewardlab.verifiers.sql.extract import (
    SQL_FENCE_LANGS,
    extract_sql,
    first_keyword,
    has_top_level_order_by,
    split_statements,
)

DB_SUFFIXES = {"sqlite": (".sqlite", ".sqlite3", ".db"), "duckdb": (".duckdb", ".ddb", ".db")}
STAGES = ("syntax", "executes", "columns", "rows")


@dataclass
class SQLConfig:
    """Options of :class:`SQLVerifier` (all optional; the defaults follow Spider's test-suite evaluation)."""

    engine: str = "sqlite"
    """``"sqlite"`` (standard library, default) or ``"duckdb"``."""
    db_root: str | None = None
    """Folder that relative database paths and ``db_id`` names resolve against (default: the working
    directory). ``db_id`` resolves to ``<db_root>/<db_id>/<db_id>.sqlite`` (Spider layout), else
    ``<db_root>/<db_id>.sqlite``."""
    test_suite: bool = False
    """With a ``db_id``: use every database file in ``<db_root>/<db_id>/`` (Spider test-suite layout) and
    count the prediction correct only if it matches the gold query on all of them."""
    extract: str = "last_fence"
    """Where the SQL is in the completion: ``last_fence`` (last ```sql block, else the whole text),
    ``first_fence``, ``fence_only`` (no fence: no answer) or ``whole``."""
    fence_langs: tuple[str, ...] = SQL_FENCE_LANGS
    """Fence language tags accepted as SQL (``""``: an untagged fence)."""
    row_order: str = "auto"
    """``auto``: rows compared in order only when the gold query has a top-level ORDER BY; ``always``;
    ``never``."""
    ignore_column_order: bool = True
    """Accept the predicted columns in any order (Spider test-suite). False: same order as gold (BIRD)."""
    distinct: bool = False
    """Compare results as sets, ignoring duplicate rows (BIRD's ``set(pred) == set(gold)``)."""
    float_tolerance: float = 1e-6
    """Relative tolerance for floats (absolute near zero); 0 compares floats exactly (Spider, BIRD)."""
    timeout: float = 5.0
    """Seconds one query (gold or predicted, on one database) may run before it is stopped."""
    max_rows: int = 100_000
    """A result with more rows is not fetched further: ``error: "result too large"``."""
    max_value_bytes: int = 10_000_000
    """Largest string or blob a SQLite query may build (``SQLITE_LIMIT_LENGTH``)."""
    memory_limit_mb: int = 1024
    """DuckDB ``memory_limit`` per connection."""
    partial: bool = False
    """Partial credit for RL on a wrong answer: the sum of ``partial_weights`` of the stages reached."""
    partial_weights: dict[str, float] = field(
        default_factory=lambda: {"syntax": 0.1, "executes": 0.1, "columns": 0.1, "rows": 0.1}
    )
    """Credit per stage: ``syntax`` (the engine parses it), ``executes`` (runs without error), ``columns``
    (as many columns as gold), ``rows`` (as many rows as gold). A correct answer always scores 1."""
    gold_cache_size: int = 4096
    """Gold results kept per verifier (keyed by database content and gold query)."""
    preview_rows: int = 3
    """Rows of each result shown in ``details`` (0: none)."""

    def __post_init__(self) -> None:
        if self.engine not in ("sqlite", "duckdb"):
            raise ValueError(f"engine must be 'sqlite' or 'duckdb', got {self.engine!r}")
        if self.row_order not in ("auto", "always", "never"):
            raise ValueError(f"row_order must be auto, always or never, got {self.row_order!r}")
        if self.extract not in ("last_fence", "first_fence", "fence_only", "whole"):
            raise ValueError(f"unknown extract mode {self.extract!r}")
        unknown = set(self.partial_weights) - set(STAGES)
        if unknown:
            raise ValueError(f"unknown partial_weights stages {sorted(unknown)} (known: {list(STAGES)})")
        if sum(self.partial_weights.values()) >= 1.0:
            raise ValueError("partial_weights must sum to less than 1 (a correct answer scores 1)")
        self.fence_langs = tuple(self.fence_langs)


@dataclass
class _Gold:
    output: QueryOutput | None
    error: str | None
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # normalised once, compared many times


class SQLVerifier(Verifier):
    """Execution accuracy: the predicted query is right when its result equals the gold query's result.

    The record's ``reference`` is the gold query (a string, with the database in ``metadata["db_id"]``)
    or a dict::

        {"query": "SELECT ...",            # gold SQL (also accepted: "gold", "SQL", "sql")
         "db": "path/to/db.sqlite",        # a file, a list of files, or a folder (all its databases);
                                           # also accepted: db_path, db_paths, db_dir
         "db_id": "concert_singer",        # or a Spider/BIRD database name under db_root
         "setup_sql": "CREATE TABLE ...;", # or DDL + INSERTs built in memory (a string or a list;
                                           # also accepted: ddl, schema)
         "engine": "duckdb"}               # optional per-record engine

    Several databases (a list, a folder, ``test_suite``) give test-suite accuracy: correct only when
    equal on every one. See docs/sql.md for the comparison rules and the safety measures.
    """

    name = "sql"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        unknown = sorted(set(config) - set(SQLConfig.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"unknown sql verifier option(s) {unknown} (known: {sorted(SQLConfig.__dataclass_fields__)})"
            )
        self.cfg = SQLConfig(**config)
        self._local = threading.local()
        self._gold: OrderedDict[tuple, _Gold] = OrderedDict()
        self._gold_lock = threading.Lock()
        self.gold_cache_hits = 0
        self._files: dict[str, tuple[tuple[int, int], Database]] = {}
        self._folders: dict[tuple[str, str], tuple[int, list[str]]] = {}

    # Verifiers travel to worker processes: drop connections and caches, keep the config.
    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])

    def engine(self, name: str) -> SQLiteEngine | DuckDBEngine:
        engines = getattr(self._local, "engines", None)
        if engines is None:
            engines = self._local.engines = {}
        if name not in engines:
            if name == "sqlite":
                engines[name] = SQLiteEngine(
                    max_rows=self.cfg.max_rows, max_value_bytes=self.cfg.max_value_bytes
                )
            elif name == "duckdb":
                engines[name] = DuckDBEngine(
                    max_rows=self.cfg.max_rows, memory_limit_mb=self.cfg.memory_limit_mb
                )
            else:
                raise ValueError(f"unknown SQL engine {name!r}")
        return engines[name]

    def close(self) -> None:
        """Closes this thread's cached connections."""
        for engine in getattr(self._local, "engines", {}).values():
            engine.close()
        self._local.engines = {}

    # ----------------------------------------------------------------------------------------- reference
    def _resolve_path(self, path: str) -> str:
        if not os.path.isabs(path) and self.cfg.db_root:
            path = os.path.join(self.cfg.db_root, path)
        return path

    def _file(self, path: str) -> Database:
        """``Database.file(path)``, re-using the object while the file's size and mtime are unchanged."""
        st = os.stat(path)  # raises FileNotFoundError
        stamp = (st.st_size, st.st_mtime_ns)
        cached = self._files.get(path)
        if cached is None or cached[0] != stamp:
            cached = (stamp, Database.file(path))
            self._files[path] = cached
        return cached[1]

    def _folder(self, path: str, engine: str) -> list[Database]:
        """Every database file of ``engine`` in ``path`` (sorted), listing re-used while the folder is unchanged."""
        stamp = os.stat(path).st_mtime_ns
        cached = self._folders.get((path, engine))
        if cached is None or cached[0] != stamp:
            with os.scandir(path) as entries:
                names = sorted(
                    e.name for e in entries if e.is_file() and e.name.endswith(DB_SUFFIXES[engine])
                )
            cached = (stamp, [os.path.join(path, n) for n in names])
            self._folders[(path, engine)] = cached
        if not cached[1]:
            raise FileNotFoundError(f"no {engine} database files in {path}")
        return [self._file(f) for f in cached[1]]

    def _databases(self, ref: dict[str, Any], metadata: dict[str, Any], engine: str) -> list[Database]:
        suffixes = DB_SUFFIXES[engine]
        setup = ref.get("setup_sql") or ref.get("ddl") or ref.get("schema")
        if setup:
            return [Database.script(s) for s in ([setup] if isinstance(setup, str) else setup)]
        db = (
            ref.get("db")
            or ref.get("db_path")
            or ref.get("db_paths")
            or ref.get("db_dir")
            or metadata.get("db_path")
        )
        if db:
            out: list[Database] = []
            for item in [db] if isinstance(db, str) else db:
                path = self._resolve_path(str(item))
                if os.path.isdir(path):
                    out.extend(self._folder(path, engine))
                elif os.path.isfile(path):
                    out.append(self._file(path))
                else:
                    raise FileNotFoundError(f"database not found: {path}")
            return out
        db_id = ref.get("db_id") or metadata.get("db_id")
        if not db_id:
            raise ValueError("reference names no database (db, db_id or setup_sql)")
        root = self.cfg.db_root or "."
        spider_dir = os.path.join(root, db_id)
        if self.cfg.test_suite and os.path.isdir(spider_dir):
            return self._folder(spider_dir, engine)
        for suffix in suffixes:
            for candidate in (os.path.join(spider_dir, db_id + suffix), os.path.join(root, db_id + suffix)):
                if os.path.isfile(candidate):
                    return [self._file(candidate)]
        raise FileNotFoundError(f"database {db_id!r} not found under {os.path.abspath(root)}")

    @staticmethod
    def _gold_query(ref: dict[str, Any]) -> str:
        for key in ("query", "gold", "SQL", "sql", "gold_sql"):
            if ref.get(key):
                return str(ref[key])
        raise ValueError("reference has no gold query (query, gold or SQL)")

    # ---------------------------------------------------------------------------------------- execution
    def _run_gold(self, engine_name: str, db: Database, gold: str) -> _Gold:
        key = (engine_name, db.key, gold, self.cfg.max_rows)
        with self._gold_lock:
            cached = self._gold.get(key)
            if cached is not None:
                self._gold.move_to_end(key)
                self.gold_cache_hits += 1
                return cached
        try:
            output = self.engine(engine_name).run(db, gold, self.cfg.timeout)
            outcome = _Gold(output, None, normalize_rows(output.rows))
        except QueryError as exc:
            outcome = _Gold(None, exc.message if exc.kind != "timeout" else "timeout")
        if outcome.error == "timeout":
            return outcome  # a slow moment (a loaded machine) must not fail this gold query for good
        with self._gold_lock:
            self._gold[key] = outcome
            while len(self._gold) > self.cfg.gold_cache_size:
                self._gold.popitem(last=False)
        return outcome

    def gold_result(self, reference: Any, metadata: dict[str, Any] | None = None) -> list[QueryOutput]:
        """The gold query's result on each database of ``reference`` (cached); raises on failure."""
        ref = self._reference(reference)
        engine = ref.get("engine") or self.cfg.engine
        gold = self._gold_query(ref)
        outs = []
        for db in self._databases(ref, metadata or {}, engine):
            g = self._run_gold(engine, db, gold)
            if g.error:
                raise RuntimeError(f"gold query failed on {db.label}: {g.error}")
            outs.append(g.output)
        return outs

    def _partial(self, stages: dict[str, bool]) -> float:
        if not self.cfg.partial:
            return 0.0
        total = 0.0
        for stage in STAGES:  # stages are cumulative: a later one only counts if the earlier ones hold
            if not stages.get(stage):
                break
            total += float(self.cfg.partial_weights.get(stage, 0.0))
        return round(total, 10)  # 0.1 + 0.1 + 0.1 would be 0.30000000000000004

    def _preview(self, output: QueryOutput | None) -> Any:
        if output is None or self.cfg.preview_rows <= 0:
            return None
        return jsonable([list(r) for r in output.rows[: self.cfg.preview_rows]])

    @staticmethod
    def _error(exc: QueryError) -> str:
        if exc.kind == "timeout":
            return "timeout"
        if exc.kind == "too large":
            return (
                exc.message
                if exc.message.startswith("result too large")
                else f"result too large: {exc.message}"
            )
        if exc.kind == "unsafe":
            return f"unsafe query: {exc.message}"
        if exc.kind == "syntax":
            return f"sql syntax error: {exc.message}"
        return f"sql error: {exc.message}"

    @staticmethod
    def _reference(reference: Any) -> dict[str, Any]:
        """The reference as a dict: a dict as is, a JSON object string (a parquet/CSV column) parsed,
        anything else taken as the gold query."""
        if isinstance(reference, dict):
            return reference
        if isinstance(reference, str) and reference.lstrip().startswith("{"):
            try:
                parsed = json.loads(reference)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return parsed
        return {"query": reference}

    def record_databases(self, record: Record) -> tuple[str, list[Database]]:
        """The engine and the database(s) of ``record`` (raises ``ValueError`` or ``FileNotFoundError`` when
        its reference names none that exists); the SQL tool of multi-turn environments queries these."""
        ref = self._reference(record.reference)
        metadata = record.metadata or {}
        engine_name = ref.get("engine") or metadata.get("engine") or self.cfg.engine
        return engine_name, self._databases(ref, metadata, engine_name)

    def verify(self, record: Record) -> Result:
        cfg = self.cfg
        ref = self._reference(record.reference)
        metadata = record.metadata or {}
        engine_name = ref.get("engine") or metadata.get("engine") or cfg.engine
        try:
            gold_sql = self._gold_query(ref)
            databases = self._databases(ref, metadata, engine_name)
        except (ValueError, FileNotFoundError) as exc:
            return Result.failure(f"bad reference: {exc}")

        sql = extract_sql(record.completion_text, mode=cfg.extract, langs=cfg.fence_langs)
        details: dict[str, Any] = {"sql": sql, "engine": engine_name}
        if not sql:
            return Result(0.0, details, "no SQL found")

        ordered = cfg.row_order == "always" or (cfg.row_order == "auto" and _order_matters(gold_sql))
        details["order_matters"] = ordered
        stages = {"syntax": False, "executes": False, "columns": False, "rows": False}

        # Lexical guard before anything reaches an engine (the engines enforce it again on their own).
        statements = split_statements(sql)
        if len(statements) != 1:
            details["stages"] = stages
            return Result(0.0, details, f"unsafe query: {len(statements)} statements, expected one")
        keyword = first_keyword(sql)
        if keyword in _WRITE_OR_ADMIN:
            details["stages"] = stages
            return Result(0.0, details, f"unsafe query: {keyword} is not allowed (read-only)")

        engine = self.engine(engine_name)
        per_db: list[dict[str, Any]] = []
        correct = True
        error: str | None = None
        for index, db in enumerate(databases):
            gold = self._run_gold(engine_name, db, gold_sql)
            if gold.error:
                return Result.failure(
                    f"gold query failed: {gold.error} (on {db.label})", **details, databases=per_db
                )
            entry: dict[str, Any] = {"db": db.label}
            try:
                pred = engine.run(db, sql, cfg.timeout)
            except QueryError as exc:
                correct = False
                error = self._error(exc)
                # Stage credit: an engine error after parsing ("no such column") still parsed; a result
                # that was too large parsed and ran. Timeouts and unsafe statements earn nothing.
                stages["syntax"] = exc.kind in ("error", "too large")
                stages["executes"] = False
                entry.update(equal=False, reason=error)
                per_db.append(entry)
                break
            assert gold.output is not None
            cmp = compare_results(
                gold.rows,
                normalize_rows(pred.rows),
                ordered=ordered,
                ignore_column_order=cfg.ignore_column_order,
                distinct=cfg.distinct,
                tolerance=cfg.float_tolerance,
                gold_ncols=len(gold.output.columns),
                pred_ncols=len(pred.columns),
                normalized=True,
            )
            entry.update(
                equal=cmp.equal,
                reason=cmp.reason,
                gold_rows=len(gold.output.rows),
                pred_rows=len(pred.rows),
                seconds=round(pred.seconds, 6),
            )
            if index == 0:
                stages["syntax"] = stages["executes"] = True
                stages["columns"] = len(pred.columns) == len(gold.output.columns)
                stages["rows"] = stages["columns"] and len(pred.rows) == len(gold.output.rows)
                details["columns"] = pred.columns
                details["gold_columns"] = gold.output.columns
                details["pred_preview"] = self._preview(pred)
                details["gold_preview"] = self._preview(gold.output)
            per_db.append(entry)
            if not cmp.equal:
                correct = False
                break  # test-suite accuracy: one counterexample database is enough
        details["databases"] = per_db
        details["stages"] = stages
        if correct:
            details["stages"] = dict.fromkeys(stages, True)
            return Result(1.0, details, None)
        return Result(self._partial(stages), details, error)


@functools.lru_cache(maxsize=4096)
def _order_matters(gold_sql: str) -> bool:
    return has_top_level_order_by(gold_sql)


_WRITE_OR_ADMIN = {
    "INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT", "MERGE", "CREATE", "DROP", "ALTER", "ATTACH",
    "DETACH", "PRAGMA", "VACUUM", "REINDEX", "ANALYZE", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT",
    "RELEASE", "COPY", "EXPORT", "IMPORT", "INSTALL", "LOAD", "SET", "RESET", "CALL", "CHECKPOINT",
    "TRUNCATE", "GRANT", "REVOKE", "EXPLAIN", "USE",
}  # fmt: skip


__all__ = ["SQLConfig", "SQLVerifier"]
