"""Token entropies as a training signal and a health check: the high-entropy ("forking") token mask and the
statistics that show entropy collapse.

Wang et al. (2025, "Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective Reinforcement
Learning for LLM Reasoning", arXiv:2506.01939) train only on the top 20% of tokens by entropy; TRL calls it
``top_entropy_quantile``. Cui et al. (2025) show entropy falling early and the reward plateauing with it;
percentiles and the share of near-deterministic tokens show that fall before the mean does.
"""

from __future__ import annotations

import numpy as np
import torch

Tensor = torch.Tensor

__all__ = [
    "ENTROPY_PERCENTILES",
    "NEAR_DETERMINISTIC_ENTROPY",
    "entropy_stats",
    "high_entropy_mask",
]

ENTROPY_PERCENTILES = (10, 25, 50, 75, 90)
"""The percentiles of the step's token entropies that :func:`entropy_stats` reports."""

NEAR_DETERMINISTIC_ENTROPY = 0.05
"""A token whose entropy (nats) is below this is near-deterministic: its top choice holds about 99% of the
mass (one rival at 1% gives 0.056 nats)."""


def high_entropy_mask(
    entropies: Tensor, response_mask: Tensor, top_quantile: float, *, pooled: Tensor | None = None
) -> Tensor:
    """The tokens at or above the ``1 - top_quantile`` quantile of the masked entropies, ``(B, T)`` bool.

    TRL's ``get_high_entropy_mask(entropies, mask, 1 - top_entropy_quantile)``: the threshold is
    ``torch.quantile`` (linear interpolation) over ``pooled`` (every rank's masked entropies, 1-D; default:
    those of ``entropies``), padding never selected; no token at all gives an all-False mask.
    """
    valid = response_mask.bool()
    values = entropies.detach()[valid].float() if pooled is None else pooled.float()
    if values.numel() == 0:
        return torch.zeros_like(valid)
    threshold = _quantiles(values, [1.0 - top_quantile])[0]
    return (entropies.detach() * valid >= threshold) & valid


def entropy_stats(entropies: Tensor, response_mask: Tensor | None = None) -> dict[str, float]:
    """``entropy/pXX`` for :data:`ENTROPY_PERCENTILES` and ``entropy/near_deterministic`` (the share of
    tokens below :data:`NEAR_DETERMINISTIC_ENTROPY`) over the masked tokens (every one of ``entropies``
    without a mask); empty without any."""
    values = entropies.detach().float()
    values = values[response_mask.bool()] if response_mask is not None else values.reshape(-1)
    if values.numel() == 0:
        return {}
    quantiles = _quantiles(values, [p / 100 for p in ENTROPY_PERCENTILES])
    stats = {f"entropy/p{p}": float(v) for p, v in zip(ENTROPY_PERCENTILES, quantiles, strict=True)}
    stats["entropy/near_deterministic"] = float((values < NEAR_DETERMINISTIC_ENTROPY).float().mean())
    return stats


_TORCH_QUANTILE_MAX = 2**24  # torch.quantile refuses larger inputs


def _quantiles(values: Tensor, qs: list[float]) -> Tensor:
    """``torch.quantile`` (linear interpolation), or numpy's same rule for inputs torch refuses."""
    if values.numel() <= _TORCH_QUANTILE_MAX:
        return torch.quantile(values, torch.tensor(qs, dtype=values.dtype, device=values.device))
    return torch.from_numpy(np.quantile(values.cpu().numpy(), qs)).to(values)
