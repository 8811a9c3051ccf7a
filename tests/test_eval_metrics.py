"""pass@k, best-of-k and maj@k against brute-force enumeration and the reference formula."""

import itertools
from math import comb

import numpy as np
import pytest

from rewardkit.eval.metrics import (
    best_of_k_matrix,
    bootstrap_means,
    maj_at_k_matrix,
    majority_vote,
    pass_at_k_matrix,
    pass_at_k_single,
)


def codex_reference(n: int, c: int, k: int) -> float:
    """The estimator as printed in Chen et al. (2021), Figure 3."""
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_equals_enumeration_over_all_subsets(n):
    for c in range(n + 1):
        row = pass_at_k_matrix(np.array([n]), np.array([c]), list(range(1, n + 1)))[0]
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            brute = np.mean([any(i < c for i in s) for s in subsets])
            assert row[k - 1] == pytest.approx(brute, abs=1e-12)
            assert row[k - 1] == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_pass_at_k_large_n_no_overflow():
    n = 1000
    cs = np.array([0, 1, 3, 500, 999, 1000])
    ks = [1, 10, 100, 500, 1000]
    matrix = pass_at_k_matrix(np.full(len(cs), n), cs, ks)
    assert np.all(np.isfinite(matrix))
    for i, c in enumerate(cs):
        for j, k in enumerate(ks):
            assert matrix[i, j] == pytest.approx(codex_reference(n, int(c), k), abs=1e-9)
            assert matrix[i, j] == pytest.approx(pass_at_k_single(n, int(c), k), abs=1e-9)
    assert matrix[:, 0] == pytest.approx(cs / n)


def test_pass_at_k_undefined_when_k_exceeds_n():
    matrix = pass_at_k_matrix(np.array([2, 4]), np.array([1, 1]), [4])
    assert np.isnan(matrix[0, 0]) and matrix[1, 0] == pytest.approx(1.0)


def test_best_of_k_equals_enumeration_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(1, 8))
        scores = rng.integers(0, 3, n).astype(float)
        correct = rng.integers(0, 2, n)
        row = best_of_k_matrix([scores], [correct], list(range(1, n + 1)))[0]
        for k in range(1, n + 1):
            picks = [
                correct[min(s, key=lambda i: (-scores[i], i))] for s in itertools.combinations(range(n), k)
            ]
            assert row[k - 1] == pytest.approx(np.mean(picks), abs=1e-12)


def test_majority_vote_ties_go_to_first_seen():
    assert majority_vote([2, 1, 1, 2]) == 2
    assert majority_vote([None, 3, 1, 1]) == 1
    assert majority_vote([None, None]) is None


def test_maj_at_k_matches_a_loop_over_the_same_subsets():
    rng = np.random.default_rng(3)
    classes = [[int(x) if x >= 0 else None for x in rng.integers(-1, 4, 12)] for _ in range(30)]
    good = [{0} for _ in classes]
    ks = [1, 3, 12]
    fast = maj_at_k_matrix(classes, good, ks, draws=16, seed=7)
    # the same draws, replayed with the plain vote
    replay = np.random.default_rng(7)
    for p, cls in enumerate(classes):
        for j, k in enumerate(ks):
            if k == len(cls):
                assert fast[p, j] == float(majority_vote(cls) == 0)
                continue
            draws = np.sort(np.argsort(replay.random((16, len(cls))), axis=1)[:, :k], axis=1)
            hits = sum(majority_vote([cls[i] for i in subset]) == 0 for subset in draws)
            assert fast[p, j] == pytest.approx(hits / 16)


def test_bootstrap_interval_contains_mean_and_is_seeded():
    values = np.random.default_rng(0).random((200, 2))
    first = bootstrap_means(values, resamples=500, seed=1)
    second = bootstrap_means(values, resamples=500, seed=1)
    for a, b, col in zip(first, second, values.T, strict=True):
        assert a.mean == pytest.approx(col.mean())
        assert a.low < a.mean < a.high
        assert (a.low, a.high) == (b.low, b.high)
