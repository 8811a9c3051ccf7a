"""PRM evaluation: step-level accuracy and F1, and ProcessBench's earliest-error metric.

ProcessBench (Zheng et al., 2024) asks for the index of the earliest wrong step of a solution, or -1 when
every step is right. A PRM predicts it as the first step whose score is below a threshold (0.5 by
default). The metric is the accuracy on the erroneous solutions (the exact index must match), the accuracy
on the correct ones (must say -1), and their harmonic mean, the reported F1.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from rewardlab.rewardmodels.prm.data import first_error


def predict_first_error(scores: Sequence[float], threshold: float = 0.5) -> int:
    """The first step scoring below ``threshold`` (NaN scores are skipped), or -1."""
    return first_error([None if s is None or math.isnan(s) else s for s in scores], threshold)


def processbench_metrics(predicted: Sequence[int], gold: Sequence[int]) -> dict[str, float]:
    """ProcessBench's metric from predicted and gold earliest-error indices (-1 = all steps right).

    Returns ``error_acc`` (accuracy on solutions with an error), ``correct_acc`` (on solutions without),
    ``f1`` (their harmonic mean, 0 when both are 0) and the two counts. A side with no samples has
    accuracy NaN and the F1 is then NaN too.
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} labels")
    err = [p == g for p, g in zip(predicted, gold, strict=False) if g >= 0]
    cor = [p == -1 for p, g in zip(predicted, gold, strict=False) if g < 0]
    error_acc = sum(err) / len(err) if err else math.nan
    correct_acc = sum(cor) / len(cor) if cor else math.nan
    if math.isnan(error_acc) or math.isnan(correct_acc):
        f1 = math.nan
    elif error_acc + correct_acc == 0:
        f1 = 0.0
    else:
        f1 = 2 * error_acc * correct_acc / (error_acc + correct_acc)
    return {
        "error_acc": error_acc,
        "correct_acc": correct_acc,
        "f1": f1,
        "n_error": len(err),
        "n_correct": len(cor),
    }


def step_metrics(
    scores: Sequence[Sequence[float]], labels: Sequence[Sequence[float | None] | None], threshold: float = 0.5
) -> dict[str, float]:
    """Step-level classification metrics over every labelled step.

    A step is predicted right when its score is at least ``threshold`` and is right when its label is at
    least 0.5 (soft labels are binarised there). Returns ``step_accuracy``; ``step_f1``, ``step_precision``,
    ``step_recall`` with the *wrong* step as the positive class (the thing a PRM must find);
    ``step_f1_correct`` with the right step as positive; ``step_auc`` (ROC-AUC of the scores, NaN when
    only one class is present); ``n_steps``.
    """
    from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

    y_true: list[int] = []
    y_score: list[float] = []
    for sc, lab in zip(scores, labels, strict=False):
        if lab is None:
            continue
        for s, y in zip(sc, lab, strict=False):
            if y is None or s is None or math.isnan(s):
                continue
            y_true.append(1 if y >= 0.5 else 0)
            y_score.append(float(s))
    if not y_true:
        return {"step_accuracy": math.nan, "step_f1": math.nan, "n_steps": 0}
    y_pred = [1 if s >= threshold else 0 for s in y_score]
    wrong_true = [1 - y for y in y_true]
    wrong_pred = [1 - y for y in y_pred]
    out = {
        "step_accuracy": sum(int(a == b) for a, b in zip(y_true, y_pred, strict=False)) / len(y_true),
        "step_f1": float(f1_score(wrong_true, wrong_pred, zero_division=0)),
        "step_precision": float(precision_score(wrong_true, wrong_pred, zero_division=0)),
        "step_recall": float(recall_score(wrong_true, wrong_pred, zero_division=0)),
        "step_f1_correct": float(f1_score(y_true, y_pred, zero_division=0)),
        "step_auc": float(roc_auc_score(y_true, y_score)) if len(set(y_true)) == 2 else math.nan,
        "n_steps": len(y_true),
    }
    return out


def evaluate_step_scores(
    scores: Sequence[Sequence[float]],
    examples: Sequence[Any],
    *,
    threshold: float = 0.5,
    group_by: str | None = None,
) -> dict[str, Any]:
    """Step metrics and ProcessBench metrics of ``scores`` against labelled ``examples``
    (:class:`~rewardlab.rewardmodels.prm.data.StepExample`), overall and by ``metadata[group_by]``."""

    def compute(idx: list[int]) -> dict[str, Any]:
        sc = [scores[i] for i in idx]
        labels = [examples[i].labels for i in idx]
        labelled = [i for i in idx if examples[i].labels is not None]
        out: dict[str, Any] = dict(step_metrics(sc, labels, threshold))
        predicted = [predict_first_error(scores[i], threshold) for i in labelled]
        gold = [examples[i].first_error(0.5) for i in labelled]
        out.update({f"processbench_{k}": v for k, v in processbench_metrics(predicted, gold).items()})
        out["n"] = len(idx)
        return out

    report: dict[str, Any] = compute(list(range(len(examples))))
    if group_by:
        groups: dict[str, list[int]] = defaultdict(list)
        for i, ex in enumerate(examples):
            key = ex.metadata.get(group_by)
            if key is not None:
                groups[str(key)].append(i)
        if groups:
            report["by_" + group_by] = {k: compute(v) for k, v in sorted(groups.items())}
    return report


__all__ = ["evaluate_step_scores", "predict_first_error", "processbench_metrics", "step_metrics"]
