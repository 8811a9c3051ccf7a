"""Unit tests of rewardlab.rl.step_rewards: placement on step-end tokens, success + steps, step advantages."""

from __future__ import annotations

import math

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.core_algos import step_return_advantages
from rewardlab.rewardmodels.shaping.functional import pad_steps as pad_step_lists
from rewardlab.rewardmodels.shaping.functional import success_plus_steps
from rewardlab.rl.step_rewards import (
    place_step_rewards,
    step_end_token_positions,
    step_token_rewards_from_scores,
)


def test_place_step_rewards_by_hand():
    steps, smask = pad_step_lists([[0.5, -1.0, 2.0], [3.0]])
    ends, _ = pad_step_lists([[1, 3, 9], [-1]], dtype=torch.long, fill=-1)
    rmask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], dtype=torch.float32)
    out = place_step_rewards(steps, smask, ends, rmask)
    # step 3 ends past the response (index 9 > last = 4): moved to the last token; -1 -> last token (2)
    assert out.tolist() == [[0, 0.5, 0, -1.0, 2.0, 0], [0, 0, 3.0, 0, 0, 0]]


def test_place_step_rewards_same_token_adds_and_empty_response():
    steps, smask = pad_step_lists([[1.0, 2.0], [5.0]])
    ends = torch.tensor([[2, 2], [0, -1]])
    rmask = torch.tensor([[1, 1, 1], [0, 0, 0]], dtype=torch.float32)
    out = place_step_rewards(steps, smask, ends, rmask)
    assert out.tolist() == [[0, 0, 3.0], [0, 0, 0]]


def test_combine_success_and_steps_weights():
    step_tok = torch.tensor([[0.0, 1.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0]])
    rmask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.float32)
    out = success_plus_steps(torch.tensor([1.0, 0.0]), step_tok, rmask, success_weight=2.0, step_weight=0.5)
    assert out.tolist() == [[0, 0.5, 2.0, 0], [1.0, 0, 0, 0]]


def test_token_returns_are_sums_of_future_rewards():
    r = torch.tensor([[0.0, -1.0, 0.0, 0.5, 1.0]])
    assert ca.discounted_returns(r, torch.ones(1, 5)).tolist() == [[0.5, 0.5, 1.5, 1.5, 1.0]]


def test_scores_to_token_rewards_with_shaping_and_nan():
    rmask = torch.ones(1, 6)
    tok, stats = step_token_rewards_from_scores(
        [[0.8, float("nan"), 0.3]], [[1, 3, 5]], rmask, shaping="delta"
    )
    # NaN step dropped -> steps (0.8 @1, 0.3 @5); delta: 0.8 - 0.3 = 0.5 @1, 0.3 @5
    assert tok[0].tolist() == pytest.approx([0, 0.5, 0, 0, 0, 0.3])
    assert stats["steps/unscored"] == 1 and stats["steps/raw_sum_mean"] == pytest.approx(1.1)
    tok, _ = step_token_rewards_from_scores([[0.8, 0.3]], [[1, 5]], rmask, shaping="clip", eta=0.5)
    # clip: min(r - 0.5, 0) -> 0 and -0.2
    assert tok[0].tolist() == pytest.approx([0, 0, 0, 0, 0, -0.2])


def test_step_return_advantages_by_hand():
    # two groups of 2; totals: 1.5, 0.5 | 2.0, 2.0
    r = torch.tensor([[0.5, 0.0, 1.0], [0.0, 0.5, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    m = torch.ones(4, 3)
    adv, ret = step_return_advantages(r, m, group_size=2)
    assert ret[0].tolist() == [1.5, 1.0, 1.0]
    # RLOO baseline (the other member's total): 0.5 for sample 0, 1.5 for sample 1
    assert adv[0].tolist() == pytest.approx([1.0, 0.5, 0.5])
    assert adv[1].tolist() == pytest.approx([-1.0, -1.0, -1.5])
    adv, _ = step_return_advantages(r, m, group_size=2, baseline="mean")
    assert adv[0].tolist() == pytest.approx([0.5, 0.0, 0.0])
    adv, _ = step_return_advantages(r, m, group_size=2, baseline="mean", scale="group", eps=0.0)
    # group std of (1.5, 0.5) = sqrt(0.5)
    assert adv[0, 0].item() == pytest.approx(0.5 / math.sqrt(0.5))
    adv, _ = ca.compute_advantages(
        "step_return", r, m, group_size=2, valid=torch.tensor([True, False, True, True])
    )
    assert adv[1].abs().sum() == 0
    # sample 0 has no valid partner: baseline is its own total -> A_0 = 0 at the first token
    assert adv[0, 0].item() == pytest.approx(0.0)


def test_step_end_token_positions(tiny_tokenizer):
    text = "1+1=2\n2+2=4"
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    # char-level tokenizer: ends at chars 5 and 11 -> tokens 4 and 10
    assert step_end_token_positions(tiny_tokenizer, ids, [5, 11, -1]) == [4, 10, -1]
