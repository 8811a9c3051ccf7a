"""Tree rollouts (``rollout.tree``): roots, their branch positions, and branches continued from the roots'
prefixes, laid out as one group per prompt.

Per prompt the backend samples ``m`` roots; each root gets ``t`` branch positions
(:func:`rewardlab.core_algos.branch_positions`: its highest-entropy tokens, from one forward pass over
the roots, or evenly spaced ones); from each position ``p`` the backend samples ``k`` continuations of the
prompt and the root's first ``p`` tokens. Inside the backend's ``prefix_cache(branching=True)`` block the hf
backend reuses the roots' keys and values for those prompts (only the last prefix token runs); vLLM's
automatic prefix caching does the same by itself. A branch is returned whole (the root's prefix, then its
own tokens) with ``Generation.branch = (root's index in the group, p)``; the group is a root followed by its
``t * k`` branches, for each root.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from rewardlab import core_algos as ca
from rewardlab.generation import Generation, SamplingParams
from rewardlab.generation.base import cut_at_stop
from rewardlab.rl.config import TreeConfig

__all__ = ["BRANCH_SEED_OFFSET", "grow_trees", "tree_token_counts"]

BRANCH_SEED_OFFSET = 104_729
"""Added to the step's sampling seed for the branches, so that they do not replay the roots' draws."""

Entropies = Callable[[list[Generation]], torch.Tensor]
"""The per-token entropies ``(R, T)`` of the roots under the policy that sampled them."""


def grow_trees(
    backend: Any,
    prompts: Sequence[Any],
    params: SamplingParams,
    tree: TreeConfig,
    *,
    decode: Callable[[list[int]], str],
    entropies: Entropies | None,
) -> list[list[Generation]]:
    """The tree of each prompt, ``tree.samples_per_prompt`` samples each (see the module docstring);
    ``decode`` turns a branch's whole token list into its text, ``entropies`` is read when
    ``tree.branch_at == "entropy"``."""
    keep = getattr(backend, "prefix_cache", None)
    with keep(branching=True) if keep is not None else contextlib.nullcontext():
        roots = [g for group in backend.generate(list(prompts), replace(params, n=tree.roots)) for g in group]
        points = _branch_points(roots, tree, entropies)
        branch_prompts = [
            list(r.prompt_token_ids) + r.token_ids[:p]
            for r, row in zip(roots, points, strict=True)
            for p in row
        ]
        budget = params.max_new_tokens - min((p for row in points for p in row), default=0)
        seed = None if params.seed is None else params.seed + BRANCH_SEED_OFFSET
        branched = backend.generate(
            branch_prompts, replace(params, n=tree.branches, max_new_tokens=budget, seed=seed)
        )
    out: list[list[Generation]] = []
    for i in range(len(prompts)):
        group: list[Generation] = []
        for j in range(tree.roots):
            r = i * tree.roots + j
            root_index = len(group)
            group.append(roots[r])
            for q, p in enumerate(points[r]):
                for b in branched[r * tree.points + q]:
                    group.append(_joined(roots[r], root_index, p, b, params, decode))
        assert len(group) == tree.samples_per_prompt
        out.append(group)
    return out


def _branch_points(roots: list[Generation], tree: TreeConfig, entropies: Entropies | None) -> list[list[int]]:
    lengths = torch.tensor([len(r.token_ids) for r in roots])
    if tree.branch_at == "entropy":
        if entropies is None:
            raise ValueError("rollout.tree.branch_at=entropy needs the roots' entropies")
        ent = entropies(roots)
    else:
        ent = torch.zeros(len(roots), max(int(lengths.max()), 1) if len(roots) else 1)
    return ca.branch_positions(ent, lengths, tree.points, tree.branch_at).tolist()


def _joined(
    root: Generation,
    root_index: int,
    p: int,
    branch: Generation,
    params: SamplingParams,
    decode: Callable[[list[int]], str],
) -> Generation:
    """The branch as a whole sample: the root's first ``p`` tokens, then the branch's own, cut at the
    sample's token budget (``max_new_tokens``, which the batch's branch call may exceed)."""
    own = params.max_new_tokens - p
    tokens = root.token_ids[:p] + branch.token_ids[:own]
    cut = len(branch.token_ids) > own
    logprobs = None
    if root.logprobs is not None and branch.logprobs is not None:
        logprobs = root.logprobs[:p] + branch.logprobs[:own]
    return Generation(
        text=cut_at_stop(decode(tokens), params),
        token_ids=tokens,
        prompt_token_ids=list(root.prompt_token_ids),
        logprobs=logprobs,
        finish_reason="length" if cut else branch.finish_reason,
        branch=(root_index, p) if p > 0 else None,
    )


def tree_token_counts(groups: Sequence[Sequence[Generation]]) -> dict[str, float]:
    """``tree/generated_tokens_per_sample`` (tokens the backend sampled, shared prefixes once, per sample)
    and ``tree/shared_token_share`` (the share of the samples' tokens that were shared, not sampled)."""
    total = sum(len(g.token_ids) for group in groups for g in group)
    shared = sum(g.branch[1] for group in groups for g in group if g.branch is not None)
    samples = sum(len(group) for group in groups)
    return {
        "tree/generated_tokens_per_sample": (total - shared) / max(samples, 1),
        "tree/shared_token_share": shared / max(total, 1),
    }
