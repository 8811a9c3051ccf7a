"""The outcome and value-based advantage estimators (GRPO, Dr.GRPO, RLOO, REINFORCE++, GAE, signed
REINFORCE), the dispatch by name, and :class:`AdvantageInputs`, the one input object of every estimator.

Each estimator is registered once, here, with its :class:`rewardlab.core_algos.estimators.EstimatorTraits`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch

from rewardlab.core_algos.estimators import ADVANTAGE_ESTIMATORS, advantage_estimator

from .groups import apply_sample_mask, group_normalize, group_stats
from .masked import _broadcast, _sequence_scores, masked_sum, masked_var, masked_whiten
from .returns import discounted_returns

Tensor = torch.Tensor


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
    of the mean and std. The normalisation is :func:`.groups.group_normalize` (reward shaping's ``group_norm``
    calls it too) with these choices made explicit.
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


@advantage_estimator("grpo", centres_by_group=True, zero_on_equal_rewards=True)
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


@advantage_estimator("dr_grpo", centres_by_group=True, zero_on_equal_rewards=True)
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


@advantage_estimator("rloo", centres_by_group=True, zero_on_equal_rewards=True)
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


@advantage_estimator("reinforce_pp")
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


@advantage_estimator("reinforce_pp_baseline", centres_by_group=True)
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


@advantage_estimator("gae", needs_critic=True)
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


@advantage_estimator("reinforce_signed")
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
    process_rewards: Tensor | None = None
    """``(B, T)`` token-level process rewards kept apart from the outcome in ``token_level_rewards``
    (``prime``: the implicit PRM's, after its granularity and norm)."""
    rm_coef: float = 5.0
    """``prime``: weight of the process rewards' leave-one-out term (PRIME's ``reward_dpo_coef``)."""
    outcome_coef: float = 5.0
    """``prime``: weight of the outcome's leave-one-out term (PRIME's ``reward_gt_coef``)."""

    def estimate(self, name: str) -> tuple[Tensor, Tensor]:
        """``(advantages, returns)`` of the estimator ``name``."""
        options = {f.name: getattr(self, f.name) for f in fields(self)[2:]}
        return compute_advantages(name, self.token_level_rewards, self.response_mask, **options)
