"""PRIME's formulas (core_algos/prime.py) against a transcription of the authors' code (tests/prime_reference.py)
and against hand-computed cases.

Every comparison runs in float64 at 1e-9, on random batches of several seeds, groups of 2..8, ragged response
lengths and all-equal rewards. Where PRIME's two releases differ (see core_algos/prime.py), each option is
compared with the release it follows.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import prime_reference as ref  # tests/prime_reference.py (pytest puts tests/ on the path)
import pytest
import torch
import torch.nn.functional as F

from rewardlab import core_algos as ca
from rewardlab.core_algos import prime

TOL = 1e-9
SEEDS = (0, 1, 2)
GROUP_SIZES = (2, 3, 4, 5, 8)
PROMPT = 3


def close(a: torch.Tensor, b: torch.Tensor, tol: float = TOL) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=0, atol=tol))


def make_batch(seed: int, n: int, groups: int = 3, length: int = 7, equal_outcome: bool = False) -> dict:
    """A verl-shaped batch: prompts, right-padded responses of 1..length tokens, log-probs, 0/1 outcomes."""
    g = torch.Generator().manual_seed(seed * 100 + n)
    b = groups * n
    lengths = torch.randint(1, length + 1, (b,), generator=g)
    lengths[0] = length  # one full-length response, so no column is padding everywhere
    response_mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    input_ids = torch.randint(5, 100, (b, PROMPT + length), generator=g)
    attention_mask = torch.cat([torch.ones(b, PROMPT, dtype=torch.long), response_mask], dim=1)
    rm_lp = -torch.rand(b, length, generator=g, dtype=torch.float64) * 3
    ref_lp = -torch.rand(b, length, generator=g, dtype=torch.float64) * 3
    acc = torch.randint(0, 2, (b,), generator=g).to(torch.float64)
    if equal_outcome:
        acc = torch.ones(b, dtype=torch.float64)
    return {
        "n": n,
        "input_ids": input_ids,
        "prompts": input_ids[:, :PROMPT],
        "responses": input_ids[:, PROMPT:],
        "attention_mask": attention_mask,
        "response_mask": response_mask,
        "rm_lp": rm_lp,
        "ref_lp": ref_lp,
        "acc": acc,
    }


def prm_config(granularity: str, norm: str, beta: float = prime.PRIME_BETA) -> SimpleNamespace:
    return SimpleNamespace(
        prime_granularity=granularity,
        prime_norm=norm,
        model={"beta_train": beta},
        prime_model={"beta_train": beta},
    )


def cases():
    for seed in SEEDS:
        for n in GROUP_SIZES:
            yield seed, n


CASES = list(cases())


@pytest.fixture(autouse=True)
def float64_default():
    """verl's Bessel correction ``mask_sum / (mask_sum - 1)`` divides two integer tensors, which gives the
    default dtype (float32 in PRIME's runs: a 3e-8 relative rounding); float64 here keeps the reference exact."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


# ---- the implicit token rewards -------------------------------------------------------------------------


@pytest.mark.parametrize("seed,n", CASES)
def test_implicit_token_rewards_are_the_recipes_q_times_beta(seed, n):
    d = make_batch(seed, n)
    mask = d["response_mask"]
    _, q = ref.recipe_implicit_reward(
        d, d["rm_lp"].clone(), d["ref_lp"].clone(), PROMPT, prm_config("token", "none")
    )
    ours = prime.implicit_token_rewards(d["rm_lp"], d["ref_lp"], mask, beta=0.05)
    assert close(ours, q * 0.05)
    assert bool((ours[mask == 0] == 0).all())
    assert close(prime.implicit_outcome_logits(ours, mask), (q * mask).sum(dim=1) * 0.05)


def test_implicit_token_rewards_ignore_non_finite_padding():
    mask = torch.tensor([[1, 1, 0]])
    rm = torch.tensor([[-1.0, -2.0, float("-inf")]], dtype=torch.float64)
    rf = torch.tensor([[-1.5, -1.0, float("nan")]], dtype=torch.float64)
    out = prime.implicit_token_rewards(rm, rf, mask, beta=0.1)
    assert close(out, torch.tensor([[0.05, -0.1, 0.0]], dtype=torch.float64))


# ---- granularity and norm -------------------------------------------------------------------------------


@pytest.mark.parametrize("granularity", prime.PRIME_GRANULARITIES)
@pytest.mark.parametrize("norm", prime.PRIME_NORMS)
@pytest.mark.parametrize("seed,n", CASES)
def test_prime_token_rewards_match_prime_rl(seed, n, granularity, norm):
    """PRIME-RL/PRIME's compute_implicit_reward + batch_norm, fed the beta-scaled log-probs (its rm scores are
    the raw log-ratio; ours carry beta, as the recipe's)."""
    d = make_batch(seed, n)
    beta = 0.05
    cfg = prm_config(granularity, norm)
    scores, _ = ref.compute_implicit_reward(d, d["rm_lp"] * beta, d["ref_lp"] * beta, cfg)
    expected = ref.prime_batch_norm(scores, cfg)
    rewards = prime.implicit_token_rewards(d["rm_lp"], d["ref_lp"], d["response_mask"], beta)
    ours = prime.prime_token_rewards(rewards, d["response_mask"], granularity=granularity, norm=norm)
    assert close(ours, expected)


@pytest.mark.parametrize("norm", prime.PRIME_NORMS)
@pytest.mark.parametrize("seed,n", CASES)
def test_drop_last_token_is_the_recipes_token_granularity(seed, n, norm):
    d = make_batch(seed, n)
    cfg = prm_config("token", norm)
    scores, _ = ref.recipe_implicit_reward(d, d["rm_lp"].clone(), d["ref_lp"].clone(), PROMPT, cfg)
    expected = ref.recipe_prime_norm(scores, cfg)
    rewards = prime.implicit_token_rewards(d["rm_lp"], d["ref_lp"], d["response_mask"], 0.05)
    ours = prime.prime_token_rewards(rewards, d["response_mask"], norm=norm, drop_last_token=True)
    assert close(ours, expected)


def test_the_recipes_whole_granularity_raises_so_we_follow_prime_rl():
    """verl issue #1322: the recipe assigns a response's vector of rewards to one position."""
    d = make_batch(0, 2)
    with pytest.raises(RuntimeError):
        ref.recipe_implicit_reward(
            d, d["rm_lp"].clone(), d["ref_lp"].clone(), PROMPT, prm_config("whole", "none")
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_with_norm_none_prime_rl_scores_are_ours_without_beta(seed):
    d = make_batch(seed, 4)
    scores, _ = ref.compute_implicit_reward(d, d["rm_lp"], d["ref_lp"], prm_config("token", "none"))
    rewards = prime.implicit_token_rewards(d["rm_lp"], d["ref_lp"], d["response_mask"], 0.05)
    assert close(prime.prime_token_rewards(rewards, d["response_mask"], norm="none"), 0.05 * scores)


def test_granularity_and_norm_by_hand():
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    r = torch.tensor([[0.1, -0.4, 0.2], [0.3, 9.0, 9.0]], dtype=torch.float64)
    whole = prime.prime_token_rewards(r, mask, granularity="whole", norm="none")
    assert close(whole, torch.tensor([[0, 0, -0.1], [0.3, 0, 0]], dtype=torch.float64))
    # reverse cumsums: [-0.1, -0.2, 0.2] and [0.3, 0, 0]: the largest magnitude is 0.3
    normed = prime.prime_token_rewards(r, mask, norm="batch_norm")
    expected = torch.tensor([[0.1, -0.4, 0.2], [0.3, 0, 0]], dtype=torch.float64) / (0.3 + 1e-6)
    assert close(normed, expected)
    dropped = prime.prime_token_rewards(r, mask, norm="none", drop_last_token=True)
    assert close(dropped, torch.tensor([[0.1, -0.4, 0], [0, 0, 0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="granularity"):
        prime.prime_token_rewards(r, mask, granularity="step")
    with pytest.raises(ValueError, match="norm"):
        prime.prime_token_rewards(r, mask, norm="group_norm")


# ---- the advantage --------------------------------------------------------------------------------------


def recipe_advantage(d: dict, rm_scores: torch.Tensor, rm_coef: float, outcome_coef: float, n: int):
    cfg = SimpleNamespace(algorithm=SimpleNamespace(reward_dpo_coef=rm_coef, reward_gt_coef=outcome_coef))
    data = ref.Data(
        rm_scores=rm_scores, acc=d["acc"], prompts=d["prompts"], attention_mask=d["attention_mask"]
    )
    return ref.compute_rloo_advantage_return(data, d["response_mask"], n, cfg)


def process_rewards(d: dict, granularity: str = "token", norm: str = "batch_norm") -> torch.Tensor:
    rewards = prime.implicit_token_rewards(d["rm_lp"], d["ref_lp"], d["response_mask"], 0.05)
    return prime.prime_token_rewards(rewards, d["response_mask"], granularity=granularity, norm=norm)


def assert_same_on_mask(ours: tuple, theirs: tuple, mask: torch.Tensor) -> None:
    """Equal on the response tokens; ours is 0 elsewhere (verl's whitening leaves -mean/std on padding)."""
    on = mask.bool()
    for a, b in zip(ours, theirs, strict=True):
        assert close(a[on], b[on]), (a[on] - b[on]).abs().max()
        assert bool((a[~on] == 0).all())


@pytest.mark.parametrize("coefs", [(5.0, 5.0), (1.0, 3.0), (0.0, 5.0), (5.0, 0.0)])
@pytest.mark.parametrize("granularity", prime.PRIME_GRANULARITIES)
@pytest.mark.parametrize("seed,n", CASES)
def test_prime_advantages_match_the_recipe(seed, n, granularity, coefs):
    d = make_batch(seed, n)
    scores = process_rewards(d, granularity)
    rm_coef, outcome_coef = coefs
    ours = prime.prime_advantages(
        scores, d["acc"], d["response_mask"], n, rm_coef=rm_coef, outcome_coef=outcome_coef
    )
    assert_same_on_mask(ours, recipe_advantage(d, scores, rm_coef, outcome_coef, n), d["response_mask"])


@pytest.mark.parametrize("gammas", [(1.0, 1.0), (0.9, 1.0), (0.5, 0.8)])
@pytest.mark.parametrize("seed,n", CASES)
def test_prime_advantages_match_prime_rl_with_its_discounts(seed, n, gammas):
    """PRIME-RL/PRIME's compute_rloo_returns: one discount per source and no coefficients (ours with 1, 1)."""
    d = make_batch(seed, n)
    scores = process_rewards(d)
    data = ref.Data(
        responses=d["responses"], prompts=d["prompts"], attention_mask=d["attention_mask"], rm_scores=scores
    )
    data.batch["gt_scores"] = ref.gt_scores(data, d["acc"])
    rm_gamma, outcome_gamma = gammas
    adv_params = SimpleNamespace(reward_model_gamma=rm_gamma, verifier_gamma=outcome_gamma)
    theirs = ref.compute_rloo_returns(
        data, d["response_mask"], n, SimpleNamespace(algorithm=SimpleNamespace(adv_params=adv_params))
    )
    ours = prime.prime_advantages(
        scores,
        d["acc"],
        d["response_mask"],
        n,
        rm_coef=1.0,
        outcome_coef=1.0,
        rm_gamma=rm_gamma,
        outcome_gamma=outcome_gamma,
    )
    assert_same_on_mask(ours, theirs, d["response_mask"])


@pytest.mark.parametrize("seed,n", CASES)
def test_all_equal_outcomes_leave_only_the_process_term(seed, n):
    d = make_batch(seed, n, equal_outcome=True)
    scores = process_rewards(d)
    ours = prime.prime_advantages(scores, d["acc"], d["response_mask"], n)
    assert_same_on_mask(ours, recipe_advantage(d, scores, 5.0, 5.0, n), d["response_mask"])
    only_process = prime.prime_advantages(scores, d["acc"], d["response_mask"], n, outcome_coef=0.0)
    assert close(ours[0], only_process[0]) and close(ours[1], only_process[1])


def test_all_equal_rewards_everywhere_give_zero():
    d = make_batch(0, 4)
    mask = d["response_mask"]
    scores = torch.full(mask.shape, 0.25, dtype=torch.float64) * mask
    lengths = mask.sum(-1)
    # every sample's mean process reward is 0.25 and every outcome 1: both RLOO terms vanish
    adv, ret = prime.prime_advantages(scores, torch.ones(len(lengths), dtype=torch.float64), mask, 4)
    assert close(ret, torch.zeros_like(ret), 1e-12) and close(adv, torch.zeros_like(adv), 1e-7)
    theirs = recipe_advantage(
        {**d, "acc": torch.ones(len(lengths), dtype=torch.float64)}, scores, 5.0, 5.0, 4
    )
    assert close(ret[mask.bool()], theirs[1][mask.bool()])


def test_outcome_given_per_token_is_summed():
    d = make_batch(1, 3)
    scores = process_rewards(d)
    mask = d["response_mask"]
    last = mask.sum(-1) - 1
    per_token = torch.zeros(mask.shape, dtype=torch.float64)
    per_token[torch.arange(len(last)), last] = d["acc"]
    a = prime.prime_advantages(scores, per_token, mask, 3)
    b = prime.prime_advantages(scores, d["acc"], mask, 3)
    assert close(a[0], b[0]) and close(a[1], b[1])


def test_rloo_and_returns_by_hand():
    """n = 2, two tokens. A: r = [0.2, 0.4], o = 1; B: r = [0.1], o = 0 (its second token is padding).

    Per-sample means 0.3 and 0.1, so the group's sum is 0.4 and n / (n - 1) = 2:
    process A = [2 * 0.2 - 0.4, 2 * 0.4 - 0.4] = [0, 0.4], B = [2 * 0.1 - 0.4] = [-0.2];
    outcome A = 1 - 0 = 1 on its last token, B = -1. With both coefficients 5: A = [0, 7], B = [-6];
    returns A = [7, 7], B = [-6]; whitened over {7, 7, -6}: mean 8/3, unbiased var 169/3.
    """
    mask = torch.tensor([[1, 1], [1, 0]])
    r = torch.tensor([[0.2, 0.4], [0.1, 0.0]], dtype=torch.float64)
    o = torch.tensor([1.0, 0.0], dtype=torch.float64)
    adv, ret = prime.prime_advantages(r, o, mask, 2)
    assert close(ret, torch.tensor([[7.0, 7.0], [-6.0, 0.0]], dtype=torch.float64))
    scale = 1 / math.sqrt(169 / 3 + 1e-8)
    expected = torch.tensor([[13 / 3, 13 / 3], [-26 / 3, 0.0]], dtype=torch.float64) * scale
    assert close(adv, expected)
    # the paper's process baseline would give A = [0.2 - 0.1, 0.4 - 0.1]: the code's differs by
    # (r_t - mean_t r) / (n - 1) = [-0.1, 0.1]; we follow the code
    only_process = prime.prime_advantages(r, o, mask, 2, rm_coef=1.0, outcome_coef=0.0)[1]
    assert close(only_process, torch.tensor([[0.4, 0.4], [-0.2, 0.0]], dtype=torch.float64))


def test_discounted_returns_by_hand():
    mask = torch.tensor([[1, 1, 1], [1, 1, 1]])
    r = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    o = torch.tensor([1.0, 0.0], dtype=torch.float64)
    _, ret = prime.prime_advantages(
        r, o, mask, 2, rm_coef=1.0, outcome_coef=1.0, rm_gamma=0.5, outcome_gamma=0.5
    )
    # process: means 1/3 and 0; A = [2 - 1/3, -1/3, -1/3], B = [-1/3] * 3; outcome A = +1, B = -1 at t = 2
    a = [2 - 1 / 3, -1 / 3, -1 / 3]
    b = [-1 / 3] * 3
    ga = [a[0] + 0.5 * a[1] + 0.25 * (a[2] + 1), a[1] + 0.5 * (a[2] + 1), a[2] + 1]
    gb = [b[0] + 0.5 * b[1] + 0.25 * (b[2] - 1), b[1] + 0.5 * (b[2] - 1), b[2] - 1]
    assert close(ret, torch.tensor([ga, gb], dtype=torch.float64))


def test_a_group_of_one_is_refused_as_prime_cannot_divide_by_zero():
    d = make_batch(0, 2, groups=2)
    scores = process_rewards(d)
    with pytest.raises(ZeroDivisionError):
        recipe_advantage(d, scores, 5.0, 5.0, 1)
    with pytest.raises(ValueError, match="at least 2"):
        prime.prime_advantages(scores, d["acc"], d["response_mask"], 1)


def reference_by_group(d: dict, scores: torch.Tensor, ids: torch.Tensor):
    """The recipe per group (its own n), then verl's whitening over the whole batch: the RLOO terms and
    the returns are per group, only the whitening is global."""
    returns = torch.zeros_like(scores)
    for gid in ids.unique():
        rows = (ids == gid).nonzero().squeeze(-1)
        sub = {k: v[rows] if torch.is_tensor(v) else v for k, v in d.items()}
        returns[rows] = recipe_advantage(sub, scores[rows], 5.0, 5.0, len(rows))[1]
    return ref.verl_masked_whiten(returns, d["response_mask"]), returns


@pytest.mark.parametrize("seed", SEEDS)
def test_groups_by_id_of_any_size_and_order(seed):
    d = make_batch(seed, 2, groups=6)
    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor([7, 3, 7, 7, 1, 3, 1, 1, 1, 9, 9, 7])[torch.randperm(12, generator=g)]
    scores = process_rewards(d)
    ours = prime.prime_advantages(scores, d["acc"], d["response_mask"], ids)
    assert_same_on_mask(ours, reference_by_group(d, scores, ids), d["response_mask"])


@pytest.mark.parametrize("seed", SEEDS)
def test_invalid_samples_are_as_if_removed(seed):
    d = make_batch(seed, 4, groups=3)
    valid = torch.ones(12, dtype=torch.bool)
    valid[[1, 6, 7]] = False
    scores = process_rewards(d)
    adv, ret = prime.prime_advantages(scores, d["acc"], d["response_mask"], 4, valid=valid)
    kept = valid.nonzero().squeeze(-1)
    sub = {k: v[kept] if torch.is_tensor(v) else v for k, v in d.items()}
    ids = (torch.arange(12) // 4)[kept]
    theirs = reference_by_group(sub, scores[kept], ids)
    assert_same_on_mask((adv[kept], ret[kept]), theirs, sub["response_mask"])
    assert bool((adv[~valid] == 0).all()) and bool((ret[~valid] == 0).all())


def test_a_group_left_with_one_valid_sample_gets_no_rloo_term():
    mask = torch.ones(4, 2, dtype=torch.long)
    r = torch.tensor([[0.1, 0.2], [0.3, 0.0], [0.5, 0.5], [0.2, 0.1]], dtype=torch.float64)
    o = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    valid = torch.tensor([True, False, True, True])
    _, ret = prime.prime_advantages(r, o, mask, 2, valid=valid)
    assert bool((ret[:2] == 0).all()) and not bool((ret[2:] == 0).all())


# ---- the estimator --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed,n", CASES[:6])
def test_the_registered_estimator_is_prime_advantages(seed, n):
    d = make_batch(seed, n)
    mask = d["response_mask"]
    scores = process_rewards(d)
    outcome_tokens = torch.zeros(mask.shape, dtype=torch.float64)
    outcome_tokens[torch.arange(mask.shape[0]), mask.sum(-1) - 1] = d["acc"]
    valid = torch.ones(mask.shape[0], dtype=torch.bool)
    valid[1] = False
    inputs = ca.AdvantageInputs(
        outcome_tokens, mask, group_size=n, valid=valid, gamma=0.9, process_rewards=scores
    )
    adv, ret = inputs.estimate("prime")
    direct = prime.prime_advantages(scores, d["acc"], mask, n, rm_gamma=0.9, outcome_gamma=0.9, valid=valid)
    assert close(adv, direct[0]) and close(ret, direct[1])
    inputs.rm_coef, inputs.outcome_coef = 2.0, 7.0
    adv2, _ = inputs.estimate("prime")
    direct2 = prime.prime_advantages(
        scores, d["acc"], mask, n, rm_coef=2.0, outcome_coef=7.0, rm_gamma=0.9, outcome_gamma=0.9, valid=valid
    )
    assert close(adv2, direct2[0])
    via_dispatch = ca.compute_advantages("prime", outcome_tokens, mask, group_size=n, process_rewards=scores)
    assert close(via_dispatch[0], prime.prime_advantages(scores, d["acc"], mask, n)[0])


def test_the_estimator_without_process_rewards_says_what_it_needs():
    inputs = ca.AdvantageInputs(torch.zeros(4, 3), torch.ones(4, 3), group_size=2)
    with pytest.raises(ValueError, match=r"reward\.process: implicit_prm:PATH"):
        inputs.estimate("prime")


def test_the_estimators_traits():
    traits = ca.estimator_traits("prime")
    assert traits.centres_by_group and not traits.zero_on_equal_rewards
    assert not traits.needs_critic and not traits.needs_source_rewards


def test_a_group_shift_of_the_outcome_changes_nothing():
    """What centres_by_group promises: the outcome's leave-one-out baseline cancels a per-group constant."""
    d = make_batch(2, 4)
    scores = process_rewards(d)
    shifted = d["acc"] + torch.repeat_interleave(torch.tensor([3.0, -1.0, 0.5], dtype=torch.float64), 4)
    a = prime.prime_advantages(scores, d["acc"], d["response_mask"], 4)
    b = prime.prime_advantages(scores, shifted, d["response_mask"], 4)
    assert close(a[0], b[0], 1e-9) and close(a[1], b[1], 1e-9)


# ---- the implicit PRM's loss ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed,n", CASES)
def test_ce_loss_and_its_gradient_match_prime(seed, n):
    d = make_batch(seed, n)
    mask = d["response_mask"]
    rm_ours = d["rm_lp"].clone().requires_grad_(True)
    ours = prime.implicit_prm_loss(
        prime.implicit_token_rewards(rm_ours, d["ref_lp"], mask, 0.05), mask, d["acc"]
    )
    ours.backward()
    rm_theirs = d["rm_lp"].clone().requires_grad_(True)
    _, q = ref.recipe_implicit_reward(d, rm_theirs, d["ref_lp"].clone(), PROMPT, prm_config("token", "none"))
    theirs = ref.compute_ce_dpo_loss_rm(q, d["acc"], mask, 0.05)
    theirs.backward()
    assert close(ours.detach(), theirs.detach())
    assert close(rm_ours.grad, rm_theirs.grad)
    prime_rl = ref.prime_compute_ce_dpo_loss_rm(d["rm_lp"] - d["ref_lp"], d["acc"], mask, 0.05)
    assert close(ours.detach(), prime_rl)


def test_ce_loss_by_hand_and_against_torch():
    """Sequence rewards ln 3 (p = 0.75) with label 1 and 0 (p = 0.5) with label 0."""
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    r = torch.tensor([[math.log(3) / 2, math.log(3) / 2, 5.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    labels = torch.tensor([1.0, 0.0], dtype=torch.float64)
    loss = prime.implicit_prm_loss(r, mask, labels)
    assert abs(loss.item() - (-math.log(0.75) - math.log(0.5)) / 2) < TOL
    logits = torch.tensor([math.log(3), 0.0], dtype=torch.float64)
    assert abs(loss.item() - F.binary_cross_entropy(torch.sigmoid(logits), labels).item()) < TOL
    accumulated = prime.implicit_prm_loss(r, mask, labels, global_num_seqs=8)
    assert abs(accumulated.item() - loss.item() * 2 / 8) < TOL
    with pytest.raises(ValueError, match="unknown implicit PRM loss"):
        prime.implicit_prm_loss(r, mask, labels, loss_type="mse")


@pytest.mark.parametrize("loss_type", ["dpo", "bon_acc", "bon_rm"])
@pytest.mark.parametrize("seed,n", CASES)
def test_detached_dpo_losses_match_the_recipe(seed, n, loss_type):
    """compute_detach_dpo_loss_rm with the recipe's ``update: reverse`` broadcast of the group's q sums."""
    d = make_batch(seed, n)
    mask = d["response_mask"]
    _, q = ref.recipe_implicit_reward(
        d, d["rm_lp"].clone(), d["ref_lp"].clone(), PROMPT, prm_config("token", "none")
    )
    bc = ref.broadcast_group(q, d["acc"], n)
    bon_mode = "none" if loss_type == "dpo" else loss_type
    theirs = ref.compute_detach_dpo_loss_rm(
        q, d["acc"], bc["Q_bc"], bc["acc_bc"], mask, 0.05, bon_mode=bon_mode
    )
    rewards = prime.implicit_token_rewards(d["rm_lp"], d["ref_lp"], mask, 0.05)
    ours = prime.implicit_prm_loss(rewards, mask, d["acc"], loss_type, group_index=n)
    assert close(ours, theirs)
    if loss_type == "dpo":
        # the comparison logits of the recipe's first mini-batch are the current ones; later ones are stale
        stale = q.sum(-1) * 0.05 + torch.linspace(-0.3, 0.3, q.shape[0], dtype=torch.float64)
        q_stale = stale / 0.05
        bc_stale = ref.broadcast_group(q_stale[:, None], d["acc"], n)
        theirs = ref.compute_detach_dpo_loss_rm(q, d["acc"], bc_stale["Q_bc"], bc["acc_bc"], mask, 0.05)
        ours = prime.implicit_prm_loss(rewards, mask, d["acc"], "dpo", group_index=n, reference_logits=stale)
        assert close(ours, theirs)


def test_dpo_loss_needs_groups():
    mask = torch.ones(2, 2)
    with pytest.raises(ValueError, match="group_index"):
        prime.implicit_prm_loss(torch.zeros(2, 2), mask, torch.tensor([1.0, 0.0]), "dpo")


def test_dpo_loss_by_hand():
    """One group: A correct (s = 1), B wrong (s = -1), C correct (s = 0). A and C are compared with B, B with
    the mean of A and C (0.5)."""
    mask = torch.ones(3, 1)
    s = torch.tensor([[1.0], [-1.0], [0.0]], dtype=torch.float64)
    labels = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
    loss = prime.implicit_prm_loss(s, mask, labels, "dpo", group_index=3)

    def nls(x: float) -> float:
        return math.log1p(math.exp(-x))

    expected = (nls(1 - (-1)) + nls(-(-1 - 0.5)) + nls(0 - (-1))) / 3
    assert abs(loss.item() - expected) < TOL
