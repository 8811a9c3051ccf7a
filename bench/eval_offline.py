"""Offline evaluation speed: 100,000 scored completions (1,000 problems x 100 samples), every metric.

rewardlab's vectorised metrics (pass@k, maj@k with answers grouped by math equivalence, best-of-k,
mean reward, bootstrap 95% intervals for all of them) against a plain-Python loop computing the same
numbers (math.comb for pass@k, maj@1 and maj@n voted directly, the same bootstrap resamples), in the
same run. Both must agree; the ratio is printed. Target: rewardlab under 10 s on 2 cores. Then the
exact maj@k alone for every k from 1 to n (tests check it against enumeration of all k-subsets).

    python bench/eval_offline.py [--problems 1000] [--samples 100] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections import Counter

import numpy as np

from rewardlab.eval.aggregate import compute_metrics, default_ks
from rewardlab.eval.config import EvalConfig
from rewardlab.eval.metrics import maj_at_k_matrix, vote_share
from rewardlab.eval.samples import Sample
from rewardlab.verifiers.math import group_answers

FORMS = {  # equivalent spellings of a few answers, as completions write them
    "1/2": ["1/2", "0.5", "\\frac{1}{2}", "\\dfrac{1}{2}"],
    "3": ["3", "3.0", "x = 3", "\\text{3}"],
    "\\sqrt{2}": ["\\sqrt{2}", "\\sqrt 2", "2^{1/2}"],
}


def synthetic(problems: int, samples: int, seed: int = 0) -> dict[str, list[Sample]]:
    rng = random.Random(seed)
    data: dict[str, list[Sample]] = {}
    for p in range(problems):
        gold = rng.choice(list(FORMS))
        skill = rng.random()
        group = []
        for i in range(samples):
            if rng.random() < skill:
                answer, correct = rng.choice(FORMS[gold]), True
            elif rng.random() < 0.1:
                answer, correct = None, False
            else:
                answer, correct = str(rng.randint(4, 9 + p % 5)), False
            score = rng.gauss(1.0 if correct else 0.0, 1.0)
            group.append(
                Sample(f"p{p}", i, "", reward=float(correct), correct=correct, answer=answer, rm_score=score)
            )
        data[f"p{p}"] = group
    return data


def plain_python(data: dict[str, list[Sample]], ks: list[int], config: EvalConfig) -> dict[str, float]:
    """The same metrics, one problem and one number at a time (means and bootstrap bounds)."""
    pids = list(data)
    rows = []
    for pid in pids:
        group = data[pid]
        n, c = len(group), sum(s.correct for s in group)
        row = [1.0 - math.comb(n - c, k) / math.comb(n, k) for k in ks]
        classes = group_answers([s.answer for s in group])
        good = {cl for cl, s in zip(classes, group, strict=True) if cl is not None and s.correct}
        # maj@1: the share of samples in a correct class; maj@n: the vote of all n, ties split evenly
        row.append(sum(cl in good for cl in classes) / n)
        row.append(vote_share(classes, good))
        ranked = sorted(range(n), key=lambda i: (-group[i].rm_score, i))
        for k in ks:
            row.append(
                sum(group[i].correct * math.comb(n - 1 - r, k - 1) for r, i in enumerate(ranked))
                / math.comb(n, k)
            )
        row.append(sum(s.reward for s in group) / n)
        rows.append(row)
    means = [sum(col) / len(col) for col in zip(*rows, strict=True)]
    # bootstrap with the same multinomial counts as the vectorised code
    rng = np.random.default_rng(config.seed)
    counts = rng.multinomial(len(pids), np.full(len(pids), 1.0 / len(pids)), size=config.bootstrap)
    lows = []
    for j in range(len(means)):
        boots = sorted(
            sum(int(w) * r[j] for w, r in zip(draw, rows, strict=True)) / len(pids) for draw in counts
        )
        lows.append(float(np.quantile(boots, 0.025)))
    n = len(data[pids[0]])
    names = [f"pass@{k}" for k in ks] + ["maj@1", f"maj@{n}"] + [f"best_of_{k}" for k in ks] + ["mean_reward"]
    return {name: (mean, low) for name, mean, low in zip(names, means, lows, strict=True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()
    data = synthetic(args.problems, args.samples)
    ks = default_ks(args.samples)
    config = EvalConfig(bootstrap=args.bootstrap)
    total = args.problems * args.samples
    print(f"{args.problems} problems x {args.samples} samples = {total:,} scored completions; k = {ks}")

    group_answers(["\\sqrt{2}", "2^{1/2}"])  # import math-verify / sympy before either clock starts
    start = time.perf_counter()
    fast = compute_metrics(data, ks, config, votes=group_answers, with_best_of=True)
    fast_s = time.perf_counter() - start
    print(f"rewardlab (vectorised):  {fast_s:7.2f} s")

    start = time.perf_counter()
    slow = plain_python(data, ks, config)
    slow_s = time.perf_counter() - start
    print(f"plain-Python loop:       {slow_s:7.2f} s")
    print(f"ratio (loop / rewardlab): {slow_s / fast_s:.1f}x")

    worst = max(abs(fast[name]["mean"] - mean) for name, (mean, _) in slow.items())
    worst_low = max(abs(fast[name]["ci_low"] - low) for name, (_, low) in slow.items())
    print(f"largest difference: means {worst:.2e}, CI lower bounds {worst_low:.2e}")
    for name in ("pass@1", f"pass@{ks[-1]}", f"maj@{ks[-1]}", f"best_of_{ks[-1]}"):
        m = fast[name]
        print(f"  {name:12s} {100 * m['mean']:5.1f}  [{100 * m['ci_low']:5.1f}, {100 * m['ci_high']:5.1f}]")
    classes = [group_answers([s.answer for s in g]) for g in data.values()]
    groups = zip(classes, data.values(), strict=True)
    good = [{c for c, s in zip(cl, g, strict=True) if s.correct} for cl, g in groups]
    every_k = list(range(1, args.samples + 1))
    start = time.perf_counter()
    maj_at_k_matrix(classes, good, every_k)
    print(f"exact maj@k alone, k = 1..{args.samples}: {time.perf_counter() - start:.2f} s")
    counts = Counter(len(set(c)) for c in classes[:50])
    print(f"distinct answer classes per problem (first 50): {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
