"""Masked reductions (sum, mean, variance, whitening) and the token / sequence counts of a loss mask."""

from __future__ import annotations

import torch

Tensor = torch.Tensor


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


def _broadcast(adv: Tensor, response_mask: Tensor) -> Tensor:
    """One advantage per sample ``(B,)`` on every response token ``(B, T)``."""
    return adv.unsqueeze(-1) * response_mask
