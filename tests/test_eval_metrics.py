"""pass@k, best-of-k and maj@k against brute-force enumeration and the reference formula."""

import itertools
from math import comb

import numpy as np
import pytest

from rewardlab.eval.metrics import (
    best_of_k_matrix,
    bootstrap_means,
    maj_at_k_matrix,
    majority_vote,
    pass_at_k_matrix,
    pass_at_k_single,
    vote_share,
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


def test_vote_share_splits_ties_evenly():
    assert vote_share([2, 1, 1, 2], {1}) == 0.5
    assert vote_share([2, 1, 1, 2, 3, 3], {1, 3}) == pytest.approx(2 / 3)
    assert vote_share([None, 3, 1, 1], {1}) == 1.0
    assert vote_share([None, None], {1}) == 0.0


def brute_force_maj(classes, good, k):
    """maj@k by enumerating every k-subset: the mean of the tie-splitting vote."""
    return float(
        np.mean(
            [
                vote_share([classes[i] for i in s], good)
                for s in itertools.combinations(range(len(classes)), k)
            ]
        )
    )


def random_case(rng, n_max=10):
    n = int(rng.integers(1, n_max + 1))
    num_classes = int(rng.integers(1, 6))
    abstain_rate = rng.choice([0.0, 0.2, 0.5])
    classes = [None if rng.random() < abstain_rate else int(rng.integers(0, num_classes)) for _ in range(n)]
    good = {int(c) for c in range(num_classes) if rng.random() < 0.35}
    return classes, good


def test_maj_at_k_equals_enumeration_over_all_subsets():
    rng = np.random.default_rng(0)
    for _ in range(300):
        classes, good = random_case(rng)
        n = len(classes)
        row = maj_at_k_matrix([classes], [good], list(range(1, n + 1)))[0]
        for k in range(1, n + 1):
            assert abs(row[k - 1] - brute_force_maj(classes, good, k)) < 1e-12, (classes, good, k)


def test_maj_at_k_equals_enumeration_for_shaped_cases():
    # many tied classes, several correct classes, a large correct class among large wrong ones, all abstain
    cases = [
        ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], {3}),
        ([0, 0, 1, 1, 2, 2, 3, 3, 4, 4], {1, 4}),
        ([0, 0, 0, 0, 1, 1, 1, 1, None, 2], {0}),
        ([0, 0, 0, 1, 1, 1, 2, 2, 2, None], {1, 2}),
        ([0] * 6 + [1] * 4, {1}),
        ([None] * 5, {0}),
        ([None, None, 0, None], {0}),
        ([5, 5, 5, 5, 5, 5, 5, 5], {5}),
    ]
    for classes, good in cases:
        n = len(classes)
        row = maj_at_k_matrix([classes], [good], list(range(1, n + 1)))[0]
        brute = [brute_force_maj(classes, good, k) for k in range(1, n + 1)]
        assert row == pytest.approx(brute, abs=1e-12), (classes, good)


def test_maj_at_k_in_chunks_of_v_is_the_same(monkeypatch):
    # past a memory budget the dynamic program runs over a few v at a time
    from rewardlab.eval import metrics

    rng = np.random.default_rng(4)
    cases = [random_case(rng, n_max=30) for _ in range(30)]
    cases.append(([0] * 12 + [1] * 10 + [2] * 5 + [None] * 3, {0, 2}))
    classes, good = [c for c, _ in cases], [g for _, g in cases]
    whole = maj_at_k_matrix(classes, good, list(range(1, 31)))
    monkeypatch.setattr(metrics, "_CHUNK", 1)
    assert np.allclose(maj_at_k_matrix(classes, good, list(range(1, 31))), whole, atol=1e-14, equal_nan=True)


def test_maj_at_k_is_first_seen_vote_averaged_over_orders():
    # The tie rule is the old "class seen first wins", averaged over every order of the samples.
    rng = np.random.default_rng(1)
    for _ in range(20):
        classes, good = random_case(rng, n_max=6)
        n = len(classes)
        row = maj_at_k_matrix([classes], [good], list(range(1, n + 1)))[0]
        orders = list(itertools.permutations(classes))
        for k in range(1, n + 1):
            first_seen = np.mean([majority_vote(order[:k]) in good for order in orders])
            assert row[k - 1] == pytest.approx(first_seen, abs=1e-12)


def test_maj_at_1_is_pass_at_1_and_maj_at_n_is_the_vote():
    rng = np.random.default_rng(2)
    classes, good, correct = [], [], []
    for _ in range(200):
        cls, right = random_case(rng, n_max=40)
        classes.append(cls)
        good.append(right)
        correct.append(sum(c in right for c in cls))  # the samples in a correct class are the correct ones
    n = np.array([len(c) for c in classes])
    maj1 = maj_at_k_matrix(classes, good, [1])[:, 0]
    assert maj1 == pytest.approx(np.array(correct) / n, abs=1e-15)
    assert maj1 == pytest.approx(pass_at_k_matrix(n, np.array(correct), [1])[:, 0], abs=1e-15)
    for cls, right in zip(classes, good, strict=True):
        assert maj_at_k_matrix([cls], [right], [len(cls)])[0, 0] == pytest.approx(
            vote_share(cls, right), abs=1e-12
        )


def test_maj_at_k_undefined_past_n_and_validates_k():
    matrix = maj_at_k_matrix([[0, 1], [0, 0, 1, None]], [{0}, {1}], [1, 3, 4])
    assert np.isnan(matrix[0, 1]) and np.isnan(matrix[0, 2]) and not np.isnan(matrix[1]).any()
    assert matrix[1, 2] == 0.0  # class 0 has two of the three votes
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        maj_at_k_matrix([[0]], [{0}], [0])
    with pytest.raises(ValueError, match="2.5"):
        maj_at_k_matrix([[0]], [{0}], [2.5])


def test_maj_at_k_many_samples_stays_finite():
    # past 1,000 samples the counts (C(n, n/2) ~ 1e300) need extended precision
    n = 1030
    classes = [0] * 400 + [1] * 380 + [2] * 200 + [None] * 50
    row = maj_at_k_matrix([classes], [{0}], [1, 2, 3])[0]
    assert row[0] == pytest.approx(400 / n, abs=1e-12)
    # k = 2: right when the subset holds a 0 and no other answer, or a 0 and another answer (tie: 1/2)
    pairs = n * (n - 1) / 2
    expected = (400 * 399 / 2 + 400 * 50 + 0.5 * 400 * 580) / pairs
    assert row[1] == pytest.approx(expected, abs=1e-12)
    assert np.all(np.isfinite(row)) and np.all((row >= 0) & (row <= 1))


def codex_estimator(n: int, c: int, k: int) -> float:
    """``estimate_pass_at_k``'s inner function from human-eval (openai/human-eval, evaluation.py)."""
    if n - c < k:
        return 1.0
    return 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))


def test_pass_at_k_single_matches_the_codex_estimator():
    for n in range(1, 25):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k_single(n, c, k) == pytest.approx(codex_estimator(n, c, k), abs=1e-15)
                assert pass_at_k_single(float(n), np.int64(c), k) == pass_at_k_single(n, c, k)


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (0, 0, 1, "n .* must be >= 1, got n=0"),
        (-3, 0, 1, "n .* must be >= 1, got n=-3"),
        (5, -1, 1, "c .* between 0 and n=5, got c=-1"),
        (5, 6, 1, "c .* between 0 and n=5, got c=6"),
        (5, 2, 0, "k must be >= 1, got k=0"),
        (5, 2, 6, "k must be <= n=5, got k=6"),
        (4.5, 2, 1, "n must be an integer, got 4.5"),
        (5, 2.5, 1, "c must be an integer, got 2.5"),
        (5, 2, 1.5, "k must be an integer, got 1.5"),
        (5, True, 1, "c must be an integer, got True"),
        (float("nan"), 2, 1, "n must be an integer, got nan"),
        ("5", 2, 1, "n must be an integer, got '5'"),
    ],
)
def test_pass_at_k_single_rejects_bad_input(n, c, k, message):
    with pytest.raises(ValueError, match=message):
        pass_at_k_single(n, c, k)


@pytest.mark.parametrize(
    ("num_samples", "num_correct", "ks", "message"),
    [
        ([4.5, 3], [1, 1], [1], r"num_samples must hold integers, got 4\.5 at index 0"),
        ([4, 3], [1, 0.5], [1], r"num_correct must hold integers, got 0\.5 at index 1"),
        ([4, 3], [1, 1], [4.5], r"k must be an integer, got 4\.5"),
        ([4, 3], [1, 1], [0], "k must be >= 1, got 0"),
        ([4, 3], [1, 1, 1], [1], "differ in length: 2 vs 3"),
        ([4, 3, 2], [1], [1], "differ in length: 3 vs 1"),
        ([[4, 3]], [[1, 1]], [1], r"num_samples must be 1-D, got shape \(1, 2\)"),
        (4, 1, [1], r"num_samples must be 1-D, got shape \(\)"),
        ([4, -1], [1, 0], [1], "num_samples must be >= 0, got -1 at index 1"),
        ([4, 3], [-1, 0], [1], "num_correct must be between 0 and num_samples, got -1 .* at index 0"),
        (
            [4, 3],
            [1, 5],
            [1],
            r"num_correct must be between 0 and num_samples, got 5 \(num_samples 3\) at index 1",
        ),
        ([True, False], [0, 0], [1], "num_samples"),
    ],
)
def test_pass_at_k_matrix_rejects_bad_input(num_samples, num_correct, ks, message):
    with pytest.raises(ValueError, match=message):
        pass_at_k_matrix(num_samples, num_correct, ks)


def test_pass_at_k_matrix_accepts_whole_floats_and_zero_samples():
    matrix = pass_at_k_matrix(np.array([4.0, 0.0]), np.array([1.0, 0.0]), [1, 2.0])
    assert matrix[0] == pytest.approx([0.25, 0.5]) and np.isnan(matrix[1]).all()


def test_bootstrap_interval_contains_mean_and_is_seeded():
    values = np.random.default_rng(0).random((200, 2))
    first = bootstrap_means(values, resamples=500, seed=1)
    second = bootstrap_means(values, resamples=500, seed=1)
    for a, b, col in zip(first, second, values.T, strict=True):
        assert a.mean == pytest.approx(col.mean())
        assert a.low < a.mean < a.high
        assert (a.low, a.high) == (b.low, b.high)
