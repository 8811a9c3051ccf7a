"""Unit tests of rewardlab.core_algos against values computed by hand (in the comments)."""

from __future__ import annotations

import math

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.rewardmodels.shaping.functional import dapo_overlong_penalty, truncation_handling

ATOL = 1e-6


def close(a, b, atol=ATOL):
    return torch.allclose(
        torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=atol
    )


# ---------------------------------------------------------------------------------------------------- advantages


def test_grpo_group_normalised_by_hand():
    # group 1: rewards 1,0,0,1 -> mean 0.5, unbiased std sqrt(1/3) = 0.57735 -> A = +-0.5 / 0.57735 = +-0.866025
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 4.0, 6.0, 8.0])
    adv = ca.group_normalized_advantages(r, 4, eps=0.0)
    s = math.sqrt(1 / 3)
    # group 2: mean 5, unbiased std sqrt((9+1+1+9)/3) = sqrt(20/3)
    s2 = math.sqrt(20 / 3)
    expected = [0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, -3 / s2, -1 / s2, 1 / s2, 3 / s2]
    assert close(adv, expected)


def test_grpo_eps_enters_denominator():
    r = torch.tensor([1.0, 0.0])  # std = sqrt(0.5) = 0.7071
    adv = ca.group_normalized_advantages(r, 2, eps=0.1)
    assert close(adv, [0.5 / (math.sqrt(0.5) + 0.1), -0.5 / (math.sqrt(0.5) + 0.1)])


def test_dr_grpo_is_mean_only():
    r = torch.tensor([3.0, 1.0, 2.0, 2.0])
    assert close(ca.group_normalized_advantages(r, 2, scale="none"), [1.0, -1.0, 0.0, 0.0])
    adv, ret = ca.compute_advantages("dr_grpo", r, torch.ones(4, 2), group_size=2)
    assert close(adv, [[1, 1], [-1, -1], [0, 0], [0, 0]])
    assert close(ret, adv)


def test_batch_scaled_std():
    r = torch.tensor([1.0, 0.0, 3.0, 3.0])
    # group means 0.5 and 3; batch unbiased std of (1,0,3,3): mean 1.75, sq dev .5625+3.0625+1.5625*2=6.75 /3
    bstd = math.sqrt(6.75 / 3)
    adv = ca.group_normalized_advantages(r, 2, scale="batch", eps=0.0)
    assert close(adv, [0.5 / bstd, -0.5 / bstd, 0.0, 0.0])


def test_rloo_leave_one_out_by_hand():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    # A_0 = 1 - 0 = 1; A_1 = 0 - (1+0+0)/3 = -1/3
    assert close(ca.rloo_advantages(r, 4), [1.0, -1 / 3, -1 / 3, -1 / 3])
    # identity: G/(G-1) * (r - mean)
    r = torch.randn(12, generator=torch.Generator().manual_seed(0))
    grouped = r.view(-1, 4)
    ref = (4 / 3 * (grouped - grouped.mean(1, keepdim=True))).reshape(-1)
    assert close(ca.rloo_advantages(r, 4), ref, atol=1e-5)


@pytest.mark.parametrize("scale", [1e-3, 0.1, 1.0, 7.3, 1e6])
def test_zero_variance_groups_have_exactly_zero_advantage(scale):
    # 0.1 * 3 / 3 != 0.1 in floating point; the advantage must still be exactly 0, not rounding / eps.
    r = torch.full((6,), 0.1 * scale)
    for name in ("grpo", "dr_grpo", "rloo"):
        adv, _ = ca.compute_advantages(name, r, torch.ones(6, 3), group_size=3)
        assert torch.equal(adv, torch.zeros_like(adv)), name
    assert ca.frac_zero_std_groups(r, 3) == 1.0


def test_missing_rewards_are_excluded_from_the_baseline():
    rewards, valid, n_missing = ca.optional_rewards([1.0, None, 0.0, 0.5, None, None])
    assert n_missing == 3 and valid.tolist() == [True, False, True, True, False, False]
    assert not torch.isnan(rewards).any()
    adv = ca.group_normalized_advantages(rewards, 3, valid=valid, eps=0.0)
    # group 1: valid (1, 0): mean .5, std sqrt(.5); group 2: one valid sample -> no baseline -> 0
    s = math.sqrt(0.5)
    assert close(adv, [0.5 / s, 0.0, -0.5 / s, 0.0, 0.0, 0.0])
    rl = ca.rloo_advantages(rewards, 3, valid=valid)
    assert close(rl, [1.0, 0.0, -1.0, 0.0, 0.0, 0.0])
    mask = ca.apply_sample_mask(torch.ones(6, 2), valid)
    assert mask.sum() == 6


def test_group_std_and_dynamic_sampling_filter_on_std_not_mean():
    r = torch.tensor([0.3, 0.3, 0.3, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.9, 0.4])
    keep = ca.dynamic_sampling_keep(r, 3)
    # (0.3,0.3,0.3) has mean strictly inside (0,1) but zero std: dropped; (1,1,1) dropped; others kept
    assert keep.tolist() == [False, True, False, True]
    assert close(ca.group_reward_std(r, 3)[0], 0.0)
    assert close(ca.group_reward_std(r, 3)[1], math.sqrt(1 / 3))
    assert ca.frac_zero_std_groups(r, 3) == 0.5
    assert ca.dynamic_sampling_keep(r, 3, min_std=0.5).tolist() == [False, True, False, False]


def test_reinforce_pp_returns_and_whitening():
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, -0.5, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv, ret = ca.compute_advantages("reinforce_pp", rewards, mask)
    assert close(ret, [[1, 1, 1], [-0.5, -0.5, 0]])
    vals = torch.tensor([1, 1, 1, -0.5, -0.5])
    expected = (vals - vals.mean()) / torch.sqrt(vals.var() + 1e-8)
    assert close(adv[mask.bool()], expected, atol=1e-5)
    assert adv[1, 2] == 0
    # discounted: G = r_t + gamma G_{t+1}
    _, ret = ca.compute_advantages("reinforce_pp", rewards, mask, gamma=0.5)
    assert close(ret[0], [0.25, 0.5, 1.0])


def test_reinforce_pp_baseline():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    mask = torch.ones(4, 2)
    adv, centered = ca.compute_advantages("reinforce_pp_baseline", r, mask, group_size=2)
    assert close(centered, [[0.5, 0.5], [-0.5, -0.5], [0, 0], [0, 0]])
    vals = centered.reshape(-1)
    assert close(adv.reshape(-1), (vals - vals.mean()) / torch.sqrt(vals.var() + 1e-8), atol=1e-5)


def test_gae_by_hand():
    # one sequence, rewards (0, 1), values (0.5, 0.2), gamma 0.9, lam 0.8
    # delta_1 = 1 + 0 - 0.2 = 0.8 ; A_1 = 0.8
    # delta_0 = 0 + 0.9*0.2 - 0.5 = -0.32 ; A_0 = -0.32 + 0.9*0.8*0.8 = 0.256
    r = torch.tensor([[0.0, 1.0]])
    v = torch.tensor([[0.5, 0.2]])
    m = torch.ones(1, 2)
    adv, ret = ca.gae_advantages(r, m, values=v, gamma=0.9, lam=0.8, whiten=False)
    assert close(adv, [[0.256, 0.8]])
    assert close(ret, [[0.756, 1.0]])
    # gamma = lam = 1: A_t = sum of future rewards - V_t
    adv, _ = ca.compute_advantages("gae", r, m, values=v, whiten=False)
    assert close(adv, [[0.5, 0.8]])
    # padding in the middle is skipped by the recursion; padding at the end carries 0
    r2 = torch.tensor([[0.0, 9.0, 1.0, 5.0]])
    v2 = torch.tensor([[0.5, 7.0, 0.2, 3.0]])
    m2 = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    adv2, _ = ca.gae_advantages(r2, m2, values=v2, gamma=0.9, lam=0.8, whiten=False)
    assert close(adv2, [[0.256, 0.0, 0.8, 0.0]])


def test_gae_whitened():
    r = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    v = torch.zeros(2, 2)
    adv, _ = ca.gae_advantages(r, torch.ones(2, 2), values=v, whiten=True)
    assert close(adv.mean(), 0.0) and close(adv.reshape(-1).var(), 1.0, atol=1e-5)


def test_discounted_returns_masked():
    r = torch.tensor([[1.0, 2.0, 3.0]])
    assert close(ca.discounted_returns(r, torch.ones(1, 3)), [[6, 5, 3]])
    assert close(ca.discounted_returns(r, torch.tensor([[1.0, 1.0, 0.0]])), [[3, 2, 0]])


def test_truncation_and_overlong():
    rewards = torch.tensor([1.0, 0.5, 0.0])
    truncated = torch.tensor([False, True, True])
    r, keep, stats = truncation_handling(rewards, truncated, "mask")
    assert keep.tolist() == [True, False, False] and close(r, rewards)
    assert stats["num_truncated"] == 2 and close(stats["completions/clipped_ratio"], 2 / 3)
    r, keep, _ = truncation_handling(rewards, truncated, "penalize", penalty=-1.0)
    assert keep.all() and close(r, [1.0, -1.0, -1.0])
    with pytest.raises(ValueError):
        truncation_handling(rewards, truncated, "drop")
    # L_max = 10, L_cache = 4: <= 6 -> 0; 8 -> (6 - 8) / 4 = -0.5; 11 -> -1
    pen = dapo_overlong_penalty(torch.tensor([5, 6, 8, 10, 11]), 10, 4)
    assert close(pen, [0, 0, -0.5, -1.0, -1.0])


def test_group_shape_errors():
    with pytest.raises(ValueError):
        ca.group_normalized_advantages(torch.zeros(5), 2)
    with pytest.raises(KeyError):
        ca.compute_advantages("nope", torch.zeros(2), torch.ones(2, 1))


# ---------------------------------------------------------------------------------------------------- aggregation


def _loss_and_mask():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 100.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    return loss, mask


def test_aggregation_modes_by_hand():
    loss, mask = _loss_and_mask()
    # token-mean: (1+2+3+4)/4 = 2.5
    assert close(ca.agg_loss(loss, mask, "token-mean"), 2.5)
    # seq-mean-token-mean: (2 + 4)/2 = 3
    assert close(ca.agg_loss(loss, mask, "seq-mean-token-mean"), 3.0)
    # seq-mean-token-sum: (6 + 4)/2 = 5
    assert close(ca.agg_loss(loss, mask, "seq-mean-token-sum"), 5.0)
    # Dr.GRPO: 10 / (2 * 3) ; with max_len 5: 10 / 10
    assert close(ca.agg_loss(loss, mask, "seq-mean-token-sum-norm"), 10 / 6)
    assert close(ca.agg_loss(loss, mask, "seq-mean-token-sum-norm", max_len=5), 1.0)


def test_aggregation_global_counts():
    loss, mask = _loss_and_mask()
    assert close(ca.agg_loss(loss, mask, "token-mean", global_num_tokens=8), 10 / 8)
    assert close(ca.agg_loss(loss, mask, "seq-mean-token-mean", global_num_seqs=4), 6 / 4)
    assert close(ca.agg_loss(loss, mask, "seq-mean-token-sum", global_num_seqs=4), 10 / 4)
    assert close(ca.agg_loss(loss, mask, "seq-mean-token-sum-norm", global_num_seqs=4, max_len=5), 10 / 20)
    assert close(ca.agg_loss(loss, mask, "token-mean", global_num_tokens=8, dp_size=2), 20 / 8)
    assert ca.batch_counts(mask) == (4, 2)
    assert ca.batch_counts(torch.tensor([[1.0, 0.0], [0.0, 0.0]])) == (1, 1)


def test_aggregation_ignores_nan_outside_mask():
    loss = torch.tensor([[1.0, float("nan")]])
    mask = torch.tensor([[1.0, 0.0]])
    for mode in ca.LOSS_AGG_MODES.names():
        assert torch.isfinite(ca.agg_loss(loss, mask, mode)), mode


# ---------------------------------------------------------------------------------------------------- KL, entropy


def test_kl_estimators_by_hand():
    lp = torch.tensor([math.log(0.5)])
    ref = torch.tensor([math.log(0.25)])
    # d = log ref - log p = -log 2
    assert close(ca.kl_penalty(lp, ref, "k1"), [math.log(2)])
    assert close(ca.kl_penalty(lp, ref, "k2"), [0.5 * math.log(2) ** 2])
    assert close(ca.kl_penalty(lp, ref, "k3"), [0.5 + math.log(2) - 1])
    assert close(ca.kl_penalty(lp, ref, "low_var_kl"), ca.kl_penalty(lp, ref, "k3"))
    assert close(ca.kl_penalty(lp, ref, "k1", clamp=0.1), [0.1])


def test_kl_estimators_are_unbiased_in_expectation():
    # p = (0.7, 0.3), q = (0.4, 0.6): E_p[k1] = E_p[k3] = KL(p||q)
    p = torch.tensor([0.7, 0.3])
    q = torch.tensor([0.4, 0.6])
    kl = (p * (p / q).log()).sum()
    for kind in ("k1", "k3"):
        est = (p * ca.kl_penalty(p.log(), q.log(), kind)).sum()
        assert close(est, kl), kind


def test_kl_in_reward():
    scores = torch.tensor([[0.0, 1.0]])
    lp = torch.tensor([[math.log(0.5), math.log(0.5)]])
    ref = torch.tensor([[math.log(0.25), math.log(0.5)]])
    rewards, stats = ca.apply_kl_penalty(scores, lp, ref, torch.ones(1, 2), beta=0.1, kind="k1")
    assert close(rewards, [[-0.1 * math.log(2), 1.0]])
    assert close(stats["kl"], math.log(2) / 2)


def test_kl_controllers():
    c = ca.AdaptiveKLController(value=0.1, target=6.0, horizon=100)
    c.update(12.0, 10)  # error clipped to 0.2 -> 0.1 * (1 + 0.2 * 0.1) = 0.102
    assert close(c.value, 0.102)
    f = ca.FixedKLController(0.05)
    f.update(100.0, 10)
    assert f.value == 0.05


def test_entropy_and_logprobs_from_logits():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [math.log(3.0), 0.0, -1e9, -1e9]]])
    ent = ca.entropy_from_logits(logits)
    # uniform over 4: log 4 ; (3/4, 1/4): -(.75 log .75 + .25 log .25)
    assert close(ent, [[math.log(4), -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))]], atol=1e-5)
    lp = ca.logprobs_from_logits(logits, torch.tensor([[2, 0]]))
    assert close(lp, [[math.log(0.25), math.log(0.75)]], atol=1e-6)
    # temperature 2 on (log 3, 0): softmax (sqrt3, 1)/(sqrt3+1)
    lp2 = ca.logprobs_from_logits(logits[:, 1:], torch.tensor([[0]]), temperature=2.0)
    assert close(lp2, [[math.log(math.sqrt(3) / (math.sqrt(3) + 1))]], atol=1e-6)


# ---------------------------------------------------------------------------------------------------- policy loss


def test_ppo_clipped_surrogate_by_hand():
    # ratios 1.5, 0.5, 1.1, 0.7 with advantages +1, -1, +1, +1 ; eps 0.2
    ratio = torch.tensor([[1.5, 0.5, 1.1, 0.7]])
    adv = torch.tensor([[1.0, -1.0, 1.0, 1.0]])
    old = torch.zeros(1, 4)
    lp = ratio.log()
    out = ca.ppo_policy_loss(lp, old, adv, torch.ones(1, 4))
    # token losses: -min(1.5, 1.2) = -1.2 ; -min(-0.5, -0.8) = 0.8 ; -1.1 ; -min(0.7, 0.8) = -0.7
    assert close(out.per_token_loss, [[-1.2, 0.8, -1.1, -0.7]], atol=1e-6)
    assert close(out.loss, (-1.2 + 0.8 - 1.1 - 0.7) / 4, atol=1e-6)
    # TRL semantics: low = ratio < 1-eps with A<0 (token 2); high = ratio > 1+eps with A>0 (token 1)
    assert out.stats["clip_ratio/low_mean"] == 0.25
    assert out.stats["clip_ratio/high_mean"] == 0.25
    assert out.stats["clip_ratio/region_mean"] == 0.5


def test_clip_higher_and_gradients():
    ratio = torch.tensor([[1.25]])
    lp = ratio.log().requires_grad_()
    out = ca.ppo_policy_loss(
        lp, torch.zeros(1, 1), torch.tensor([[1.0]]), torch.ones(1, 1), clip_ratio_high=0.28
    )
    # 1.25 < 1.28: not clipped, loss -1.25 and d/dlp = -ratio = -1.25
    out.loss.backward()
    assert close(out.loss, -1.25) and close(lp.grad, [[-1.25]])
    lp2 = ratio.log().requires_grad_()
    out2 = ca.ppo_policy_loss(lp2, torch.zeros(1, 1), torch.tensor([[1.0]]), torch.ones(1, 1))
    out2.loss.backward()
    # clipped at 1.2: no gradient
    assert close(out2.loss, -1.2) and close(lp2.grad, [[0.0]])


def test_dual_clip_by_hand():
    # A = -1, ratio 5: standard loss = max(5, 0.8) = 5 ; dual clip c=3 -> min(5, 3) = 3
    lp = torch.tensor([[math.log(5.0), math.log(5.0)]])
    adv = torch.tensor([[-1.0, 1.0]])
    out = ca.ppo_policy_loss(lp, torch.zeros(1, 2), adv, torch.ones(1, 2), clip_ratio_c=3.0)
    # second token: A=+1, ratio 5 -> -min(5, 1.2) = -1.2 (dual clip only for A < 0)
    assert close(out.per_token_loss, [[3.0, -1.2]], atol=1e-5)
    assert out.stats["clip_ratio/dual_mean"] == 0.5
    with pytest.raises(ValueError):
        ca.ppo_policy_loss(lp, torch.zeros(1, 2), adv, torch.ones(1, 2), clip_ratio_c=0.5)


def test_gspo_sequence_ratio_by_hand():
    # log ratios (0.1, 0.3) -> mean 0.2 -> s = e^0.2 = 1.2214 for both tokens; eps 0.3 -> not clipped
    lp = torch.tensor([[0.1, 0.3, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    out = ca.ppo_policy_loss(
        lp, torch.zeros(1, 3), torch.tensor([2.0]), mask, ratio_level="sequence", clip_ratio_high=0.3
    )
    s = math.exp(0.2)
    assert close(out.per_token_loss, [[-2 * s, -2 * s, 0.0]], atol=1e-5)
    g = ca.compute_policy_loss("gspo", lp, torch.zeros(1, 3), torch.tensor([2.0]), mask)
    # GSPO defaults eps_high = 4e-4: clipped at 1.0004
    assert close(g.loss, -2 * 1.0004, atol=1e-5) and g.stats["clip_ratio/high_mean"] == 1.0


def test_policy_loss_with_is_weights_and_padding_garbage():
    lp = torch.tensor([[0.0, 0.0, 50.0]], requires_grad=True)
    old = torch.tensor([[0.0, 0.0, -50.0]])  # padding position with a huge log ratio
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    w = torch.tensor([[2.0, 0.5, 0.0]])
    out = ca.ppo_policy_loss(lp, old, torch.tensor([1.0]), mask, is_weights=w)
    out.loss.backward()
    assert close(out.per_token_loss, [[-2.0, -0.5, 0.0]])
    assert torch.isfinite(lp.grad).all() and lp.grad[0, 2] == 0


def test_value_loss_by_hand():
    v = torch.tensor([[1.0, 0.0]])
    old = torch.tensor([[0.5, 0.0]])
    ret = torch.tensor([[0.0, 1.0]])
    loss, stats = ca.ppo_value_loss(v, old, ret, torch.ones(1, 2), cliprange_value=0.2)
    # token 0: unclipped 1, clipped V=0.7 -> 0.49 ; max = 1 -> 0.5 ; token 1: both 1 -> 0.5 ; mean 0.5
    assert close(loss, 0.5) and stats["vf_clipfrac"] == 0.0
    v = torch.tensor([[0.0, 0.0]])
    old = torch.tensor([[-1.0, 0.0]])
    ret = torch.tensor([[1.0, 0.0]])
    loss, stats = ca.ppo_value_loss(v, old, ret, torch.ones(1, 2), cliprange_value=0.2)
    # token 0: unclipped 1, clipped V=-0.8 -> 3.24 -> 0.5 * 3.24 = 1.62; token 1: 0 -> mean 0.81
    assert close(loss, 0.81) and stats["vf_clipfrac"] == 0.5
    loss, _ = ca.ppo_value_loss(v, old, ret, torch.ones(1, 2), cliprange_value=None)
    assert close(loss, 0.25)


# ---------------------------------------------------------------------------------------------------- rollout IS


def test_rollout_importance_weights_by_hand():
    old = torch.log(torch.tensor([[0.5, 0.5, 0.9], [0.2, 0.2, 0.2]]))
    mu = torch.log(torch.tensor([[0.25, 0.5, 0.1], [0.2, 0.4, 0.2]]))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    w, keep, stats = ca.rollout_importance_weights(old, mu, mask, cap=2.0)
    # token ratios: 2, 1, (masked) ; 1, 0.5, 1
    assert close(w, [[2.0, 1.0, 0.0], [1.0, 0.5, 1.0]], atol=1e-6)
    assert keep.all()
    assert close(stats["rollout_is/ratio_mean"], 5.5 / 5, atol=1e-6)
    assert close(stats["rollout_is/ratio_min"], 0.5) and close(stats["rollout_is/ratio_max"], 2.0)
    # sequence product ratios 2 and 0.5: inside [1/2, 2]
    w, keep, stats = ca.rollout_importance_weights(
        old, mu, mask, cap=1.5, level="sequence", mask_outside=True
    )
    assert close(w, [[1.5, 1.5, 0.0], [0.5, 0.5, 0.5]], atol=1e-6)
    assert keep.tolist() == [False, False] and stats["rollout_is/masked_frac"] == 1.0
    _, keep, stats = ca.rollout_importance_weights(old, mu, mask, cap=2.0, mask_outside=True)
    assert keep.tolist() == [True, True] and stats["rollout_is/masked_frac"] == 0.0
    # geometric: 2^(1/2) and 0.5^(1/3)
    w, _, _ = ca.rollout_importance_weights(old, mu, mask, level="sequence", seq_ratio="geometric")
    assert close(w[:, 0], [math.sqrt(2), 0.5 ** (1 / 3)], atol=1e-6)


def test_cispo_by_hand():
    # ratios 7 and 0.5, A = +1 and -2, eps_max 5: weights 5 and 0.5 (detached)
    lp = torch.log(torch.tensor([[0.7, 0.05]])).requires_grad_()
    old = torch.log(torch.tensor([[0.1, 0.1]]))
    adv = torch.tensor([[1.0, -2.0]])
    out = ca.compute_policy_loss("cispo", lp, old, adv, torch.ones(1, 2), clip_ratio_max=5.0)
    expected = [[-5 * 1 * math.log(0.7), -0.5 * -2 * math.log(0.05)]]
    assert close(out.per_token_loss, expected, atol=1e-5)
    out.loss.backward()
    # d/dlp = -w * A / 2 tokens: the clipped token keeps a gradient (unlike PPO)
    assert close(lp.grad, [[-5 / 2, 1.0 / 2]], atol=1e-5)
    assert out.stats["cispo_clip_ratio"] == 0.5


def test_every_registered_function_resolves_and_is_documented():
    import rewardlab.rl.step_rewards  # noqa: F401  (registers step_return)

    for registry in (ca.ADVANTAGE_ESTIMATORS, ca.POLICY_LOSSES, ca.LOSS_AGG_MODES, ca.KL_ESTIMATORS):
        for name in registry.names():
            fn = registry.get(name)
            assert callable(fn) and (fn.__doc__ or "").strip(), (registry.kind, name)
    assert {"grpo", "dr_grpo", "rloo", "reinforce_pp", "gae", "step_return"} <= set(
        ca.ADVANTAGE_ESTIMATORS.names()
    )
