"""What the loop reads off a model's logits: per-token log-probabilities, entropy, self-certainty.

:func:`token_logprobs_from_hidden` and :func:`self_certainty_from_hidden` read the same from the last
hidden states, applying the LM head a chunk of tokens at a time, so that the ``(tokens, vocabulary)``
logits never exist whole (with a 152k vocabulary they are 0.6 MB per token in float32).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.utils.checkpoint import checkpoint

from .masked import masked_mean

Tensor = torch.Tensor


def _upcast(logits: Tensor) -> Tensor:
    # bf16/fp16 log-softmax loses digits that the ratio exp(log pi - log pi_old) amplifies; float64 stays.
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def _scaled(logits: Tensor, temperature: float) -> Tensor:
    logits = _upcast(logits)
    return logits / temperature if temperature != 1.0 else logits


def logprobs_from_logits(logits: Tensor, labels: Tensor, temperature: float = 1.0) -> Tensor:
    """``log softmax(logits / temperature)[labels]``, ``(B, T)``; half precision is upcast to float32."""
    logits = _scaled(logits, temperature)
    logp = logits.log_softmax(dim=-1)
    return torch.gather(logp, -1, labels.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Per-position entropy ``H = logsumexp(z) - sum softmax(z) z`` of ``softmax(logits / temperature)``."""
    logits = _scaled(logits, temperature)
    p = logits.softmax(dim=-1)
    return torch.logsumexp(logits, dim=-1) - (p * logits).sum(dim=-1)


def token_logprobs_from_hidden(
    hidden: Tensor,
    head: Callable[[Tensor], Tensor],
    labels: Tensor,
    temperature: float = 1.0,
    *,
    chunk_tokens: int = 1024,
    entropy: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """:func:`logprobs_from_logits` (and :func:`entropy_from_logits`) of ``head(hidden)``, ``(B, T)`` each,
    without the whole ``(B, T, V)`` logits: ``head`` (the model's LM head module, LoRA and tied weights
    included) runs on ``chunk_tokens`` tokens at a time, and under autograd each chunk's logits are dropped
    after the forward and recomputed in the backward (activation checkpointing). Equal to the full path up
    to float rounding; peak memory holds one chunk's logits instead of all of them.

    ``hidden`` is ``(B, T, H)``: the hidden states that predict ``labels`` ``(B, T)``.
    """
    batch, length = labels.shape
    flat_hidden = hidden.reshape(batch * length, hidden.shape[-1])
    flat_labels = labels.reshape(-1)
    step = max(1, int(chunk_tokens))
    recompute = torch.is_grad_enabled() and (
        hidden.requires_grad or any(p.requires_grad for p in getattr(head, "parameters", list)())
    )
    linear = type(head) is torch.nn.Linear  # a plain head: its backward written out (faster than recomputing)
    logps, entropies = [], []
    for start in range(0, flat_labels.numel(), step):
        chunk_hidden, chunk_labels = flat_hidden[start : start + step], flat_labels[start : start + step]
        if linear:
            logp, ent = _LinearHeadStats.apply(
                chunk_hidden, head.weight, head.bias, chunk_labels, temperature, entropy
            )
        elif recompute:
            args = (chunk_hidden, chunk_labels, head, temperature, entropy)
            logp, ent = checkpoint(_chunk_stats, *args, use_reentrant=False)
        else:
            logp, ent = _chunk_stats(chunk_hidden, chunk_labels, head, temperature, entropy)
        logps.append(logp)
        entropies.append(ent)
    logp = torch.cat(logps).reshape(batch, length) if logps else hidden.new_zeros(batch, length).float()
    if not entropy:
        return logp, None
    ent = torch.cat(entropies).reshape(batch, length) if entropies else torch.zeros_like(logp)
    return logp, ent


def _chunk_stats(
    hidden: Tensor, labels: Tensor, head: Callable[[Tensor], Tensor], temperature: float, entropy: bool
) -> tuple[Tensor, Tensor]:
    """The full path's own functions on one chunk's logits (any head module: LoRA, a wrapper), upcast and
    scaled once for both."""
    logits = _scaled(head(hidden), temperature)
    logp = logprobs_from_logits(logits, labels)
    return logp, entropy_from_logits(logits) if entropy else logp.new_zeros(())


class _LinearHeadStats(torch.autograd.Function):
    """Log-probs (and entropies) of ``softmax((hidden @ W.T + b) / T)`` for one chunk of tokens; the backward
    recomputes the chunk's logits from ``hidden`` and writes their gradient out, ``(onehot - p) g / T`` for
    the log-prob and ``-p (z - E_p z) g / T`` for the entropy, instead of saving the logits."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, temperature, entropy):  # type: ignore[override]
        z, normalizer = _scaled_logits(hidden, weight, bias, temperature)
        logp = torch.gather(z, -1, labels.unsqueeze(-1)).squeeze(-1) - normalizer
        ent = normalizer - (torch.exp(z - normalizer.unsqueeze(-1)) * z).sum(-1) if entropy else None
        ctx.save_for_backward(hidden, weight, bias, labels, normalizer, ent)
        ctx.temperature = temperature
        return logp, ent if ent is not None else logp.new_zeros(())

    @staticmethod
    def backward(ctx, grad_logp, grad_ent):  # type: ignore[override]
        hidden, weight, bias, labels, normalizer, ent = ctx.saved_tensors
        z, _ = _scaled_logits(hidden, weight, bias, ctx.temperature)
        scale = 1.0 / ctx.temperature  # d z / d logits
        if ent is not None and grad_ent is not None and grad_ent.dim():
            p = torch.exp(z - normalizer.unsqueeze(-1))
            mean_z = (normalizer - ent).unsqueeze(-1)  # E_p[z] = logsumexp(z) - H
            # -p (g_logp + g_ent (z - E_p z)), in z's buffer
            grad_z = p.mul_(z.sub_(mean_z).mul_(grad_ent.unsqueeze(-1)).add_(grad_logp.unsqueeze(-1)))
            grad_z.mul_(-scale)
        else:  # -p g_logp, in z's buffer: one chunk of logits is all the memory the backward takes
            grad_z = z.sub_(normalizer.unsqueeze(-1)).exp_().mul_((-scale * grad_logp).unsqueeze(-1))
        grad_z.scatter_add_(-1, labels.unsqueeze(-1), (scale * grad_logp).unsqueeze(-1))
        grad_logits = grad_z.to(hidden.dtype)
        grad_hidden = grad_logits @ weight.to(hidden.dtype) if ctx.needs_input_grad[0] else None
        grad_weight = (grad_logits.T @ hidden).to(weight.dtype) if ctx.needs_input_grad[1] else None
        grad_bias = (
            grad_logits.sum(0).to(bias.dtype) if bias is not None and ctx.needs_input_grad[2] else None
        )
        return grad_hidden, grad_weight, grad_bias, None, None, None


def _scaled_logits(hidden: Tensor, weight: Tensor, bias: Tensor | None, temperature: float):
    """``(hidden @ W.T + b) / T`` in at least float32 (the matmul in ``hidden``'s dtype, as under autocast)
    and its logsumexp."""
    logits = torch.nn.functional.linear(
        hidden, weight.to(hidden.dtype), bias.to(hidden.dtype) if bias is not None else None
    )
    z = _upcast(logits)
    if temperature != 1.0:
        z = z.div_(temperature)  # a fresh tensor, and no autograd here (the Function's own passes)
    return z, torch.logsumexp(z, dim=-1)


def self_certainty(logits: Tensor, mask: Tensor) -> Tensor:
    """Self-certainty of each sample (Kang et al., 2025, "Scalable Best-of-N Selection for Large Language
    Models via Self-Certainty"; the reward of INTUITOR, Zhao et al., 2025, "Learning to Reason without
    External Rewards"), ``(B,)``.

    The mean over the sample's tokens of ``KL(U || p_t) = -log |V| - (1/|V|) sum_j log p_t(j)``: how far
    each next-token distribution is from uniform. ``logits`` is ``(B, T, V)`` (the logits that predict each
    response token), ``mask`` ``(B, T)``.
    """
    return masked_mean(_token_certainty(logits), mask, dim=-1)


def self_certainty_from_hidden(
    hidden: Tensor,
    head: Callable[[Tensor], Tensor],
    mask: Tensor,
    temperature: float = 1.0,
    *,
    chunk_tokens: int = 1024,
) -> Tensor:
    """:func:`self_certainty` of ``head(hidden) / temperature``, ``(B,)``, the head applied to
    ``chunk_tokens`` tokens at a time (no gradient: a reward, not a loss)."""
    batch, length = mask.shape
    flat = hidden.reshape(batch * length, hidden.shape[-1])
    step = max(1, int(chunk_tokens))
    with torch.no_grad():
        parts = [_token_certainty(head(flat[i : i + step]), temperature) for i in range(0, len(flat), step)]
    per_token = torch.cat(parts).reshape(batch, length) if parts else mask.new_zeros(batch, length).float()
    return masked_mean(per_token, mask, dim=-1)


def _token_certainty(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Per position, ``KL(U || softmax(logits / temperature))`` = ``logsumexp(z) - mean(z) - log |V|``."""
    z = _scaled(logits, temperature)
    return torch.logsumexp(z, dim=-1) - z.mean(dim=-1) - math.log(z.shape[-1])
