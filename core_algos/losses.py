"""Policy losses (PPO's clipped surrogate with clip-higher and dual clip, GSPO, CISPO) and PPO's value loss."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .aggregation import agg_loss
from .kl import kl_k3
from .masked import masked_mean, masked_sum
from .registries import POLICY_LOSSES, PolicyLossTraits

Tensor = torch.Tensor


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


@POLICY_LOSSES.register("ppo", traits=PolicyLossTraits(config_fields=("clip_ratio_c",)))
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


@POLICY_LOSSES.register("gspo", traits=PolicyLossTraits())
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


@POLICY_LOSSES.register("cispo", traits=PolicyLossTraits())
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
