"""The data one RL step passes between its stages: a scored rollout, its padded tensors, the update's batch and
the update's running statistics.

:class:`Rollout` is what generation and scoring hand on; :func:`build_tensors` lays its samples out as the
``(B, P + T)`` rows every forward pass reads; :class:`UpdateBatch` is what the update's stages fill in, one
after the other (reference passes, token rewards, advantages, IS weights); :class:`UpdateStats` sums the
micro-batches' statistics into the update's metrics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from rewardlab import core_algos as ca
from rewardlab.generation import Generation
from rewardlab.rl.rewards import RewardBatch, ScoredBatch
from rewardlab.types import Record

__all__ = ["Rollout", "UpdateBatch", "UpdateStats", "build_tensors"]


@dataclass
class Rollout:
    """Samples of one step, grouped contiguously (``n`` per prompt): generations and their rewards."""

    gens: list[Generation]
    reward: RewardBatch
    discarded: list[Generation] = field(default_factory=list)
    """Samples generated for this rollout and then replaced (guided hints' unsolved attempts): not trained
    on, but counted in the step's generated tokens and samples."""

    @property
    def records(self) -> list[Record]:
        return self.reward.records

    @property
    def scored(self) -> ScoredBatch:
        return self.reward.scored

    @property
    def rewards(self) -> torch.Tensor:
        return self.reward.rewards

    @property
    def valid(self) -> torch.Tensor:
        return self.reward.valid

    @property
    def keep(self) -> torch.Tensor:
        return self.reward.keep

    @property
    def stats(self) -> dict[str, float]:
        return self.reward.stats()

    def select_groups(self, groups: torch.Tensor, n: int) -> Rollout:
        idx = [g * n + j for g in groups.tolist() for j in range(n)]
        return Rollout([self.gens[i] for i in idx], self.reward.select(idx), self.discarded)

    @staticmethod
    def concat(parts: list[Rollout]) -> Rollout:
        return Rollout(
            sum((p.gens for p in parts), []),
            RewardBatch.concat([p.reward for p in parts]),
            sum((p.discarded for p in parts), []),
        )


def build_tensors(gens: Sequence[Generation], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded prompts and right-padded responses in one ``(B, P + T)`` batch, plus the response mask
    (every response token) and the loss mask (the tokens the policy sampled: a multi-turn episode's tool
    output is in the response, as context, but never in the loss)."""
    P = max(len(g.prompt_token_ids) for g in gens)
    T = max(max(len(g.token_ids) for g in gens), 1)
    B = len(gens)
    # Rows are filled in Python lists and converted once (one tensor per row costs more than the model at
    # tiny sizes).
    ids = [[pad_id] * (P - len(g.prompt_token_ids)) + list(g.prompt_token_ids) for g in gens]
    ids = [
        row + list(g.token_ids) + [pad_id] * (T - len(g.token_ids)) for row, g in zip(ids, gens, strict=True)
    ]
    att = [
        [0] * (P - len(g.prompt_token_ids))
        + [1] * (len(g.prompt_token_ids) + len(g.token_ids))
        + [0] * (T - len(g.token_ids))
        for g in gens
    ]
    resp = [[1.0] * len(g.token_ids) + [0.0] * (T - len(g.token_ids)) for g in gens]
    own = [
        ([float(x) for x in g.loss_mask] if g.loss_mask is not None else [1.0] * len(g.token_ids))
        + [0.0] * (T - len(g.token_ids))
        for g in gens
    ]
    lps = [
        (list(g.logprobs) if g.logprobs is not None else [0.0] * len(g.token_ids))
        + [0.0] * (T - len(g.token_ids))
        for g in gens
    ]
    input_ids = torch.tensor(ids, dtype=torch.long).view(B, P + T)
    attention_mask = torch.tensor(att, dtype=torch.long).view(B, P + T)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": torch.tensor(resp, dtype=torch.float32).view(B, T),
        "loss_mask": torch.tensor(own, dtype=torch.float32).view(B, T),
        "responses": input_ids[:, P:],
        "rollout_logprobs": torch.tensor(lps, dtype=torch.float32).view(B, T),
    }


@dataclass
class UpdateBatch:
    """What one update reads and its stages fill in (all on the CPU, ``B`` samples, ``T`` response tokens)."""

    tensors: dict[str, torch.Tensor]
    """:func:`build_tensors`'s padded batch."""
    mask: torch.Tensor
    """``(B, T)`` the loss mask: response tokens of samples that stay in the loss."""
    step: int = 0
    """The trainer step this update makes (it seeds the minibatch order)."""
    old_logp: torch.Tensor | None = None
    """``(B, T)`` pi_old (``None``: the update's first forward pass is pi_old)."""
    ref_logp: torch.Tensor | None = None
    """``(B, T)`` the reference policy's log-probs (KL)."""
    old_values: torch.Tensor | None = None
    """``(B, T)`` the critic's values before the update (PPO)."""
    token_rewards: torch.Tensor | None = None
    """``(B, T)`` rewards per token."""
    advantages: torch.Tensor | None = None
    """``(B, T)``."""
    returns: torch.Tensor | None = None
    """``(B, T)`` the critic's targets."""
    is_weights: torch.Tensor | None = None
    """Truncated importance weights for the rollout/trainer mismatch."""
    is_per_micro_batch: bool = False
    """The IS weights are computed in each micro-batch from its own forward pass: with one optimiser step
    per rollout that pass is pi_old, so no separate pass over the batch is needed."""
    token_weights: torch.Tensor | None = None
    """``(B, T)`` per-token policy-loss weights (tree rollouts: a shared prefix trained once,
    :func:`core_algos.shared_prefix_weights`); ``None``: 1."""

    @property
    def size(self) -> int:
        return self.mask.shape[0]


@dataclass
class UpdateStats:
    """Running sums of one update's statistics (sample-weighted means) and loss terms (per optimiser step)."""

    sums: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)
    losses: Counter = field(default_factory=Counter)
    grad_norms: list[float] = field(default_factory=list)
    extrema: dict[str, float] = field(default_factory=dict)
    entropies: list[torch.Tensor] = field(default_factory=list)
    """The loss tokens' entropies of every micro-batch (1-D each), for :func:`core_algos.entropy_stats`."""

    def add(self, stats: dict[str, float], losses: dict[str, float], n: int) -> None:
        self.losses.update(losses)
        for key, value in stats.items():
            if key.endswith(("_min", "_max")):  # a minimum (maximum) over micro-batches, not a mean
                pick = min if key.endswith("_min") else max
                self.extrema[key] = pick(self.extrema.get(key, value), value)
                continue
            self.sums[key] += value * n
            self.counts[key] += n

    def means(self, optimizer_steps: int) -> dict[str, float]:
        """With the global normalisation the micro-batch losses of one optimiser step sum to that step's loss;
        a loss term is that sum averaged over the optimiser steps. Other statistics are sample-weighted."""
        out = {key: total / max(self.counts[key], 1) for key, total in self.sums.items()}
        out.update({key: total / optimizer_steps for key, total in self.losses.items()})
        out.update(self.extrema)
        out["grad_norm"] = sum(self.grad_norms) / len(self.grad_norms)
        if self.entropies:
            out.update(ca.entropy_stats(torch.cat(self.entropies)))
        return out
