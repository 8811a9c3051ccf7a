"""What the loop reads off a model's logits: per-token log-probabilities, entropy, self-certainty."""

from __future__ import annotations

import math

import torch

from .masked import masked_mean

Tensor = torch.Tensor


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
