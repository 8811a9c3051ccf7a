"""Where RL loops silently train wrong (issue 8), each with a test that the naive implementation fails.

* gradient accumulation: 4 micro-batches x 2 samples == one batch of 8, for every aggregation mode, with
  ragged lengths and a sample removed from the loss (1e-6, float64, the tiny Qwen2 model);
* zero-variance groups: exactly zero gradient at every reward scale;
* missing rewards / truncated samples: excluded from the loss and counted;
* rollout/trainer mismatch: with a sampler whose distribution differs from the trainer's (and which reports
  its own log-probs, as vLLM does), the importance-corrected expected gradient equals the on-policy one and
  the uncorrected one does not (exact expectations by enumerating every sequence).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.rewardmodels.shaping.functional import truncation_handling

MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
PROMPT_LEN = 3


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model64():
    from rewardlab.data.tiny import build_tiny_model

    torch.manual_seed(0)
    return build_tiny_model().double()


def _ragged_batch(n=8, max_len=9, vocab=60, seed=0):
    """Prompt + right-padded completions of lengths 1..max_len (ragged), as token ids and a response mask."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([1, 9, 3, 7, 2, 8, 5, 4])[:n]
    ids = torch.randint(10, vocab, (n, PROMPT_LEN + max_len), generator=g)
    mask = (torch.arange(max_len)[None, :] < lengths[:, None]).double()
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    old_noise = 0.3 * torch.randn(n, max_len, generator=g, dtype=torch.float64)
    return ids, mask, adv, old_noise


def _logps(model, ids, width):
    """Log-probs of the first ``width`` completion tokens; the micro-batch is trimmed to its own width, as a
    loop that pads each micro-batch to its longest sample does."""
    ids = ids[:, : PROMPT_LEN + width]
    logits = model(input_ids=ids).logits[:, PROMPT_LEN - 1 : -1]
    return ca.logprobs_from_logits(logits, ids[:, PROMPT_LEN:])


def _grad(model):
    return torch.cat([p.grad.reshape(-1).clone() for p in model.parameters() if p.grad is not None])


def _step_grad(model, ids, mask, adv, old_noise, mode, micro, *, naive=False, keep=None, max_len=None):
    """Gradient of one optimisation step made of micro-batches of size ``micro``."""
    if keep is not None:
        mask = ca.apply_sample_mask(mask, keep)
    num_tokens, num_seqs = ca.batch_counts(mask)
    total_seqs = mask.shape[0]  # Dr.GRPO's constant normaliser counts every sample of the step
    model.zero_grad()
    n_micro = mask.shape[0] // micro
    for k in range(n_micro):
        sl = slice(k * micro, (k + 1) * micro)
        width = int(mask[sl].sum(-1).max().clamp(min=1).item()) if keep is None else mask.shape[1]
        m = mask[sl, :width]
        lp = _logps(model, ids[sl], width)
        old = (lp + old_noise[sl, :width]).detach()
        if naive:  # per-micro-batch normalisation, divided by the number of micro-batches (the common bug)
            out = ca.ppo_policy_loss(lp, old, adv[sl], m, loss_agg_mode=mode, max_len=None)
            (out.loss / n_micro).backward()
        else:
            out = ca.ppo_policy_loss(
                lp,
                old,
                adv[sl],
                m,
                loss_agg_mode=mode,
                global_num_tokens=num_tokens,
                global_num_seqs=total_seqs if mode == "seq-mean-token-sum-norm" else num_seqs,
                max_len=max_len,
            )
            out.loss.backward()
    return _grad(model)


@pytest.mark.parametrize("mode", MODES)
def test_accumulation_matches_full_batch(model64, mode):
    ids, mask, adv, old_noise = _ragged_batch()
    L = mask.shape[1]
    full = _step_grad(model64, ids, mask, adv, old_noise, mode, micro=8, max_len=L)
    accum = _step_grad(model64, ids, mask, adv, old_noise, mode, micro=2, max_len=L)
    assert full.abs().max() > 1e-3
    assert torch.allclose(accum, full, atol=1e-6, rtol=0), (accum - full).abs().max()
    # The naive per-micro-batch normalisation (divided by the number of micro-batches) is wrong with ragged
    # lengths for token-mean, and with per-micro-batch padding widths for Dr.GRPO's constant; the sequence
    # means are right here only because every micro-batch has the same number of sequences (next test).
    if mode in ("token-mean", "seq-mean-token-sum-norm"):
        naive = _step_grad(model64, ids, mask, adv, old_noise, mode, micro=2, naive=True)
        assert not torch.allclose(naive, full, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_accumulation_with_a_sample_removed_from_the_loss(model64, mode):
    """A sample without reward (or a masked truncated one) is removed from the loss; the sequence means then
    count only the remaining sequences, in the full batch and across micro-batches alike."""
    ids, mask, adv, old_noise = _ragged_batch(seed=1)
    keep = torch.ones(8, dtype=torch.bool)
    keep[3] = False
    L = mask.shape[1]
    full = _step_grad(model64, ids, mask, adv, old_noise, mode, micro=8, keep=keep, max_len=L)
    accum = _step_grad(model64, ids, mask, adv, old_noise, mode, micro=2, keep=keep, max_len=L)
    assert torch.allclose(accum, full, atol=1e-6, rtol=0)
    naive = _step_grad(model64, ids, mask, adv, old_noise, mode, micro=2, naive=True, keep=keep)
    if mode != "seq-mean-token-sum-norm":  # (width is the full one here, so that mode's constant matches)
        assert not torch.allclose(naive, full, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_removed_sample_contributes_nothing(model64, mode):
    ids, mask, adv, old_noise = _ragged_batch(seed=2)
    keep = torch.tensor([True, True, False, True, True, True, True, True])
    with_garbage = adv.clone()
    with_garbage[2] = 1e6  # whatever its advantage, a removed sample must not move the policy
    g1 = _step_grad(model64, ids, mask, with_garbage, old_noise, mode, micro=8, keep=keep, max_len=9)
    g2 = _step_grad(model64, ids, mask, adv, old_noise, mode, micro=8, keep=keep, max_len=9)
    assert torch.allclose(g1, g2, atol=1e-9, rtol=0)


# ------------------------------------------------------------------------------------------- zero variance


@pytest.mark.parametrize("scale", [1e-3, 0.1, 1.0, 3.7, 1e5])
@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo", "reinforce_pp_baseline"])
def test_zero_variance_groups_give_exactly_zero_gradient(model64, scale, estimator):
    ids, mask, _, old_noise = _ragged_batch(seed=3)
    rewards = torch.full((8,), 0.1, dtype=torch.float64) * scale
    rewards[4:] = 0.7 * scale  # two groups of four, each constant
    adv, _ = ca.compute_advantages(estimator, rewards, mask, group_size=4)
    model64.zero_grad()
    lp = _logps(model64, ids, 9)
    out = ca.ppo_policy_loss(lp, (lp + old_noise).detach(), adv, mask, loss_agg_mode="token-mean")
    out.loss.backward()
    g = _grad(model64)
    assert torch.count_nonzero(g) == 0
    assert ca.frac_zero_std_groups(rewards, 4) == 1.0


def test_naive_group_normalisation_is_not_zero():
    # The bug the exact check prevents: mean(0.1, 0.1, 0.1) != 0.1 in floating point, / (0 + eps) is huge.
    r = torch.full((3,), 0.1, dtype=torch.float64)
    naive = (r - r.mean()) / (r.std() + 1e-6)
    assert naive.abs().max() > 1e-12
    assert torch.count_nonzero(ca.group_normalized_advantages(r, 3)) == 0


def test_missing_rewards_counted_and_masked():
    rewards, valid, n_missing = ca.optional_rewards([1.0, None, float("nan"), 0.0])
    assert n_missing == 2
    mask = ca.apply_sample_mask(torch.ones(4, 3), valid)
    assert mask.sum(-1).tolist() == [3.0, 0.0, 0.0, 3.0]
    adv = ca.group_normalized_advantages(rewards, 4, valid=valid)
    assert adv[1] == 0 and adv[2] == 0 and torch.isfinite(adv).all()


def test_truncated_samples_masked_or_penalised():
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0])
    truncated = torch.tensor([False, True, False, True])
    r, keep, stats = truncation_handling(rewards, truncated, "mask")
    assert stats["num_truncated"] == 2 and keep.tolist() == [True, False, True, False]
    r, keep, _ = truncation_handling(rewards, truncated, "penalize", penalty=-0.5)
    assert r.tolist() == [1.0, -0.5, 0.0, -0.5] and keep.all()


# ------------------------------------------------------------------------------------------- off-policy


V, L = 3, 3


def _seq_logps(theta, seqs):
    """Per-token log-probs of a tiny autoregressive policy: logits theta[t, prev_token] (prev = V at t=0)."""
    prev = torch.cat([torch.full((seqs.shape[0], 1), V), seqs[:, :-1]], dim=1)
    logits = theta[torch.arange(seqs.shape[1])[None, :], prev]  # (N, L, V)
    return ca.logprobs_from_logits(logits, seqs)


class PerturbedSampler:
    """A rollout backend whose sampling distribution differs from the trainer's (kernels, precision, top-p
    renormalisation in a real engine): it samples from mu = softmax(theta + delta) and reports log mu, as
    vLLM reports the log-probs of what it sampled."""

    def __init__(self, theta, delta):
        self.theta_mu = theta.detach() + delta

    def sequence_distribution(self, seqs):
        lp = _seq_logps(self.theta_mu, seqs)
        return lp.sum(-1).exp(), lp  # mu(y) of every sequence, and the reported per-token log-probs


def _expected_grad(theta, seqs, q, adv, is_weights=None, keep=None):
    """Exact E_{y ~ q}[grad of the PPO loss] at the first step (old = the trainer's own log-probs)."""
    theta = theta.detach().clone().requires_grad_()
    lp = _seq_logps(theta, seqs)
    mask = torch.ones_like(lp)
    if keep is not None:
        mask = ca.apply_sample_mask(mask, keep)
    out = ca.ppo_policy_loss(
        lp, lp.detach(), adv, mask, is_weights=is_weights, loss_agg_mode="seq-mean-token-sum"
    )
    (q.unsqueeze(-1) * out.per_token_loss).sum().backward()
    return theta.grad


def _setup(delta_scale, seed=0):
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(L, V + 1, V, generator=g, dtype=torch.float64)
    delta = delta_scale * torch.randn(theta.shape, generator=g, dtype=torch.float64)
    seqs = torch.tensor(list(itertools.product(range(V), repeat=L)))
    reward = torch.randn(seqs.shape[0], generator=g, dtype=torch.float64)
    return theta, delta, seqs, reward


def test_off_policy_correction_recovers_the_on_policy_gradient():
    theta, delta, seqs, reward = _setup(0.15)
    pi = _seq_logps(theta, seqs).sum(-1).exp()
    assert torch.isclose(pi.sum(), torch.tensor(1.0, dtype=torch.float64))
    adv = reward - (pi * reward).sum()
    sampler = PerturbedSampler(theta, delta)
    mu, rollout_logps = sampler.sequence_distribution(seqs)
    trainer_logps = _seq_logps(theta, seqs).detach()  # old log-probs recomputed by the trainer (the default)

    on_policy = _expected_grad(theta, seqs, pi, adv)
    uncorrected = _expected_grad(theta, seqs, mu, adv)
    w, keep, stats = ca.rollout_importance_weights(
        trainer_logps,
        rollout_logps,
        torch.ones_like(trainer_logps),
        cap=2.0,
        level="sequence",
        mask_outside=True,
    )
    assert stats["rollout_is/masked_frac"] == 0.0 and stats["rollout_is/truncated_frac"] == 0.0
    assert 0.5 < stats["rollout_is/ratio_min"] < 1.0 < stats["rollout_is/ratio_max"] < 2.0
    corrected = _expected_grad(theta, seqs, mu, adv, is_weights=w, keep=keep)

    assert torch.allclose(corrected, on_policy, atol=1e-10)
    rel = (uncorrected - on_policy).norm() / on_policy.norm()
    assert rel > 0.05, rel


def test_token_level_tis_is_exact_for_single_token_responses():
    g = torch.Generator().manual_seed(4)
    theta = torch.randn(1, V + 1, V, generator=g, dtype=torch.float64)
    delta = 0.3 * torch.randn(theta.shape, generator=g, dtype=torch.float64)
    seqs = torch.arange(V).unsqueeze(-1)
    reward = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
    pi = _seq_logps(theta, seqs).sum(-1).exp()
    adv = reward - (pi * reward).sum()
    mu, rollout_logps = PerturbedSampler(theta, delta).sequence_distribution(seqs)
    w, _, stats = ca.rollout_importance_weights(
        _seq_logps(theta, seqs).detach(), rollout_logps, torch.ones(V, 1)
    )
    assert stats["rollout_is/ratio_max"] < 2.0
    corrected = _expected_grad(theta, seqs, mu, adv, is_weights=w)
    assert torch.allclose(corrected, _expected_grad(theta, seqs, pi, adv), atol=1e-12)
    assert not torch.allclose(
        _expected_grad(theta, seqs, mu, adv), _expected_grad(theta, seqs, pi, adv), atol=1e-3
    )


def test_sequence_masking_drops_far_off_policy_samples():
    theta, delta, seqs, reward = _setup(1.0, seed=5)
    trainer_logps = _seq_logps(theta, seqs).detach()
    mu, rollout_logps = PerturbedSampler(theta, delta).sequence_distribution(seqs)
    w, keep, stats = ca.rollout_importance_weights(
        trainer_logps,
        rollout_logps,
        torch.ones_like(trainer_logps),
        cap=2.0,
        level="token",
        mask_outside=True,
    )
    seq_ratio = (trainer_logps - rollout_logps).sum(-1).exp()
    outside = (seq_ratio < 0.5) | (seq_ratio > 2.0)
    assert outside.any() and (~outside).any()
    assert torch.equal(keep, ~outside)
    assert abs(stats["rollout_is/masked_frac"] - outside.double().mean().item()) < 1e-9
    assert (w <= 2.0).all() and stats["rollout_is/truncated_frac"] > 0
    # masked samples contribute no gradient whatever their advantage
    adv = reward.clone()
    g1 = _expected_grad(theta, seqs, mu, adv, is_weights=w, keep=keep)
    adv[outside] = 1e6
    g2 = _expected_grad(theta, seqs, mu, adv, is_weights=w, keep=keep)
    assert torch.allclose(g1, g2, atol=1e-9)
