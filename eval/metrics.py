"""Benchmark metrics over n samples per problem: pass@k, maj@k, best-of-n, mean reward, bootstrap CIs.

All functions are vectorised over problems (numpy), so 1,000 problems x 100 samples with every k and
bootstrap intervals take well under a second.

* pass@k, the unbiased estimator of Chen et al. (2021), "Evaluating Large Language Models Trained on
  Code": pass@k = E_problems[1 - C(n-c, k) / C(n, k)], computed as the running product
  prod_{i=0}^{k-1} (n-c-i) / (n-i) of factors in [0, 1], which never overflows (n = 1000 is fine).
* best-of-k with a reward model: the expected correctness of the highest-scored sample of a random
  k-subset, exact: the sample of rank r (0 = highest score) is the subset's best with probability
  C(n-1-r, k-1) / C(n, k).
* maj@k: majority vote over the extracted answers of k samples (answers grouped by equivalence
  classes computed beforehand), expected over random k-subsets (exact when k = n); ties go to the
  class seen first among the k samples, so results are deterministic for a seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def pass_at_k_single(n: int, c: int, k: int) -> float:
    """The reference formula of Chen et al. (2021) for one problem: 1 - prod_{i=n-c+1}^{n} (1 - k / i)."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_matrix(num_samples: np.ndarray, num_correct: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """Per-problem pass@k, shape (problems, len(ks)).

    ``num_samples`` and ``num_correct`` are per-problem counts. A k larger than a problem's n gives NaN
    for that problem (undefined), so callers can drop or report it.
    """
    n = np.asarray(num_samples, dtype=np.int64)
    c = np.asarray(num_correct, dtype=np.int64)
    ks = [int(k) for k in ks]
    if np.any(c > n) or np.any(c < 0):
        raise ValueError("num_correct must be between 0 and num_samples")
    max_k = max(ks) if ks else 0
    # fail_prob[:, j] = C(n-c, j+1) / C(n, j+1) = prod_{i=0}^{j} (n-c-i)/(n-i), clipped at 0
    i = np.arange(max_k, dtype=np.float64)[None, :]
    numer = np.clip(n[:, None] - c[:, None] - i, 0, None)
    denom = n[:, None] - i
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.where(denom > 0, numer / np.where(denom > 0, denom, 1), np.nan)
    fail = np.cumprod(factors, axis=1)
    out = np.empty((len(n), len(ks)))
    for j, k in enumerate(ks):
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        col = 1.0 - fail[:, k - 1]
        out[:, j] = np.where(k <= n, col, np.nan)
    return out


def best_of_k_matrix(
    scores: Sequence[np.ndarray], correct: Sequence[np.ndarray], ks: Sequence[int]
) -> np.ndarray:
    """Per-problem expected best-of-k accuracy, shape (problems, len(ks)).

    For each problem, samples are ranked by ``scores`` (descending; ties by sample index), and the
    sample of rank r is the highest-scored of a uniformly random k-subset with probability
    w_k(r) = C(n-1-r, k-1) / C(n, k); w_1(r) = 1/n and w_{k+1}(r) = w_k(r) (n-r-k)(k+1) / (k (n-k)).
    Best-of-n (k = n) is the correctness of the top-scored sample.
    """
    ks = [int(k) for k in ks]
    out = np.full((len(scores), len(ks)), np.nan)
    for p, (s, y) in enumerate(zip(scores, correct, strict=True)):
        s = np.asarray(s, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        n = len(s)
        if n == 0:
            continue
        order = np.lexsort((np.arange(n), -s))  # by score desc, then index asc
        y_ranked = y[order]
        r = np.arange(n, dtype=np.float64)[:, None]
        kk = np.arange(1, n, dtype=np.float64)[None, :]  # step k -> k+1 for k = 1..n-1
        steps = np.clip(n - r - kk, 0, None) * (kk + 1) / (kk * (n - kk))
        weights = np.concatenate([np.full((n, 1), 1.0 / n), np.cumprod(steps, axis=1) / n], axis=1)
        per_k = y_ranked @ weights  # expected best-of-k for k = 1..n
        for j, k in enumerate(ks):
            if 1 <= k <= n:
                out[p, j] = per_k[k - 1]
    return out


def majority_vote(classes: Sequence[int | None]) -> int | None:
    """The class with most votes (None votes are abstentions); ties go to the class seen first."""
    counts: dict[int, int] = {}
    first: dict[int, int] = {}
    for position, cls in enumerate(classes):
        if cls is None:
            continue
        counts[cls] = counts.get(cls, 0) + 1
        first.setdefault(cls, position)
    if not counts:
        return None
    return max(counts, key=lambda cls: (counts[cls], -first[cls]))


def maj_at_k_matrix(
    answer_classes: Sequence[Sequence[int | None]],
    correct_classes: Sequence[set[int]],
    ks: Sequence[int],
    *,
    draws: int = 64,
    seed: int = 0,
) -> np.ndarray:
    """Per-problem maj@k, shape (problems, len(ks)).

    ``answer_classes[p][i]`` is the equivalence class of sample i's extracted answer (None when no answer
    was extracted: an abstention); ``correct_classes[p]`` the classes that match the reference. For k = n
    the vote is over all samples (exact); for k < n it is averaged over ``draws`` random k-subsets, each
    kept in sample order so that ties resolve to the class seen first. Same answer as looping
    :func:`majority_vote` over the same subsets, vectorised with bincount.
    """
    rng = np.random.default_rng(seed)
    ks = [int(k) for k in ks]
    out = np.full((len(answer_classes), len(ks)), np.nan)
    for p, (classes, good) in enumerate(zip(answer_classes, correct_classes, strict=True)):
        n = len(classes)
        labels = sorted({c for c in classes if c is not None})
        index = {c: i for i, c in enumerate(labels)}
        abstain = len(labels)
        num_classes = abstain + 1
        encoded = np.array([abstain if c is None else index[c] for c in classes], dtype=np.int64)
        is_good = np.zeros(num_classes, dtype=bool)
        for c in good:
            if c in index:
                is_good[index[c]] = True
        for j, k in enumerate(ks):
            if k > n or k < 1:
                continue
            rows = 1 if k == n else draws
            if k == n:
                subsets = np.arange(n)[None, :]
            else:
                subsets = np.sort(np.argsort(rng.random((rows, n)), axis=1)[:, :k], axis=1)
            votes = encoded[subsets]  # (rows, k), in sample order
            flat = votes + num_classes * np.arange(rows)[:, None]
            counts = np.bincount(flat.ravel(), minlength=rows * num_classes).reshape(rows, num_classes)
            counts[:, abstain] = 0
            first = np.full(rows * num_classes, k, dtype=np.int64)
            positions = np.broadcast_to(np.arange(k), (rows, k))
            # Writing positions in reverse leaves each class's earliest position (last write wins).
            first[flat[:, ::-1].ravel()] = positions[:, ::-1].ravel()
            first = first.reshape(rows, num_classes)
            key = counts * (k + 1) - first  # most votes, then earliest
            winner = np.argmax(key, axis=1)
            has_vote = counts.max(axis=1) > 0
            out[p, j] = float(np.mean(is_good[winner] & has_vote))
    return out


@dataclass
class Interval:
    """A point estimate with its bootstrap 95% confidence interval."""

    mean: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "ci_low": self.low, "ci_high": self.high}


def bootstrap_means(
    values: np.ndarray, *, resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> list[Interval]:
    """Mean over problems of each column of ``values`` (problems x metrics) with a percentile bootstrap CI.

    Problems are resampled with replacement; all columns share the same resamples, so intervals of
    different k are consistent. Rows with NaN in a column are left out of that column.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    num_problems, num_cols = values.shape
    if num_problems == 0:
        return [Interval(float("nan"), float("nan"), float("nan")) for _ in range(num_cols)]
    rng = np.random.default_rng(seed)
    # Resample counts instead of indices: a (resamples x problems) @ (problems x metrics) product.
    counts = rng.multinomial(num_problems, np.full(num_problems, 1.0 / num_problems), size=resamples)
    valid = ~np.isnan(values)
    filled = np.where(valid, values, 0.0)
    sums = counts @ filled
    sizes = counts @ valid.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = sums / sizes
    alpha = (1.0 - confidence) / 2.0
    intervals = []
    for col in range(num_cols):
        column = values[valid[:, col], col]
        mean = float(column.mean()) if len(column) else float("nan")
        samples = boot[:, col][~np.isnan(boot[:, col])]
        if len(samples) == 0:
            intervals.append(Interval(mean, float("nan"), float("nan")))
            continue
        low, high = np.quantile(samples, [alpha, 1.0 - alpha])
        intervals.append(Interval(mean, float(low), float(high)))
    return intervals
