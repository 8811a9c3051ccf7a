"""Rollout / trainer mismatch: truncated importance sampling and sequence masking."""

from __future__ import annotations

import math

import torch

from .masked import masked_mean

Tensor = torch.Tensor


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
