"""GDPO: multi-reward advantages that normalise each reward source within its group before summing."""

from __future__ import annotations

from typing import Any

import torch

from rewardlab.core_algos.estimators import advantage_estimator

from .advantages import group_normalized_advantages
from .masked import _broadcast, _sequence_scores

Tensor = torch.Tensor


def gdpo_advantages(
    source_rewards: Tensor,
    weights: Tensor,
    group_size: int,
    *,
    eps: float = 1e-6,
    valid: Tensor | None = None,
) -> Tensor:
    """GDPO (Liu et al., 2026, "GDPO: Group reward-Decoupled Normalization Policy Optimization for
    Multi-reward RL Optimization", sec. 3), one value per sample ``(B,)``.

    ``source_rewards`` is ``(B, K)``: each reward source's reward. Each source is normalised within the
    group on its own, ``A_k = (r_k - mean_g(r_k)) / (std_g(r_k) + eps)`` (0 where the group agrees on that
    source), the weighted sum ``A = sum_k w_k A_k`` is taken, and ``A`` is normalised over the batch's valid
    samples, ``(A - mean_B(A)) / (std_B(A) + eps)``. Summing first and normalising after (GRPO) lets the
    source with the largest spread decide the sign, and maps different reward combinations to one advantage.
    """
    per_source = torch.stack(
        [
            group_normalized_advantages(source_rewards[:, j], group_size, eps=eps, valid=valid)
            for j in range(source_rewards.shape[1])
        ],
        dim=1,
    )
    summed = per_source @ weights.to(per_source.dtype)
    v = torch.ones_like(summed, dtype=torch.bool) if valid is None else valid.bool()
    if v.sum() < 2:
        return torch.zeros_like(summed)
    mean = summed[v].mean()
    std = summed[v].std()
    return torch.where(v, (summed - mean) / (std + eps), torch.zeros_like(summed))


@advantage_estimator("gdpo", centres_by_group=True, needs_source_rewards=True)
def gdpo_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    source_rewards: Tensor | None = None,
    source_weights: Tensor | None = None,
    eps: float = 1e-6,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """GDPO: :func:`gdpo_advantages` of the per-source rewards, on every token. Without ``source_rewards``
    the summed token rewards are the one source."""
    if source_rewards is None:
        source_rewards = _sequence_scores(token_level_rewards, response_mask)[:, None]
    if source_weights is None:
        source_weights = torch.ones(source_rewards.shape[1])
    adv = gdpo_advantages(source_rewards, source_weights, group_size, eps=eps, valid=valid)
    adv = _broadcast(adv, response_mask)
    return adv, adv
