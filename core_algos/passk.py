"""Advantages for pass@k objectives: Pass@k Training's analytic advantages and verl's max-minus-second."""

from __future__ import annotations

from typing import Any

import torch

from rewardlab.core_algos.estimators import advantage_estimator

from .groups import group_stats
from .masked import _broadcast, _sequence_scores

Tensor = torch.Tensor


def _binom(n: Tensor, k: int) -> Tensor:
    """``C(n, k)`` elementwise for integer tensors ``n >= 0`` (0 where ``n < k``), in float64."""
    n = n.to(torch.float64)
    if k < 0:
        return torch.zeros_like(n)
    out = torch.ones_like(n)
    for j in range(k):
        out = out * (n - j) / (j + 1)
    return torch.where(n >= k, out, torch.zeros_like(out))


def passk_advantages(
    scores: Tensor, group_size: int, *, k: int = 4, valid: Tensor | None = None, eps: float = 1e-6
) -> Tensor:
    """Pass@k Training's analytic advantages (Chen et al., 2025, "Pass@k Training for Adaptively Balancing
    Exploration and Exploitation of Large Reasoning Models", sec. 3.3), one value per sample ``(B,)``.

    The group's reward is pass@k: the chance that ``k`` of its ``N`` samples, drawn without replacement,
    hold a correct one. With ``N_neg`` wrong samples the mean group reward over all ``C(N, k)`` subsets is
    ``R = 1 - C(N_neg, k) / C(N, k)`` with std ``s = sqrt(R (1 - R))``, and averaging each subset's
    normalised reward over the subsets that contain a sample gives

    * a correct sample: ``A_pos = (1 - R) / s``;
    * a wrong sample: ``A_neg = (1 - R - C(N_neg - 1, k - 1) / C(N - 1, k - 1)) / s``.

    Rewards are read as binary: a sample is correct when its reward is > 0 (0 and the truncation penalty are
    wrong). ``k`` larger than a group's valid count is cut to it; groups with all samples right or all wrong
    (``s = 0``) and invalid samples get 0. With ``k = 1`` this is GRPO with the population std.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    stats = group_stats(scores, group_size=group_size, valid=valid)
    members = stats.members
    positive = (stats.values > 0) & members
    n = stats.count.to(torch.float64)
    n_neg = (members & ~positive).sum(dim=1).to(torch.float64)
    kk = torch.clamp(n, max=k).to(torch.long)
    adv = torch.zeros(stats.values.shape, dtype=torch.float64)
    for kg in kk.unique().tolist():  # C(., k) is per k: one pass for each distinct group k
        if kg < 1:  # a group without valid samples
            continue
        rows = (kk == kg).nonzero().flatten()
        r_mean = 1 - _binom(n_neg[rows], kg) / _binom(n[rows], kg)
        std = (r_mean * (1 - r_mean)).clamp(min=0).sqrt()
        a_pos = (1 - r_mean) / (std + eps)
        a_neg = (1 - r_mean - _binom(n_neg[rows] - 1, kg - 1) / _binom(n[rows] - 1, kg - 1)) / (std + eps)
        a_neg = torch.where(n[rows] > 1, a_neg, torch.zeros_like(a_neg))
        values = torch.where(positive[rows], a_pos[:, None], a_neg[:, None])
        adv[rows] = torch.where((std > 0)[:, None], values, torch.zeros_like(values))
    adv = torch.where(members, adv, torch.zeros_like(adv))
    return adv.to(scores.dtype).reshape(-1)


@advantage_estimator("passk", centres_by_group=True, zero_on_equal_rewards=True)
def passk_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    k: int = 4,
    eps: float = 1e-6,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """Pass@k Training (Chen et al., 2025): :func:`passk_advantages` of the summed rewards, on every token."""
    scores = _sequence_scores(token_level_rewards, response_mask)
    adv = _broadcast(passk_advantages(scores, group_size, k=k, valid=valid, eps=eps), response_mask)
    return adv, adv


def max_minus_second_advantages(
    scores: Tensor, group_size: int, *, scale: str = "group", eps: float = 1e-6, valid: Tensor | None = None
) -> Tensor:
    """verl's ``grpo_passk`` (Tang et al., 2025, "Optimizing Language Models for Inference Time Objectives
    using Reinforcement Learning"): only the group's best sample is credited, with ``r_max - r_second``
    (divided by the group's std plus ``eps`` when ``scale="group"``); every other sample gets 0. Ties go to
    the first best sample; groups with fewer than two valid samples get 0. ``(B,)``."""
    if group_size < 2:
        return torch.zeros_like(scores)
    stats = group_stats(scores, group_size=group_size, valid=valid)
    big = torch.finfo(stats.values.dtype).max
    values = torch.where(stats.members, stats.values, torch.full_like(stats.values, -big))
    top, idx = torch.topk(values, 2, dim=1)
    gap = top[:, 0] - top[:, 1]
    if scale == "group":
        gap = gap / (stats.std + eps)
    gap = torch.where(stats.count >= 2, gap, torch.zeros_like(gap))
    adv = torch.zeros_like(stats.values)
    adv.scatter_(1, idx[:, :1], gap[:, None])
    return adv.reshape(-1)


@advantage_estimator("grpo_passk", centres_by_group=True, zero_on_equal_rewards=True)
def grpo_passk_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    scale: str = "group",
    eps: float = 1e-6,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """verl's ``grpo_passk``: :func:`max_minus_second_advantages`, on every token."""
    scores = _sequence_scores(token_level_rewards, response_mask)
    adv = _broadcast(
        max_minus_second_advantages(scores, group_size, scale=scale, eps=eps, valid=valid), response_mask
    )
    return adv, adv
