"""Issue 17's advantage estimators and losses, each against its paper's formula on hand-computed inputs:
Pass@k Training's analytic advantages (checked against the definition, by enumerating every k-subset),
verl's ``grpo_passk``, GDPO, PSR/NSR weights and +1/-1 REINFORCE, Lite PPO's normalisation, self-certainty,
and the reward pipeline's per-source matrix."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.rl.config import ConfigError, load_config


def _passk_by_enumeration(rewards: list[float], k: int) -> list[float]:
    """The paper's definition (Chen et al. 2025, sec. 3.2): every k-subset of the group is a "group" whose
    reward is max over it; its advantage is (R - mean) / std over all subsets (population std); a sample's
    advantage is the mean advantage of the subsets that contain it."""
    subsets = list(itertools.combinations(range(len(rewards)), k))
    values = [max(rewards[i] for i in s) for s in subsets]
    mean = statistics.fmean(values)
    std = statistics.pstdev(values)
    if std == 0:
        return [0.0] * len(rewards)
    adv = [(v - mean) / std for v in values]
    return [
        statistics.fmean(a for s, a in zip(subsets, adv, strict=True) if i in s) for i in range(len(rewards))
    ]


@pytest.mark.parametrize(
    ("group", "k"),
    [
        ([1, 0, 0, 0], 2),
        ([1, 1, 0, 0, 0, 0], 3),
        ([0, 1, 0, 1, 1, 0, 0, 0], 4),
        ([1, 0, 0, 0, 0, 0, 0, 0], 8),
        ([1, 1, 1, 0], 2),
        ([0, 0, 1], 1),
    ],
)
def test_passk_analytic_advantages_equal_the_subset_enumeration(group, k):
    got = ca.passk_advantages(torch.tensor(group, dtype=torch.float32), len(group), k=k, eps=0.0)
    assert got.tolist() == pytest.approx(_passk_by_enumeration(group, k), abs=1e-5)


def test_passk_hand_computed_and_edge_cases():
    # N = 4, one right: R = 1 - C(3,2)/C(4,2) = 0.5, s = 0.5; A_pos = 1, A_neg = (0.5 - C(2,1)/C(3,1)) / 0.5
    adv = ca.passk_advantages(torch.tensor([1.0, 0, 0, 0]), 4, k=2, eps=0.0)
    assert adv.tolist() == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])
    # all right / all wrong: no signal; the truncation penalty (-1) is wrong, like 0
    assert ca.passk_advantages(torch.tensor([1.0, 1, 0, -1, 0, 0]), 3, k=2)[:3].tolist() == [0.0] * 3
    assert ca.passk_advantages(torch.tensor([1.0, 1, 0, -1, 0, 0]), 3, k=2)[3:].tolist() == [0.0] * 3
    # k = 1 is GRPO with the population std
    r = torch.tensor([1.0, 0, 0, 1, 1])
    pop = (r - r.mean()) / r.std(unbiased=False)
    assert ca.passk_advantages(r, 5, k=1, eps=0.0).tolist() == pytest.approx(pop.tolist(), abs=1e-6)
    # an invalid sample is out of the group (N = 3) and gets 0; k larger than the group is cut to it
    valid = torch.tensor([True, True, True, False])
    got = ca.passk_advantages(torch.tensor([1.0, 0, 0, 1]), 4, k=2, valid=valid, eps=0.0)
    assert got.tolist() == pytest.approx([*_passk_by_enumeration([1, 0, 0], 2), 0.0], abs=1e-6)
    assert ca.passk_advantages(torch.tensor([1.0, 0]), 2, k=5).tolist() == pytest.approx(
        ca.passk_advantages(torch.tensor([1.0, 0]), 2, k=2).tolist()
    )
    with pytest.raises(ValueError, match="k must be"):
        ca.passk_advantages(torch.tensor([1.0, 0]), 2, k=0)


def test_grpo_passk_credits_only_the_best_sample_like_verl():
    r = torch.tensor([0.2, 0.9, 0.5, 0.1, 1.0, 1.0, 0.0, 0.0])
    adv = ca.max_minus_second_advantages(r, 4, eps=1e-6)
    std0 = statistics.stdev([0.2, 0.9, 0.5, 0.1])
    assert adv[:4].tolist() == pytest.approx([0.0, (0.9 - 0.5) / (std0 + 1e-6), 0.0, 0.0])
    assert adv[4:].tolist() == [0.0] * 4  # a tie at the top: r_max - r_second = 0
    assert ca.max_minus_second_advantages(r, 4, scale="none")[1].item() == pytest.approx(0.4)
    est, _ = ca.compute_advantages("grpo_passk", r, torch.ones(8, 3), group_size=4)
    assert est[:, 0].tolist() == pytest.approx(adv.tolist())


def test_gdpo_normalises_each_source_in_its_group_then_over_the_batch():
    # GDPO's figure 2: two binary rewards, two rollouts per prompt
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    got = ca.gdpo_advantages(rewards, torch.tensor([1.0, 1.0]), 2, eps=0.0)
    # source 0 agrees in both groups (0); source 1: -/+0.7071 and +/-0.7071; batch std of those = 0.8165
    a = 1 / math.sqrt(2)
    summed = torch.tensor([-a, a, a, -a])
    assert got.tolist() == pytest.approx(((summed - summed.mean()) / summed.std()).tolist(), abs=1e-6)
    weighted = ca.gdpo_advantages(rewards, torch.tensor([1.0, 0.5]), 2, eps=0.0)
    assert weighted.tolist() == pytest.approx(
        got.tolist(), abs=1e-6
    )  # one live source: the batch norm undoes w


def test_gdpo_keeps_reward_combinations_apart_where_grpo_merges_them():
    """Three rollouts: (correct, format) = (1, 0), (0, 1), (0, 0). GRPO on the sum gives the first two the
    same advantage; GDPO with correctness weighted 1 and format 0.5 ranks correctness first."""
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    weights = torch.tensor([1.0, 0.5])
    grpo = ca.group_normalized_advantages(rewards.sum(-1), 3)
    gdpo = ca.gdpo_advantages(rewards, weights, 3)
    assert grpo[0] == pytest.approx(grpo[1].item())
    assert gdpo[0] > gdpo[1] > gdpo[2]
    # the per-source group terms by hand: (r - mean) / std per column, weighted, summed
    col = (torch.tensor([1.0, 0, 0]) - 1 / 3) / torch.tensor([1.0, 0, 0]).std()
    summed = col + 0.5 * col[[1, 0, 2]]
    expected = (summed - summed.mean()) / (summed.std() + 1e-6)
    assert gdpo.tolist() == pytest.approx(expected.tolist(), abs=1e-5)


def test_gdpo_estimator_leaves_invalid_samples_out():
    rewards = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
    valid = torch.tensor([True, True, True, False])
    adv, _ = ca.compute_advantages(
        "gdpo",
        torch.zeros(4, 2),
        torch.ones(4, 2),
        group_size=2,
        source_rewards=rewards,
        source_weights=torch.ones(2),
        valid=valid,
    )
    assert adv[3].abs().sum() == 0 and adv[:3].abs().sum() > 0


def test_w_reinforce_is_plus_minus_one_with_the_positive_term_weighted():
    scores = torch.tensor([1.0, 0.0, -1.0, 1.0])
    adv, _ = ca.compute_advantages("reinforce_signed", scores, torch.ones(4, 2))
    assert adv[:, 0].tolist() == [1.0, -1.0, -1.0, 1.0]
    w = ca.reweight_advantages(adv, positive_weight=0.1, negative_weight=1.0)
    assert w[:, 0].tolist() == pytest.approx([0.1, -1.0, -1.0, 0.1])  # L = 0.1 L_PSR + L_NSR
    nsr = ca.reweight_advantages(torch.tensor([0.8, -0.4, 0.0]), positive_weight=0.0)
    assert nsr.tolist() == pytest.approx([0.0, -0.4, 0.0])


def test_lite_ppo_preset_is_group_mean_over_batch_std_with_token_mean():
    cfg = load_config(preset="lite_ppo")
    assert (cfg.algorithm.adv_scale, cfg.algorithm.loss_agg_mode) == ("batch", "token-mean")
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    got = ca.group_normalized_advantages(r, 3, scale=cfg.algorithm.adv_scale, eps=0.0)
    group_mean = torch.tensor([1 / 3] * 3 + [1.0] * 3)
    assert got.tolist() == pytest.approx(((r - group_mean) / r.std()).tolist(), abs=1e-6)


def test_self_certainty_is_the_mean_kl_from_uniform():
    # p = (1/4, 3/4): KL(U || p) = 0.5 log(0.5 / 0.25) + 0.5 log(0.5 / 0.75) = 0.5 log(4 / 3)
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0], [9.0, 9.0]]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    assert ca.self_certainty(logits, mask).item() == pytest.approx(0.25 * math.log(4 / 3), abs=1e-6)
    assert ca.self_certainty(torch.zeros(2, 3, 7), torch.ones(2, 3)).tolist() == pytest.approx(
        [0.0, 0.0], abs=1e-6
    )


def test_source_matrix_carries_the_shaping_penalty_as_a_column():
    from rewardlab.generation import Generation
    from rewardlab.rl.rewards import RewardPipeline
    from rewardlab.types import Record

    def right(prompts, completions, references):
        return [1.0 if c == r else 0.0 for c, r in zip(completions, references, strict=True)]

    def short(prompts, completions, references):
        return [1.0 if len(c) < 3 else 0.0 for c in completions]

    cfg = load_config(overrides=["reward.sources=[]", "reward.truncation=penalize"])
    pipe = RewardPipeline.from_config(cfg, [right, short])
    records = [Record(id=i, prompt="1+1=", completion=c, reference="2", metadata={"group": 0}) for i, c in
               enumerate(["2", "22", "2222", "2"])]  # fmt: skip
    gens = [
        Generation(r.completion, [1] * len(r.completion), [1], None, f)
        for r, f in zip(records, ["stop", "stop", "stop", "length"], strict=True)
    ]
    batch = pipe.score(records, gens)
    matrix, weights = pipe.source_rewards(batch)
    assert weights.tolist() == [1.0, 1.0, 1.0]  # right, short, and the truncation penalty's column
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [0, 0, 0], [1, 1, -3]]
    assert (matrix @ weights).tolist() == batch.rewards.tolist()


def test_config_refuses_what_the_algorithms_cannot_run():
    with pytest.raises(ConfigError, match="passk_k"):
        load_config(overrides=["algorithm.adv_estimator=passk", "algorithm.passk_k=9", "rollout.n=8"])
    with pytest.raises(ConfigError, match="positive_adv_weight"):
        load_config(overrides=["algorithm.positive_adv_weight=-1"])
    with pytest.raises(ConfigError, match=r"prompt_filter\.low"):
        load_config(overrides=["algorithm.prompt_filter.mode=band", "algorithm.prompt_filter.low=0.9"])
    with pytest.raises(ConfigError, match="prompt_filter"):
        load_config(overrides=["algorithm.prompt_filter.mode=sometimes"])
    with pytest.raises(ConfigError, match="length_budget_min"):
        load_config(overrides=["reward.length_budget=max", "reward.length_budget_final_max=50"])
    with pytest.raises(ConfigError, match="async_staleness"):
        load_config(overrides=["rollout.async_staleness=1", "rollout.backend=vllm"])
    with pytest.raises(ConfigError, match="dynamic sampling"):
        load_config(overrides=["rollout.async_staleness=1", "algorithm.dynamic_sampling=true"])
    with pytest.raises(ConfigError, match="async_staleness"):
        load_config(overrides=["rollout.async_staleness=-1"])
    with pytest.raises(ConfigError, match="self_certainty takes no"):
        load_config(overrides=["reward.sources=[{name: self_certainty, kwargs: {x: 1}}]"])
    for preset in ("passk", "gdpo", "w_reinforce", "lite_ppo"):
        load_config(preset=preset)
    load_config(overrides=["reward.sources=[{name: math, weight: 0}, {name: ttrl}, {name: self_certainty}]"])
