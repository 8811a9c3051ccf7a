"""What an RL step logs: the rollout's metrics (rewards, scoring, lengths, episodes), throughput and token
counts, and the sample rows of ``rollouts.jsonl`` (``run.log_completions``; docs/rl.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rewardlab.envs import Episode, episode_metrics
from rewardlab.generation import Generation
from rewardlab.rl.batch import Rollout, UpdateBatch
from rewardlab.rl.tree import tree_token_counts
from rewardlab.scoring.jobs import rounded_time
from rewardlab.types import Record, details_answer

__all__ = ["TokenCounts", "rollout_metrics", "sample_advantages", "sample_rows", "throughput_metrics"]


def rollout_metrics(r: Rollout, n: int) -> dict[str, Any]:
    """Rewards (shaped, and per source), accuracy, scoring errors, lengths and episode statistics of ``r``."""
    m: dict[str, Any] = {}
    v = r.valid
    rewards = r.rewards[v] if v.any() else torch.zeros(1)
    m["reward"] = float(rewards.mean())
    m["reward_std"] = float(rewards.std()) if rewards.numel() > 1 else 0.0
    for name, values in r.scored.per_source.items():
        vals = torch.tensor([x for x in values if x is not None] or [0.0])
        m[f"rewards/{name}/mean"] = float(vals.mean())
        m[f"rewards/{name}/std"] = float(vals.std()) if vals.numel() > 1 else 0.0
    m["accuracy"] = sum(r.scored.correct) / max(len(r.scored.correct), 1)
    m["scoring/errors"] = r.scored.num_errors
    m["scoring/error_rate"] = r.scored.num_errors / max(len(r.gens), 1)
    for kind, count in sorted(r.scored.errors.items()):
        m[f"scoring/error/{kind}"] = count
    m["scoring/missing_reward"] = int((~v).sum())
    lengths, term = r.reward.lengths, ~r.reward.truncated
    m["completions/mean_length"] = float(lengths.mean())
    m["completions/max_length"] = float(lengths.max())
    m["completions/min_length"] = float(lengths.min())
    # clipped_ratio, num_truncated, masked_truncated, overlong_penalty/*: the reward pipeline's statistics
    m.update(r.stats)
    m["completions/mean_terminated_length"] = float(lengths[term].mean()) if term.any() else 0.0
    m["samples/masked_from_loss"] = int((~(r.keep & r.valid)).sum())
    m.update(episode_metrics([g.summary() for g in r.gens if isinstance(g, Episode)]))
    if any(g.branch is not None for g in r.gens):
        m.update(tree_token_counts([r.gens]))
    return m


@dataclass
class TokenCounts:
    """Tokens the run has processed (prompts and generated) and generated, over every step."""

    num_tokens: int = 0
    num_completion_tokens: int = 0


def throughput_metrics(
    parts: list[Rollout], timings: dict[str, float], step_s: float, counts: TokenCounts, epoch: float
) -> dict[str, Any]:
    """Adds the step's rollouts ``parts`` to ``counts``; the step's timings, rates and running counts."""
    # the policy's own tokens (an episode's tool output is not generated)
    generated = [g for p in parts for g in (*p.gens, *p.discarded)]  # replaced attempts cost as much
    gen_tokens = sum(_generated_tokens(g) for g in generated)
    counts.num_tokens += gen_tokens + sum(len(g.prompt_token_ids) for g in generated)
    counts.num_completion_tokens += gen_tokens
    return {
        "num_tokens": counts.num_tokens,
        "num_completion_tokens": counts.num_completion_tokens,
        "timing/generate_s": timings["generate"],
        "timing/score_s": timings["score"],
        "timing/train_s": timings["train"],
        "timing/step_s": step_s,
        "tokens_per_s": gen_tokens / max(timings["generate"], 1e-9),
        "samples_per_s": len(generated) / max(timings["generate"], 1e-9),
        "epoch": epoch,
    }


def _generated_tokens(g: Generation) -> int:
    """The tokens the policy sampled for ``g``: not an episode's tool output, not a branch's shared prefix."""
    own = len(g.token_ids) if g.loss_mask is None else sum(g.loss_mask)
    return own - (g.branch[1] if g.branch is not None else 0)


def sample_advantages(u: UpdateBatch, r: Rollout) -> dict[int, float | None]:
    """Each sample's mean advantage over its loss tokens, keyed by its generation (the logged samples come
    from the first rollout, the update's from dynamic sampling's selection); ``None``: no loss token."""
    tokens = u.mask.sum(-1)
    means = (u.advantages * u.mask).sum(-1) / tokens.clamp(min=1)
    return {
        id(g): float(m) if t > 0 else None
        for g, m, t in zip(r.gens, means.tolist(), tokens.tolist(), strict=True)
    }


def sample_rows(
    r: Rollout,
    *,
    step: int,
    n: int,
    limit: int,
    prompt_text: Callable[[Record], str],
    advantages: dict[int, float | None],
) -> list[dict[str, Any]]:
    """``rollouts.jsonl``'s rows of a step: the first ``limit`` samples of ``r``, rounded up to whole groups
    of ``n`` (``advantages``: :func:`sample_advantages` of the update, empty outside one)."""
    count = min(len(r.gens), -(-limit // n) * n)
    prompts = {gi: prompt_text(r.records[gi * n]) for gi in range(-(-count // n))}
    return [_sample_row(r, i, n, step, prompts[i // n], advantages) for i in range(count)]


def _sample_row(
    r: Rollout, i: int, n: int, step: int, prompt: str, advantages: dict[int, float | None]
) -> dict[str, Any]:
    """One sample as a ``rollouts.jsonl`` row (see docs/rl.md)."""
    gen, scored = r.gens[i], r.scored
    details = scored.details[i]
    return {
        "step": step,
        "group": i // n,
        "index": i % n,
        "prompt": prompt,
        "completion": gen.text,
        "reference": r.records[i].reference,
        "reward": scored.rewards[i],
        "shaped_reward": float(r.rewards[i]),
        "rewards": {name: values[i] for name, values in scored.per_source.items()},
        "advantage": advantages.get(id(gen)),
        "length": len(gen.token_ids),
        "truncated": bool(r.reward.truncated[i]),
        "correct": bool(scored.correct[i]),
        "answer": details_answer(details),
        "details": details,
        "error": scored.sample_errors[i],
        "reward_time_s": rounded_time(scored.times[i]),
        "finish_reason": gen.finish_reason,
        **({"branch": list(gen.branch)} if gen.branch is not None else {}),
    }
