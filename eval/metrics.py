"""Benchmark metrics over n samples per problem: pass@k, maj@k, best-of-n, mean reward, bootstrap CIs.

The work is vectorised with numpy (pass@k and the bootstrap over problems, best-of-k and maj@k within
each problem), so 1,000 problems x 100 samples with every k and bootstrap intervals take seconds at most.

* pass@k, the unbiased estimator of Chen et al. (2021), "Evaluating Large Language Models Trained on
  Code": pass@k = E_problems[1 - C(n-c, k) / C(n, k)], computed as the running product
  prod_{i=0}^{k-1} (n-c-i) / (n-i) of factors in [0, 1], which never overflows (n = 1000 is fine).
* best-of-k with a reward model: the expected correctness of the highest-scored sample of a random
  k-subset, exact: the sample of rank r (0 = highest score) is the subset's best with probability
  C(n-1-r, k-1) / C(n, k).
* maj@k: majority vote over the extracted answers of k samples (answers grouped by equivalence
  classes computed beforehand), the exact expectation over all C(n, k) k-subsets, computed by counting
  (no sampling). The vote of one subset: the classes with the most votes win; abstentions (class None)
  never win, and a subset of abstentions only scores 0. A tie between m classes is split evenly: each
  counts 1/m, so a tie of m classes of which one is correct scores 1/m. Unlike "the class seen first
  wins" (:func:`majority_vote`, for picking one answer), it depends on the subset alone, not on the
  order of its samples; it is that rule averaged over random orders of the samples, since each of m
  tied classes, having the same number of votes, is equally likely to be seen first. Hence maj@1 is the
  share of samples whose answer is in a correct class (pass@1 when exactly those samples are the correct
  ones), and maj@n the vote over all n samples with the same rule.

  Counting: a subset's winners have some number v >= 1 of votes each. For each v, every class j
  contributes the generating polynomial L_j(x) + y E_j(x), with L_j = sum_{u<v} C(a_j, u) x^u (fewer
  than v of its a_j samples drawn) and E_j = C(a_j, v) x^v (exactly v drawn, a winner: y counts them);
  classes with a_j < v and abstentions contribute (1 + x)^{a_j}. With G_w and G_c the products over
  wrong and correct classes, the subsets of size s weighted by (correct winners) / (winners) sum to
  [x^s] integral_0^1 G_w(x, y) dG_c(x, y)/dy dy, i.e. sum_W [x^s y^W] H / W for
  H = y G_w dG_c/dy, which a dynamic program over the classes builds (all v at once, polynomials
  truncated at the largest k). For v = 1 it is a polynomial in xy: prod_j (1 + a_j xy). maj@k is the
  sum over v of the x^k coefficients divided by C(n, k). Counts are float64 (exact integers while below
  2**53), extended precision past n = 1,000 samples.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


def _as_int(value: object, name: str) -> int:
    """``value`` as an int: Python or numpy integers, or floats with a whole value; bools are refused."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    raise ValueError(f"{name} must be an integer, got {value!r}")


def _as_ks(ks: Sequence[int]) -> list[int]:
    out = []
    for k in ks:
        k = _as_int(k, "k")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        out.append(k)
    return out


def _as_counts(values: object, name: str) -> np.ndarray:
    """A 1-D array of whole numbers as int64 (refusing fractions, NaN, bools and other shapes)."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    if array.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(array) | (array != np.round(array)))
        if len(bad):
            raise ValueError(f"{name} must hold integers, got {array[bad[0]].item()!r} at index {bad[0]}")
        return array.astype(np.int64)
    return np.array([_as_int(v, f"{name}[{i}]") for i, v in enumerate(array.tolist())], dtype=np.int64)


def pass_at_k_single(n: int, c: int, k: int) -> float:
    """The reference formula of Chen et al. (2021) for one problem: 1 - prod_{i=n-c+1}^{n} (1 - k / i).

    Needs integers with n >= 1, 0 <= c <= n and 1 <= k <= n; anything else raises ValueError.
    """
    n, c, k = _as_int(n, "n"), _as_int(c, "c"), _as_int(k, "k")
    if n < 1:
        raise ValueError(f"n (samples) must be >= 1, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"c (correct samples) must be between 0 and n={n}, got c={c}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got k={k}")
    if k > n:
        raise ValueError(f"k must be <= n={n}, got k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_matrix(num_samples: np.ndarray, num_correct: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """Per-problem pass@k, shape (problems, len(ks)).

    ``num_samples`` and ``num_correct`` are per-problem counts: 1-D, of the same length, whole numbers
    with 0 <= num_correct <= num_samples (ValueError otherwise), and every k >= 1. A k larger than a
    problem's n (n = 0 included) gives NaN for that problem (undefined), so callers can drop or report it.
    """
    n = _as_counts(num_samples, "num_samples")
    c = _as_counts(num_correct, "num_correct")
    if len(n) != len(c):
        raise ValueError(f"num_samples and num_correct differ in length: {len(n)} vs {len(c)}")
    ks = _as_ks(ks)
    bad = np.flatnonzero(n < 0)
    if len(bad):
        raise ValueError(f"num_samples must be >= 0, got {n[bad[0]]} at index {bad[0]}")
    bad = np.flatnonzero((c < 0) | (c > n))
    if len(bad):
        i = bad[0]
        raise ValueError(
            f"num_correct must be between 0 and num_samples, got {c[i]} (num_samples {n[i]}) at index {i}"
        )
    max_k = max(ks) if ks else 0
    # fail_prob[:, j] = C(n-c, j+1) / C(n, j+1) = prod_{i=0}^{j} (n-c-i)/(n-i), clipped at 0
    i = np.arange(max_k, dtype=np.float64)[None, :]
    numer = np.clip(n[:, None] - c[:, None] - i, 0, None)
    denom = n[:, None] - i
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.where(denom > 0, numer / np.where(denom > 0, denom, 1), np.nan)
    fail = np.cumprod(factors, axis=1)
    k_index = np.array(ks, dtype=np.int64)
    return np.where(k_index[None, :] <= n[:, None], 1.0 - fail[:, k_index - 1], np.nan)


def best_of_k_matrix(
    scores: Sequence[np.ndarray], correct: Sequence[np.ndarray], ks: Sequence[int]
) -> np.ndarray:
    """Per-problem expected best-of-k accuracy, shape (problems, len(ks)).

    For each problem, samples are ranked by ``scores`` (descending; ties by sample index), and the
    sample of rank r is the highest-scored of a uniformly random k-subset with probability
    w_k(r) = C(n-1-r, k-1) / C(n, k); w_1(r) = 1/n and w_{k+1}(r) = w_k(r) (n-r-k)(k+1) / (k (n-k)).
    Best-of-n (k = n) is the correctness of the top-scored sample.
    """
    ks = _as_ks(ks)
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
    """The class with most votes (None votes are abstentions), for a single answer: ties go to the class
    seen first. :func:`maj_at_k_matrix` scores ties differently (split evenly, see :func:`vote_share`),
    which is this rule averaged over random orders of the samples."""
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


def vote_share(classes: Sequence[int | None], correct: set[int]) -> float:
    """The correctness of one majority vote under maj@k's rule: among the classes with most votes
    (abstentions never win), the share that is correct; 0 when every vote abstains."""
    counts = Counter(cls for cls in classes if cls is not None)
    if not counts:
        return 0.0
    top = max(counts.values())
    winners = [cls for cls, count in counts.items() if count == top]
    return sum(cls in correct for cls in winners) / len(winners)


def maj_at_k_matrix(
    answer_classes: Sequence[Sequence[int | None]],
    correct_classes: Sequence[set[int]],
    ks: Sequence[int],
) -> np.ndarray:
    """Per-problem maj@k, shape (problems, len(ks)), exact.

    ``answer_classes[p][i]`` is the equivalence class of sample i's extracted answer (None when no answer
    was extracted: an abstention); ``correct_classes[p]`` the classes that match the reference. Each entry
    is the mean of :func:`vote_share` over all k-subsets of the problem's samples (ties split evenly),
    counted as described in the module docstring; a k larger than the problem's n gives NaN.
    """
    ks = _as_ks(ks)
    out = np.full((len(answer_classes), len(ks)), np.nan)
    if not ks:
        return out
    k_index = np.array(ks) - 1
    for p, (classes, good) in enumerate(zip(answer_classes, correct_classes, strict=True)):
        curve = _maj_curve(classes, good, max(ks))  # maj@1 .. maj@min(max k, n)
        defined = k_index < len(curve)
        out[p, defined] = curve[k_index[defined]]
    return out


_CHUNK = 2_000_000
"""Entries of the dynamic program's arrays held at once (maj@k for many v is done in chunks of v)."""


@lru_cache(maxsize=4096)
def _binom_row(r: int, extended: bool) -> np.ndarray:
    """C(r, u) for u = 0..r, rounded from exact integers (read-only: cached)."""
    row = [math.comb(r, u) for u in range(r + 1)]
    out = np.array(row, dtype=object).astype(np.longdouble) if extended else np.array(row, dtype=np.float64)
    out.flags.writeable = False
    return out


def _maj_curve(classes: Sequence[int | None], good: set[int], kmax: int) -> np.ndarray:
    """maj@k of one problem for k = 1..min(kmax, n)."""
    n = len(classes)
    top_k = min(kmax, n)
    counts = Counter(cls for cls in classes if cls is not None)
    if top_k == 0 or not any(cls in good for cls in counts):
        return np.zeros(top_k)
    abstain = n - sum(counts.values())
    if all(cls in good for cls in counts):  # right unless every vote abstains
        return pass_at_k_matrix(np.array([n]), np.array([n - abstain]), range(1, top_k + 1))[0]
    extended = n > 1000  # C(n, n/2) and the tallies near it overflow float64 past n ~ 1030
    dtype = np.longdouble if extended else np.float64
    total = np.zeros(top_k + 1, dtype=dtype)  # total[s]: subsets of size s, weighted by their score

    # v = 1: winners have one vote each, so polynomials in t = xy: prod_j (1 + a_j t), grouped by a_j.
    def product(sizes: list[int]) -> np.ndarray:
        poly = np.ones(1, dtype=dtype)
        for size, mult in Counter(sizes).items():
            power = _binom_row(mult, extended) * np.power(dtype(size), np.arange(mult + 1, dtype=dtype))
            poly = np.convolve(poly, power)
        return poly

    g_wrong = product([a for cls, a in counts.items() if cls not in good])
    g_right = product([a for cls, a in counts.items() if cls in good])
    integrand = np.convolve(g_wrong, g_right[1:] * np.arange(1, len(g_right), dtype=dtype))
    s1 = np.zeros(len(integrand) + 1, dtype=dtype)
    s1[1:] = integrand / np.arange(1, len(integrand) + 1, dtype=dtype)  # integral from 0 to t
    with_abstentions = np.convolve(s1, _binom_row(abstain, extended))[: top_k + 1]
    total[: len(with_abstentions)] += with_abstentions

    # v >= 2: a dynamic program over the classes with at least 2 samples, all v at once.
    big = sorted(((a, cls in good) for cls, a in counts.items() if a >= 2), reverse=True)
    top_v = min(max((a for a, right in big if right), default=0), top_k)
    if top_v >= 2:
        sizes = np.array([a for a, _ in big])
        chunk = max(1, _CHUNK // (2 * (len(big) + 1) * (2 * top_k + 1)))
        for v_lo in range(2, top_v + 1, chunk):
            vs = np.arange(v_lo, min(v_lo + chunk, top_v + 1))
            total += _maj_ties(vs, big, sizes, n, top_k, extended)
    return (total[1:] / _binom_row(n, extended)[1 : top_k + 1]).astype(np.float64)


def _maj_ties(
    vs: np.ndarray,
    big: list[tuple[int, bool]],
    sizes: np.ndarray,
    n: int,
    top_k: int,
    extended: bool,
) -> np.ndarray:
    """Sum over v in ``vs`` of the weighted subset counts whose winners have v votes each (by size s).

    ``big``: the classes with at least 2 samples as (size, correct), by size descending, the first one
    at least as large as the largest v; ``sizes`` their sizes.
    """
    dtype = np.longdouble if extended else np.float64
    width, num_v, pad = len(big) + 1, len(vs), int(vs[-1])
    # gh[0]: G = prod_j (L_j + y E_j); gh[1]: H = y G_wrong dG_right/dy; axes v, y (winners), x (size),
    # the x axis preceded by ``pad`` zeros so that shifts by up to v read zeros.
    gh = np.zeros((2, num_v, width, pad + top_k + 1), dtype=dtype)
    # [b, v, y, s, o] = gh[b, v, y, s + o]: x^(s + o - pad)
    view = np.lib.stride_tricks.as_strided(
        gh, gh.shape[:3] + (top_k + 1, pad + 1), gh.strides + gh.strides[-1:], writeable=False
    )
    # Classes with fewer than v samples, and abstentions: (1 + x)^rest. The largest class comes first:
    # G_v = (1 + x)^rest_v (L_1 + y E_1), whose x^s coefficients are prefix sums over u of
    # C(a_1, u) C(rest_v, s - u), the same for every v of the same rest.
    sums = np.concatenate([[0], np.cumsum(sizes)])[np.searchsorted(-sizes, -vs, side="right")]
    rests, which = np.unique(n - sums, return_inverse=True)
    a, right = big[0]
    u = np.arange(pad + 1)
    lag = np.arange(top_k + 1)[:, None] - u[None, :] + pad  # index of x^(s - u) in a row padded by pad
    rows = np.zeros((len(rests), pad + top_k + 1), dtype=dtype)
    for i, rest in enumerate(rests):
        row = _binom_row(int(rest), extended)[: top_k + 1]
        rows[i, pad : pad + len(row)] = row
    terms = rows[:, lag] * _binom_row(a, extended)[: pad + 1]  # (rest, s, u): C(rest, s - u) C(a, u)
    prefix = np.cumsum(terms, axis=-1)
    gh[0, :, 0, pad:] = prefix[which, :, vs - 1]
    gh[0, :, 1, pad:] = terms[which, :, vs]
    if right:
        gh[1, :, 1, pad:] = gh[0, :, 1, pad:]
    correct = [i for i, (_, right) in enumerate(big) if right]
    # Each further class takes part in the v <= a (a prefix of vs); the others count it in rest. Before
    # the first correct class H is 0 and after the last one G is not needed: only one of them is updated.
    for used, (a, right) in enumerate(big[1:], start=1):
        active = min(a - int(vs[0]) + 1, num_v)
        if active <= 0:
            break  # by size, descending: none of the rest takes part either
        parts = slice(0 if used <= correct[-1] else 1, 2 if used >= correct[0] else 1)
        v_act = vs[:active]
        row = _binom_row(a, extended)
        span = min(int(v_act[-1]), top_k + 1)
        # L_j: C(a, u) x^u for u < v (each v its own kernel)
        kernel = np.where(u[None, span - 1 :: -1] < v_act[:, None], row[span - 1 :: -1], 0)
        old = view[parts, :active, : used + 1]
        new = np.einsum("bvyso,vo->bvys", old[..., pad - span + 1 :], kernel)
        # E_j: exactly v drawn, C(a, v) x^v y (shift by v along x, by one winner along y); axes v, b, y, s
        shifted = old[:, np.arange(active), :, :, pad - v_act] * row[v_act][:, None, None, None]
        gh[parts, :active, : used + 1, pad:] = new
        gh[parts, :active, 1 : used + 2, pad:] += shifted.transpose(1, 0, 2, 3)
        if right:  # d/dy of this class's factor, times y: H += y E_j G
            gh[1, :active, 1 : used + 2, pad:] += shifted[:, 0]
    winners = np.arange(1, width, dtype=dtype)
    return np.einsum("vws,w->s", gh[1, :, 1:, pad:], 1.0 / winners)


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
