"""Rewards that may be missing, group statistics, DAPO's dynamic sampling (groups are contiguous)."""

from __future__ import annotations

import math

import torch

from rewardkit.rewardmodels.shaping.functional import group_stats

Tensor = torch.Tensor


def optional_rewards(
    rewards: list[float | None] | Tensor, dtype: torch.dtype = torch.float32
) -> tuple[Tensor, Tensor, int]:
    """Turns rewards that may be ``None`` / NaN into ``(rewards, valid, num_missing)``.

    A missing reward is *not* a reward: its entry becomes 0.0 (so no NaN reaches a loss) and ``valid`` is
    False, so that estimators leave it out of the group baseline and give it advantage 0, and
    :func:`apply_sample_mask` removes it from the loss. ``num_missing`` is what the loop logs.
    """
    if isinstance(rewards, Tensor):
        values = rewards.to(dtype)
    else:
        values = torch.tensor([math.nan if r is None else float(r) for r in rewards], dtype=dtype)
    valid = ~torch.isnan(values)
    return torch.nan_to_num(values, nan=0.0), valid, int((~valid).sum().item())


def apply_sample_mask(response_mask: Tensor, keep: Tensor) -> Tensor:
    """``response_mask * keep[:, None]``: removes whole samples (missing reward, masked truncation) from the loss."""
    return response_mask * keep.to(response_mask.dtype).unsqueeze(-1)


def _masked_group_stats(
    scores: Tensor, group_size: int, valid: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-group mean, unbiased std and "degenerate" flag (fewer than 2 valid members or all equal), of
    contiguous groups (:func:`rewardkit.rewardmodels.shaping.functional.group_stats`)."""
    stats = group_stats(scores, group_size=group_size, valid=valid)
    # Degenerate by exact equality, not std < tol: the mean of identical floats need not equal them
    # (0.1+0.1+0.1 != 0.3), and (r - mean) / (0 + eps) would then turn a rounding error into a huge advantage.
    return stats.mean, stats.std, stats.degenerate


def group_reward_std(scores: Tensor, group_size: int, valid: Tensor | None = None) -> Tensor:
    """Unbiased standard deviation of each group's rewards, ``(B // G,)`` (0 for degenerate groups)."""
    _, std, degenerate = _masked_group_stats(scores, group_size, valid)
    return torch.where(degenerate, torch.zeros_like(std), std)


def frac_zero_std_groups(scores: Tensor, group_size: int, valid: Tensor | None = None) -> float:
    """Fraction of groups whose rewards are all equal (TRL's ``frac_reward_zero_std``, per group not sample).

    These groups have advantage 0 under every group baseline: they contribute no policy gradient. A value of
    1.0 means the step trained on nothing; the loop logs it so that this is visible.
    """
    _, _, degenerate = _masked_group_stats(scores, group_size, valid)
    return float(degenerate.float().mean().item())


def dynamic_sampling_keep(
    scores: Tensor, group_size: int, valid: Tensor | None = None, min_std: float = 0.0
) -> Tensor:
    """DAPO's dynamic sampling filter (Yu et al., 2025): which groups to keep, ``(B // G,)`` bool.

    A group is kept when its reward **standard deviation** exceeds ``min_std`` (and it is not degenerate).
    Filtering on the std rather than on ``0 < mean < 1`` is what stays right for non-binary rewards: a group
    with rewards (0.3, 0.3, 0.3) has mean strictly inside (0, 1) yet carries no signal. Expand to samples with
    ``keep.repeat_interleave(group_size)``.
    """
    _, std, degenerate = _masked_group_stats(scores, group_size, valid)
    return (~degenerate) & (std > min_std)
