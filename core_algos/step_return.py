"""Step-level advantages from per-token (process) rewards: returns minus a group baseline of total returns."""

from __future__ import annotations

from typing import Any

import torch

from rewardlab.core_algos.estimators import advantage_estimator

from .groups import group_reward_std
from .returns import discounted_returns

Tensor = torch.Tensor


STEP_BASELINES = ("rloo", "mean", "none")
"""Baselines of :func:`step_return_advantages` (the config's ``algorithm.step_baseline``)."""


@advantage_estimator("step_return", centres_by_group=True)
def step_return_advantages(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    baseline: str = "rloo",
    scale: str = "none",
    gamma: float = 1.0,
    eps: float = 1e-6,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """Step-level advantages from token rewards: ``A_{i,t} = (G_{i,t} - b_i) / s``, ``(B, T)``.

    ``G_{i,t} = sum_{u >= t} gamma^(u-t) r_{i,u}`` is the return from token ``t`` (the sum of the future
    shaped step rewards and the success reward). The baseline uses the trajectories' total returns
    ``G_{j,0}`` in the group: ``rloo`` -- the mean over the other valid members (Kool et al., 2019);
    ``mean`` -- the group mean; ``none`` -- 0. ``scale="group"`` divides by the group's std of total returns
    plus ``eps`` (GRPO-style). Tokens of one step share the return of the step's end, so each step is
    credited with what follows it (DeepSeekMath's process-supervision GRPO, Shao et al., 2024, sec. 4.1.3,
    with a group baseline instead of per-step normalisation, which would break Clip's bound).
    Returns ``(advantages, returns)``. Samples with ``valid`` False get 0.
    """
    returns = discounted_returns(token_level_rewards, response_mask, gamma)
    totals = returns[:, 0] if returns.shape[1] else torch.zeros(returns.shape[0])
    # the return at the first *response* token (responses are right-padded: column 0)
    grouped = totals.view(-1, group_size)
    v = torch.ones_like(grouped, dtype=torch.bool) if valid is None else valid.bool().view(-1, group_size)
    n = v.sum(dim=1, keepdim=True)
    gsum = torch.where(v, grouped, torch.zeros_like(grouped)).sum(dim=1, keepdim=True)
    if baseline == "rloo":
        b = torch.where(n > 1, (gsum - grouped) / (n - 1).clamp(min=1), grouped)
    elif baseline == "mean":
        b = (gsum / n.clamp(min=1)).expand_as(grouped)
    elif baseline == "none":
        b = torch.zeros_like(grouped)
    else:
        raise ValueError(f"unknown baseline {baseline!r} (known: {', '.join(STEP_BASELINES)})")
    adv = returns - b.reshape(-1, 1)
    if scale == "group":
        std = group_reward_std(totals, group_size, valid)
        adv = adv / (std.repeat_interleave(group_size)[:, None] + eps)
    elif scale != "none":
        raise ValueError(f"unknown scale {scale!r} (known: none, group)")
    adv = adv * response_mask
    if valid is not None:
        adv = adv * valid.to(adv.dtype)[:, None]
    return adv, returns
