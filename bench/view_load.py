"""Benchmark: ``rewardlab view`` on a large scored file: time to the first page, index build, queries, memory.

The file is made by really scoring: ``data/math/sample.jsonl`` is scored once (``score_file``, math verifier,
``workers=0``), then its scored rows are replicated to ``--rows`` rows with unique ids (``p00-0#123``),
completions lengthened by a seeded random amount of reasoning text put in front (``extracted_span`` shifted
to match), the sample's own errors (2 of 60 rows, ``no answer found``: about 3%) and a few malformed
(truncated) lines. Its ``.run.json`` is written beside it, as ``score`` does (default verifier ``math``).

Measured, each in a fresh process (the median of ``--repeats``; the sides alternate, so a slow spell of the
machine hits all of them). The file was just written, so it is in the OS page cache throughout: these are
warm-cache times (the viewer's process starts cold, the disk does not):

- **open**: ``python -m rewardlab.cli view FILE --no-browser --port 0`` launched; seconds until it prints its URL
  (listening), then, in a browser's order, until ``/s/0`` (the HTML), the first page
  ``/api/s/0/rows?page=1&size=50`` (the headline: the target is < 2 s for a million rows; it is served from
  the line offsets) and ``/api/s/0/facets`` (the filter menus: ready once the columns, read in a thread, are
  in: from then on filters and sorts answer) have been answered, all counted from the launch. The same for the 60-row scored
  sample is the reference (interpreter start-up, imports, server start).
- **build**: ``RowIndex(path)`` in-process (imports outside the timing), DuckDB's reader vs the orjson
  fallback (``rows._duckdb_columns`` patched to return ``None``); peak RSS and RSS kept by the index.
- **queries**: on a built index, one page (``SourceData.page``, what ``/api/s/0/rows`` serves, less HTTP) of
  each view, first call (the query computed) and the next page (the cached result sliced); against a
  naive viewer's reference, every line ``json.loads``-ed into a list of dicts and filtered / sorted in
  Python (free text: ``json.dumps`` of each row searched), its load time and peak RSS.

    .venv/bin/python bench/view_load.py                       # 1,000,000 rows, 3 repeats
    .venv/bin/python bench/view_load.py --rows 100000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data/math/sample.jsonl"
PAGE_SIZE = 50
SEARCH = "apples"  # in the prompt of one problem of twenty: about 5% of rows
_WORDS = [
    "first",
    "we",
    "compute",
    "the",
    "value",
    "carefully",
    "then",
    "check",
    "each",
    "step",
    "again",
    "so",
    "the",
    "result",
    "follows",
]


# ----------------------------------------------------------------------------------------------------------
# The file
# ----------------------------------------------------------------------------------------------------------
def score_sample(folder: Path) -> tuple[list[dict], dict, float]:
    """The shipped math sample scored for real (rows, the run record, seconds)."""
    from rewardlab.scoring import score_file

    out = folder / "sample.scored.jsonl"
    start = time.perf_counter()
    score_file(SAMPLE, out, "math", workers=0, progress=False)
    seconds = time.perf_counter() - start
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    run = json.loads(out.with_name(out.name + ".run.json").read_text())
    return rows, run, seconds


def build_file(path: Path, base: list[dict], run: dict, rows: int, seed: int) -> int:
    """``rows`` rows replicated from ``base`` into ``path`` (see the module docstring); returns the number of
    malformed lines among them."""
    from rewardlab.scoring.io import row_line

    rng = random.Random(seed)
    filler = " ".join(rng.choice(_WORDS) for _ in range(20_000)) + " "
    malformed = set(rng.sample(range(rows), max(2, rows * 5 // 1_000_000)))
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(rows):
            row = dict(base[i % len(base)])
            row["id"] = f"{row['id']}#{i}"
            # lognormal extra reasoning: median ~400 chars, a long tail, capped by the filler
            extra = min(int(rng.lognormvariate(6.0, 1.0)), len(filler) - 1)
            offset = rng.randrange(len(filler) - extra)
            prefix = filler[offset : offset + extra].strip() + "\n\n" if extra else ""
            row["completion"] = prefix + row["completion"]
            span = (row.get("details") or {}).get("extracted_span")
            if span:
                row["details"] = {
                    **row["details"],
                    "extracted_span": [span[0] + len(prefix), span[1] + len(prefix)],
                }
            line = row_line(row)
            if i in malformed:  # a line cut off mid-row (a writer killed, a bad copy)
                line = line[: len(line) // 2] + "\n"
            handle.write(line)
    run = {**run, "input": f"{SAMPLE} (replicated to {rows} rows)"}
    path.with_name(path.name + ".run.json").write_text(json.dumps(run, indent=1))
    return len(malformed)


# ----------------------------------------------------------------------------------------------------------
# Sides (each in a fresh process)
# ----------------------------------------------------------------------------------------------------------
def _anon_mb() -> float:
    """This process's anonymous resident memory (not the file pages it maps, which are the page cache's)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class PeakMemory:
    """The peak of ``_anon_mb`` while the block runs (sampled every 10 ms by a thread), and what is kept,
    both over the memory before it; ``maxrss`` also counts mapped file pages (an mmap-ed file read through)."""

    def __enter__(self) -> PeakMemory:
        self.before = self.peak = _anon_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, _anon_mb())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.kept = _anon_mb() - self.before
        self.peak = max(self.peak, self.before + self.kept) - self.before

    def result(self) -> dict[str, float]:
        return {"peak_mb": self.peak, "kept_mb": self.kept, "maxrss_mb": _maxrss_mb()}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=600) as response:
        return response.read()


def measure_open(path: Path) -> dict[str, float]:
    """Seconds from launching ``rewardlab view`` to: its URL printed, the HTML, the first page, the facets."""
    command = [sys.executable, "-m", "rewardlab.cli", "view", str(path), "--no-browser", "--port", "0"]
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
        try:
            line = proc.stdout.readline()
            listening = time.perf_counter() - start
            if " at http" not in line:
                err.seek(0)
                raise RuntimeError(f"rewardlab view did not start: {line!r} {err.read().decode()[-2000:]}")
            url = line.rsplit(" at ", 1)[1].strip().rstrip("/")
            _get(f"{url}/s/0")
            html = time.perf_counter() - start
            page = json.loads(_get(f"{url}/api/s/0/rows?page=1&size={PAGE_SIZE}"))
            first = time.perf_counter() - start
            _get(f"{url}/api/s/0/facets")
            facets = time.perf_counter() - start
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    if len(page["data"]) != min(PAGE_SIZE, page["total"]):
        raise RuntimeError(f"first page has {len(page['data'])} rows of {page['total']}")
    return {"listening": listening, "html": html, "first page": first, "facets": facets}


def side_build(path: Path, fallback: bool) -> dict[str, float]:
    import duckdb  # noqa: F401  (imports outside the timing)

    from rewardlab.view import rows

    if fallback:
        rows._duckdb_columns = lambda *args, **kwargs: None
    with PeakMemory() as memory:
        start = time.perf_counter()
        index = rows.RowIndex(path)
        seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "rows": len(index),
        "malformed": int(index._cols.malformed.sum()),
        **memory.result(),
        "arrays_mb": _index_bytes(index) / 2**20,
    }


def _index_bytes(index) -> int:
    """Bytes held by the index's arrays, the objects of its text columns counted once each."""
    arrays = [index.starts, index.ends, index.line_numbers, index._cols.malformed, index.error_kinds()]
    arrays += list(index._cols.values.values())
    total, seen = 0, set()
    for array in arrays:
        total += array.nbytes
        if array.dtype == object:
            for value in array.tolist():
                if value is not None and id(value) not in seen:
                    seen.add(id(value))
                    total += sys.getsizeof(value)
    return total


def views(rows: int) -> list[tuple[str, dict[str, str], int]]:
    """(label, URL query, page) of each measured view."""
    deep = min(10_000, max(1, rows // PAGE_SIZE // 2))
    return [
        ("unfiltered, page 1", {}, 1),
        ("error=any", {"error": "any"}, 1),
        ("reward_max=0", {"reward_max": "0"}, 1),
        ("sort=reward desc", {"sort": "reward", "dir": "desc"}, 1),
        ("sort=id", {"sort": "id"}, 1),
        (f"q={SEARCH}", {"q": SEARCH}, 1),
        (f"unfiltered, page {deep}", {}, deep),
    ]


def side_queries(path: Path, rows: int) -> dict[str, float]:
    """Seconds of each view's page on a built index: first call, then the next page."""
    from rewardlab.view.app import query_of
    from rewardlab.view.data import SourceData
    from rewardlab.view.sources import Source

    data = SourceData(Source("scored", path, path.name))
    data.index().column("reward")  # the columns are read in a thread: wait for them (a built index)
    out: dict[str, float] = {}
    for label, params, page in views(rows):
        query = query_of(params)
        start = time.perf_counter()
        got = data.page(query, page, PAGE_SIZE)
        out[label] = time.perf_counter() - start
        start = time.perf_counter()
        data.page(query, page + 1, PAGE_SIZE)
        out[label + " +1"] = time.perf_counter() - start
        out[label + " #"] = got["last_row"]
    index = data.index()
    start = time.perf_counter()
    index.facets()
    out["facets"] = time.perf_counter() - start
    return out


def side_naive(path: Path, rows: int) -> dict[str, float]:
    """A hand-rolled viewer: every row parsed into a list, each view filtered / sorted in Python."""
    table = []
    with PeakMemory() as memory:
        start = time.perf_counter()
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    table.append(json.loads(line))
                except ValueError:
                    table.append({"error": "malformed row", "_line": line})
        load = time.perf_counter() - start
    out = {"load": load, **memory.result()}

    def reward(row: dict) -> float | None:
        value = row.get("reward")
        return value if isinstance(value, int | float) else None

    def by_reward(row: dict, desc: bool) -> tuple[bool, float]:  # no reward last either way, as the index
        value = reward(row)
        return (value is None, 0.0 if value is None else -value if desc else value)

    def view(params: dict[str, str]) -> list[dict]:
        chosen = table
        if params.get("error") == "any":
            chosen = [r for r in chosen if r.get("error")]
        if "reward_max" in params:
            chosen = [r for r in chosen if reward(r) is not None and reward(r) <= float(params["reward_max"])]
        if "q" in params:
            needle = params["q"].lower()
            chosen = [r for r in chosen if needle in json.dumps(r, ensure_ascii=False).lower()]
        if params.get("sort") == "reward":
            desc = params.get("dir") == "desc"
            chosen = sorted(chosen, key=lambda r: by_reward(r, desc))
        elif params.get("sort") == "id":
            chosen = sorted(chosen, key=lambda r: str(r.get("id")))
        return chosen

    for label, params, page in views(rows):
        start = time.perf_counter()
        chosen = view(params)
        chosen[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        out[label] = time.perf_counter() - start
        out[label + " #"] = len(chosen)
    return out


def run_side(args: argparse.Namespace) -> None:
    path = Path(args.file)
    if args.side in ("duckdb", "orjson"):
        result = side_build(path, fallback=args.side == "orjson")
    elif args.side == "queries":
        result = side_queries(path, args.rows)
    else:
        result = side_naive(path, args.rows)
    print(json.dumps(result))


def measure(side: str, path: Path, rows: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--side", side, "--file", str(path), "--rows", str(rows)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"side {side} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def medians(results: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


# ----------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------
def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the scored file")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each measurement; the median is shown"
    )
    parser.add_argument("--out", help="folder to write the file into (default: a temporary one, removed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--side", choices=["duckdb", "orjson", "queries", "naive"], help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        run_side(args)
        return

    import duckdb
    import numpy
    import orjson

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        base, run, score_s = score_sample(folder)
        base_errors = sum(1 for row in base if row.get("error"))
        path = folder / f"scored_{args.rows}.jsonl"
        start = time.perf_counter()
        bad = build_file(path, base, run, args.rows, args.seed)
        build_s = time.perf_counter() - start
        size = path.stat().st_size
        print(
            f"operating point: rows={args.rows:,} file={size / 1e6:,.1f} MB mean row={size / args.rows:.0f} B "
            f"cpus={os.cpu_count()} load={_load()} python={platform.python_version()} duckdb={duckdb.__version__} "
            f"numpy={numpy.__version__} orjson={orjson.__version__}"
        )
        print(
            f"file: {SAMPLE.relative_to(ROOT)} scored for real ({len(base)} rows, {base_errors} errors, "
            f"{score_s:.2f} s), replicated in {build_s:.1f} s; errors {base_errors / len(base):.1%} of rows, "
            f"{bad} malformed lines; median of {args.repeats} runs, each in a fresh process; the file is in "
            "the OS page cache (just written): warm-disk, cold-process times"
        )

        small = folder / "sample.scored.jsonl"
        opens: dict[str, list] = {"small": [], "big": []}
        builds: dict[str, list] = {"duckdb": [], "orjson": []}
        queries, naive = [], []
        for _ in range(args.repeats):
            opens["small"].append(measure_open(small))
            opens["big"].append(measure_open(path))
            for side in builds:
                builds[side].append(measure(side, path, args.rows))
            queries.append(measure("queries", path, args.rows))
            naive.append(measure("naive", path, args.rows))

        # -- open ------------------------------------------------------------------------------------------
        small_o, big_o = medians(opens["small"]), medians(opens["big"])
        print("\n(a) open: seconds from launching `rewardlab view FILE --no-browser --port 0`")
        print(f"{'file':<24}{'listening':>11}{'/s/0 html':>11}{'first page':>12}{'filters ready':>15}")
        for label, o in ((f"sample ({len(base)} rows)", small_o), (f"{args.rows:,} rows", big_o)):
            print(
                f"{label:<24}{o['listening']:>11.2f}{o['html']:>11.2f}{o['first page']:>12.2f}{o['facets']:>15.2f}"
            )
        runs = ", ".join(f"{o['first page']:.2f}" for o in opens["big"])
        verdict = "meets" if big_o["first page"] < 2.0 else "MISSES"
        print(
            f"first page of {args.rows:,} rows: {big_o['first page']:.2f} s ({verdict} the < 2 s target); "
            f"{big_o['first page'] - small_o['first page']:.2f} s over the {len(base)}-row file "
            f"(runs: {runs})"
        )

        # -- build -----------------------------------------------------------------------------------------
        duck, fall = medians(builds["duckdb"]), medians(builds["orjson"])
        print(f"\n(b) RowIndex({args.rows:,} rows) in-process, imports outside the timing")
        print(
            f"{'reader':<18}{'seconds':>9}{'rows/s':>12}{'peak MB':>9}{'kept MB':>9}{'arrays MB':>11}{'malformed':>11}"
        )
        for label, b in (("duckdb", duck), ("orjson fallback", fall)):
            print(
                f"{label:<18}{b['seconds']:>9.2f}{b['rows'] / b['seconds']:>12,.0f}{b['peak_mb']:>9.0f}"
                f"{b['kept_mb']:>9.0f}{b['arrays_mb']:>11.0f}{b['maxrss_mb']:>11.0f}{b['malformed']:>11.0f}"
            )
        print(
            f"duckdb is {fall['seconds'] / duck['seconds']:.1f}x faster than the orjson fallback; peak / kept: "
            "anonymous memory over the process's before the build (sampled every 10 ms); arrays: the index's "
            "arrays and their text objects; maxrss: the process's peak, counting the pages of the file it "
            "maps (page cache, shared)"
        )

        # -- queries ---------------------------------------------------------------------------------------
        q, n = medians(queries), medians(naive)
        print(
            f"\n(c) one page of {PAGE_SIZE} rows (SourceData.page) on the built index vs a naive list of dicts"
        )
        print(f"{'view':<26}{'matches':>10}{'index ms':>10}{'next ms':>9}{'naive ms':>10}{'naive/index':>12}")
        for label, _, _ in views(args.rows):
            if q[label + " #"] != n[label + " #"]:
                print(f"  !! {label}: index {q[label + ' #']:.0f} rows, naive {n[label + ' #']:.0f}")
            print(
                f"{label:<26}{q[label + ' #']:>10,.0f}{q[label] * 1e3:>10.1f}{q[label + ' +1'] * 1e3:>9.1f}"
                f"{n[label] * 1e3:>10.1f}{n[label] / q[label]:>11.2g}x"
            )
        print(f"{'facets (menus)':<26}{'':>10}{q['facets'] * 1e3:>10.1f}")
        print(
            f"naive load: {n['load']:.2f} s ({n['load'] / duck['seconds']:.1f}x the duckdb build), peak anon "
            f"+{n['peak_mb']:,.0f} MB, kept +{n['kept_mb']:,.0f} MB; index: peak +{duck['peak_mb']:,.0f} MB, "
            f"kept +{duck['kept_mb']:,.0f} MB ({n['kept_mb'] / max(duck['kept_mb'], 1):.0f}x less)"
        )
        print(f"load average at the end: {_load()}")


if __name__ == "__main__":
    main()
