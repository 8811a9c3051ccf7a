"""SQL execution accuracy: rewardlab against the Spider test-suite and BIRD evaluation logic, same run.

    python bench/score_sql.py [--repeat 8] [--timeout 2]

On the shipped sample (102 labelled predictions for 50 Spider-format questions on 4 databases, each with a
test-suite instance), this script

1. re-implements the reference verdicts faithfully (not imported: neither harness is a package):
   * Spider test-suite ``eval_exec_match``: run gold and prediction on every database instance in the
     db_id folder; ``result_eq`` with ``order_matters = 'order by' in gold.lower()``: same row count,
     same column count, a quick rejection on rows with their cells sorted, then a search over column
     permutations (exhaustive up to 3 columns, pruned by 20 sampled rows beyond) for multiset (or list)
     equality; exact values, no float tolerance;
   * BIRD ``calculate_ex``: ``set(fetchall(pred)) == set(fetchall(gold))`` on one database: column order
     matters, duplicates and row order do not, exact values;
2. scores the same rows with rewardlab (default config = Spider semantics with a float tolerance and
   top-level ORDER BY detection; and a BIRD-like config), prints where the verdicts differ and why, and
   the agreement with the hand labels;
3. times scoring an RL-style batch (every prediction repeated ``--repeat`` times, as a group of samples
   per prompt) with rewardlab against the reference approach (a fresh connection and both queries per
   sample, no gold cache), and prints the ratio;
4. measures what per-query process isolation would cost (fork per query, warm worker over a pipe) against
   in-process execution, which is why rewardlab runs queries in-process (see docs/sql.md).

Timings on a shared machine are noisy; the ratio is measured within one run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from itertools import product

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rewardlab.types import Record  # noqa: E402
from rewardlab.verifiers.sql import SQLVerifier  # noqa: E402
from rewardlab.verifiers.sql.extract import extract_sql  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "sql")
DB_ROOT = os.path.join(DATA, "databases")
# The reference harnesses open databases read-write: the sample's hostile "DROP TABLE author" really drops
# the table. They run on a scratch copy (REF_ROOT, set in main) and the bench reports what they changed.
REF_ROOT = DB_ROOT


# ----------------------------------------------------------------------------------- Spider test suite
def permute_tuple(element, perm):
    return tuple(element[i] for i in perm)


def unorder_row(row):
    return tuple(sorted(row, key=lambda x: str(x) + str(type(x))))


def quick_rej(result1, result2, order_matters):
    s1 = [unorder_row(row) for row in result1]
    s2 = [unorder_row(row) for row in result2]
    return s1 == s2 if order_matters else set(s1) == set(s2)


def multiset_eq(l1, l2):
    if len(l1) != len(l2):
        return False
    d = defaultdict(int)
    for e in l1:
        d[e] += 1
    for e in l2:
        d[e] -= 1
        if d[e] < 0:
            return False
    return True


def get_constraint_permutation(tab1_sets_by_columns, result2):
    num_cols = len(result2[0])
    perm_constraints = [set(range(num_cols)) for _ in range(num_cols)]
    if num_cols <= 3:
        return product(*perm_constraints)
    for _ in range(20):
        row = random.choice(result2)
        for c1 in range(num_cols):
            for c2 in set(perm_constraints[c1]):
                if row[c2] not in tab1_sets_by_columns[c1]:
                    perm_constraints[c1].remove(c2)
    return product(*perm_constraints)


def spider_result_eq(result1, result2, order_matters):
    if len(result1) == 0 and len(result2) == 0:
        return True
    if len(result1) != len(result2):
        return False
    num_cols = len(result1[0])
    if len(result2[0]) != num_cols:
        return False
    if not quick_rej(result1, result2, order_matters):
        return False
    tab1_sets_by_columns = [{row[i] for row in result1} for i in range(num_cols)]
    for perm in get_constraint_permutation(tab1_sets_by_columns, result2):
        if len(perm) != len(set(perm)):
            continue
        result2_perm = result2 if num_cols == 1 else [permute_tuple(e, perm) for e in result2]
        if order_matters:
            if result1 == result2_perm:
                return True
        elif set(result1) == set(result2_perm) and multiset_eq(result1, result2_perm):
            return True
    return False


def run_plain(path, sql, timeout):
    """The reference harnesses' execution: a fresh connection, fetchall (a progress handler stands in
    for their thread/func_timeout timeouts so that the bench itself cannot hang)."""
    conn = sqlite3.connect(path)
    conn.text_factory = lambda b: b.decode(errors="ignore")
    deadline = time.monotonic() + timeout
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def spider_verdict(db_id, gold, pred, timeout):
    folder = os.path.join(REF_ROOT, db_id)
    order_matters = "order by" in gold.lower()
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".sqlite"):
            continue
        path = os.path.join(folder, name)
        try:
            g = run_plain(path, gold, timeout)
            p = run_plain(path, pred, timeout)
        except Exception:
            return 0
        if not spider_result_eq(g, p, order_matters):
            return 0
    return 1


def bird_verdict(db_id, gold, pred, timeout):
    path = os.path.join(REF_ROOT, db_id, db_id + ".sqlite")
    try:
        p = run_plain(path, pred, timeout)
        g = run_plain(path, gold, timeout)
    except Exception:
        return 0
    return int(set(p) == set(g))


# ------------------------------------------------------------------------------------ process isolation
def _child(path, sql, conn):
    conn.send(run_plain(path, sql, 5.0))
    conn.close()


def _worker(conn):
    while True:
        msg = conn.recv()
        if msg is None:
            return
        conn.send(run_plain(msg[0], msg[1], 5.0))


def checksums(root):
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".sqlite"):
                with open(os.path.join(folder, name), "rb") as f:
                    out[os.path.relpath(os.path.join(folder, name), root)] = hashlib.sha256(
                        f.read()
                    ).hexdigest()
    return out


def isolation_costs(n=200):
    path = os.path.join(DB_ROOT, "concert_singer", "concert_singer.sqlite")
    sql = "SELECT country, count(*) FROM singer GROUP BY country"
    v = SQLVerifier()
    rec = Record(completion=sql, reference={"query": sql, "db": path})
    v.score(rec)
    t = time.perf_counter()
    for _ in range(n):
        v.score(rec)
    inproc = (time.perf_counter() - t) / n
    ctx = mp.get_context("fork")
    t = time.perf_counter()
    for _ in range(n // 4):
        a, b = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(path, sql, b))
        proc.start()
        a.recv()
        proc.join()
    fork = (time.perf_counter() - t) / (n // 4)
    a, b = ctx.Pipe()
    proc = ctx.Process(target=_worker, args=(b,))
    proc.start()
    t = time.perf_counter()
    for _ in range(n):
        a.send((path, sql))
        a.recv()
    warm = (time.perf_counter() - t) / n
    a.send(None)
    proc.join()
    return inproc, fork, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=8, help="samples per prediction in the timing batch")
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args()
    random.seed(0)
    global REF_ROOT
    scratch = tempfile.mkdtemp(prefix="rk-sql-bench-")
    REF_ROOT = os.path.join(scratch, "databases")
    shutil.copytree(DB_ROOT, REF_ROOT)
    shipped_before = checksums(DB_ROOT)
    ref_before = checksums(REF_ROOT)

    with open(os.path.join(DATA, "predictions.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    records = [Record.from_dict(r) for r in rows]

    ours = SQLVerifier(db_root=DB_ROOT, test_suite=True, timeout=args.timeout).score_batch(records)
    ours_bird = SQLVerifier(
        db_root=DB_ROOT, distinct=True, ignore_column_order=False, row_order="never", float_tolerance=0.0,
        timeout=args.timeout,
    ).score_batch(records)  # fmt: skip

    spider, bird = [], []
    for r in rows:
        pred = extract_sql(r["completion"])
        spider.append(spider_verdict(r["reference"]["db_id"], r["reference"]["query"], pred, args.timeout))
        bird.append(bird_verdict(r["reference"]["db_id"], r["reference"]["query"], pred, args.timeout))

    changed_by_ref = sorted(k for k, v in checksums(REF_ROOT).items() if ref_before[k] != v)
    shutil.rmtree(scratch)
    shutil.copytree(DB_ROOT, REF_ROOT)  # fresh copy for the timing runs
    labels = [r["metadata"]["expected"] for r in rows]
    ours_v = [int(x.reward == 1.0) for x in ours]
    bird_v = [int(x.reward == 1.0) for x in ours_bird]
    n = len(rows)

    def agree(a, b):
        return sum(x == y for x, y in zip(a, b, strict=True))

    print(f"rows: {n} predictions, 50 questions, 4 databases x 2 instances")
    print(f"{'':38}{'vs labels':>10}{'vs Spider-TS':>14}{'vs BIRD':>9}")
    print(
        f"{'rewardlab (default, test suite)':38}{agree(ours_v, labels):>10}{agree(ours_v, spider):>14}{agree(ours_v, bird):>9}"
    )
    print(
        f"{'rewardlab (BIRD config, one db)':38}{agree(bird_v, labels):>10}{agree(bird_v, spider):>14}{agree(bird_v, bird):>9}"
    )
    print(f"{'Spider test-suite result_eq':38}{agree(spider, labels):>10}{n:>14}{agree(spider, bird):>9}")
    print(f"{'BIRD set equality':38}{agree(bird, labels):>10}{agree(bird, spider):>14}{n:>9}")
    print("\nrewardlab (default) vs Spider test-suite, rows that differ:")
    for r, o, s, x in zip(rows, ours_v, spider, ours, strict=True):
        if o != s:
            print(f"  {r['id']} [{r['metadata']['kind']}] rewardlab={o} spider={s} label={r['metadata']['expected']}: "
                  f"{x.details.get('databases', [{}])[-1].get('reason', x.error)}")  # fmt: skip
    print("rewardlab (BIRD config) vs BIRD, rows that differ:")
    for r, o, b, x in zip(rows, bird_v, bird, ours_bird, strict=True):
        if o != b:
            print(f"  {r['id']} [{r['metadata']['kind']}] rewardlab={o} bird={b}: {x.error}")
    print("BIRD vs labels, rows that differ:")
    for r, b in zip(rows, bird, strict=True):
        if b != r["metadata"]["expected"]:
            print(f"  {r['id']} [{r['metadata']['kind']}] bird={b} label={r['metadata']['expected']}")

    print("\ndatabase files changed by the predictions (sha256 before/after):")
    print(
        f"  rewardlab:            {sorted(k for k, v in checksums(DB_ROOT).items() if shipped_before[k] != v) or 'none'}"
    )
    print(f"  reference harnesses:  {changed_by_ref or 'none'} (read-write connections: the DROP ran)")

    # ------------------------------------------------------------------ throughput, RL-style groups
    fast_rows = [r for r in rows if "runaway" not in r["metadata"]["kind"]]
    batch = [Record.from_dict(r) for r in fast_rows for _ in range(args.repeat)]
    t = time.perf_counter()
    SQLVerifier(db_root=DB_ROOT, test_suite=True, timeout=args.timeout).score_batch(batch)
    ours_s = time.perf_counter() - t
    t = time.perf_counter()
    for r in fast_rows:
        pred = extract_sql(r["completion"])
        for _ in range(args.repeat):
            spider_verdict(r["reference"]["db_id"], r["reference"]["query"], pred, args.timeout)
    ref_s = time.perf_counter() - t
    m = len(batch)
    print(
        f"\nthroughput, {m} samples ({len(fast_rows)} predictions x {args.repeat}), test suite (2 instances):"
    )
    print(f"  rewardlab  {m / ours_s:9.0f} samples/s  ({ours_s:.2f} s)")
    print(f"  reference  {m / ref_s:9.0f} samples/s  ({ref_s:.2f} s; connection per query, gold re-run)")
    print(f"  ratio      {ref_s / ours_s:9.1f}x")

    inproc, fork, warm = isolation_costs()
    print("\nper-query cost of process isolation (one small query, gold cached):")
    print(f"  in-process (rewardlab)      {inproc * 1e3:7.3f} ms")
    print(f"  warm worker over a pipe     {warm * 1e3:7.3f} ms  ({warm / inproc:.1f}x)")
    print(f"  fork a process per query    {fork * 1e3:7.3f} ms  ({fork / inproc:.0f}x)")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
