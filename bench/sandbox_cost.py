"""Benchmark: what the code sandbox costs per program, against starting a plain interpreter per program.

Operating point: ``--n`` trivial stdio programs (``print(input())``) run once sequentially (one slot) and
once ``--workers`` at a time; the sandbox's start-up (layout probe, root, warm workers) separately.
Reference, same run: ``subprocess.run([python, "-I", "-S", "-c", code])`` per program (no isolation at
all), from a pool of the same number of threads. Prints milliseconds per program, programs per second,
and the ratio (rewardlab / reference, higher is better); the median of ``--repeats`` runs.

Then the cost of a supervisor per program: ``--n`` programs one at a time (one call each, the median
latency), the default sandbox against the same sandbox with ``supervisor_per_program=False`` (the slot
supervises every program itself: no fork per program, no fresh memory per program), the two interleaved
so that both see the same load. Target: the default within 1.15x.

    python bench/sandbox_cost.py --n 300 --workers 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from rewardlab.verifiers.code.sandbox import Sandbox, SandboxConfig, StdioTask

PROGRAM = "print(input())"


def sandbox_rate(sandbox: Sandbox, n: int) -> float:
    tasks = [StdioTask(PROGRAM, f"{i}\n") for i in range(n)]
    t0 = time.perf_counter()
    reports = sandbox.run(tasks)
    elapsed = time.perf_counter() - t0
    wrong = [r for i, r in enumerate(reports) if r.stdout != f"{i}\n".encode()]
    if wrong:
        raise SystemExit(f"sandbox gave wrong output: {wrong[0]}")
    return n / elapsed


def reference_rate(n: int, workers: int) -> float:
    def one(i: int) -> bytes:
        cmd = [sys.executable, "-I", "-S", "-c", PROGRAM]
        return subprocess.run(cmd, input=f"{i}\n".encode(), capture_output=True, timeout=60).stdout

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(n)))
    return n / (time.perf_counter() - t0)


def start_seconds(workers: int) -> float:
    t0 = time.perf_counter()
    sandbox = Sandbox(SandboxConfig(parallelism=workers))
    sandbox.start()
    elapsed = time.perf_counter() - t0
    sandbox.close()
    return elapsed


def single_costs(n: int) -> dict[str, float]:
    """Median latency of one program per call, per program supervisor on and off, interleaved."""
    boxes = {
        "supervisor per program (default)": Sandbox(SandboxConfig(parallelism=1)),
        "slot supervises (isolation off)": Sandbox(
            SandboxConfig(parallelism=1, supervisor_per_program=False)
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in boxes}
    for box in boxes.values():
        box.start()
        sandbox_rate(box, 20)  # warm
    for i in range(n):
        for name, box in boxes.items():
            t0 = time.perf_counter()
            report = box.run([StdioTask(PROGRAM, f"{i}\n")])[0]
            times[name].append(time.perf_counter() - t0)
            if report.stdout != f"{i}\n".encode():
                raise SystemExit(f"sandbox gave wrong output: {report}")
    for box in boxes.values():
        box.close()
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="programs per measurement")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="programs at a time")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (the median is shown)")
    args = parser.parse_args()
    print(f"{args.n} programs, {args.workers} workers, load average {os.getloadavg()[0]:.1f}")
    starts = [start_seconds(args.workers) for _ in range(args.repeats)]
    print(f"sandbox start-up: {statistics.median(starts):.2f} s (median of {args.repeats})")
    for workers in (1, args.workers):
        sandbox = Sandbox(SandboxConfig(parallelism=workers))
        sandbox.start()
        sandbox_rate(sandbox, 20)  # warm
        ours = statistics.median(sandbox_rate(sandbox, args.n) for _ in range(args.repeats))
        sandbox.close()
        ref = statistics.median(reference_rate(args.n, workers) for _ in range(args.repeats))
        print(
            f"{workers} at a time: rewardlab {1000 / ours:6.2f} ms/program ({ours:6.1f}/s), "
            f"plain interpreter {1000 / ref:6.2f} ms/program ({ref:6.1f}/s), ratio {ours / ref:.2f}x"
        )
    print(f"isolation: {sandbox.info}")
    costs = single_costs(args.n)
    for name, cost in costs.items():
        print(f"one program per call, {name}: {1000 * cost:.2f} ms (median of {args.n})")
    on, off = costs.values()
    print(f"supervisor per program costs {on / off:.2f}x the slot supervising (target <= 1.15x)")


if __name__ == "__main__":
    main()
