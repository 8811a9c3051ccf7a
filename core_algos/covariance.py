"""Clip-Cov and KL-Cov (Cui et al., 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models", arXiv:2505.22617): policy losses that hold back the few tokens driving entropy collapse.

The paper shows that a policy-gradient step lowers entropy in proportion to the covariance, over tokens,
of ``log pi(y_t)`` and the advantage; a handful of tokens with a large positive covariance (confident and
rewarded) carry most of it. Clip-Cov cuts the gradient of a random few of those tokens; KL-Cov adds a
``|log pi - log pi_old|`` penalty to the highest-covariance ones. Both select per micro-batch, as verl's
``compute_policy_loss_clip_cov`` / ``compute_policy_loss_kl_cov`` do.
"""

from __future__ import annotations

from typing import Any

import torch

from .aggregation import agg_loss
from .kl import kl_k3
from .losses import PolicyLossOutput, _ppo_surrogate
from .masked import masked_mean
from .registries import POLICY_LOSSES, PolicyLossTraits

Tensor = torch.Tensor

__all__ = ["clip_cov_policy_loss", "kl_cov_policy_loss", "token_covariance"]


def token_covariance(log_prob: Tensor, advantages: Tensor, response_mask: Tensor) -> Tensor:
    """Each token's term of the covariance of advantage and log-probability over the masked tokens:
    ``(A_t - mean A) * (log pi_t - mean log pi)``, means over ``response_mask``; detached, ``(B, T)``."""
    log_prob = log_prob.detach()
    advantages = advantages.detach().expand_as(log_prob)
    return (advantages - masked_mean(advantages, response_mask)) * (
        log_prob - masked_mean(log_prob, response_mask)
    )


_AGG_KEYS = ("global_num_tokens", "global_num_seqs", "max_len", "dp_size")


def _aggregate(per_token: Tensor, response_mask: Tensor, loss_agg_mode: str, kw: dict[str, Any]) -> Tensor:
    """:func:`agg_loss` with the step's normalisers among ``kw`` (the loop's other arguments ignored)."""
    return agg_loss(per_token, response_mask, loss_agg_mode, **{k: kw[k] for k in _AGG_KEYS if k in kw})


@POLICY_LOSSES.register(
    "clip_cov",
    traits=PolicyLossTraits(
        batch_dependent=True, config_fields=("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub")
    ),
)
def clip_cov_policy_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_cov_ratio: float = 2e-4,
    clip_cov_lb: float = 1.0,
    clip_cov_ub: float = 5.0,
    loss_agg_mode: str = "token-mean",
    is_weights: Tensor | None = None,
    generator: torch.Generator | None = None,
    **kw: Any,
) -> PolicyLossOutput:
    """Clip-Cov: PPO's clipped surrogate, with the gradient of ``max(1, r * N)`` tokens cut, drawn at random
    among the unclipped tokens whose covariance term lies in ``(lb, ub)`` (paper: r = 2e-4, bounds 1 and 5).

    ``N`` is the micro-batch's token count; ``generator`` drives the draw (the global RNG when ``None``, as
    verl's ``torch.randperm``); ``kw``: the normalisers of :func:`agg_loss`. Stats: ``clip_cov/cut_share``
    (tokens cut), ``approx_kl`` and PPO's clip ratios. The clipped region is tested as verl tests it
    (``-A clip(r) > -A r``).
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    valid = response_mask.bool()
    log_ratio = torch.where(valid, log_prob - old_log_prob, torch.zeros_like(log_prob))
    per_token, stats = _ppo_surrogate(
        log_ratio, advantages, response_mask, clip_ratio_low, clip_ratio_high, None
    )
    ratio = torch.exp(log_ratio)
    clipped = (
        -advantages * ratio.clamp(1 - clip_ratio_low, 1 + clip_ratio_high) > -advantages * ratio
    ) & valid
    cov = token_covariance(log_prob, advantages, response_mask)
    candidates = torch.nonzero((cov > clip_cov_lb) & (cov < clip_cov_ub) & valid & ~clipped)
    keep = torch.ones_like(per_token)
    if len(candidates):  # no draw otherwise: the RNG stream stays verl's
        n_cut = max(int(clip_cov_ratio * response_mask.sum().item()), 1)
        chosen = candidates[torch.randperm(len(candidates), generator=generator)[:n_cut]]
        keep[chosen[:, 0], chosen[:, 1]] = 0
    per_token = per_token * keep
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    per_token = per_token * response_mask.to(per_token.dtype)
    with torch.no_grad():
        stats["clip_cov/cut_share"] = float(masked_mean((keep == 0).float(), response_mask).item())
        stats["approx_kl"] = float(masked_mean(kl_k3(log_prob, old_log_prob), response_mask).item())
    loss = _aggregate(per_token, response_mask, loss_agg_mode, kw)
    return PolicyLossOutput(loss=loss, per_token_loss=per_token, stats=stats)


@POLICY_LOSSES.register(
    "kl_cov", traits=PolicyLossTraits(batch_dependent=True, config_fields=("kl_cov_ratio", "ppo_kl_coef"))
)
def kl_cov_policy_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    kl_cov_ratio: float = 2e-4,
    ppo_kl_coef: float = 1.0,
    loss_agg_mode: str = "token-mean",
    is_weights: Tensor | None = None,
    **kw: Any,
) -> PolicyLossOutput:
    """KL-Cov: the unclipped surrogate ``-r_t A_t``, plus ``beta |log pi_t - log pi_old_t|`` on the
    ``max(1, k * N)`` tokens with the largest covariance term (paper: beta = 1; k = 2e-4, or 2e-3 for 7B
    models). Like the paper and verl, KL-Cov has no ratio clip: the penalty is its only trust region (the
    loop's ``clip_ratio_*`` are ignored); ``kw``: the normalisers of :func:`agg_loss`.

    Stats: ``kl_cov/penalised_share``, ``kl_cov/abs_log_ratio`` (verl's ``ppo_kl``: the mean
    ``|log pi - log pi_old|``), ``approx_kl``.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    valid = response_mask.bool()
    log_ratio = torch.where(valid, log_prob - old_log_prob, torch.zeros_like(log_prob))
    per_token = -advantages * torch.exp(log_ratio)
    cov = token_covariance(log_prob, advantages, response_mask)
    n_valid = int(valid.sum())
    penalised = torch.zeros_like(valid)
    if n_valid:
        n_pen = max(1, int(n_valid * kl_cov_ratio))
        flat = torch.nonzero(valid.reshape(-1), as_tuple=True)[0]
        top = flat[torch.topk(cov[valid], n_pen, largest=True).indices]
        penalised.view(-1)[top] = True
    per_token = torch.where(penalised, per_token + ppo_kl_coef * log_ratio.abs(), per_token)
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    per_token = per_token * response_mask.to(per_token.dtype)
    with torch.no_grad():
        stats = {
            "kl_cov/penalised_share": float(masked_mean(penalised.float(), response_mask).item()),
            "kl_cov/abs_log_ratio": float(masked_mean(log_ratio.abs(), response_mask).item()),
            "approx_kl": float(masked_mean(kl_k3(log_prob, old_log_prob), response_mask).item()),
        }
    loss = _aggregate(per_token, response_mask, loss_agg_mode, kw)
    return PolicyLossOutput(loss=loss, per_token_loss=per_token, stats=stats)
