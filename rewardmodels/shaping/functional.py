"""Reward-shaping transforms as pure torch functions.

Three levels of rewards, three tensor layouts:

* **per sample**: a 1-D float tensor ``r`` of shape ``[B]``;
* **per group** (several samples of one prompt, as GRPO draws them): ``r`` of shape ``[B]`` plus a 1-D
  integer tensor ``group`` of shape ``[B]`` holding each sample's group id. Groups may have different sizes
  and need not be contiguous;
* **per step** (process rewards, ragged step counts): a padded float tensor ``r`` of shape ``[B, T]`` and a
  boolean ``mask`` of the same shape, ``True`` at real steps. Steps are *left-aligned and contiguous*:
  row ``i`` has its ``n_i`` steps at columns ``0 .. n_i - 1`` (:func:`pad_steps` builds this layout from
  lists, :func:`unpad_steps` goes back). Every step function returns zeros at padded positions.

This module is the one home of every reward transform of the project: the RL loop
(:mod:`rewardlab.rl.rewards`) calls these functions rather than keeping copies. Group statistics, group
normalisation and returns are advantage math: their home is :mod:`rewardlab.core_algos` (a floor below),
and they are re-exported here for the transforms that use them. open-r1's repetition penalty and cosine
length formulas are plain Python in :mod:`rewardlab.verifiers.shaping.formulas` (a floor below: the reward
sources of the same names and the torch-free ``score --shape`` path need no torch), re-exported here too.
Where two callers need different constants (GRPO's eps 1e-6 vs TRL's 1e-4, a lone sample kept or
zeroed, a penalty factor) the function takes the difference as an explicit argument.

Nothing here keeps state or changes its inputs; the one stateful transform (running whitening) keeps its
moments in :class:`RunningMoments` and calls the pure :func:`whiten` / :func:`update_moments`.

Two different "delta" transforms exist for process rewards, and they are not the same thing:

* :func:`progress_delta` is ``d_t = r_t - r_{t-1}`` (with ``r_0 = 0``): the reward of a step is the
  *progress* it makes; the sum over steps telescopes to the **last** step's reward ``r_T``.
* :func:`gao_delta` is Gao et al. (2024)'s Delta mechanism, ``d_t = r_t - r_{t+1}`` for ``t < T`` and
  ``d_T = r_T``; the sum over steps telescopes to the **first** step's reward ``r_1``, and the return from
  step ``t`` (sum of future shaped rewards) is exactly ``r_t``, so padding a trajectory with extra steps
  cannot raise its return.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from rewardlab.core_algos.groups import GroupStats, group_index, group_normalize, group_stats
from rewardlab.core_algos.returns import discounted_returns
from rewardlab.verifiers.shaping.formulas import (
    REPETITION_UNITS,
    check_repetition_settings,
    cosine_length_value,
    ngram_repetition_penalty,
    repetition_tokens,
)

__all__ = [
    "L1_ALPHA",
    "L1_BUDGET_RANGE",
    "L1_DELTA",
    "L1_PROMPT_TEMPLATES",
    "LENGTH_BUDGET_MODES",
    "TRUNCATION_MODES",
    "GroupStats",
    "binarize",
    "check_repetition_settings",
    "budget_schedule",
    "clamp",
    "REPETITION_UNITS",
    "cosine_length_reward",
    "dapo_overlong_penalty",
    "discounted_returns",
    "gao_clip",
    "gao_clip_delta",
    "gao_delta",
    "group_normalize",
    "group_stats",
    "kimi_length_penalty",
    "ngram_repetition_penalty",
    "repetition_tokens",
    "length_budget_reward",
    "min_form",
    "min_form_returns",
    "overlong_mask",
    "pad_steps",
    "progress_delta",
    "sample_budget",
    "scale_shift",
    "step_returns",
    "success_plus_steps",
    "truncation_handling",
    "unpad_steps",
    "update_moments",
    "weighted_sum",
    "whiten",
]


# --------------------------------------------------------------------------------------------------
# layout helpers
# --------------------------------------------------------------------------------------------------


def pad_steps(
    steps: Sequence[Sequence[float]], *, dtype: torch.dtype = torch.float32, fill: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged per-step values -> ``(values [B, T], mask [B, T])``, left-aligned, padded with ``fill``.

    ``T`` is the longest row (at least 1, so an all-empty batch still has a column).
    """
    width = max([len(row) for row in steps] + [1])
    rewards = torch.full((len(steps), width), fill, dtype=dtype)
    mask = torch.zeros(len(steps), width, dtype=torch.bool)
    for i, row in enumerate(steps):
        if len(row):
            rewards[i, : len(row)] = torch.as_tensor(list(row), dtype=dtype)
            mask[i, : len(row)] = True
    return rewards, mask


def unpad_steps(rewards: torch.Tensor, mask: torch.Tensor) -> list[list[float]]:
    """Inverse of :func:`pad_steps`: the real steps of each row as Python floats."""
    return [row[m].tolist() for row, m in zip(rewards, mask.bool(), strict=True)]


def _check_steps(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if rewards.dim() != 2 or rewards.shape != mask.shape:
        raise ValueError(
            f"per-step rewards need rewards [B, T] and a mask of the same shape, got "
            f"{tuple(rewards.shape)} and {tuple(mask.shape)}"
        )
    return mask.bool()


# --------------------------------------------------------------------------------------------------
# elementwise (any level)
# --------------------------------------------------------------------------------------------------


def clamp(rewards: torch.Tensor, lo: float | None = None, hi: float | None = None) -> torch.Tensor:
    """Clamps to an interval: ``r' = min(max(r, lo), hi)``; ``None`` leaves that side open.

    (Named ``clamp``, not ``clip``: "clip" is Gao et al.'s Clip of process rewards, :func:`gao_clip`.)
    """
    return torch.clamp(rewards, min=lo, max=hi)


def scale_shift(rewards: torch.Tensor, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    """Affine map ``r' = scale * r + shift``."""
    return rewards * scale + shift


def binarize(
    rewards: torch.Tensor, threshold: float = 0.5, low: float = 0.0, high: float = 1.0
) -> torch.Tensor:
    """Thresholds: ``r' = high if r >= threshold else low``."""
    return torch.where(
        rewards >= threshold,
        torch.full_like(rewards, high),
        torch.full_like(rewards, low),
    )


def weighted_sum(components: dict[str, torch.Tensor], weights: dict[str, float]) -> torch.Tensor:
    """Weighted sum of named reward components: ``r = sum_k w_k * r_k`` (e.g. 0.9 correctness + 0.1 format).

    Every name in ``weights`` must be in ``components``; components without a weight are ignored.
    """
    missing = [name for name in weights if name not in components]
    if missing:
        raise KeyError(f"weighted_sum: no reward component named {missing} (have {sorted(components)})")
    if not weights:
        raise ValueError("weighted_sum needs at least one weight")
    total = None
    for name, weight in weights.items():
        term = components[name].to(torch.float32) * float(weight)
        total = term if total is None else total + term
    return total


# --------------------------------------------------------------------------------------------------
# per group
# --------------------------------------------------------------------------------------------------


def whiten(rewards: torch.Tensor, mean: float, var: float, *, eps: float = 1e-8) -> torch.Tensor:
    """Whitening with given moments: ``r' = (r - mean) / sqrt(var + eps)``."""
    return (rewards - mean) / math.sqrt(var + eps)


def update_moments(count: float, mean: float, m2: float, batch: torch.Tensor) -> tuple[float, float, float]:
    """Merges a batch into running ``(count, mean, M2)`` (Chan et al.'s parallel Welford update).

    The running variance is ``M2 / count``. Returns the new ``(count, mean, M2)``.
    """
    x = batch.detach().to(torch.float64).flatten()
    n_b = x.numel()
    if n_b == 0:
        return count, mean, m2
    mean_b = float(x.mean())
    m2_b = float(((x - mean_b) ** 2).sum())
    total = count + n_b
    delta = mean_b - mean
    new_mean = mean + delta * n_b / total
    new_m2 = m2 + m2_b + delta * delta * count * n_b / total
    return total, new_mean, new_m2


# --------------------------------------------------------------------------------------------------
# length-based rewards
# --------------------------------------------------------------------------------------------------


def kimi_length_penalty(
    lengths: torch.Tensor, correct: torch.Tensor, group: torch.Tensor | None = None
) -> torch.Tensor:
    """Kimi k1.5's length reward (Kimi Team, 2025, Sec. 2.3.3), per group of samples of one prompt.

    ``lambda_i = 0.5 - (len_i - min_len) / (max_len - min_len)`` with ``min_len`` / ``max_len`` over the
    group; a correct sample gets ``lambda_i``, a wrong one ``min(0, lambda_i)``. So the shortest correct
    answer gets +0.5, the longest -0.5, and wrong answers are only ever penalised. When every sample of a
    group has the same length the reward is 0 (the formula is 0/0; open-r1 does the same). Without
    ``group`` the whole batch is one group. The caller adds ``weight * penalty`` to the reward.
    """
    lengths = torch.as_tensor(lengths, dtype=torch.float64)
    correct = torch.as_tensor(correct).bool()
    if group is None:
        group = torch.zeros(lengths.numel(), dtype=torch.long)
    inverse, n_groups = group_index(group, lengths.numel())
    lo = torch.full((n_groups,), math.inf, dtype=torch.float64).scatter_reduce(
        0, inverse, lengths, reduce="amin"
    )[inverse]
    hi = torch.full((n_groups,), -math.inf, dtype=torch.float64).scatter_reduce(
        0, inverse, lengths, reduce="amax"
    )[inverse]
    span = hi - lo
    lam = torch.where(span > 0, 0.5 - (lengths - lo) / span.clamp(min=1e-12), torch.zeros_like(lengths))
    out = torch.where(correct, lam, lam.clamp(max=0.0))
    return out.to(torch.float32)


def dapo_overlong_penalty(
    lengths: torch.Tensor, max_len: int, cache_len: int, factor: float = 1.0
) -> torch.Tensor:
    """DAPO's soft overlong punishment (Yu et al., 2025, Eq. 13), added to the reward.

    With ``L_max = max_len`` and ``L_cache = cache_len``::

        R(y) = 0                                   if |y| <= L_max - L_cache
             = ((L_max - L_cache) - |y|) / L_cache if L_max - L_cache < |y| <= L_max
             = -1                                  if |y| > L_max

    i.e. 0 up to ``L_max - L_cache`` tokens, then a linear ramp down to -1 at ``L_max``; times ``factor``
    (the RL config's ``reward.overlong_penalty_factor``, the shaping transform's ``weight``).
    The paper's setting is ``L_max = 20480``, ``L_cache = 4096``.
    """
    if cache_len <= 0 or cache_len > max_len:
        raise ValueError(f"need 0 < cache_len <= max_len, got cache_len={cache_len}, max_len={max_len}")
    lengths = torch.as_tensor(lengths).to(torch.float32)
    start = max_len - cache_len
    ramp = (start - lengths) / cache_len
    out = torch.where(lengths <= start, torch.zeros_like(lengths), ramp)
    return torch.where(lengths > max_len, torch.full_like(lengths, -1.0), out) * factor


def overlong_mask(truncated: torch.Tensor) -> torch.Tensor:
    """DAPO's overlong filtering: a loss mask that is 0 for truncated samples, 1 for the rest.

    Truncated samples' rewards are noise (the answer was cut off, not wrong), so their loss is masked.
    """
    return (~torch.as_tensor(truncated).bool()).to(torch.float32)


TRUNCATION_MODES = ("mask", "penalize", "none")
"""What :func:`truncation_handling` can do with truncated samples (the RL config's ``reward.truncation``)."""


def truncation_handling(
    rewards: torch.Tensor, truncated: torch.Tensor, mode: str = "mask", penalty: float = -1.0
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """What to do with completions cut at the length limit (``finish_reason == "length"``).

    * ``"mask"`` -- DAPO's overlong filtering (:func:`overlong_mask`): truncated samples keep their reward
      for the group statistics but are removed from the loss (returned ``keep`` is False for them).
    * ``"penalize"`` -- their reward is replaced by ``penalty`` and they stay in the loss.
    * ``"none"`` -- nothing changes.

    Returns ``(rewards, keep, stats)`` with ``stats["completions/clipped_ratio"]`` (TRL's name for the
    truncated fraction) and ``stats["num_truncated"]``.
    """
    truncated = torch.as_tensor(truncated).bool()
    keep = torch.ones_like(truncated)
    if mode == "mask":
        keep = overlong_mask(truncated).bool()
    elif mode == "penalize":
        rewards = torch.where(truncated, torch.full_like(rewards, penalty), rewards)
    elif mode not in TRUNCATION_MODES:
        raise ValueError(f"unknown truncation mode {mode!r} (known: {', '.join(TRUNCATION_MODES)})")
    n = int(truncated.sum().item())
    stats = {"num_truncated": float(n), "completions/clipped_ratio": n / max(truncated.numel(), 1)}
    return rewards, keep, stats


def cosine_length_reward(
    lengths: torch.Tensor,
    correct: torch.Tensor,
    max_len: int,
    *,
    min_value_correct: float = 0.5,
    max_value_correct: float = 1.0,
    min_value_wrong: float = -1.0,
    max_value_wrong: float = -0.5,
    exceed: float | None = None,
) -> torch.Tensor:
    """Cosine length-scaled reward (open-r1's ``get_cosine_scaled_reward``; Yeo et al., 2025) of each
    sample, a float64 tensor of the broadcast shape of ``lengths`` and ``correct``: the value of
    :func:`rewardlab.verifiers.shaping.formulas.cosine_length_value` (the formula, its settings and their
    meaning) at each element. This *replaces* the correctness reward.

    Element by element rather than ``torch.cos`` on the tensor: torch's vectorised cosine differs from
    ``math.cos`` in the last bit for some inputs, and the source, the transform and the torch-free
    ``rewardlab score --shape`` path must give the same value.
    """
    lengths, correct = torch.broadcast_tensors(
        torch.as_tensor(lengths, dtype=torch.float64), torch.as_tensor(correct).bool()
    )
    values = [
        cosine_length_value(
            length,
            hit,
            max_len,
            min_value_correct=min_value_correct,
            max_value_correct=max_value_correct,
            min_value_wrong=min_value_wrong,
            max_value_wrong=max_value_wrong,
            exceed=exceed,
        )
        for length, hit in zip(lengths.flatten().tolist(), correct.flatten().tolist(), strict=True)
    ]
    return torch.tensor(values, dtype=torch.float64, device=lengths.device).reshape(lengths.shape)


# L1 (Aggarwal & Welleck, 2025, "L1: Controlling How Long A Reasoning Model Thinks With Reinforcement
# Learning", arXiv 2503.04697): the budget is written into the prompt and rewarded against the length.

LENGTH_BUDGET_MODES = ("exact", "max")
"""L1's two objectives: ``exact`` (L1-Exact, Eq. 1) and ``max`` (L1-Max, Eq. 2)."""

L1_ALPHA: dict[str, float] = {"exact": 0.0003, "max": 0.001}
"""Default length-penalty slope ``alpha`` per mode. ``exact``: 0.0003, the paper's Sec. 4 ("Hyperparameters")
and ``scripts/train/run_l1_exact.sh`` of github.com/cmu-l3/l1. ``max``: the paper gives no value; 0.001 is
what the code released with the paper computes (``get_delta_score_max`` in ``deepscaler/rewards/
math_reward.py`` at commit 9b888fb: ``(clip(-(n_y - n_gold) / 500, -1, 1) + 1) / 2``, i.e. Eq. 2 with
``alpha = 1/1000``, ``delta = 0.5``)."""

L1_DELTA = 0.5
"""L1-Max's offset ``delta`` (paper Sec. 3, below Eq. 2): a correct answer slightly over budget still beats
a wrong one."""

L1_BUDGET_RANGE = (100, 4000)
"""``(n_min, n_max)`` of the training budgets, drawn uniformly from the integers in between (paper Sec. 4;
``random.randint(100, 4000)`` in the repo's ``scripts/data/deepscaler_dataset.py``)."""

L1_PROMPT_TEMPLATES: dict[str, str] = {
    "exact": "Think for {budget} tokens.",
    "max": "Think for maximum {budget} tokens.",
}
"""Suffix appended (after a space) to the prompt, per mode: the paper's Sec. 3 ``Concat(x, "Think for
n_gold tokens.")`` and the repo's ``scripts/data/deepscaler_dataset.py`` for both modes. (The project page
writes "Think for exactly n tokens."; the trained models saw the wording here.)"""


def length_budget_reward(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    budgets: torch.Tensor,
    *,
    mode: str = "exact",
    alpha: float | None = None,
    delta: float = L1_DELTA,
) -> torch.Tensor:
    """L1's length-controlled reward (Aggarwal & Welleck, 2025, LCPO, Sec. 3), per sample ``[B]``.

    With ``n_gold`` the budget in the prompt and ``n_y`` the completion length (tokens)::

        exact (Eq. 1):  r = 1[correct] - alpha * |n_gold - n_y|
        max   (Eq. 2):  r = 1[correct] * clip(alpha * (n_gold - n_y) + delta, 0, 1)

    ``exact`` pulls the length to the budget from both sides and can go negative; ``max`` is 0 for wrong
    answers and, for right ones, 1 at ``(1 - delta) / alpha`` or more tokens under budget, ``delta`` at the
    budget, falling linearly to 0 at ``delta / alpha`` tokens over. ``alpha=None`` takes :data:`L1_ALPHA` of the mode. A NaN budget
    gives a NaN reward (the pipeline transform keeps the old reward there). This *replaces* the
    correctness reward.
    """
    if mode not in LENGTH_BUDGET_MODES:
        raise ValueError(f"unknown length budget mode {mode!r} (known: {', '.join(LENGTH_BUDGET_MODES)})")
    alpha = L1_ALPHA[mode] if alpha is None else alpha
    hit = torch.as_tensor(correct).bool().to(torch.float64)
    n_y = torch.as_tensor(lengths).to(torch.float64)
    n_gold = torch.as_tensor(budgets).to(torch.float64)
    if mode == "exact":
        out = hit - alpha * (n_gold - n_y).abs()
    else:
        out = hit * (alpha * (n_gold - n_y) + delta).clamp(0.0, 1.0)
    return out.to(torch.float32)


def budget_schedule(step: int, total_steps: int, *, start: float, end: float) -> float:
    """Budget upper bound at ``step`` for a shrinking-budget (long2short) curriculum.

    ``b(step) = start + (end - start) * min(max(step / total_steps, 0), 1)``: linear from ``start`` at step
    0 to ``end`` at ``total_steps``, constant after. L1 itself keeps ``[100, 4000]`` fixed; tightening the
    limit over training follows ThinkPrune's iterative pruning (Hou et al., 2025, arXiv 2504.01296, rounds
    at 4k, 3k, 2k tokens), here as a smooth ramp rather than rounds.
    """
    if total_steps <= 0:
        raise ValueError(f"budget_schedule needs total_steps > 0, got {total_steps}")
    frac = min(max(step / total_steps, 0.0), 1.0)
    return start + (end - start) * frac


def sample_budget(rng: random.Random, low: int = L1_BUDGET_RANGE[0], high: int = L1_BUDGET_RANGE[1]) -> int:
    """A training budget ``n_gold ~ U{low, ..., high}`` (both ends included), as L1 draws them (Sec. 4).

    With a curriculum pass ``high=int(budget_schedule(...))``; ``high < low`` is refused rather than
    silently swapped, since it means the schedule went below the floor.
    """
    if high < low:
        raise ValueError(f"sample_budget needs low <= high, got low={low}, high={high}")
    return rng.randint(int(low), int(high))


# --------------------------------------------------------------------------------------------------
# per step (process rewards)
# --------------------------------------------------------------------------------------------------


def _next_step(rewards: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(r_{t+1}, mask_{t+1})`` aligned with position ``t`` (0 / False past the end)."""
    nxt = torch.zeros_like(rewards)
    nmask = torch.zeros_like(mask)
    nxt[:, :-1] = rewards[:, 1:]
    nmask[:, :-1] = mask[:, 1:]
    return nxt, nmask


def gao_clip(rewards: torch.Tensor, mask: torch.Tensor, eta: float = 0.0) -> torch.Tensor:
    """Gao et al. (2024)'s Clip mechanism: ``r'_t = min(r_t - eta, 0)``.

    No step earns positive reward, so a trajectory's return is bounded above by 0 whatever its length:
    padding with "correct-looking" steps cannot be rewarded. ``eta`` is the threshold (default 0).
    """
    mask = _check_steps(rewards, mask)
    return torch.where(mask, torch.clamp(rewards - eta, max=0.0), torch.zeros_like(rewards))


def gao_delta(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Gao et al. (2024)'s Delta mechanism: ``r'_t = r_t - r_{t+1}`` for ``t < T``, ``r'_T = r_T``.

    The sum of the shaped rewards from step ``t`` on telescopes to ``r_t``: the whole trajectory's return
    is the first step's reward and cannot grow with repeated steps. (Compare :func:`progress_delta`,
    ``r_t - r_{t-1}``, which telescopes to the last step's reward.)
    """
    mask = _check_steps(rewards, mask)
    r = torch.where(mask, rewards, torch.zeros_like(rewards))
    nxt, nmask = _next_step(r, mask)
    return torch.where(mask, r - torch.where(nmask, nxt, torch.zeros_like(nxt)), torch.zeros_like(r))


def gao_clip_delta(rewards: torch.Tensor, mask: torch.Tensor, eta: float = 0.0) -> torch.Tensor:
    """Clip then Delta (Gao et al., 2024): ``c_t = min(r_t - eta, 0)``, then ``r'_t = c_t - c_{t+1}``
    (``r'_T = c_T``). The return is ``c_1 <= 0``."""
    return gao_delta(gao_clip(rewards, mask, eta), mask)


def progress_delta(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Progress (difference) rewards: ``r'_t = r_t - r_{t-1}`` with ``r_0 = 0``, so ``r'_1 = r_1``.

    Each step is credited with the change in the process score it causes; the sum telescopes to the
    last step's reward ``r_T``. (Gao et al.'s Delta, :func:`gao_delta`, is ``r_t - r_{t+1}`` instead.)
    """
    mask = _check_steps(rewards, mask)
    r = torch.where(mask, rewards, torch.zeros_like(rewards))
    prev = torch.zeros_like(r)
    prev[:, 1:] = r[:, :-1]
    return torch.where(mask, r - prev, torch.zeros_like(r))


def min_form_returns(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """PURE's min-form returns (Cheng et al., 2025): ``G_t = min_{k >= t} r_k`` over the real steps.

    A trajectory is worth its worst future step rather than the sum of its steps, which cannot be
    inflated by adding steps. Padded positions are 0.
    """
    mask = _check_steps(rewards, mask)
    big = torch.finfo(rewards.dtype).max
    r = torch.where(mask, rewards, torch.full_like(rewards, big))
    g = torch.flip(torch.cummin(torch.flip(r, dims=[1]), dim=1).values, dims=[1])
    return torch.where(mask, g, torch.zeros_like(g))


def min_form(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-step rewards whose sum-of-future returns are PURE's min-form returns.

    ``r'_t = G_t - G_{t+1}`` (``r'_T = G_T``) with ``G_t = min_{k >= t} r_k`` (:func:`min_form_returns`),
    so an RL loop that computes returns as the sum of future rewards gets ``G_t`` at every step.
    """
    return gao_delta(min_form_returns(rewards, mask), mask)


def step_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Returns from each step: ``G_t = sum_{k >= t} gamma^(k - t) r_k`` over the real steps
    (:func:`discounted_returns` on the per-step layout; padding may hold anything)."""
    mask = _check_steps(rewards, mask)
    return discounted_returns(torch.where(mask, rewards, torch.zeros_like(rewards)), mask, gamma)


def success_plus_steps(
    success: torch.Tensor,
    step_rewards: torch.Tensor,
    mask: torch.Tensor,
    *,
    success_weight: float = 1.0,
    step_weight: float = 1.0,
) -> torch.Tensor:
    """Outcome plus process rewards (Gao et al., 2024, sec. 4): ``r'_t = step_weight * s_t`` at each
    position plus ``success_weight * success`` on the last one.

    Any left-aligned layout: per step (``[B, S]`` with the step mask) or per response token (``[B, T]``
    with the response mask, ``s_t`` the step rewards placed on their step-end tokens: the RL loop's token
    rewards). A row without positions gets nothing (there is nowhere to place the success reward).
    """
    mask = _check_steps(step_rewards, mask)
    out = torch.where(mask, step_rewards * step_weight, torch.zeros_like(step_rewards))
    _, nmask = _next_step(step_rewards, mask)
    last = mask & ~nmask
    bonus = success.to(out.dtype).unsqueeze(1) * success_weight
    return out + torch.where(last, bonus, torch.zeros_like(out))
