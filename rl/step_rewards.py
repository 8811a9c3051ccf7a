"""Per-step (process) rewards in RL: shaped step rewards on the step-end tokens, returns, step advantages.

A process reward model (or any per-step scorer) gives one score per reasoning step. Summed naively, those
scores reward *length*: a policy learns to repeat correct but useless steps and collects reward for each
(Gao et al., 2024, "On Designing Effective RL Reward at Training Time for LLM Reasoning"). This module
turns step scores into token-level rewards the RL loop can use, with Gao et al.'s fix:

1. the step scores are shaped by :func:`rewardlab.rewardmodels.shaping.shape_step_rewards` (``clip``:
   ``min(r_t - eta, 0)``; ``delta``: ``r_t - r_{t+1}``, last step keeps ``r_T``; ``clip+delta``; ``none``);
2. each shaped step reward is placed on the **last token of its step** (:func:`place_step_rewards`),
   and the verifier's success reward on the last response token
   (:func:`rewardlab.rewardmodels.shaping.functional.success_plus_steps` on the token layout):
   ``r_t = w_s * success * [t = last] + w_p * sum_k shaped_k * [t = end_k]``;
3. the return of token ``t`` is the sum of the future rewards, ``G_t = sum_{s >= t} r_s``
   (:func:`rewardlab.rewardmodels.shaping.functional.discounted_returns`), and the advantage subtracts a
   group baseline of
   the trajectories' total returns (:func:`rewardlab.core_algos.step_return_advantages`, registered in
   :data:`rewardlab.core_algos.ADVANTAGE_ESTIMATORS` as ``step_return``).

Under Clip the return of any trajectory is bounded by the success reward (no step earns positive reward);
under Delta the step rewards telescope to the first step's score. Either way padding a solution with
repeated steps cannot raise its return, which the reward-hacking testbed checks
(:class:`CorrectLookingStepScorer`, :func:`count_repeated_steps`, ``tests/test_reward_hacking.py``,
``bench/reward_hacking.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import torch

from rewardlab.rewardmodels.prm.model import StepScores
from rewardlab.rewardmodels.prm.steps import char_to_token_index, split_steps
from rewardlab.rewardmodels.shaping import shape_step_rewards
from rewardlab.rewardmodels.shaping.functional import pad_steps

Tensor = torch.Tensor

__all__ = [
    "CorrectLookingStepScorer",
    "count_repeated_steps",
    "place_step_rewards",
    "shaped_step_token_rewards",
    "step_end_token_positions",
    "step_token_rewards_from_scores",
]


def place_step_rewards(
    step_rewards: Tensor, step_mask: Tensor, step_token_ends: Tensor, response_mask: Tensor
) -> Tensor:
    """Puts each step's reward on the token that ends the step: ``r_t = sum_k s_k [t = end_k]``, ``(B, T)``.

    * ``step_rewards``, ``step_mask``, ``step_token_ends``: ``(B, S)``; ``step_token_ends`` holds the index
      (within the response, 0-based) of each step's last token.
    * An end outside the response (``-1`` for "not found", or past the last response token, e.g. a step cut
      by the length limit) is moved to the response's last token, so the reward still counts; a sample with
      an empty response gets no reward. Several steps ending on one token add up.
    """
    B, T = response_mask.shape
    lengths = response_mask.sum(-1).long()
    last = (lengths - 1).clamp(min=0)
    ends = step_token_ends.long()
    ends = torch.where((ends < 0) | (ends > last[:, None]), last[:, None].expand_as(ends), ends)
    keep = step_mask.bool() & (lengths[:, None] > 0)
    values = torch.where(keep, step_rewards, torch.zeros_like(step_rewards)).to(torch.float32)
    out = torch.zeros((B, T), dtype=values.dtype)
    out.scatter_add_(1, ends.clamp(0, max(T - 1, 0)), values)
    return out * response_mask


def step_end_token_positions(tokenizer: Any, token_ids: Sequence[int], char_ends: Sequence[int]) -> list[int]:
    """Token index of each step's last token from the step's end offset in the completion text.

    Wraps :func:`rewardlab.rewardmodels.prm.steps.char_to_token_index` (decodes the *generated* ids, so it
    is right whether or not re-tokenising the text would give the same ids). Offsets ``< 0`` (step not
    found in the text) stay ``-1``.
    """

    found = [e for e in char_ends if e > 0]
    mapped = iter(char_to_token_index(tokenizer, token_ids, found)) if found else iter(())
    return [next(mapped) if e > 0 else -1 for e in char_ends]


def step_token_rewards_from_scores(
    step_scores: Sequence[Sequence[float]],
    step_token_ends: Sequence[Sequence[int]],
    response_mask: Tensor,
    *,
    shaping: str = "clip+delta",
    eta: float = 0.0,
) -> tuple[Tensor, dict[str, float]]:
    """Shapes ragged step scores and places them on their step-end tokens; returns ``((B, T), stats)``.

    A NaN score (a step the scorer could not score, e.g. cut by its ``max_length``) is dropped before
    shaping and counted in ``stats["steps/unscored"]``. ``shaping``: ``none``, ``clip``, ``delta``,
    ``clip+delta`` (and the other modes of :data:`rewardlab.rewardmodels.shaping.STEP_SHAPINGS`).
    Stats: ``steps/mean_count``, ``steps/raw_sum_mean`` (mean over samples of the unshaped sum),
    ``steps/shaped_sum_mean``, ``steps/unscored``.
    """

    kept_scores: list[list[float]] = []
    kept_ends: list[list[int]] = []
    unscored = 0
    for scores, ends in zip(step_scores, step_token_ends, strict=True):
        row_s, row_e = [], []
        for s, e in zip(scores, ends, strict=True):
            if s is None or (isinstance(s, float) and math.isnan(s)):
                unscored += 1
                continue
            row_s.append(float(s))
            row_e.append(int(e))
        kept_scores.append(row_s)
        kept_ends.append(row_e)
    raw, mask = pad_steps(kept_scores)
    ends_t, _ = pad_steps(kept_ends, dtype=torch.long, fill=-1)
    shaped = shape_step_rewards(shaping, raw, mask, eta=eta)
    token_rewards = place_step_rewards(shaped, mask, ends_t, response_mask)
    n = max(len(kept_scores), 1)
    stats = {
        "steps/mean_count": float(mask.sum().item()) / n,
        "steps/raw_sum_mean": float((raw * mask).sum().item()) / n,
        "steps/shaped_sum_mean": float((shaped * mask).sum().item()) / n,
        "steps/unscored": float(unscored),
    }
    return token_rewards, stats


def shaped_step_token_rewards(
    scorer: Any,
    records: Sequence[Any],
    token_ids: Sequence[Sequence[int]],
    tokenizer: Any,
    response_mask: Tensor,
    *,
    shaping: str = "clip+delta",
    eta: float = 0.0,
) -> tuple[Tensor, dict[str, float]]:
    """A per-step scorer as an RL reward source: ``(B, T)`` shaped step rewards on the step-end tokens.

    ``scorer`` has ``score_steps_detailed(records) -> list[StepScores]`` (scores, steps and character ends
    in ``record.completion_text``), as :class:`rewardlab.rewardmodels.prm.ProcessRewardModel` and
    :class:`CorrectLookingStepScorer` do. ``token_ids[i]`` are the generated ids of sample ``i`` (the
    response part of ``response_mask``). Add the success reward with
    :func:`rewardlab.rewardmodels.shaping.functional.success_plus_steps`.
    """
    detailed = scorer.score_steps_detailed(records)
    ends = [
        step_end_token_positions(tokenizer, ids, d.step_ends)
        for ids, d in zip(token_ids, detailed, strict=True)
    ]
    return step_token_rewards_from_scores(
        [d.scores for d in detailed], ends, response_mask, shaping=shaping, eta=eta
    )


# --------------------------------------------------------------------------------------------------------------
# The reward-hacking testbed
# --------------------------------------------------------------------------------------------------------------

_EQUATION = re.compile(r"^\s*(-?\d+)\s*([-+*])\s*(-?\d+)\s*=\s*(-?\d+)\s*$")


def _normalise_step(step: str) -> str:
    return re.sub(r"\s+", "", step)


def count_repeated_steps(text: str, separator: str = "\n") -> int:
    """Number of steps (non-blank lines) that repeat an earlier step of the same text, spaces ignored."""
    seen: set[str] = set()
    repeated = 0
    for line in text.split(separator):
        key = _normalise_step(line)
        if not key:
            continue
        if key in seen:
            repeated += 1
        seen.add(key)
    return repeated


class CorrectLookingStepScorer:
    """A scripted per-step scorer with a real PRM's flaw: every step that *looks* correct scores high.

    Steps are the non-blank lines of the completion. An arithmetic step ``a op b = c`` that is true scores
    ``correct_score`` (also when it merely repeats an earlier step: that is the flaw), a false one
    ``wrong_score``, any other line ``other_score``. Implements ``score_steps_detailed`` (the interface of
    :class:`rewardlab.rewardmodels.prm.ProcessRewardModel`) and ``score_steps``.
    """

    name = "correct_looking_steps"

    def __init__(
        self,
        correct_score: float = 1.0,
        wrong_score: float = -1.0,
        other_score: float = 0.0,
        separator: str = "\n",
    ) -> None:
        self.correct_score = correct_score
        self.wrong_score = wrong_score
        self.other_score = other_score
        self.separator = separator

    def score_step(self, step: str) -> float:
        """The score of one step's text."""
        m = _EQUATION.match(step)
        if not m:
            return self.other_score
        a, op, b, c = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
        value = a + b if op == "+" else a - b if op == "-" else a * b
        return self.correct_score if value == c else self.wrong_score

    def score_steps_detailed(self, records: Sequence[Any]) -> list[Any]:
        """Per-record ``StepScores`` (scores, step texts, character ends in ``record.completion_text``)."""

        out = []
        for record in records:
            text = record.completion_text if hasattr(record, "completion_text") else str(record)
            steps = split_steps(text, separator=self.separator, step_tag=None)
            out.append(
                StepScores(
                    scores=[self.score_step(s) for s in steps.steps], steps=steps.steps, step_ends=steps.ends
                )
            )
        return out

    def score_steps(self, records: Sequence[Any]) -> list[list[float]]:
        """One score per step of each record."""
        return [s.scores for s in self.score_steps_detailed(records)]
