"""Reward model evaluation: pairwise accuracy, ROC-AUC and expected calibration error, per category.

Pairwise data (RewardBench layout: ``prompt``, ``chosen``, ``rejected``, ``subset``):

* accuracy: the fraction of pairs with ``r_chosen > r_rejected`` (strict, as RewardBench counts; a tie is
  a miss);
* ROC-AUC: chosen responses as positives, rejected as negatives, all scores pooled (scikit-learn's
  ``roc_auc_score``);
* ECE: the Bradley-Terry probability ``p = sigmoid(r_c - r_r)`` that the chosen response wins, taken in
  both orders (``p`` with outcome 1 and ``1 - p`` with outcome 0) so that both classes appear, binned
  into ``n_bins`` equal-width bins: ``ECE = sum_b |B_b| / N * |mean(y in B_b) - mean(p in B_b)|``.

Pointwise data (``completion``, ``label``): accuracy of ``sigmoid(r) >= 0.5`` against ``label >= 0.5``,
ROC-AUC of ``r`` against the labels, ECE of ``sigmoid(r)``.

Every metric is also given per ``subset`` when the rows have one. When the subsets are RewardBench's,
its section scores are added (``sections``): each section's accuracy is the mean of its subsets'
accuracies weighted by RewardBench's example counts (``math-prm`` weighted up to equal the code
subsets together), and ``score`` is the mean over the sections present.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .data import detect_kind, load_rows, tokenize_rows
from .scoring import RewardModel

# RewardBench (Lambert et al., 2024) sections and per-subset weights, as its leaderboard computes them.
REWARDBENCH_SECTIONS = {
    "Chat": ("alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"),
    "Chat Hard": (
        "mt-bench-hard",
        "llmbar-natural",
        "llmbar-adver-neighbor",
        "llmbar-adver-GPTInst",
        "llmbar-adver-GPTOut",
        "llmbar-adver-manual",
    ),
    "Safety": (
        "refusals-dangerous",
        "refusals-offensive",
        "xstest-should-refuse",
        "xstest-should-respond",
        "donotanswer",
    ),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}
REWARDBENCH_WEIGHTS = {
    "alpacaeval-easy": 100,
    "alpacaeval-length": 95,
    "alpacaeval-hard": 95,
    "mt-bench-easy": 28,
    "mt-bench-med": 40,
    "mt-bench-hard": 37,
    "math-prm": 984,  # 447 rows, weighted to count as much as the six hep-* subsets
    "refusals-dangerous": 100,
    "refusals-offensive": 100,
    "llmbar-natural": 100,
    "llmbar-adver-neighbor": 134,
    "llmbar-adver-GPTInst": 92,
    "llmbar-adver-GPTOut": 47,
    "llmbar-adver-manual": 46,
    "xstest-should-refuse": 154,
    "xstest-should-respond": 250,
    "donotanswer": 136,
    "hep-cpp": 164,
    "hep-go": 164,
    "hep-java": 164,
    "hep-js": 164,
    "hep-python": 164,
    "hep-rust": 164,
}


def rewardbench_sections(subset_accuracy: dict[str, float]) -> dict[str, float]:
    """RewardBench section scores from per-subset accuracies (subsets absent from the data are skipped,
    as RewardBench does); ``score`` is the mean of the sections present. Empty when no subset matches."""
    out: dict[str, float] = {}
    for section, subsets in REWARDBENCH_SECTIONS.items():
        present = [s for s in subsets if s in subset_accuracy]
        if present:
            total = sum(REWARDBENCH_WEIGHTS[s] for s in present)
            out[section] = sum(subset_accuracy[s] * REWARDBENCH_WEIGHTS[s] for s in present) / total
    if out:
        out["score"] = sum(out.values()) / len(out)
    return out


def expected_calibration_error(probs: Sequence[float], labels: Sequence[float], n_bins: int = 10) -> float:
    """``sum_b |B_b| / N * |mean(y in B_b) - mean(p in B_b)|`` over equal-width probability bins."""
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if p.size == 0:
        return float("nan")
    bins = np.clip((p * n_bins).astype(int), 0, n_bins - 1)  # p = 1 falls in the last bin
    total = 0.0
    for b in range(n_bins):
        sel = bins == b
        if sel.any():
            total += sel.sum() / p.size * abs(y[sel].mean() - p[sel].mean())
    return float(total)


def _auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    binary = labels >= 0.5
    if binary.all() or not binary.any():
        return None  # undefined with one class
    return float(roc_auc_score(binary.astype(int), scores))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -500, 500)))


def pairwise_metrics(
    chosen: Sequence[float], rejected: Sequence[float], *, n_bins: int = 10
) -> dict[str, Any]:
    """Accuracy, ROC-AUC, ECE, mean margin and count of one set of pairs."""
    c = np.asarray(chosen, dtype=np.float64)
    r = np.asarray(rejected, dtype=np.float64)
    if c.size == 0:
        return {"n": 0}
    diff = c - r
    p = _sigmoid(diff)
    return {
        "n": int(c.size),
        "accuracy": float((diff > 0).mean()),
        "roc_auc": _auc(np.concatenate([c, r]), np.concatenate([np.ones_like(c), np.zeros_like(r)])),
        "ece": expected_calibration_error(
            np.concatenate([p, 1 - p]), np.concatenate([np.ones_like(p), np.zeros_like(p)]), n_bins
        ),
        "mean_margin": float(diff.mean()),
        "mean_chosen": float(c.mean()),
        "mean_rejected": float(r.mean()),
    }


def pointwise_metrics(
    scores: Sequence[float], labels: Sequence[float], *, n_bins: int = 10
) -> dict[str, Any]:
    """Accuracy, ROC-AUC, ECE and count of pointwise scores against 0/1 (or soft) labels."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if s.size == 0:
        return {"n": 0}
    p = _sigmoid(s)
    return {
        "n": int(s.size),
        "accuracy": float(((p >= 0.5) == (y >= 0.5)).mean()),
        "roc_auc": _auc(s, y),
        "ece": expected_calibration_error(p, y, n_bins),
        "mean_score": float(s.mean()),
    }


def by_subset(
    kind: str,
    a: Sequence[float],
    b: Sequence[float],
    subsets: Sequence[str | None] | None,
    *,
    n_bins: int = 10,
) -> dict[str, Any]:
    """Overall metrics plus ``"subsets": {name: metrics}`` when any row has a subset.

    ``kind`` is ``"pairwise"`` (``a`` chosen, ``b`` rejected scores) or ``"pointwise"`` (``a`` scores,
    ``b`` labels).
    """
    fn = pairwise_metrics if kind == "pairwise" else pointwise_metrics
    out = fn(a, b, n_bins=n_bins)
    if subsets is not None and any(s is not None for s in subsets):
        groups: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(subsets):
            groups[str(s)].append(i)
        out["subsets"] = {
            name: fn([a[i] for i in idx], [b[i] for i in idx], n_bins=n_bins)
            for name, idx in sorted(groups.items())
        }
        if kind == "pairwise":
            sections = rewardbench_sections({k: v["accuracy"] for k, v in out["subsets"].items()})
            if sections:
                out["sections"] = sections
    return out


def evaluate_examples(
    rm: Any, examples: Sequence[dict[str, Any]], kind: str, *, n_bins: int = 10, progress: bool | None = False
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Scores tokenised examples (see :func:`.data.tokenize_rows`) with a :class:`.scoring.RewardModel`;
    returns ``(metrics, per-row scores)``. ``progress``: a bar of sequences scored (``None``: on a terminal)."""
    subsets = [e.get("subset") for e in examples]
    if kind == "pairwise":
        n = len(examples)
        sides = [e["chosen_ids"] for e in examples] + [e["rejected_ids"] for e in examples]
        scores = rm.score_ids(sides, progress=progress)
        chosen, rejected = scores[:n], scores[n:]
        rows = [
            {"chosen_score": c, "rejected_score": r, "subset": s}
            for c, r, s in zip(chosen, rejected, subsets, strict=True)
        ]
        return by_subset("pairwise", chosen, rejected, subsets, n_bins=n_bins), rows
    scores = rm.score_ids([e["input_ids"] for e in examples], progress=progress)
    labels = [e["label"] for e in examples]
    rows = [{"score": s, "label": y, "subset": g} for s, y, g in zip(scores, labels, subsets, strict=True)]
    return by_subset("pointwise", scores, labels, subsets, n_bins=n_bins), rows


def evaluate_reward_model(
    model: Any,
    data: str | Sequence[dict[str, Any]],
    *,
    tokenizer: Any | None = None,
    split: str | None = None,
    limit: int | None = None,
    max_length: int | None = None,
    use_chat_template: bool | None = None,
    n_bins: int = 10,
    group_by: str = "subset",
    progress: bool | None = False,
    **rm_kwargs: Any,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Evaluates a reward model (path or :class:`.scoring.RewardModel`) on pairwise or pointwise data.

    Inputs longer than ``max_length`` are cut from the left for scoring (nothing is dropped, unlike
    training). Metrics are also given per value of ``group_by`` (a row field, else a ``metadata`` key;
    ``subset`` by default, RewardBench's); ``progress``: a bar of sequences scored (``None``: on a terminal).
    Returns ``(metrics, per-row scores)``.
    """

    rows = load_rows(data, split=split, limit=limit) if isinstance(data, str) else list(data)
    rm = (
        model
        if isinstance(model, RewardModel)
        else RewardModel(
            model, tokenizer, use_chat_template=use_chat_template, max_length=max_length, **rm_kwargs
        )
    )
    kind = detect_kind(rows)
    examples, _ = tokenize_rows(
        rows, rm.tokenizer, kind=kind, use_chat_template=rm.use_chat_template, append_eos=rm.append_eos
    )
    if group_by != "subset":
        for example, row in zip(examples, rows, strict=True):
            value = row.get(group_by, (row.get("metadata") or {}).get(group_by))
            example.pop("subset", None)
            if value is not None:
                example["subset"] = str(value)
    if max_length:
        for e in examples:
            for key in ("chosen_ids", "rejected_ids", "input_ids"):
                if key in e and len(e[key]) > max_length:
                    e[key] = e[key][-max_length:]
    metrics, scored = evaluate_examples(rm, examples, kind, n_bins=n_bins, progress=progress)
    metrics["kind"] = kind
    return metrics, scored
