"""Exploration against entropy collapse (issue 35): Clip-Cov and KL-Cov against verl's functions, the
entropy statistics, and the switches in a run. (``top_entropy_quantile`` against TRL: tests/test_trl_parity.py;
its gradient in the trainer's update: tests/test_update_through_trainer.py; tree rollouts:
tests/test_tree_rollouts.py.)"""

from __future__ import annotations

import math

import pytest
import torch
import verl_cov_reference as verl  # tests/verl_cov_reference.py (pytest puts tests/ on the path)

from rewardlab import core_algos as ca

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: one thread is much faster

# Cui et al. (2025), section 4 and verl's PolicyLossConfig: written out here, not read from our defaults,
# so that a changed default fails the tests.
PAPER_CLIP_COV = {"clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0}
PAPER_KL_COV = {"kl_cov_ratio": 2e-4, "ppo_kl_coef": 1.0}


def _inputs(seed: int, batch: int = 64, length: int = 512):
    """Random log-probs, old log-probs off by up to ~0.3, token advantages (GRPO-like: one value per
    sample) and a right-padded mask; 64 x 512 tokens so that 2e-4 of them is several."""
    g = torch.Generator().manual_seed(seed)
    log_prob = -torch.rand(batch, length, generator=g) * 4
    old = log_prob + 0.3 * torch.randn(batch, length, generator=g)
    adv = torch.randn(batch, 1, generator=g).expand(batch, length).clone()
    lengths = torch.randint(length // 4, length + 1, (batch,), generator=g)
    mask = (torch.arange(length)[None] < lengths[:, None]).float()
    return log_prob.requires_grad_(), old, adv, mask


def _grad(loss, log_prob):
    (g,) = torch.autograd.grad(loss, log_prob)
    return g


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_clip_cov_matches_verl(seed, agg):
    log_prob, old, adv, mask = _inputs(seed)
    torch.manual_seed(100 + seed)
    ref_loss, ref_stats = verl.compute_policy_loss_clip_cov(
        old, log_prob, adv, mask, agg, cliprange_low=0.2, cliprange_high=0.2, **PAPER_CLIP_COV
    )
    ref_grad = _grad(ref_loss, log_prob)
    torch.manual_seed(100 + seed)
    out = ca.clip_cov_policy_loss(log_prob, old, adv, mask, loss_agg_mode=agg)
    assert abs(out.loss.item() - ref_loss.item()) < 1e-6
    assert torch.allclose(_grad(out.loss, log_prob), ref_grad, atol=1e-6)
    assert abs(out.stats["clip_cov/cut_share"] - ref_stats["actor/pg_clipfrac"]) < 1e-6
    # max(1, int(2e-4 * N)) tokens cut: several at this size, so the ratio's constant shows
    cut = round(out.stats["clip_cov/cut_share"] * mask.sum().item())
    assert cut == max(1, int(2e-4 * mask.sum().item())) > 1


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_kl_cov_matches_verl(seed, agg):
    log_prob, old, adv, mask = _inputs(seed)
    ref_loss, ref_stats = verl.compute_policy_loss_kl_cov(old, log_prob, adv, mask, agg, **PAPER_KL_COV)
    ref_grad = _grad(ref_loss, log_prob)
    out = ca.kl_cov_policy_loss(log_prob, old, adv, mask, loss_agg_mode=agg)
    assert abs(out.loss.item() - ref_loss.item()) < 1e-6
    assert torch.allclose(_grad(out.loss, log_prob), ref_grad, atol=1e-6)
    assert abs(out.stats["kl_cov/abs_log_ratio"] - ref_stats["actor/ppo_kl"]) < 1e-6
    assert round(out.stats["kl_cov/penalised_share"] * mask.sum().item()) == int(2e-4 * mask.sum().item()) > 1


def test_cov_losses_take_sample_advantages_and_are_ppo_without_selection():
    """(B,) advantages broadcast like (B, T) ones; with no token in the covariance band Clip-Cov is PPO."""
    log_prob, old, adv, mask = _inputs(3, batch=8, length=32)
    per_sample = adv[:, 0]
    a = ca.kl_cov_policy_loss(log_prob, old, per_sample, mask)
    b = ca.kl_cov_policy_loss(log_prob, old, adv, mask)
    assert torch.allclose(a.loss, b.loss)
    none = ca.clip_cov_policy_loss(log_prob, old, adv, mask, clip_cov_lb=1e3, clip_cov_ub=1e4)
    ppo = ca.ppo_policy_loss(log_prob, old, adv, mask, loss_agg_mode="token-mean")
    assert torch.allclose(none.loss, ppo.loss) and none.stats["clip_cov/cut_share"] == 0


def test_cov_losses_ignore_padding_garbage():
    log_prob, old, adv, mask = _inputs(4, batch=8, length=32)
    dirty = log_prob.detach().clone()
    dirty[mask == 0] = -1e4  # padding log-probs from a model that never saw those positions
    for name in ("clip_cov", "kl_cov"):
        torch.manual_seed(0)
        out = ca.compute_policy_loss(name, dirty, old, adv, mask)
        assert torch.isfinite(out.loss) and torch.isfinite(out.per_token_loss).all()


def test_entropy_stats():
    ent = torch.tensor([[0.0, 0.01, 1.0, 2.0], [3.0, 0.02, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    stats = ca.entropy_stats(ent, mask)
    values = torch.tensor([0.0, 0.01, 1.0, 2.0, 3.0, 0.02])
    for p in ca.ENTROPY_PERCENTILES:
        assert stats[f"entropy/p{p}"] == pytest.approx(float(torch.quantile(values, p / 100)))
    assert stats["entropy/near_deterministic"] == pytest.approx(3 / 6)
    assert ca.entropy_stats(ent, torch.zeros_like(mask)) == {}


def test_config_defaults_are_the_papers():
    from rewardlab.rl.config import AlgorithmConfig

    cfg = AlgorithmConfig()
    for name, value in {**PAPER_CLIP_COV, **PAPER_KL_COV}.items():
        assert getattr(cfg, name) == value, name
    assert cfg.policy_loss == "ppo" and cfg.top_entropy_quantile == 1.0  # off by default


# ---------------------------------------------------------------------------------------------- in a run


def _run(tmp_path, *overrides):
    """A 2-step GRPO run of the tiny model (seed 3); returns its metrics rows and its final weights."""
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.training.metrics import read_metrics
    from rewardlab.types import Record

    prompts = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(4)]

    def digits(prompts, completions, references):
        return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]

    base = [
        "train.max_steps=2",
        "train.prompts_per_step=2",
        "rollout.n=4",
        "rollout.max_new_tokens=8",
        "train.learning_rate=1e-3",
        "reward.sources=[]",
        "reward.truncation=none",
        "train.report_to=none",
        "train.seed=3",
        f"run.output_dir={tmp_path / 'run'}",
    ]
    cfg = load_config(preset="grpo", overrides=base + list(overrides))
    with RLTrainer(cfg, train_records=prompts, eval_records=[], reward_fns=[digits], console=None) as tr:
        tr.train()
        weights = {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}
    return read_metrics(tmp_path / "run" / "metrics.jsonl"), weights


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """The run without a switch, and the token entropies each step's update handed to ``entropy_stats``."""
    seen = []
    stats = ca.entropy_stats

    def recorded(entropies, response_mask=None):
        seen.append(entropies.detach().clone())
        return stats(entropies, response_mask)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ca, "entropy_stats", recorded)
        rows, weights = _run(tmp_path_factory.mktemp("default"))
    return rows, weights, seen


@pytest.mark.parametrize(
    "overrides,key",
    [
        (
            ["algorithm.policy_loss=clip_cov", "algorithm.clip_cov_lb=-100", "algorithm.clip_cov_ratio=0.05"],
            "clip_cov/cut_share",
        ),
        (["algorithm.policy_loss=kl_cov", "algorithm.kl_cov_ratio=0.05"], "kl_cov/penalised_share"),
    ],
)
def test_switches_train_and_log(tmp_path, overrides, key):
    rows, _ = _run(tmp_path, *overrides)
    assert len(rows) == 2 and all(r[key] > 0 for r in rows)


def test_top_entropy_quantile_changes_the_run(tmp_path, default_run):
    """Same seed, same first rollout: with ``top_entropy_quantile=0.2`` the first update trains on a fifth
    of the tokens, so its loss, gradient and the final weights are another run's. (At ratio 1 GRPO's
    ``seq-mean-token-mean`` loss over every token is ``-(1/N) sum_i A_i = 0``: the group advantages sum to 0;
    over the forking tokens only it is not. The gradient itself: tests/test_update_through_trainer.py.)"""
    base, base_weights, _ = default_run
    rows, weights = _run(tmp_path, "algorithm.top_entropy_quantile=0.2")
    assert len(rows) == len(base) == 2 and not any("skipped_update" in r for r in rows + base)
    for key in ("reward", "completions/mean_length", "entropy", "advantages/abs_mean", "num_loss_tokens"):
        assert rows[0][key] == pytest.approx(base[0][key], rel=1e-6), key  # the same first rollout
    assert base[0]["advantages/abs_mean"] > 0.1
    assert abs(base[0]["policy_loss"]) < 1e-6 and abs(rows[0]["policy_loss"]) > 1e-4
    assert rows[0]["grad_norm"] != pytest.approx(base[0]["grad_norm"], rel=1e-3)
    assert weights.keys() == base_weights.keys()
    assert max(float((weights[k] - base_weights[k]).abs().max()) for k in weights) > 1e-5


def test_default_run_logs_entropy_percentiles(default_run):
    """Each step's ``entropy/pXX`` are the percentiles, and ``entropy`` the mean, of the entropies of exactly
    the update's loss tokens (one micro-batch, no sample skipped), each between 0 and log(vocabulary)."""
    from rewardlab.data.tiny import tiny_model_config

    rows, _, seen = default_run
    assert len(rows) == len(seen) == 2
    vocab = tiny_model_config().vocab_size  # the run's model: the config's default, qwen2-tiny
    for r, tokens in zip(rows, seen, strict=True):
        assert r["samples/skipped_zero_advantage"] == 0 and tokens.numel() == r["num_loss_tokens"] > 0
        assert float(tokens.min()) >= 0 and float(tokens.max()) <= math.log(vocab) + 1e-5
        ps = [r[f"entropy/p{p}"] for p in ca.ENTROPY_PERCENTILES]
        assert ps == pytest.approx(
            torch.quantile(tokens, torch.tensor(ca.ENTROPY_PERCENTILES) / 100).tolist()
        )
        assert r["entropy"] == pytest.approx(float(tokens.mean()), rel=1e-6)
        assert r["entropy/near_deterministic"] == pytest.approx(float((tokens < 0.05).float().mean()))
