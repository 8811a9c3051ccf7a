"""Scored samples to the summary's metrics: pass@k, maj@k, best-of-k and mean reward over problems, with
bootstrap intervals, and which k a run reports (:func:`coverage`). The formulas are :mod:`.metrics`'."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from rewardlab.eval import metrics as M
from rewardlab.eval.config import EvalConfig
from rewardlab.eval.samples import Sample

Grouping = Callable[[Sequence[str | None]], list[int | None]]
"""maj@k's answer classes of one problem's samples (a verifier's ``group_answers``)."""


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... below ``n``, and ``n``."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    ks.append(n)
    return ks


def compute_metrics(
    samples_by_problem: dict[str, list[Sample]],
    ks: Sequence[int],
    config: EvalConfig,
    *,
    votes: Grouping | None,
    with_best_of: bool,
) -> dict[str, dict[str, float]]:
    """pass@k, maj@k (when ``votes`` groups the answers), best-of-k and mean reward over problems, each with
    a bootstrap 95% interval and ``problems``, the number of problems it is averaged over (a k-metric covers
    the problems with at least k samples)."""
    pids = list(samples_by_problem)
    if not pids:
        return {}
    groups = [samples_by_problem[p] for p in pids]
    n = np.array([len(group) for group in groups])
    c = np.array([sum(s.correct for s in group) for group in groups])
    columns: list[str] = [f"pass@{k}" for k in ks]
    blocks: list[np.ndarray] = [M.pass_at_k_matrix(n, c, ks)]
    if votes:
        blocks.append(_maj_block(groups, ks, votes))
        columns += [f"maj@{k}" for k in ks]
    if with_best_of:
        blocks.append(_best_of_block(groups, ks))
        columns += [f"best_of_{k}" for k in ks]
    blocks.append(np.array([np.mean([s.reward for s in group]) for group in groups])[:, None])
    columns.append("mean_reward")
    f1 = _detail_means(groups, "f1")
    if f1 is not None:
        blocks.append(f1)
        columns.append("mean_f1")
    return _intervals(np.concatenate(blocks, axis=1), columns, config)


def _maj_block(groups: list[list[Sample]], ks: Sequence[int], votes: Grouping) -> np.ndarray:
    """maj@k per problem: its samples' answers grouped by ``votes``, a class is good when a correct sample
    is in it."""
    classes, good = [], []
    for group in groups:
        cls = votes([s.answer for s in group])
        classes.append(cls)
        good.append({k for k, s in zip(cls, group, strict=True) if k is not None and s.correct})
    return M.maj_at_k_matrix(classes, good, ks)


def _best_of_block(groups: list[list[Sample]], ks: Sequence[int]) -> np.ndarray:
    """best-of-k per problem; a sample without a reward-model score ranks last."""
    scores = [np.array([_nan(s.rm_score) for s in group]) for group in groups]
    correct = [np.array([s.correct for s in group]) for group in groups]
    scores = [np.where(np.isnan(s), -np.inf, s) for s in scores]
    return M.best_of_k_matrix(scores, correct, ks)


def _intervals(matrix: np.ndarray, columns: list[str], config: EvalConfig) -> dict[str, dict[str, float]]:
    """Each column's mean over the problems it covers (not NaN), with its bootstrap interval."""
    covered = (~np.isnan(matrix)).sum(axis=0)
    if config.bootstrap > 0:
        intervals = M.bootstrap_means(matrix, resamples=config.bootstrap, seed=config.seed)
        means = [iv.to_dict() for iv in intervals]
    else:
        means = [
            {"mean": float(np.nanmean(column)) if covered[j] else float("nan")}
            for j, column in enumerate(matrix.T)
        ]
    return {
        name: {**m, "problems": int(covered[j])}
        for j, (name, m) in enumerate(zip(columns, means, strict=True))
    }


def _detail_means(groups: list[list[Sample]], key: str) -> np.ndarray | None:
    """Per-problem means of a numeric ``details[key]`` (the ``qa`` verifier's token F1, SQuAD's second
    metric beside exact match), as a column; a sample without it (an error) counts 0. ``None`` when no
    sample has it."""
    values = [[(s.details or {}).get(key) for s in group] for group in groups]
    if not any(isinstance(v, (int, float)) and not isinstance(v, bool) for row in values for v in row):
        return None
    return np.array(
        [np.mean([float(v) if isinstance(v, (int, float)) else 0.0 for v in row]) for row in values]
    )[:, None]


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def samples_per_problem(sizes: Sequence[int]) -> int | str:
    """The samples per problem: the number when all problems have the same, else "MIN-MAX"."""
    if not sizes:
        return 0
    low, high = min(sizes), max(sizes)
    return low if low == high else f"{low}-{high}"


def coverage(
    requested: Sequence[int] | None, sizes: Sequence[int]
) -> tuple[list[int], list[int], str | None]:
    """The k to report for problems with ``sizes`` samples (``requested``, or 1, 2, 4, ... up to the
    largest n, and n), the requested k dropped because they exceed every problem's n, and a one-line
    warning (None when there is nothing to say): problems with different n, k that only some problems
    reach (a k-metric is averaged over the problems with at least k samples), k dropped."""
    n_min, n_max = min(sizes, default=0), max(sizes, default=0)
    limit = max(n_max, 1)
    wanted = sorted({k for k in (requested or default_ks(limit)) if k >= 1})
    ks = [k for k in wanted if k <= limit]
    dropped = [k for k in wanted if k > limit]
    if not sizes:
        return ks, dropped, None
    notes = []
    if n_min != n_max:
        notes.append(f"problems have different numbers of samples ({n_min}-{n_max} per problem)")
    partial = [f"k={k} covers {sum(n >= k for n in sizes)} of {len(sizes)}" for k in ks if k > n_min]
    if partial:
        notes.append("a k-metric averages over the problems with at least k samples: " + ", ".join(partial))
    if dropped:
        listed = ", ".join(map(str, dropped))
        notes.append(f"k={listed} exceeds every problem's samples (at most {n_max}) and is dropped")
    return ks, dropped, ("eval: " + "; ".join(notes)) if notes else None
