"""SQL verifier safety: hostile predicted queries never change the database, runaway queries stop at the
timeout, oversized results are cut. Each hostile query is run through the verifier (lexical guard + engine)
and straight through the engine (the engine's own defences, with the guard bypassed)."""

from __future__ import annotations

import hashlib
import os
import shutil
import time

import pytest
from time_bounds import ROOM_S  # tests/time_bounds.py

from rewardlab.types import Record
from rewardlab.verifiers.sql import SQLVerifier
from rewardlab.verifiers.sql.engines import Database, DuckDBEngine, QueryError, SQLiteEngine

DB_ROOT = os.path.join(os.path.dirname(__file__), "..", "data", "sql", "databases")
GOLD = "SELECT count(*) FROM city"
KILL_S = 0.5
"""The timeout of runaway queries, where the timeout is what is tested (the others get ``ROOM_S``)."""


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def hostile_sqlite(tmp: str) -> list[str]:
    return [
        "DROP TABLE city",
        "DELETE FROM city",
        "UPDATE city SET population = 0",
        "INSERT INTO city VALUES (99, 'x', 'FRA', 1, 0)",
        "REPLACE INTO city VALUES (1, 'x', 'FRA', 1, 0)",
        "CREATE TABLE pwned (a)",
        "CREATE TEMP TABLE t AS SELECT 1",
        "ALTER TABLE city RENAME TO town",
        f"ATTACH DATABASE '{tmp}/attached.db' AS x",
        f"VACUUM INTO '{tmp}/copy.db'",
        "VACUUM",
        "PRAGMA writable_schema = 1",
        "PRAGMA query_only = 0",
        "PRAGMA journal_mode = WAL",
        "PRAGMA user_version = 7",
        "SELECT load_extension('/tmp/evil')",
        "SELECT * FROM pragma_table_info('city')",
        "BEGIN IMMEDIATE",
        "ANALYZE",
        "REINDEX",
        "SELECT 1; DROP TABLE city",
        "/* hide */ DROP TABLE city",
        "WITH x AS (SELECT 1) DELETE FROM city",
    ]


@pytest.fixture()
def world_copy(tmp_path) -> str:
    path = str(tmp_path / "world.sqlite")
    shutil.copy(os.path.join(DB_ROOT, "world", "world.sqlite"), path)
    return path


def test_hostile_queries_leave_sqlite_file_unchanged(world_copy, tmp_path):
    before = sha256(world_copy)
    verifier = SQLVerifier(timeout=ROOM_S)
    engine = SQLiteEngine(max_rows=1000, max_value_bytes=10**6)
    db = Database.file(world_copy)
    for sql in hostile_sqlite(str(tmp_path)):
        result = verifier.score(
            Record(completion=f"```sql\n{sql}\n```", reference={"query": GOLD, "db": world_copy})
        )
        assert result.reward == 0.0, sql
        assert result.error and result.error.split(":")[0] in (
            "unsafe query",
            "sql error",
            "sql syntax error",
        ), (sql, result.error)
        with pytest.raises(QueryError) as info:  # the engine alone, no lexical guard
            engine.run(db, sql, ROOM_S)
        assert info.value.kind in ("unsafe", "error"), (sql, info.value.kind, info.value.message)
    engine.close()
    verifier.close()
    assert sha256(world_copy) == before
    assert sorted(os.listdir(tmp_path)) == ["world.sqlite"]  # no attached/vacuumed copies, no journal left
    # and the database still answers
    assert (
        SQLVerifier().score(Record(completion=GOLD, reference={"query": GOLD, "db": world_copy})).reward
        == 1.0
    )


def test_in_memory_setup_databases_are_read_only_too():
    setup = "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2);"
    v = SQLVerifier()
    engine = SQLiteEngine(max_rows=1000, max_value_bytes=10**6)
    db = Database.script(setup)
    for sql in ("DELETE FROM t", "PRAGMA query_only = 0", "INSERT INTO t VALUES (3)"):
        with pytest.raises(QueryError):
            engine.run(db, sql, ROOM_S)
    assert engine.run(db, "SELECT count(*) FROM t", ROOM_S).rows == [(2,)]
    assert (
        v.score(
            Record(completion="DELETE FROM t", reference={"query": "SELECT 1", "setup_sql": setup})
        ).reward
        == 0.0
    )
    assert (
        v.score(
            Record(completion="SELECT count(*) FROM t", reference={"query": "SELECT 2", "setup_sql": setup})
        ).reward
        == 1.0
    )


@pytest.mark.parametrize(
    "sql",
    [
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
        "SELECT count(*) FROM city a, city b, city c, city d, city e, city f, city g",
        "SELECT max(a.name || b.name) FROM city a, city b, city c, city d, city e, city f ORDER BY 1",
    ],
)
def test_runaway_sqlite_queries_stop_at_the_timeout(world_copy, sql):
    # The gold query (and the check after) run with ample time; only the runaway query gets the short one.
    v = SQLVerifier(timeout=ROOM_S, partial=True)
    assert v.score(Record(completion=GOLD, reference={"query": GOLD, "db": world_copy})).reward == 1.0
    v.cfg.timeout = KILL_S
    start = time.monotonic()
    result = v.score(Record(completion=sql, reference={"query": GOLD, "db": world_copy}))
    elapsed = time.monotonic() - start
    assert result.error == "timeout" and result.reward == 0.0
    assert elapsed < 10  # a hang guard: unstopped, these queries run for hours
    # the connection is usable afterwards
    v.cfg.timeout = ROOM_S
    assert v.score(Record(completion=GOLD, reference={"query": GOLD, "db": world_copy})).reward == 1.0


def test_result_size_and_value_size_are_bounded(world_copy):
    v = SQLVerifier(max_rows=1000, max_value_bytes=10**6, timeout=ROOM_S)
    big = v.score(
        Record(
            completion="SELECT a.name FROM city a, city b, city c",
            reference={"query": GOLD, "db": world_copy},
        )
    )
    assert big.reward == 0.0 and big.error.startswith("result too large")
    blob = v.score(
        Record(completion="SELECT zeroblob(100000000)", reference={"query": GOLD, "db": world_copy})
    )
    assert blob.reward == 0.0 and blob.error.startswith("result too large")
    doubling = (
        "WITH RECURSIVE r(s) AS (SELECT 'ab' UNION ALL SELECT s || s FROM r) SELECT max(length(s)) FROM r"
    )
    grown = v.score(Record(completion=doubling, reference={"query": GOLD, "db": world_copy}))
    assert grown.reward == 0.0 and grown.error.startswith("result too large")


def test_gold_timeout_is_reported_as_a_reference_problem(world_copy):
    runaway = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    result = SQLVerifier(timeout=0.3).score(
        Record(completion=GOLD, reference={"query": runaway, "db": world_copy})
    )
    assert result.error.startswith("gold query failed: timeout")


# ----------------------------------------------------------------------------------------- duckdb
@pytest.fixture()
def world_duckdb(tmp_path) -> str:
    duckdb = pytest.importorskip("duckdb")
    path = str(tmp_path / "world.duckdb")
    conn = duckdb.connect(path)
    with open(os.path.join(DB_ROOT, "world", "world.sql"), encoding="utf-8") as f:
        conn.execute(f.read())
    conn.close()
    return path


def test_hostile_queries_leave_duckdb_file_unchanged(world_duckdb, tmp_path):
    before = sha256(world_duckdb)
    t = str(tmp_path)
    hostile = [
        "DROP TABLE city",
        "DELETE FROM city",
        "UPDATE city SET population = 0",
        "CREATE TABLE pwned AS SELECT 1",
        f"ATTACH '{t}/other.duckdb' AS o",
        f"COPY city TO '{t}/leak.csv'",
        f"EXPORT DATABASE '{t}/export'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "PRAGMA enable_profiling",
        "CHECKPOINT",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        f"SELECT * FROM glob('{t}/*')",
        "SELECT 1; DROP TABLE city",
    ]
    v = SQLVerifier(engine="duckdb", timeout=ROOM_S)
    engine = DuckDBEngine(max_rows=1000, memory_limit_mb=256)
    db = Database.file(world_duckdb)
    for sql in hostile:
        result = v.score(Record(completion=sql, reference={"query": GOLD, "db": world_duckdb}))
        assert result.reward == 0.0 and result.error.startswith("unsafe query"), (sql, result.error)
        with pytest.raises(QueryError) as info:
            engine.run(db, sql, ROOM_S)
        assert info.value.kind == "unsafe", (sql, info.value.message)
    engine.close()
    v.close()
    assert sha256(world_duckdb) == before
    assert sorted(os.listdir(tmp_path)) == ["world.duckdb"]


@pytest.mark.parametrize(
    "sql",
    [
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
        "SELECT count(*) FROM city a, city b, city c, city d, city e, city f, city g, city h",
    ],
)
def test_runaway_duckdb_queries_stop_at_the_timeout(world_duckdb, sql):
    # The gold query (and the check after) run with ample time; only the runaway query gets the short one.
    v = SQLVerifier(engine="duckdb", timeout=ROOM_S)
    assert v.score(Record(completion=GOLD, reference={"query": GOLD, "db": world_duckdb})).reward == 1.0
    v.cfg.timeout = KILL_S
    start = time.monotonic()
    result = v.score(Record(completion=sql, reference={"query": GOLD, "db": world_duckdb}))
    assert result.error == "timeout" and result.reward == 0.0
    assert time.monotonic() - start < 10  # a hang guard: unstopped, these queries run for hours
    v.cfg.timeout = ROOM_S
    assert v.score(Record(completion=GOLD, reference={"query": GOLD, "db": world_duckdb})).reward == 1.0
