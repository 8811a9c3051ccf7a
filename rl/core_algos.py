"""The math of RL for language models as pure tensor functions, in registries (the shape of verl's ``core_algos``).

Nothing here touches a model, an optimizer or a config object: every function takes tensors and plain
numbers and returns tensors (and, for losses, a dict of float statistics). The training loop composes them.
Reward transforms (DAPO's overlong penalty and filtering, group normalisation, returns) have their one
implementation in :mod:`rewardkit.rewardmodels.shaping.functional`; the estimators here call it.

Shapes and conventions
----------------------
* ``B`` samples (completions), ``T`` response tokens (right-padded); ``response_mask`` is ``(B, T)`` with 1 on
  tokens that enter the loss. Groups are **contiguous**: samples ``g*G .. g*G+G-1`` answer the same prompt
  (TRL's and verl's layout after ``repeat_interleave``).
* ``valid`` (``(B,)`` bool, optional) marks samples whose reward exists; a sample whose reward source returned
  ``None`` is excluded from its group's statistics and gets advantage exactly 0 (and should be removed from
  the loss mask with :func:`apply_sample_mask`).
* Log-probabilities are per-token ``log pi(y_t | x, y_<t)``, ``(B, T)``.

Registries
----------
* :data:`ADVANTAGE_ESTIMATORS` -- ``grpo``, ``dr_grpo``, ``rloo``, ``reinforce_pp``, ``reinforce_pp_baseline``,
  ``gae``, ``step_return``, ``passk`` (Pass@k Training), ``grpo_passk`` (verl's max-minus-second), ``gdpo``
  (per-source normalisation), ``reinforce_signed`` (+1/-1, no baseline). Uniform signature ``fn(token_level_rewards, response_mask, **kw) -> (advantages, returns)``, both
  ``(B, T)``; outcome estimators sum the token rewards into one score per sample.
* :data:`POLICY_LOSSES` -- ``ppo`` (clipped surrogate, clip-higher, dual clip), ``gspo`` (sequence ratio),
  ``cispo`` (clipped importance weight).
* :data:`LOSS_AGG_MODES` -- ``token-mean``, ``seq-mean-token-mean``, ``seq-mean-token-sum``,
  ``seq-mean-token-sum-norm`` (Dr.GRPO's constant normaliser).
* :data:`KL_ESTIMATORS` -- ``k1``, ``k2``, ``k3`` (Schulman, "Approximating KL divergence", 2020).

Gradient accumulation
---------------------
Every aggregation takes ``global_num_tokens`` / ``global_num_seqs``: the token / sequence count of the whole
optimisation step (all accumulation micro-batches, all data-parallel ranks). Given these, the micro-batch
losses *sum* to the loss of the full batch, so ``loss.backward()`` per micro-batch with no further division
yields exactly the full-batch gradient, whatever the micro-batch lengths. Without them the count is the
micro-batch's own, which is right only when there is no accumulation. Use :func:`batch_counts` on the
whole step's masks to get the counts. Under DDP/FSDP (which *average* gradients over ranks) pass
``dp_size`` so that the average of the rank losses is the global loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from rewardkit.registry import Registry
from rewardkit.rewardmodels.shaping.functional import discounted_returns, group_normalize, group_stats

Tensor = torch.Tensor

ADVANTAGE_ESTIMATORS: Registry[Callable[..., tuple[Tensor, Tensor]]] = Registry("advantage estimator")
POLICY_LOSSES: Registry[Callable[..., PolicyLossOutput]] = Registry("policy loss")
LOSS_AGG_MODES: Registry[Callable[..., Tensor]] = Registry("loss aggregation mode")
KL_ESTIMATORS: Registry[Callable[[Tensor, Tensor], Tensor]] = Registry("KL estimator")

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "ADV_SCALES",
    "STEP_BASELINES",
    "AdvantageInputs",
    "IS_LEVELS",
    "KL_CONTROLLERS",
    "kl_controller",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "AdaptiveKLController",
    "FixedKLController",
    "PolicyLossOutput",
    "agg_loss",
    "apply_kl_penalty",
    "apply_sample_mask",
    "batch_counts",
    "compute_advantages",
    "compute_policy_loss",
    "gdpo_advantages",
    "max_minus_second_advantages",
    "passk_advantages",
    "reweight_advantages",
    "self_certainty",
    "discounted_returns",
    "dynamic_sampling_keep",
    "entropy_from_logits",
    "frac_zero_std_groups",
    "gae_advantages",
    "group_normalized_advantages",
    "group_reward_std",
    "kl_loss_term",
    "kl_penalty",
    "logprobs_from_logits",
    "masked_mean",
    "masked_whiten",
    "optional_rewards",
    "ppo_policy_loss",
    "ppo_value_loss",
    "rloo_advantages",
    "rollout_importance_weights",
]


# --------------------------------------------------------------------------------------------------------------
# Small masked helpers
# --------------------------------------------------------------------------------------------------------------


def masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """``sum(values * mask)``; positions outside the mask contribute exactly 0 even when ``values`` is inf/NaN."""
    zeros = torch.zeros((), dtype=values.dtype, device=values.device)
    masked = torch.where(mask.bool(), values, zeros)
    return masked.sum() if dim is None else masked.sum(dim=dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """``sum(values * mask) / max(sum(mask), 1)``."""
    denom = mask.sum() if dim is None else mask.sum(dim=dim)
    return masked_sum(values, mask, dim) / denom.clamp(min=1)


def masked_var(values: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Variance of the masked entries (Bessel-corrected when ``unbiased`` and more than one entry)."""
    mean = masked_mean(values, mask)
    var = masked_mean((values - mean) ** 2, mask)
    n = mask.sum()
    if unbiased and n > 1:
        var = var * n / (n - 1)
    return var


def masked_whiten(values: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Whitening over the masked entries: ``(x - mean) / sqrt(var + eps)`` (PPO's advantage normalisation).

    With ``shift_mean=False`` the mean is added back (only the scale changes). Entries outside the mask are
    returned as 0.
    """
    mean = masked_mean(values, mask)
    var = masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean
    return whitened * mask


def batch_counts(response_mask: Tensor) -> tuple[int, int]:
    """``(num_tokens, num_seqs)`` of a mask: the values to pass as ``global_num_tokens`` / ``global_num_seqs``.

    Call it on the whole optimisation step's mask (all micro-batches; all-reduce the two numbers across ranks
    under data parallelism). A sequence counts when it has at least one token in the mask, so samples removed
    from the loss (reward ``None``, masked truncation) do not dilute the sequence means.
    """
    mask = response_mask.bool()
    return int(mask.sum().item()), int(mask.any(dim=-1).sum().item())


def _sequence_scores(token_level_rewards: Tensor, response_mask: Tensor) -> Tensor:
    """One score per sample: the sum of its token rewards (outcome rewards sit on the last token)."""
    if token_level_rewards.dim() == 1:
        return token_level_rewards
    return masked_sum(token_level_rewards, response_mask, dim=-1)


# --------------------------------------------------------------------------------------------------------------
# Rewards that may be missing, group statistics, dynamic sampling
# --------------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------------
# Advantage estimators
# --------------------------------------------------------------------------------------------------------------


ADV_SCALES = ("group", "batch", "none")
"""The ``scale`` choices of :func:`group_normalized_advantages` (the config's ``algorithm.adv_scale``)."""


def group_normalized_advantages(
    scores: Tensor,
    group_size: int,
    *,
    scale: str = "group",
    eps: float = 1e-6,
    valid: Tensor | None = None,
) -> Tensor:
    """GRPO's outcome advantage (Shao et al., 2024, DeepSeekMath, sec. 4.1.2), one value per sample ``(B,)``.

    ``A_i = (r_i - mean(r_group)) / (std(r_group) + eps)`` with the unbiased std over the group.

    * ``scale="group"`` -- GRPO (the std of the sample's own group).
    * ``scale="batch"`` -- the std of the whole batch (Hu et al. 2025, REINFORCE++-baseline; TRL's
      ``scale_rewards="batch"``); the mean is still the group's.
    * ``scale="none"`` -- Dr.GRPO (Liu et al., 2025, "Understanding R1-Zero-Like Training"): ``r_i - mean``.

    ``eps``: 1e-6 as in verl (TRL uses 1e-4; pass it for parity). Groups whose valid rewards are all equal
    get advantage exactly 0 whatever the reward scale; invalid samples (``valid`` False) get 0 and are left out
    of the mean and std. The normalisation is the shaping one
    (:func:`rewardkit.rewardmodels.shaping.functional.group_normalize`) with these choices made explicit.
    """
    if scale not in ADV_SCALES:
        raise ValueError(f"unknown scale {scale!r} (known: {', '.join(ADV_SCALES)})")
    batch_std = None
    if scale == "batch":
        v = torch.ones_like(scores, dtype=torch.bool) if valid is None else valid.bool()
        batch_std = masked_var(scores, v).sqrt() if v.sum() > 1 else torch.zeros((), dtype=scores.dtype)
    return group_normalize(
        scores,
        group_size=group_size,
        scale_by_std=scale != "none",
        std=batch_std,
        eps=eps,
        valid=valid,
        degenerate="zero",
        dtype=None,
    )


def rloo_advantages(scores: Tensor, group_size: int, *, valid: Tensor | None = None) -> Tensor:
    """RLOO (Kool et al., 2019; Ahmadian et al., 2024): ``A_i = r_i - mean_{j != i} r_j`` over the group.

    Equal to ``G / (G - 1) * (r_i - mean(r))``. Invalid samples are left out of the baseline and get 0; a
    group with fewer than two valid samples (no leave-one-out baseline) or all-equal rewards gets 0.
    """
    stats = group_stats(scores, group_size=group_size, valid=valid)
    grouped, v = stats.values, stats.members
    total = masked_sum(grouped, v, dim=1)[:, None]
    baseline = (total - grouped) / (stats.count[:, None] - 1).clamp(min=1)
    adv = grouped - baseline
    adv = torch.where(stats.degenerate[:, None] | ~v, torch.zeros_like(adv), adv)
    return adv.reshape(-1)


def _broadcast(adv: Tensor, response_mask: Tensor) -> Tensor:
    return adv.unsqueeze(-1) * response_mask


@ADVANTAGE_ESTIMATORS.register("grpo")
def grpo_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    eps: float = 1e-6,
    scale: str = "group",
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """GRPO: :func:`group_normalized_advantages` of the summed rewards, broadcast to every response token.

    Returns ``(advantages, returns)``, both ``(B, T)`` and equal (there is no value function).
    """
    scores = _sequence_scores(token_level_rewards, response_mask)
    adv = _broadcast(
        group_normalized_advantages(scores, group_size, scale=scale, eps=eps, valid=valid), response_mask
    )
    return adv, adv


@ADVANTAGE_ESTIMATORS.register("dr_grpo")
def dr_grpo_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """Dr.GRPO (Liu et al., 2025): ``A_i = r_i - mean(r_group)``, no std division (it biases toward easy and
    hard questions); broadcast to tokens. Pair with the ``seq-mean-token-sum-norm`` aggregation."""
    scores = _sequence_scores(token_level_rewards, response_mask)
    adv = _broadcast(
        group_normalized_advantages(scores, group_size, scale="none", valid=valid), response_mask
    )
    return adv, adv


@ADVANTAGE_ESTIMATORS.register("rloo")
def rloo_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """RLOO: :func:`rloo_advantages` of the summed rewards, broadcast to every response token."""
    scores = _sequence_scores(token_level_rewards, response_mask)
    adv = _broadcast(rloo_advantages(scores, group_size, valid=valid), response_mask)
    return adv, adv


@ADVANTAGE_ESTIMATORS.register("reinforce_pp")
def reinforce_pp_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    gamma: float = 1.0,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """REINFORCE++ (Hu et al., 2025): returns ``G_t = sum_{s>=t} gamma^(s-t) r_s``, whitened over the batch.

    The KL to the reference belongs in the token rewards (``r_t = score_t - beta * KL_t``, see
    :func:`apply_kl_penalty`); the advantage is ``(G_t - mean(G)) / std(G)`` over all response tokens of the
    batch (global, not per group). Returns ``(advantages, returns)``.
    """
    mask = response_mask if valid is None else apply_sample_mask(response_mask, valid)
    returns = discounted_returns(token_level_rewards, mask, gamma)
    return masked_whiten(returns, mask), returns


@ADVANTAGE_ESTIMATORS.register("reinforce_pp_baseline")
def reinforce_pp_baseline_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """REINFORCE++-baseline (Hu et al., 2025): subtract the group mean of the score, then whiten over the batch."""
    scores = _sequence_scores(token_level_rewards, response_mask)
    centered = group_normalized_advantages(scores, group_size, scale="none", valid=valid)
    mask = response_mask if valid is None else apply_sample_mask(response_mask, valid)
    adv = _broadcast(centered, mask)
    return masked_whiten(adv, mask), adv


@ADVANTAGE_ESTIMATORS.register("gae")
def gae_advantages(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    values: Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
    whiten: bool = True,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al., 2016) for PPO with a value model.

    ``delta_t = r_t + gamma V_{t+1} - V_t``; ``A_t = delta_t + gamma lam A_{t+1}``; ``returns = A + V``
    (computed before whitening). The value after the last response token is 0. Masked (padding) tokens are
    skipped: the recursion carries across them. ``gamma = lam = 1`` are verl's defaults for LLMs (the PPO
    paper's 0.99 / 0.95 are for Atari/MuJoCo); ``whiten`` normalises the advantages over the batch.
    """
    mask = response_mask.to(token_level_rewards.dtype)
    next_value = torch.zeros_like(token_level_rewards[:, 0])
    last_gae = torch.zeros_like(next_value)
    advantages = torch.zeros_like(token_level_rewards)
    for t in reversed(range(token_level_rewards.shape[-1])):
        delta = token_level_rewards[:, t] + gamma * next_value - values[:, t]
        gae = delta + gamma * lam * last_gae
        m = mask[:, t]
        # Padding positions neither update the recursion nor the bootstrap value.
        last_gae = m * gae + (1 - m) * last_gae
        next_value = m * values[:, t] + (1 - m) * next_value
        advantages[:, t] = last_gae
    returns = (advantages + values) * mask
    advantages = masked_whiten(advantages, mask) if whiten else advantages * mask
    return advantages, returns


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


@ADVANTAGE_ESTIMATORS.register("passk")
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


@ADVANTAGE_ESTIMATORS.register("grpo_passk")
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


@ADVANTAGE_ESTIMATORS.register("gdpo")
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


@ADVANTAGE_ESTIMATORS.register("reinforce_signed")
def reinforce_signed_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    valid: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """REINFORCE on +1 / -1 rewards with no baseline (Zhu et al., 2025, "The Surprising Effectiveness of
    Negative Reinforcement in LLM Reasoning", sec. 2): ``A = +1`` for a correct sample (reward > 0), ``-1``
    for a wrong one. With :func:`reweight_advantages` this is their PSR (negative weight 0), NSR (positive
    weight 0) and W-REINFORCE (positive weight 0.1)."""
    scores = _sequence_scores(token_level_rewards, response_mask)
    adv = torch.where(scores > 0, torch.ones_like(scores), -torch.ones_like(scores))
    if valid is not None:
        adv = torch.where(valid.bool(), adv, torch.zeros_like(adv))
    adv = _broadcast(adv, response_mask)
    return adv, adv


def reweight_advantages(
    advantages: Tensor, *, positive_weight: float = 1.0, negative_weight: float = 1.0
) -> Tensor:
    """Positive / negative sample reinforcement (Zhu et al., 2025): ``A' = w_pos A`` where ``A > 0`` (the
    sample is reinforced) and ``w_neg A`` where ``A < 0`` (it is suppressed). W-REINFORCE is ``w_pos = 0.1,
    w_neg = 1``; NSR alone is ``w_pos = 0``."""
    return torch.where(advantages > 0, advantages * positive_weight, advantages * negative_weight)


def self_certainty(logits: Tensor, mask: Tensor) -> Tensor:
    """Self-certainty of each sample (Kang et al., 2025, "Scalable Best-of-N Selection for Large Language
    Models via Self-Certainty"; the reward of INTUITOR, Zhao et al., 2025, "Learning to Reason without
    External Rewards"), ``(B,)``.

    The mean over the sample's tokens of ``KL(U || p_t) = -log |V| - (1/|V|) sum_j log p_t(j)``: how far
    each next-token distribution is from uniform. ``logits`` is ``(B, T, V)`` (the logits that predict each
    response token), ``mask`` ``(B, T)``.
    """
    logp = torch.log_softmax(_upcast(logits), dim=-1)
    vocab = logits.shape[-1]
    per_token = -math.log(vocab) - logp.mean(dim=-1)
    return masked_mean(per_token, mask, dim=-1)


STEP_BASELINES = ("rloo", "mean", "none")
"""Baselines of :func:`step_return_advantages` (the config's ``algorithm.step_baseline``)."""


@ADVANTAGE_ESTIMATORS.register("step_return")
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


def compute_advantages(
    name: str, token_level_rewards: Tensor, response_mask: Tensor, **kwargs: Any
) -> tuple[Tensor, Tensor]:
    """Dispatches to ``ADVANTAGE_ESTIMATORS[name]``; returns ``(advantages, returns)``, both ``(B, T)``."""
    return ADVANTAGE_ESTIMATORS.get(name)(token_level_rewards, response_mask, **kwargs)


@dataclass
class AdvantageInputs:
    """Everything an advantage estimator may read. Each estimator takes the fields it needs (and ignores the
    rest), so a new estimator is one registered function: the loop builds this once, the same way, for all."""

    token_level_rewards: Tensor
    """``(B, T)`` rewards on response tokens (the outcome on the last token, step rewards, KL in reward)."""
    response_mask: Tensor
    """``(B, T)`` 1 on the tokens that enter the loss."""
    group_size: int = 1
    """Samples per prompt (groups are contiguous)."""
    valid: Tensor | None = None
    """``(B,)`` samples that count in group statistics (a missing reward or a masked sample does not)."""
    values: Tensor | None = None
    """``(B, T)`` the critic's values (GAE)."""
    gamma: float = 1.0
    """Discount."""
    lam: float = 1.0
    """GAE lambda."""
    eps: float = 1e-6
    """Added to a std before dividing by it."""
    scale: str = "group"
    """Which std scales a group-centred advantage (:data:`ADV_SCALES`)."""
    baseline: str = "rloo"
    """``step_return``'s baseline (:data:`STEP_BASELINES`)."""
    k: int = 4
    """``passk``: the k of the pass@k the advantages optimise."""
    source_rewards: Tensor | None = None
    """``(B, K)`` each reward source's reward (``gdpo``)."""
    source_weights: Tensor | None = None
    """``(K,)`` the sources' weights (``gdpo``)."""

    def estimate(self, name: str) -> tuple[Tensor, Tensor]:
        """``(advantages, returns)`` of the estimator ``name``."""
        options = {f.name: getattr(self, f.name) for f in fields(self)[2:]}
        return compute_advantages(name, self.token_level_rewards, self.response_mask, **options)


# --------------------------------------------------------------------------------------------------------------
# Loss aggregation (accumulation-correct)
# --------------------------------------------------------------------------------------------------------------


@LOSS_AGG_MODES.register("token-mean")
def _agg_token_mean(loss_mat, mask, *, global_num_tokens=None, global_num_seqs=None, max_len=None):
    """``sum_{i,t} l_it / N_tokens`` (DAPO; TRL ``bnpo``/``dapo``). Every token weighs the same."""
    denom = mask.sum() if global_num_tokens is None else global_num_tokens
    return masked_sum(loss_mat, mask) / max(float(denom), 1.0)


@LOSS_AGG_MODES.register("seq-mean-token-mean")
def _agg_seq_mean_token_mean(loss_mat, mask, *, global_num_tokens=None, global_num_seqs=None, max_len=None):
    """``(1 / N_seqs) sum_i (1 / |y_i|) sum_t l_it`` (GRPO paper; TRL ``grpo``). Each sequence weighs the same."""
    lengths = mask.sum(dim=-1)
    per_seq = masked_sum(loss_mat, mask, dim=-1) / lengths.clamp(min=1)
    denom = (lengths > 0).sum() if global_num_seqs is None else global_num_seqs
    return per_seq.sum() / max(float(denom), 1.0)


@LOSS_AGG_MODES.register("seq-mean-token-sum")
def _agg_seq_mean_token_sum(loss_mat, mask, *, global_num_tokens=None, global_num_seqs=None, max_len=None):
    """``(1 / N_seqs) sum_i sum_t l_it``: each token weighs the same, sequences are not length-normalised."""
    lengths = mask.sum(dim=-1)
    denom = (lengths > 0).sum() if global_num_seqs is None else global_num_seqs
    return masked_sum(loss_mat, mask) / max(float(denom), 1.0)


@LOSS_AGG_MODES.register("seq-mean-token-sum-norm")
def _agg_seq_mean_token_sum_norm(
    loss_mat, mask, *, global_num_tokens=None, global_num_seqs=None, max_len=None
):
    """Dr.GRPO (Liu et al., 2025): ``sum_{i,t} l_it / (N_seqs * L_max)`` with a constant ``L_max`` (TRL
    ``dr_grpo`` divides by ``B * max_completion_length``). Free of the length bias of per-sequence means.

    ``N_seqs`` counts every sample of the step (also those masked out: the normaliser is a constant), and
    ``max_len`` defaults to the mask's width.
    """
    L = loss_mat.shape[-1] if max_len is None else max_len
    n = loss_mat.shape[0] if global_num_seqs is None else global_num_seqs
    return masked_sum(loss_mat, mask) / (max(float(n), 1.0) * float(L))


def agg_loss(
    loss_mat: Tensor,
    response_mask: Tensor,
    mode: str = "token-mean",
    *,
    global_num_tokens: float | int | Tensor | None = None,
    global_num_seqs: float | int | Tensor | None = None,
    max_len: int | None = None,
    dp_size: int = 1,
) -> Tensor:
    """Aggregates a per-token loss ``(B, T)`` into a scalar with one of :data:`LOSS_AGG_MODES`.

    ``global_num_tokens`` / ``global_num_seqs``: counts of the *whole optimisation step* (see the module
    docstring and :func:`batch_counts`). With them, summing the losses of the accumulation micro-batches gives
    the full-batch loss exactly, so the accumulated gradient equals the full-batch gradient. Note: for
    ``seq-mean-token-sum-norm`` pass the total number of samples of the step, masked ones included.
    ``dp_size``: world size when gradients are averaged across data-parallel ranks (the loss is multiplied by
    it so that the average over ranks is the global loss).
    """
    fn = LOSS_AGG_MODES.get(mode)
    loss = fn(
        loss_mat,
        response_mask,
        global_num_tokens=global_num_tokens,
        global_num_seqs=global_num_seqs,
        max_len=max_len,
    )
    return loss * dp_size if dp_size != 1 else loss


# --------------------------------------------------------------------------------------------------------------
# KL, entropy, log-probs
# --------------------------------------------------------------------------------------------------------------


@KL_ESTIMATORS.register("k1")
def kl_k1(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k1 = ``log pi - log pi_ref`` (unbiased for KL(pi || ref) under samples of pi, high variance, can be < 0)."""
    return log_prob - ref_log_prob


@KL_ESTIMATORS.register("k2")
def kl_k2(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k2 = ``0.5 (log pi - log pi_ref)^2`` (biased, low variance; its gradient is the true KL gradient's)."""
    return 0.5 * (log_prob - ref_log_prob) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k3 = ``exp(log ref - log pi) - (log ref - log pi) - 1`` (unbiased, >= 0, low variance; GRPO's and TRL's)."""
    d = ref_log_prob - log_prob
    return torch.exp(d) - d - 1


KL_ESTIMATORS.register("kl", kl_k1)
KL_ESTIMATORS.register("mse", kl_k2)
KL_ESTIMATORS.register("low_var_kl", kl_k3)


def kl_penalty(
    log_prob: Tensor, ref_log_prob: Tensor, kind: str = "k3", clamp: float | None = None
) -> Tensor:
    """Per-token KL estimate ``(B, T)`` between the policy and the reference (Schulman 2020's k1/k2/k3).

    ``clamp`` bounds the estimate to ``[-clamp, clamp]`` (verl clamps k3 at 10 for stability; TRL does not).
    """
    kl = KL_ESTIMATORS.get(kind)(log_prob, ref_log_prob)
    return kl.clamp(-clamp, clamp) if clamp is not None else kl


def kl_loss_term(
    log_prob: Tensor,
    ref_log_prob: Tensor,
    *,
    kind: str = "k3",
    old_log_prob: Tensor | None = None,
    ratio_corrected: bool = False,
    clamp: float | None = None,
) -> Tensor:
    """Per-token KL term for the loss (GRPO: ``loss += beta * agg(KL)``), ``(B, T)``, differentiable.

    With ``ratio_corrected`` the estimate is multiplied by the (differentiable) ratio
    ``pi / pi_old = exp(log pi - log pi_old)``: DeepSeek-V3.2's unbiased reverse-KL gradient for
    off-policy samples (TRL's ``use_bias_correction_kl``, on by default in trl >= 1.x). It changes the gradient
    even on-policy, where the ratio's value is 1.
    """
    kl = kl_penalty(log_prob, ref_log_prob, kind, clamp=clamp)
    if ratio_corrected:
        if old_log_prob is None:
            raise ValueError("ratio_corrected needs old_log_prob")
        kl = kl * torch.exp(log_prob - old_log_prob)
    return kl


def apply_kl_penalty(
    token_level_scores: Tensor,
    log_prob: Tensor,
    ref_log_prob: Tensor,
    response_mask: Tensor,
    beta: float,
    kind: str = "k1",
) -> tuple[Tensor, dict[str, float]]:
    """KL in the reward (Ziegler et al., 2019; REINFORCE++, PPO-RLHF): ``r_t = score_t - beta * KL_t``.

    The KL is detached: it shapes the reward, the gradient comes through the advantages. Returns the token
    rewards and ``{"kl": mean KL over response tokens, "kl_coef": beta}``.
    """
    kl = kl_penalty(log_prob.detach(), ref_log_prob.detach(), kind) * response_mask
    rewards = token_level_scores - beta * kl
    return rewards, {"kl": float(masked_mean(kl, response_mask).item()), "kl_coef": float(beta)}


@dataclass
class FixedKLController:
    """Constant KL coefficient."""

    value: float = 0.0
    """The coefficient beta."""

    def update(self, current_kl: float, n_steps: int) -> None:
        """No-op (the coefficient is fixed)."""


@dataclass
class AdaptiveKLController:
    """Adaptive KL coefficient (Ziegler et al., 2019, sec. 2.2): drives the observed KL toward ``target``.

    ``beta <- beta * (1 + clip((KL / target) - 1, -0.2, 0.2) * n_steps / horizon)``.
    """

    value: float = 0.1
    """Initial coefficient."""
    target: float = 6.0
    """Target KL (nats per sequence in the paper)."""
    horizon: int = 10000
    """Horizon in samples over which the error is corrected."""

    def update(self, current_kl: float, n_steps: int) -> None:
        """Updates ``value`` from the KL measured over ``n_steps`` samples."""
        error = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon


KL_CONTROLLERS: dict[str, type] = {"fixed": FixedKLController, "adaptive": AdaptiveKLController}
"""KL coefficient controllers by name (the config's ``algorithm.kl_ctrl``)."""


def kl_controller(kind: str, coef: float, *, target: float, horizon: int) -> Any:
    """The KL controller ``kind`` (:data:`KL_CONTROLLERS`) starting at ``coef``."""
    if kind == "fixed":
        return FixedKLController(value=coef)
    if kind == "adaptive":
        return AdaptiveKLController(value=coef, target=target, horizon=horizon)
    raise ValueError(f"unknown KL controller {kind!r} (known: {', '.join(KL_CONTROLLERS)})")


def _upcast(logits: Tensor) -> Tensor:
    # bf16/fp16 log-softmax loses digits that the ratio exp(log pi - log pi_old) amplifies; float64 stays.
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def logprobs_from_logits(logits: Tensor, labels: Tensor, temperature: float = 1.0) -> Tensor:
    """``log softmax(logits / temperature)[labels]``, ``(B, T)``; half precision is upcast to float32."""
    logits = _upcast(logits)
    if temperature != 1.0:
        logits = logits / temperature
    logp = logits.log_softmax(dim=-1)
    return torch.gather(logp, -1, labels.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Per-position entropy ``H = logsumexp(z) - sum softmax(z) z`` of ``softmax(logits / temperature)``."""
    logits = _upcast(logits)
    if temperature != 1.0:
        logits = logits / temperature
    p = logits.softmax(dim=-1)
    return torch.logsumexp(logits, dim=-1) - (p * logits).sum(dim=-1)


# --------------------------------------------------------------------------------------------------------------
# Rollout / trainer mismatch: truncated importance sampling and sequence masking
# --------------------------------------------------------------------------------------------------------------


IS_LEVELS = ("token", "sequence")
"""The ``level`` choices of :func:`rollout_importance_weights` (the config's ``algorithm.rollout_is``)."""


def rollout_importance_weights(
    old_log_prob: Tensor,
    rollout_log_prob: Tensor,
    response_mask: Tensor,
    *,
    cap: float = 2.0,
    level: str = "token",
    mask_outside: bool = False,
    seq_ratio: str = "product",
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """Correction for the gap between the sampler (e.g. vLLM) and the trainer's own log-probabilities.

    The rollout samples from ``mu`` (its kernels, bf16, top-p renormalisation) while the loss assumes
    ``pi_old`` (recomputed by the trainer, the default). Truncated importance sampling (Yao et al., 2025,
    "Your efficient RL framework secretly brings you off-policy RL training"; Espeholt et al., 2018, IMPALA)
    multiplies the per-token loss by the detached weight ``w = min(pi_old / mu, C)``:

    * ``level="token"``: ``w_t = min(exp(log pi_old_t - log mu_t), C)``.
    * ``level="sequence"``: one weight per sample, ``min(rho(y), C)`` with ``rho(y) = prod_t pi_old_t / mu_t``
      (``seq_ratio="product"``, the exact sequence likelihood ratio) or its per-token geometric mean
      (``seq_ratio="geometric"``), broadcast to the tokens.

    ``mask_outside``: sequence-level masking (rejection): samples whose sequence ratio ``rho`` leaves
    ``[1/C, C]`` are removed from the loss (returned ``keep`` is False).

    Returns ``(weights (B, T), keep (B,), stats)`` with ``stats`` =
    ``rollout_is/ratio_mean, ratio_min, ratio_max`` (token ratio over response tokens),
    ``rollout_is/seq_ratio_mean``, ``rollout_is/masked_frac`` (fraction of samples masked) and
    ``rollout_is/truncated_frac`` (fraction of weights that hit the cap).
    """
    mask = response_mask.bool()
    log_ratio = torch.where(mask, (old_log_prob - rollout_log_prob).detach(), torch.zeros_like(old_log_prob))
    log_ratio = log_ratio.clamp(-20.0, 20.0)
    token_ratio = torch.exp(log_ratio)
    seq_log = log_ratio.sum(dim=-1)
    if seq_ratio == "geometric":
        seq_log = seq_log / mask.sum(dim=-1).clamp(min=1)
    elif seq_ratio != "product":
        raise ValueError(f"unknown seq_ratio {seq_ratio!r} (known: product, geometric)")
    seq_rho = torch.exp(seq_log.clamp(-20.0, 20.0))
    if level == "token":
        raw = token_ratio
    elif level == "sequence":
        raw = seq_rho.unsqueeze(-1).expand_as(token_ratio)
    else:
        raise ValueError(f"unknown level {level!r} (known: {', '.join(IS_LEVELS)})")
    weights = raw.clamp(max=cap) * response_mask
    if mask_outside:
        # In log space with a float32-rounding tolerance, so a ratio of exactly C or 1/C stays inside.
        keep = seq_log.abs() <= math.log(cap) + 1e-5
    else:
        keep = torch.ones_like(seq_rho, dtype=torch.bool)
    has_tokens = mask.any(dim=-1)
    ratios = token_ratio[mask]
    stats = {
        "rollout_is/ratio_mean": float(ratios.mean().item()) if ratios.numel() else 1.0,
        "rollout_is/ratio_min": float(ratios.min().item()) if ratios.numel() else 1.0,
        "rollout_is/ratio_max": float(ratios.max().item()) if ratios.numel() else 1.0,
        "rollout_is/seq_ratio_mean": float(seq_rho[has_tokens].mean().item()) if has_tokens.any() else 1.0,
        "rollout_is/masked_frac": float(
            (~keep & has_tokens).float().sum().item() / max(int(has_tokens.sum()), 1)
        ),
        "rollout_is/truncated_frac": float(masked_mean((raw > cap).float(), response_mask).item()),
    }
    return weights, keep, stats


# --------------------------------------------------------------------------------------------------------------
# Policy losses
# --------------------------------------------------------------------------------------------------------------


@dataclass
class PolicyLossOutput:
    """What a policy loss returns."""

    loss: Tensor
    """The aggregated scalar loss (to call ``backward`` on)."""
    per_token_loss: Tensor
    """The loss per token before aggregation, ``(B, T)`` (0 outside the mask)."""
    stats: dict[str, float] = field(default_factory=dict)
    """Float metrics: ``clip_ratio/low_mean``, ``clip_ratio/high_mean``, ``clip_ratio/region_mean``,
    ``clip_ratio/dual_mean``, ``approx_kl`` (k3 of old vs new, masked token mean)."""


def _ppo_surrogate(
    log_ratio: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float | None,
) -> tuple[Tensor, dict[str, float]]:
    ratio = torch.exp(log_ratio)
    clipped = ratio.clamp(1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    loss1 = -advantages * ratio
    loss2 = -advantages * clipped
    loss = torch.maximum(loss1, loss2)
    dual = torch.zeros_like(loss, dtype=torch.bool)
    if clip_ratio_c is not None:
        if clip_ratio_c <= 1.0:
            raise ValueError(f"dual-clip constant c must be > 1, got {clip_ratio_c}")
        # Dual clip (Ye et al., 2020): for A < 0 the loss is also bounded by -c * A, so a huge ratio on a bad
        # token cannot produce an unbounded update.
        loss3 = -advantages * clip_ratio_c
        dual = (advantages < 0) & (loss > loss3)
        loss = torch.where(advantages < 0, torch.minimum(loss, loss3), loss)
    # TRL's definitions: "low" = clipped from below with a negative advantage, "high" = above with a positive.
    with torch.no_grad():
        low = (ratio < 1.0 - clip_ratio_low) & (advantages < 0)
        high = (ratio > 1.0 + clip_ratio_high) & (advantages > 0)
        stats = {
            "clip_ratio/low_mean": float(masked_mean(low.float(), response_mask).item()),
            "clip_ratio/high_mean": float(masked_mean(high.float(), response_mask).item()),
            "clip_ratio/region_mean": float(masked_mean((low | high).float(), response_mask).item()),
            "clip_ratio/dual_mean": float(masked_mean(dual.float(), response_mask).item()),
        }
    return loss, stats


@POLICY_LOSSES.register("ppo")
def ppo_policy_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float | None = None,
    ratio_level: str = "token",
    loss_agg_mode: str = "token-mean",
    is_weights: Tensor | None = None,
    global_num_tokens: float | int | Tensor | None = None,
    global_num_seqs: float | int | Tensor | None = None,
    max_len: int | None = None,
    dp_size: int = 1,
) -> PolicyLossOutput:
    """PPO's clipped surrogate (Schulman et al., 2017) with DAPO's clip-higher and an optional dual clip.

    ``r_t = exp(log pi_t - log pi_old_t)``;
    ``l_t = -min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t)``;
    with dual clip (Ye et al., 2020, c > 1): ``l_t = min(l_t, -c A_t)`` where ``A_t < 0``. (TRL's ``delta``,
    INTELLECT-2's two-sided clipping, is the same loss as a dual clip with ``c = delta`` when
    ``delta > 1 + eps_high``.)

    * ``clip_ratio_low`` / ``clip_ratio_high``: eps_low / eps_high. PPO/GRPO use 0.2 / 0.2; DAPO (Yu et al.,
      2025) decouples them, 0.2 / 0.28, so that low-probability tokens can rise (against entropy collapse).
    * ``ratio_level="sequence"``: GSPO (Zheng et al., 2025): ``s_i = exp(mean_t (log pi_t - log pi_old_t))``,
      one ratio per sequence, clipped and broadcast to its tokens (use eps ~ 3e-4 / 4e-4 and
      ``seq-mean-token-mean``, the GSPO paper's setting; see :func:`gspo_policy_loss`).
    * ``is_weights``: detached rollout-correction weights ``(B, T)`` from :func:`rollout_importance_weights`,
      multiplied into the per-token loss (TRL multiplies ``per_token_loss`` the same way).
    * ``loss_agg_mode`` and the ``global_*`` counts: see :func:`agg_loss`.

    The advantages are per token ``(B, T)`` or per sample ``(B,)``.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    log_ratio = log_prob - old_log_prob
    mask_f = response_mask.to(log_prob.dtype)
    if ratio_level == "sequence":
        seq = masked_sum(log_ratio, response_mask, dim=-1) / mask_f.sum(dim=-1).clamp(min=1)
        log_ratio = seq.unsqueeze(-1).expand_as(log_prob)
    elif ratio_level != "token":
        raise ValueError(f"unknown ratio_level {ratio_level!r} (known: token, sequence)")
    # Masked positions may hold garbage log-probs (padding); keep them out of exp() so no inf/NaN reaches the
    # gradient through the 0 * inf of a mask multiplication.
    log_ratio = torch.where(response_mask.bool(), log_ratio, torch.zeros_like(log_ratio))
    per_token, stats = _ppo_surrogate(
        log_ratio, advantages, response_mask, clip_ratio_low, clip_ratio_high, clip_ratio_c
    )
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    per_token = per_token * mask_f
    loss = agg_loss(
        per_token,
        response_mask,
        loss_agg_mode,
        global_num_tokens=global_num_tokens,
        global_num_seqs=global_num_seqs,
        max_len=max_len,
        dp_size=dp_size,
    )
    with torch.no_grad():
        stats["approx_kl"] = float(masked_mean(kl_k3(log_prob, old_log_prob), response_mask).item())
    return PolicyLossOutput(loss=loss, per_token_loss=per_token, stats=stats)


@POLICY_LOSSES.register("gspo")
def gspo_policy_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio_low: float = 3e-4,
    clip_ratio_high: float = 4e-4,
    loss_agg_mode: str = "seq-mean-token-mean",
    **kwargs: Any,
) -> PolicyLossOutput:
    """GSPO (Zheng et al., 2025, "Group Sequence Policy Optimization"): the sequence-level ratio
    ``s_i = (pi(y_i) / pi_old(y_i))^(1/|y_i|)`` in the clipped surrogate, with the paper's eps 3e-4 / 4e-4 and
    sequence-mean aggregation. Same as ``ppo_policy_loss(..., ratio_level="sequence")``."""
    return ppo_policy_loss(
        log_prob,
        old_log_prob,
        advantages,
        response_mask,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        ratio_level="sequence",
        loss_agg_mode=loss_agg_mode,
        **kwargs,
    )


@POLICY_LOSSES.register("cispo")
def cispo_policy_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio_max: float = 5.0,
    loss_agg_mode: str = "token-mean",
    is_weights: Tensor | None = None,
    global_num_tokens: float | int | Tensor | None = None,
    global_num_seqs: float | int | Tensor | None = None,
    max_len: int | None = None,
    dp_size: int = 1,
    **_: Any,
) -> PolicyLossOutput:
    """CISPO (MiniMax-M1, 2025; ScaleRL, 2025): clip the importance weight, not the update.

    ``l_t = -sg[min(r_t, eps_max)] * A_t * log pi_t``: every token keeps a gradient (PPO's clip zeroes it),
    only its weight is capped. ``clip_ratio_max`` is eps_max (5.0 in ScaleRL; TRL's ``epsilon_high`` for
    ``loss_type="cispo"``). Stats: ``cispo_clip_ratio`` (fraction of tokens with ``r > eps_max`` and
    ``A > 0``, TRL's metric), ``approx_kl``.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    log_ratio = torch.where(response_mask.bool(), log_prob - old_log_prob, torch.zeros_like(log_prob))
    ratio = torch.exp(log_ratio)
    weight = ratio.clamp(max=clip_ratio_max).detach()
    per_token = -weight * advantages * log_prob
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    per_token = torch.where(response_mask.bool(), per_token, torch.zeros_like(per_token))
    loss = agg_loss(
        per_token,
        response_mask,
        loss_agg_mode,
        global_num_tokens=global_num_tokens,
        global_num_seqs=global_num_seqs,
        max_len=max_len,
        dp_size=dp_size,
    )
    with torch.no_grad():
        clipped = (ratio > clip_ratio_max) & (advantages > 0)
        stats = {
            "cispo_clip_ratio": float(masked_mean(clipped.float(), response_mask).item()),
            "approx_kl": float(masked_mean(kl_k3(log_prob, old_log_prob), response_mask).item()),
        }
    return PolicyLossOutput(loss=loss, per_token_loss=per_token, stats=stats)


def compute_policy_loss(name: str, *args: Any, **kwargs: Any) -> PolicyLossOutput:
    """Dispatches to ``POLICY_LOSSES[name]``."""
    return POLICY_LOSSES.get(name)(*args, **kwargs)


def ppo_value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    response_mask: Tensor,
    *,
    cliprange_value: float | None = 0.2,
    loss_agg_mode: str = "token-mean",
    global_num_tokens: float | int | Tensor | None = None,
    global_num_seqs: float | int | Tensor | None = None,
    max_len: int | None = None,
    dp_size: int = 1,
) -> tuple[Tensor, dict[str, float]]:
    """PPO's clipped value loss (Schulman et al., 2017, as in OpenAI baselines and verl).

    ``V_clip = V_old + clip(V - V_old, -c, c)``; ``l_t = 0.5 * max((V - R)^2, (V_clip - R)^2)``;
    with ``cliprange_value=None``, ``0.5 (V - R)^2``. Returns the aggregated loss and
    ``{"vf_clipfrac": fraction of tokens where the clipped term is the larger}``.
    """
    unclipped = (values - returns) ** 2
    if cliprange_value is None:
        per_token, clipfrac = 0.5 * unclipped, 0.0
    else:
        v_clip = old_values + (values - old_values).clamp(-cliprange_value, cliprange_value)
        clipped = (v_clip - returns) ** 2
        per_token = 0.5 * torch.maximum(unclipped, clipped)
        clipfrac = float(masked_mean((clipped > unclipped).float(), response_mask).item())
    loss = agg_loss(
        per_token * response_mask,
        response_mask,
        loss_agg_mode,
        global_num_tokens=global_num_tokens,
        global_num_seqs=global_num_seqs,
        max_len=max_len,
        dp_size=dp_size,
    )
    return loss, {"vf_clipfrac": clipfrac}
