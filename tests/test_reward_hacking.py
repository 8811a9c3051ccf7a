"""The reward-hacking testbed of issue 7 (Gao et al., 2024): a flawed per-step scorer, padded trajectories.

A scripted scorer gives every correct-looking step a positive score. Padding a correct solution with k
repeated correct steps then raises the raw return (success + sum of step scores) by k; under Clip, Delta
and Clip+Delta the shaped return of the padded trajectory must not exceed the unpadded one. Everything goes
through the real token pipeline: the tiny tokenizer, step-end tokens, token rewards, returns, advantages.
"""

from __future__ import annotations

import random

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.rewardmodels.shaping.functional import success_plus_steps
from rewardlab.rl.step_rewards import (
    CorrectLookingStepScorer,
    count_repeated_steps,
    shaped_step_token_rewards,
    step_token_rewards_from_scores,
)
from rewardlab.types import Record

BASE = ["7*3=21", "12+21=33", "Answer: 33"]
SHAPINGS = ["clip", "delta", "clip+delta"]


def padded(k: int, repeat: str = "12+21=33") -> str:
    steps = BASE[:2] + [repeat] * k + BASE[2:]
    return "\n".join(steps)


def _token_returns(tokenizer, texts, success, shaping, scorer=None):
    scorer = scorer or CorrectLookingStepScorer()
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
    T = max(len(x) for x in ids)
    mask = torch.zeros(len(ids), T)
    for i, x in enumerate(ids):
        mask[i, : len(x)] = 1
    records = [Record(prompt="12+7*3=", completion=t) for t in texts]
    step_tok, stats = shaped_step_token_rewards(scorer, records, ids, tokenizer, mask, shaping=shaping)
    rewards = success_plus_steps(torch.tensor(success), step_tok, mask)
    return ca.discounted_returns(rewards, mask), rewards, mask, stats


def test_scripted_scorer_and_repeat_counter():
    s = CorrectLookingStepScorer()
    assert s.score_steps([Record(completion=padded(2))]) == [[1.0, 1.0, 1.0, 1.0, 0.0]]
    assert s.score_step("2+2=5") == -1.0 and s.score_step("3 - 5 = -2") == 1.0
    assert count_repeated_steps(padded(0)) == 0 and count_repeated_steps(padded(3)) == 3
    assert count_repeated_steps("a\n\n a \nb") == 1


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_raw_return_grows_with_padding_but_shaped_return_does_not(tiny_tokenizer, k):
    texts = [padded(0), padded(k)]
    raw, _, _, _ = _token_returns(tiny_tokenizer, texts, [1.0, 1.0], "none")
    # raw: success 1 + one per correct step -> 3 unpadded, 3 + k padded
    assert raw[0, 0].item() == pytest.approx(3.0) and raw[1, 0].item() == pytest.approx(3.0 + k)
    for shaping in SHAPINGS:
        ret, _, _, _ = _token_returns(tiny_tokenizer, texts, [1.0, 1.0], shaping)
        assert ret[1, 0] <= ret[0, 0] + 1e-6, (shaping, ret[:, 0])


def test_shaped_returns_by_hand(tiny_tokenizer):
    texts = [padded(0), padded(3)]
    for shaping, expected in [("clip", 1.0), ("delta", 2.0), ("clip+delta", 1.0)]:
        ret, _, _, _ = _token_returns(tiny_tokenizer, texts, [1.0, 1.0], shaping)
        # Clip: every correct step 0 -> success only; Delta: success + first step's score (1);
        # Clip+Delta: success + clipped first step (0)
        assert ret[:, 0].tolist() == pytest.approx([expected, expected]), shaping


def test_step_rewards_land_on_step_end_tokens(tiny_tokenizer):
    text = padded(0)
    _, rewards, mask, stats = _token_returns(tiny_tokenizer, [text], [0.0], "none")
    # char-level tokenizer: token i is character i; "7*3=21" ends at index 5, "12+21=33" at 14
    nz = torch.nonzero(rewards[0]).flatten().tolist()
    assert nz == [5, 14]
    assert rewards[0, 5] == 1.0 and rewards[0, 14] == 1.0
    assert stats["steps/mean_count"] == 3 and stats["steps/raw_sum_mean"] == 2.0
    # the success reward lands on the last response token (the EOS)
    _, rewards, mask, _ = _token_returns(tiny_tokenizer, [text], [1.0], "clip")
    last = int(mask.sum()) - 1
    assert torch.nonzero(rewards[0]).flatten().tolist() == [last] and rewards[0, last] == 1.0


def test_wrong_steps_still_cost_under_clip(tiny_tokenizer):
    clean = padded(0)
    wrong = "7*3=20\n12+20=32\nAnswer: 33"
    ret, _, _, _ = _token_returns(tiny_tokenizer, [clean, wrong], [1.0, 1.0], "clip")
    assert ret[1, 0] == pytest.approx(ret[0, 0].item() - 1.0)  # the false step 7*3=20 costs -1
    ret, _, _, _ = _token_returns(tiny_tokenizer, [clean, wrong], [1.0, 1.0], "clip+delta")
    assert ret[1, 0] < ret[0, 0]


def test_step_advantages_prefer_padding_only_without_shaping(tiny_tokenizer):
    texts = [padded(0), padded(1), padded(4), padded(0)]
    success = [1.0, 1.0, 1.0, 0.0]
    _, rewards, mask, _ = _token_returns(tiny_tokenizer, texts, success, "none")
    adv, _ = ca.compute_advantages("step_return", rewards, mask, group_size=4)
    assert adv[2, 0] > adv[1, 0] > adv[0, 0]  # the flawed scorer pays for padding
    _, rewards, mask, _ = _token_returns(tiny_tokenizer, texts, success, "clip+delta")
    adv, _ = ca.compute_advantages("step_return", rewards, mask, group_size=4)
    assert adv[2, 0] <= adv[0, 0] + 1e-6 and adv[1, 0] <= adv[0, 0] + 1e-6
    assert adv[3, 0] < adv[0, 0]  # the wrong final answer is still worse


@pytest.mark.parametrize("seed", range(5))
def test_random_trajectories_cannot_gain_by_repeating_steps(seed):
    """Any step scores, any step repeated anywhere any number of times: shaped return never grows."""
    rng = random.Random(seed)
    for _ in range(50):
        n = rng.randint(1, 6)
        scores = [rng.uniform(-1, 1) for _ in range(n)]
        j = rng.randrange(n)
        k = rng.randint(1, 5)
        pos = rng.randint(j + 1, n)  # a repeat comes after the step it repeats
        pad = scores[:pos] + [scores[j]] * k + scores[pos:]
        ends = [list(range(len(scores))), list(range(len(pad)))]
        mask = torch.ones(2, len(pad) + 1)
        mask[0, len(scores) + 1 :] = 0
        for shaping in SHAPINGS:
            tok, _ = step_token_rewards_from_scores([scores, pad], ends, mask, shaping=shaping)
            total = tok.sum(-1)
            assert total[1] <= total[0] + 1e-5, (shaping, scores, pad)
        tok, _ = step_token_rewards_from_scores([scores, pad], ends, mask, shaping="none")
        if scores[j] > 0:
            assert tok.sum(-1)[1] > tok.sum(-1)[0]
