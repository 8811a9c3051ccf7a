"""Group statistics and group normalisation (the one home of both: GRPO's advantages and reward shaping's
``group_norm`` call them), rewards that may be missing, DAPO's dynamic sampling."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

Tensor = torch.Tensor


def group_index(group: torch.Tensor, n: int) -> tuple[torch.Tensor, int]:
    """Each sample's group as ``0 .. G-1`` (in the order of the ids' sorted values), and ``G``."""
    group = torch.as_tensor(group)
    if group.dim() != 1 or group.numel() != n:
        raise ValueError(f"group ids must be a 1-D tensor of length {n}, got shape {tuple(group.shape)}")
    if n == 0:
        return torch.zeros(0, dtype=torch.long), 0
    _, inverse = torch.unique(group, return_inverse=True)
    return inverse, int(inverse.max().item()) + 1


def _contiguous_groups(values: torch.Tensor, group_size: int) -> torch.Tensor:
    """``values [B]`` as ``[B // G, G]``: samples ``g*G .. g*G + G - 1`` form group ``g`` (TRL's and verl's
    layout after ``repeat_interleave``)."""
    if values.dim() != 1:
        raise ValueError(f"scores must be 1-D (B,), got shape {tuple(values.shape)}")
    if group_size < 1 or values.numel() % group_size:
        raise ValueError(f"batch of {values.numel()} is not a whole number of groups of {group_size}")
    return values.view(-1, group_size)


def _masked_rowsum(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row sums over ``mask``; entries outside it add exactly 0 even when they hold inf/NaN."""
    return torch.where(mask, values, torch.zeros((), dtype=values.dtype, device=values.device)).sum(dim=1)


@dataclass(frozen=True)
class GroupStats:
    """Rewards laid out one group per row, and each group's statistics over its members.

    ``values`` and ``members`` are ``[G, W]`` (``W``: the largest group; padding and samples whose ``valid``
    is False are not members); ``count``, ``mean``, ``std`` (unbiased, as ``torch.std`` and TRL) and
    ``degenerate`` are ``[G]``. A group is degenerate when it has fewer than two members or all its members'
    rewards are equal: no group baseline can tell its samples apart.
    """

    values: torch.Tensor
    members: torch.Tensor
    count: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    degenerate: torch.Tensor
    index: tuple[torch.Tensor, torch.Tensor] | None
    """``(row, column)`` of each sample in ``values``; ``None`` for contiguous groups (row-major order)."""

    def to_samples(self, per_group: torch.Tensor) -> torch.Tensor:
        """A ``[G, W]`` tensor laid out like ``values`` back to one value per sample, ``[B]``."""
        if self.index is None:
            return per_group.reshape(-1)
        return per_group[self.index]


def group_stats(
    rewards: torch.Tensor,
    group: torch.Tensor | None = None,
    *,
    group_size: int | None = None,
    valid: torch.Tensor | None = None,
) -> GroupStats:
    """Per-group count, mean ``mu_g = sum_{i in g} r_i / n_g``, unbiased std
    ``sigma_g = sqrt(sum_{i in g} (r_i - mu_g)^2 / (n_g - 1))`` and degeneracy, in ``rewards``' dtype.

    Groups are given either by ids (``group [B]``, any values, any sizes, in any order; ``None``: the batch
    is one group) or by ``group_size`` (contiguous groups of ``G``). Samples with ``valid`` False are left
    out of every statistic.
    """
    rewards = torch.as_tensor(rewards)
    if group_size is not None:
        values = _contiguous_groups(rewards, group_size)
        members = torch.ones_like(values, dtype=torch.bool)
        if valid is not None:
            members = _contiguous_groups(valid.bool(), group_size)
        index = None
    else:
        n = rewards.numel()
        ids = group if group is not None else torch.zeros(n, dtype=torch.long, device=rewards.device)
        row, n_groups = group_index(ids, n)
        sizes = torch.bincount(row, minlength=n_groups)
        order = torch.argsort(row, stable=True)
        col = torch.empty_like(row)
        col[order] = torch.arange(n, device=row.device) - (sizes.cumsum(0) - sizes)[row[order]]
        width = max(int(sizes.max()) if n else 0, 1)
        values = rewards.new_zeros(n_groups, width)
        values[row, col] = rewards
        members = torch.zeros(n_groups, width, dtype=torch.bool, device=values.device)
        members[row, col] = True if valid is None else valid.bool()
        index = (row, col)
    count = members.sum(dim=1)
    mean = _masked_rowsum(values, members) / count.clamp(min=1)
    var = _masked_rowsum((values - mean[:, None]) ** 2, members) / (count - 1).clamp(min=1)
    big = torch.finfo(values.dtype).max
    gmax = torch.where(members, values, torch.full_like(values, -big)).amax(dim=1)
    gmin = torch.where(members, values, torch.full_like(values, big)).amin(dim=1)
    degenerate = (count < 2) | (gmax <= gmin)
    return GroupStats(values, members, count, mean, var.sqrt(), degenerate, index)


def group_normalize(
    rewards: torch.Tensor,
    group: torch.Tensor | None = None,
    *,
    group_size: int | None = None,
    scale_by_std: bool = True,
    std: torch.Tensor | float | None = None,
    eps: float = 1e-4,
    valid: torch.Tensor | None = None,
    degenerate: str = "keep",
    dtype: torch.dtype | None = torch.float64,
) -> torch.Tensor:
    """Group-relative rewards (GRPO / Dr. GRPO); the one implementation behind the ``group_norm`` shaping
    transform and GRPO's advantages (:func:`rewardlab.core_algos.group_normalized_advantages`).

    ``r'_i = (r_i - mean_g) / (std_g + eps)`` with ``scale_by_std=True`` (GRPO, Shao et al. 2024; std is
    the unbiased sample std, as ``torch.std`` and TRL compute it), or ``r'_i = r_i - mean_g`` with
    ``scale_by_std=False`` (Dr. GRPO, Liu et al. 2025, which drops the std because it up-weights
    too-easy and too-hard prompts). ``mean_g`` / ``std_g`` are over the (valid) samples sharing
    ``group[i]`` (see :func:`group_stats` for ``group`` / ``group_size``). What the callers differ in is
    explicit:

    * ``eps``: 1e-4 here and in TRL; GRPO's advantages pass verl's 1e-6.
    * ``std``: divide by this (e.g. the whole batch's std: REINFORCE++-baseline, TRL's
      ``scale_rewards="batch"``) instead of each group's own.
    * ``degenerate``: ``"keep"`` (shaping): a group of one sample keeps its raw reward (mean 0, std 1, no
      eps, as verl does), since no baseline exists; an all-equal group is normalised like any other.
      ``"zero"`` (advantages): a group with fewer than two valid samples or all-equal rewards gets exactly
      0, whatever the reward scale: the mean of identical floats need not equal them
      (0.1 + 0.1 + 0.1 != 0.3), and ``(r - mean) / (0 + eps)`` would turn the rounding error into a signal.
    * ``dtype``: the precision of the statistics (float64 for shaping; ``None``: the rewards' own, as the
      advantages keep).

    Samples with ``valid`` False are left out of the statistics and get 0.
    """
    if degenerate not in ("keep", "zero"):
        raise ValueError(f"unknown degenerate-group policy {degenerate!r} (known: keep, zero)")
    rewards = torch.as_tensor(rewards)
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    stats = group_stats(
        rewards if dtype is None else rewards.to(dtype), group, group_size=group_size, valid=valid
    )
    centred = stats.values - stats.mean[:, None]
    if scale_by_std:
        divisor = stats.std[:, None] if std is None else torch.as_tensor(std, dtype=centred.dtype)
        centred = centred / (divisor + eps)
    if degenerate == "zero":
        centred = torch.where(stats.degenerate[:, None], torch.zeros_like(centred), centred)
    else:
        centred = torch.where((stats.count <= 1)[:, None], stats.values, centred)
    out = stats.to_samples(centred)
    if valid is not None:
        out = torch.where(valid.bool(), out, torch.zeros_like(out))
    return out.to(out_dtype)


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
    contiguous groups (:func:`group_stats`)."""
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
