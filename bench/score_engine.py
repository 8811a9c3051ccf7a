"""Benchmark: the scoring engine against a plain single-process loop (and Ray), same rows, same run.

For each corpus the same JSONL file is scored three ways, one after the other in this process tree:

- ``loop``: one process, ``verifier.score(record)`` per row, reading and writing JSONL as ``score`` does
  (the baseline a user would write);
- ``engine``: :func:`rewardlab.scoring.score_file` with ``--workers`` workers (what ``rewardlab score``
  runs, without the interpreter's start-up);
- ``ray`` (``--ray``): the same with ``engine="ray"`` on a local Ray cluster of ``--workers`` CPUs.

Corpora (each a shipped sample cycled to ``--rows`` rows, ids made unique): ``math`` (data/math), ``code``
(data/code, without its never-ending programs, which measure the timeout, not the engine), ``sql``,
``ifeval``, ``arithmetic``, and ``hostile`` (the math sample with every 25th completion a 10,000-term
expression that runs into a 1 s timeout: the loop has no timeout, so it is left out there). Prints rows/s, the engine/loop ratio (target >= 1.7 on math and code with 2
workers, >= 1.0 everywhere), ray/engine (target >= 0.8), and whether each output equals the loop's byte
for byte. The operating point: rows, workers, timeout, CPUs and load are printed first.

    .venv/bin/python bench/score_engine.py                       # all corpora, 100,000 math rows
    .venv/bin/python bench/score_engine.py --corpus math --rows 200000 --ray
    .venv/bin/python bench/score_engine.py --corpus math --rows 120000 --whole

``--whole`` times whole processes as a user meets them, interpreter start-up, imports and verifier build
included: the loop as one process; the ceiling, the same loop split into ``--workers`` processes over
equal slices of the file, run at once (wall time until the last ends); and ``rewardlab score --workers N``
(the CLI). It prints each one's rows/s, loop/engine and loop/ceiling, and the engine's share of the ceiling.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CORPORA = {
    # name: (file, verifier, rows by default, per-row timeout in seconds or None for --timeout)
    "math": ("data/math/sample.jsonl", "math", 100_000, None),
    "arithmetic": ("data/arithmetic/heldout.jsonl", "math", 100_000, None),
    "code": ("data/code/sample.jsonl", "code", 500, None),
    "sql": ("data/sql/predictions.jsonl", "sql", 50_000, None),
    "ifeval": ("data/ifeval/sample.jsonl", "ifeval", 50_000, None),
    # every 25th row a 10,000-term expression (~50 s in math-verify): each costs the timeout
    "hostile": ("data/math/sample.jsonl", "math", 500, 1.0),
}
HOSTILE = "\\boxed{" + "+".join(f"x^{{{i}}}" for i in range(10_000)) + "}"


def build_corpus(name: str, rows: int, folder: Path) -> Path:
    """The corpus's sample cycled to ``rows`` rows (ids made unique), written to ``folder``."""
    source = ROOT / CORPORA[name][0]
    base = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    if name == "code":  # a never-ending program costs every engine the same timeout: left out
        base = [row for row in base if not _never_ends(row)]
    path = folder / f"{name}.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(rows):
            row = dict(base[i % len(base)])
            key = "key" if "key" in row else "id"
            row[key] = f"{row.get(key, i % len(base))}#{i}" if key == "id" else i
            if name == "hostile" and i % 25 == 24:
                row["completion"] = HOSTILE
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


@functools.cache
def _quick_code_verifier():
    from rewardlab.verifiers import get_verifier

    return get_verifier("code", timeout=1.0)


def _never_ends(row: dict) -> bool:
    from rewardlab.types import Record

    return "timeout" in json.dumps(_quick_code_verifier().score(Record.from_dict(row)).details)


def same_rows(a: Path, b: Path) -> bool:
    """Equal outputs, but for the code verifier's measured run times."""
    if a.read_bytes() == b.read_bytes():
        return True
    lines_a, lines_b = a.read_text().splitlines(), b.read_text().splitlines()
    if len(lines_a) != len(lines_b):
        return False
    pairs = zip(lines_a, lines_b, strict=True)
    return all(_untimed(json.loads(x)) == _untimed(json.loads(y)) for x, y in pairs)


def _untimed(value):
    """A parsed row without the ``wall`` / ``cpu`` run times, at any depth."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("wall", "cpu")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def run_loop(path: Path, out: Path, verifier_name: str) -> None:
    """The single-process baseline."""
    from rewardlab.scoring.io import output_row, row_line
    from rewardlab.types import Record
    from rewardlab.verifiers import get_verifier

    verifier = get_verifier(verifier_name)
    warmup = getattr(verifier, "warmup", None)
    if callable(warmup):  # as the engine does before it forks its workers
        warmup()
    with open(path, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for index, line in enumerate(src):
            row = json.loads(line)
            record = Record.from_dict(row)
            if record.id is None:
                record.id = index
            dst.write(row_line(output_row(row, verifier.score(record))))
    close = getattr(verifier, "close", None)
    if callable(close):
        close()


def _spin(_: int = 0) -> float:
    start = time.perf_counter()
    total = 0
    for i in range(5_000_000):
        total += i
    return time.perf_counter() - start


def parallel_ceiling(workers: int, trials: int = 3) -> float:
    """How many times one process's work ``workers`` CPU-bound processes do on this machine at once (median of
    ``trials``): the ceiling of any engine with that many workers against a one-process loop. Shared or
    virtual machines often fall well short of ``workers``."""
    import multiprocessing

    ratios = []
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for _ in range(trials):
            alone = pool.apply(_spin)
            together = max(pool.map(_spin, range(workers), chunksize=1))
            ratios.append(workers * alone / together)
    return statistics.median(ratios)


def run_side(args: argparse.Namespace) -> None:
    """One measurement, in a fresh process (no side inherits another's warm caches): prints its seconds."""
    from rewardlab.scoring import score_file

    if args.side == "ray":
        import ray

        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    if args.side == "loop":
        run_loop(Path(args.input), Path(args.out), args.verifier)
    else:
        engine = "ray" if args.side == "ray" else "local"
        score_file(
            args.input, args.out, args.verifier, workers=args.workers, timeout=args.timeout, engine=engine
        )
    print(json.dumps({"seconds": time.perf_counter() - start}))


def _side_command(side: str, path: Path, out: Path, verifier: str) -> list[str]:
    return [
        sys.executable,
        __file__,
        "--side",
        side,
        "--input",
        str(path),
        "--out",
        str(out),
        "--verifier",
        verifier,
    ]


def whole_processes(path: Path, corpus: str, args: argparse.Namespace, folder: Path) -> dict[str, float]:
    """Wall seconds of the loop, the loop split over ``workers`` processes at once, and ``rewardlab score``,
    each a whole process (or processes) timed from outside."""
    verifier = CORPORA[corpus][1]
    lines = path.read_bytes().splitlines(keepends=True)
    size = -(-len(lines) // args.workers)
    parts = []
    for k in range(args.workers):
        part = folder / f"part-{k}.jsonl"
        part.write_bytes(b"".join(lines[k * size : (k + 1) * size]))
        parts.append(part)
    cli = Path(sys.executable).with_name("rewardlab")
    engine = [str(cli), "score", str(path), "-o", str(folder / "cli.jsonl"), "--verifier", verifier]
    engine += ["--workers", str(args.workers), "--no-progress"]
    commands = {
        "loop": [_side_command("loop", path, folder / "loop.jsonl", verifier)],
        "ceiling": [_side_command("loop", part, part.with_suffix(".out"), verifier) for part in parts],
        "engine": [engine],
    }
    seconds = {}
    for name, group in commands.items():
        start = time.perf_counter()
        procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL) for cmd in group]
        if any(proc.wait() for proc in procs):
            raise SystemExit(f"{name}: a process failed")
        seconds[name] = time.perf_counter() - start
    return seconds


def whole_line(name: str, rows: int, seconds: dict[str, float]) -> str:
    loop, ceiling, engine = seconds["loop"], seconds["ceiling"], seconds["engine"]
    return (
        f"{name:<11}{rows:>8}{rows / loop:>11.0f}{rows / ceiling:>11.0f}{rows / engine:>12.0f}"
        f"{loop / ceiling:>8.2f}x{loop / engine:>8.2f}x{ceiling / engine:>8.2f}"
    )


def measure(side: str, path: Path, out: Path, corpus: str, args: argparse.Namespace) -> float:
    _, verifier, _, timeout = CORPORA[corpus]
    command = [sys.executable, __file__, "--side", side, "--input", str(path), "--out", str(out)]
    command += [
        "--verifier",
        verifier,
        "--workers",
        str(args.workers),
        "--timeout",
        str(timeout or args.timeout),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=sorted(CORPORA), help="repeatable; default: all")
    parser.add_argument("--rows", type=int, default=None, help="rows per corpus (default: per corpus)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side; the median is shown")
    parser.add_argument("--ray", action="store_true", help="also run engine='ray' on a local cluster")
    parser.add_argument(
        "--whole", action="store_true", help="time whole processes: loop, split-loop ceiling, rewardlab score"
    )
    parser.add_argument("--side", choices=["loop", "local", "ray"], help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--verifier", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        run_side(args)
        return

    names = args.corpus or list(CORPORA)
    if args.whole:
        whole_table(names, args)
        return
    sides = ["loop", "local"] + (["ray"] if args.ray else [])
    print(
        f"operating point: workers={args.workers} timeout={args.timeout}s cpus={os.cpu_count()} "
        f"load={os.getloadavg()[0]:.2f}; median of {args.repeat} runs per side, each in a fresh process "
        "(source built and warmed inside the timing; interpreter start-up and imports outside)"
    )
    print(
        f"this machine's ceiling: {args.workers} CPU-bound processes at once do "
        f"{parallel_ceiling(args.workers):.2f}x the work of one (pure-Python loop, median of 3)"
    )
    header = f"{'corpus':<11}{'rows':>8}{'loop r/s':>11}{'engine r/s':>12}{'ratio':>7}{'same':>6}"
    print(header + (f"{'ray r/s':>10}{'ray/eng':>9}{'same':>6}" if args.ray else ""))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in names:
            rows = args.rows or CORPORA[name][2]
            path = build_corpus(name, rows, folder)
            run = [side for side in sides if not (side == "loop" and name == "hostile")]
            times: dict[str, list[float]] = {side: [] for side in run}
            for _ in range(args.repeat):  # sides alternate, so a slow spell of the machine hits all of them
                for side in run:
                    times[side].append(measure(side, path, folder / f"{side}.jsonl", name, args))
            print(format_line(name, rows, {side: statistics.median(t) for side, t in times.items()}, folder))


def whole_table(names: list[str], args: argparse.Namespace) -> None:
    print(
        f"operating point: whole processes (start-up, imports, verifier build included), workers={args.workers} "
        f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f}; median of {args.repeat} runs of each, in turn"
    )
    print(
        f"{'corpus':<11}{'rows':>8}{'loop r/s':>11}{'ceil r/s':>11}{'engine r/s':>12}{'ceiling':>9}"
        f"{'engine':>9}{'share':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in (n for n in names if n != "hostile"):  # the loop has no timeout for hostile rows
            rows = args.rows or CORPORA[name][2]
            path = build_corpus(name, rows, folder)
            runs = [whole_processes(path, name, args, folder) for _ in range(args.repeat)]
            seconds = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            print(whole_line(name, rows, seconds))


def format_line(name: str, rows: int, seconds: dict[str, float], folder: Path) -> str:
    engine_s = seconds["local"]
    if "loop" in seconds:
        same = same_rows(folder / "loop.jsonl", folder / "local.jsonl")
        line = f"{name:<11}{rows:>8}{rows / seconds['loop']:>11.0f}{rows / engine_s:>12.0f}"
        line += f"{seconds['loop'] / engine_s:>6.2f}x{'yes' if same else 'NO':>6}"
    else:
        line = f"{name:<11}{rows:>8}{'-':>11}{rows / engine_s:>12.0f}{'-':>7}{'-':>6}"
    if "ray" in seconds:
        ray_same = same_rows(folder / "ray.jsonl", folder / "local.jsonl")
        line += f"{rows / seconds['ray']:>10.0f}{engine_s / seconds['ray']:>8.2f}x{'yes' if ray_same else 'NO':>6}"
    return line


if __name__ == "__main__":
    main()
