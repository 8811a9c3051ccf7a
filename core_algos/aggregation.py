"""Loss aggregation (token and sequence means), correct under gradient accumulation and data parallelism."""

from __future__ import annotations

import torch

from .masked import masked_sum
from .registries import LOSS_AGG_MODES, AggregationTraits

Tensor = torch.Tensor


@LOSS_AGG_MODES.register("token-mean")
def _agg_token_mean(loss_mat, mask, *, global_num_tokens=None, global_num_seqs=None, max_len=None):
    """``sum_{i,t} l_it / N_tokens`` (DAPO; TRL ``bnpo``/``dapo``). Every token weighs the same."""
    denom = mask.sum() if global_num_tokens is None else global_num_tokens
    return masked_sum(loss_mat, mask) / max(float(denom), 1.0)


@LOSS_AGG_MODES.register("seq-mean-token-mean", traits=AggregationTraits(length_normalised=True))
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


@LOSS_AGG_MODES.register("seq-mean-token-sum-norm", traits=AggregationTraits(counts_masked_samples=True))
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
