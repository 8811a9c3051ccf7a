"""Tree rollouts' math: where to branch, Tree-GRPO's intra-tree advantage term, and the loss weights that
train a shared prefix once.

A tree rollout (``rollout.tree``) samples ``m`` roots per prompt, then ``k`` branches at each of ``t``
positions of every root: a branch at position ``p`` repeats the root's first ``p`` tokens and samples the
rest. The group is the whole forest of the prompt, ``m (1 + t k)`` samples, contiguous, each root followed by
its branches. Hou et al. (2025, "TreeRL", arXiv:2506.11902) branch at the highest-entropy tokens; Ji et al.
(2025, "Tree Search for LLM Agent Reinforcement Learning", Tree-GRPO, arXiv:2509.21240) add to the group's
advantage a group-relative advantage within each tree.

A branch's copy of the root's prefix is one sample of those tokens, not ``1 + b`` samples:
:func:`shared_prefix_weights` trains it once, in the root's row, with the advantage and weight that give the
gradient of training every sample on all its tokens (the flat estimator) exactly at the on-policy point
(ratio 1, where PPO's clip is inactive).
"""

from __future__ import annotations

import torch

from .advantages import group_normalized_advantages

Tensor = torch.Tensor

__all__ = [
    "BRANCH_RULES",
    "branch_positions",
    "shared_prefix_weights",
    "tree_intra_advantages",
]

BRANCH_RULES = ("entropy", "uniform")
"""``entropy``: the ``t`` highest-entropy tokens of the root (TreeRL's EPTree); ``uniform``: ``t`` positions
evenly spaced over the root (fixed boundaries, TreeRL's and Tree-GRPO's segment baseline)."""


def branch_positions(entropies: Tensor, lengths: Tensor, t: int, rule: str = "entropy") -> Tensor:
    """``(R, t)`` branch positions, one row per root: positions ``1 .. len-1`` (a branch shares at least one
    token and resamples the token at its position), by ``rule`` (:data:`BRANCH_RULES`); a root with fewer
    than ``t`` such positions gets 0 for the rest (a fresh sample of the prompt). Sorted ascending.

    ``entropies``: ``(R, T)`` per-token entropies of the roots (read by ``entropy`` only), ``lengths``:
    ``(R,)`` their token counts."""
    if rule not in BRANCH_RULES:
        raise ValueError(f"unknown branch rule {rule!r} (known: {', '.join(BRANCH_RULES)})")
    out = torch.zeros(len(lengths), t, dtype=torch.long)
    for r in range(len(lengths)):
        n = int(lengths[r])
        eligible = n - 1  # positions 1 .. n-1
        if eligible <= 0:
            continue
        take = min(t, eligible)
        if rule == "entropy":
            chosen = torch.topk(entropies[r, 1:n].float(), take).indices + 1
        else:
            chosen = torch.unique(torch.linspace(1, n - 1, take + 2)[1:-1].round().long().clamp(1, n - 1))
            if len(chosen) < take:  # rounding merged neighbours: fill from the start
                spare = [p for p in range(1, n) if p not in set(chosen.tolist())]
                chosen = torch.cat([chosen, torch.tensor(spare[: take - len(chosen)], dtype=torch.long)])
        out[r, t - take :] = torch.sort(chosen).values  # after the zeros: the row is sorted
    return out


def tree_intra_advantages(
    scores: Tensor, tree_size: int, *, valid: Tensor | None = None, eps: float = 1e-6, scale: str = "group"
) -> Tensor:
    """Tree-GRPO's intra-tree term, ``(B,)``: the group-relative advantage (GRPO's, :func:`group_normalized_
    advantages`) within each tree, ``tree_size`` contiguous samples (a root and its branches). The run adds it
    to the group's (inter-tree) advantage, as Tree-GRPO sums the two."""
    return group_normalized_advantages(scores, tree_size, scale=scale, eps=eps, valid=valid)


def shared_prefix_weights(
    advantages: Tensor, mask: Tensor, root: Tensor, shared: Tensor, *, per_token_of_sample: Tensor
) -> tuple[Tensor, Tensor]:
    """Advantages and per-token loss weights that train each shared prefix token once.

    ``advantages`` ``(B, T)``; ``mask`` ``(B, T)`` the loss mask; ``root`` ``(B,)`` the row whose tokens a
    sample's first ``shared`` ``(B,)`` tokens are (itself and 0 for a root); ``per_token_of_sample`` ``(B,)``
    the weight the loss aggregation gives each token of the sample (``1 / |y_i|`` for a length-normalised
    mean, 1 otherwise: the common factor cancels).

    Returns ``(advantages, weights)``: a branch's shared tokens get weight 0; the root's token ``j`` gets the
    weighted mean advantage of every sample through it, ``sum_s w_s A_s,j / sum_s w_s``, and weight
    ``sum_s w_s / w_root``; every other token weight 1 (times its mask). Multiplied into the per-token loss,
    whose normaliser still counts every sample's tokens, the gradient at ratio 1 is the flat estimator's:
    ``sum_s w_s A_s,j grad log pi(y_j)`` per shared token.
    """
    adv = advantages.clone().float()
    weights = mask.clone().float()
    w = per_token_of_sample.float()
    sums = adv * w[:, None] * mask
    totals = w[:, None] * mask
    branches = [b for b in range(len(root)) if int(root[b]) != b and int(shared[b]) > 0]
    for b in branches:
        r, p = int(root[b]), int(shared[b])
        live = mask[b, :p] * mask[r, :p]  # a sample masked out (no reward) adds nothing
        sums[r, :p] += live * w[b] * advantages[b, :p]
        totals[r, :p] += live * w[b]
        weights[b, :p] = weights[b, :p] * (1 - live)
    for r in sorted({int(root[b]) for b in branches}):
        on = mask[r] > 0
        adv[r, on] = sums[r, on] / totals[r, on]
        weights[r, on] = totals[r, on] / w[r]
    return adv, weights
