"""Padding-free batches (sequence packing) for the RL update: pure tensor functions, no model.

:func:`rewardlab.rl.trainer.build_tensors` lays a batch out as ``(B, P + T)`` rows: left-padded prompts,
right-padded responses. :func:`pack` drops every pad cell and concatenates the sequences into one
``(1, N)`` row (``N`` = the sum of the real lengths) whose ``position_ids`` restart at 0 for each
sequence. Passed to a transformers model with ``attention_mask=None``, such a row is recognised as packed
(``transformers.masking_utils.find_packed_sequence_indices``: a new sequence starts wherever the position
does not grow by 1): sdpa / eager attention get a block-diagonal causal mask, flash-attention its varlen
kernel. Each response token ``y_t`` is predicted by the logits at the flat position just before it
(:attr:`PackedBatch.logit_index`, which also serves as ``logits_to_keep``, so only those logits are
computed); :func:`unpack` puts the per-token results back into the ``(B, T)`` layout the losses read.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class PackedBatch:
    """One padding-free row of ``B`` sequences (``N`` real tokens, ``M`` response tokens)."""

    input_ids: torch.Tensor
    """``(1, N)`` the sequences' tokens (prompt, then response), back to back."""
    position_ids: torch.Tensor
    """``(1, N)`` 0, 1, ... within each sequence."""
    offsets: torch.Tensor
    """``(B + 1,)`` int32 where each sequence starts in the row (``cu_seqlens``); the last entry is ``N``."""
    logit_index: torch.Tensor
    """``(M,)`` the flat positions whose logits predict the response tokens (each token's predecessor)."""
    labels: torch.Tensor
    """``(M,)`` the response tokens, in the order of :attr:`logit_index`."""
    response_mask: torch.Tensor
    """``(B, T)`` bool: where the ``M`` response tokens sit in the padded layout (for :func:`unpack`)."""

    def to(self, device: torch.device | str) -> PackedBatch:
        """The same batch on ``device``."""
        return PackedBatch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))

    def model_inputs(self) -> dict[str, torch.Tensor | None]:
        """Keyword arguments of a causal LM's forward: the packed row, no attention mask, only the logits
        that predict response tokens."""
        return {
            "input_ids": self.input_ids,
            "attention_mask": None,
            "position_ids": self.position_ids,
            "logits_to_keep": self.logit_index,
        }

    def unpack(self, flat: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        """``(M, ...)`` per-response-token values -> ``(B, T, ...)`` (``fill`` off the response mask)."""
        return unpack(flat, self.response_mask, fill)


def pack(input_ids: torch.Tensor, attention_mask: torch.Tensor, response_mask: torch.Tensor) -> PackedBatch:
    """Packs a padded batch into one row.

    ``input_ids`` / ``attention_mask`` are ``(B, L)``, with each row's real tokens marked 1 and contiguous
    (any padding on either side); ``response_mask`` is ``(B, T)`` over the last ``T`` columns and marks the
    response tokens (a subset of the real ones). Every sequence with a response needs at least one token
    before it (its first response token's logits come from there)."""
    keep = attention_mask.bool()
    resp = response_mask.bool()
    lengths = keep.sum(-1)
    if bool(((lengths - resp.sum(-1) < 1) & resp.any(-1)).any()):
        raise ValueError("pack: a sequence with response tokens needs at least one prompt token")
    flat_pos = keep.flatten().cumsum(0).view(keep.shape) - 1  # each real cell's index in the packed row
    T = resp.shape[1]
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int32, device=lengths.device)
    offsets[1:] = lengths.cumsum(0)
    return PackedBatch(
        input_ids=input_ids[keep][None],
        position_ids=((keep.cumsum(-1) - 1)[keep])[None],
        offsets=offsets,
        logit_index=flat_pos[:, -T:][resp] - 1,
        labels=input_ids[:, -T:][resp],
        response_mask=resp,
    )


def unpack(flat: torch.Tensor, mask: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Scatters ``flat`` ``(K, ...)`` into the ``True`` cells of ``mask`` ``(B, L)`` in row-major order (the
    order ``x[mask]`` reads them), ``fill`` elsewhere; differentiable with respect to ``flat``.

    ``unpack(x[mask], mask)`` is ``x`` on the mask: the inverse of packing."""
    out = flat.new_full((*mask.shape, *flat.shape[1:]), fill)
    out[mask.bool()] = flat
    return out


def token_budget_micro_batches(
    lengths: Sequence[int], budget: int, count: int | None = None
) -> list[list[int]]:
    """Positions of ``lengths`` grouped into micro-batches of about ``budget`` tokens (verl's dynamic batch
    size, ``ppo_max_token_len_per_gpu``), so that a packed row's size, and with it the attention's N x N
    cost, stays bounded whatever the mix of lengths.

    ``count`` micro-batches (default: as many as first-fit decreasing needs to keep each within ``budget``;
    a sequence longer than ``budget`` gets one of its own) are filled longest first, each sequence into the
    least-loaded one (LPT: within 4/3 of the best possible largest load). Ranks of a data-parallel group
    pass the same ``count`` so that they run the same number of forward passes. Positions within a
    micro-batch are in increasing order; no micro-batch is empty (``count`` is capped at ``len(lengths)``).
    """
    if budget < 1:
        raise ValueError(f"token budget must be at least 1, got {budget}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    if count is None:
        loads: list[int] = []
        for i in order:  # first-fit decreasing: how many micro-batches the budget needs
            fit = next((b for b, load in enumerate(loads) if load + lengths[i] <= budget), None)
            if fit is None:
                loads.append(lengths[i])
            else:
                loads[fit] += lengths[i]
        count = len(loads)
    count = max(1, min(count, len(lengths)))
    heap = [(0, b) for b in range(count)]
    bins: list[list[int]] = [[] for _ in range(count)]
    for i in order:
        load, b = heapq.heappop(heap)
        bins[b].append(i)
        heapq.heappush(heap, (load + lengths[i], b))
    return [sorted(b) for b in bins if b]
