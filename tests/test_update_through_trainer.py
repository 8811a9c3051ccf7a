"""Loss features through the trainer's own update (issue 47): ``algorithm.top_entropy_quantile`` and tree
rollouts' shared-prefix weights, each driven through ``RLTrainer.train_step`` (rl/update.py's
``PolicyUpdate.prepare`` / ``optimise``), not called as functions.

A fixed rollout backend hands the trainer seeded token ids (no sampling), a reward function scores them, and
the gradient the update hands to the optimiser (read just before its step, before clipping) is compared with
the gradient of a loss built here by hand from the documented rules: per-sample forward passes of a copy of
the initial weights (no padding), entropies and log-probs with torch, GRPO's group advantages, the token
selection and the loss aggregation (``seq-mean-token-mean``: ``(1/N) sum_i (1/|y_i|) sum_t l_it``;
``token-mean``: ``sum_{i,t} l_it / N_tokens``). At ratio 1 (one optimiser step per rollout) PPO's loss is
``-A_t * exp(logp - logp.detach())``, whose gradient is ``-A_t grad logp``."""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import pytest
import torch

from rewardlab.generation import Generation
from rewardlab.rl import update as update_module
from rewardlab.rl.config import load_config
from rewardlab.rl.trainer import RLTrainer
from rewardlab.types import Record

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FIRST_CHAR_TOKEN = 6  # the tiny tokenizer: ids 0-5 are special tokens, 6.. printable characters


class FixedBackend:
    """A rollout backend that samples nothing: each completion is seeded random printable tokens of a seeded
    length in ``[lo, hi]`` (at most ``max_new_tokens``); a prompt given as token ids (a tree's branch) is
    continued the same way. Returns everything it generated in ``calls``."""

    name = "fixed"

    def __init__(self, tokenizer, seed: int, lo: int = 4, hi: int = 12) -> None:
        self.tokenizer, self.lo, self.hi = tokenizer, lo, hi
        self.gen = torch.Generator().manual_seed(seed)
        self.calls: list[list[list[Generation]]] = []

    def generate(self, prompts, params):
        out = []
        for prompt in prompts:
            ids = list(prompt) if isinstance(prompt, list) else self.tokenizer(prompt)["input_ids"]
            group = []
            for _ in range(params.n):
                hi = min(self.hi, params.max_new_tokens)
                n = int(torch.randint(min(self.lo, hi), hi + 1, (1,), generator=self.gen))
                toks = torch.randint(FIRST_CHAR_TOKEN, len(self.tokenizer), (n,), generator=self.gen).tolist()
                text = self.tokenizer.decode(toks, skip_special_tokens=True)
                group.append(Generation(text, toks, ids, None, "stop"))
            out.append(group)
        self.calls.append(out)
        return out

    def release_memory(self) -> None:
        pass

    def update_weights(self, policy) -> None:
        pass


def char_reward(prompts, completions, references):
    """A reward that differs between random completions: the share of characters in ``0-9a-m``."""
    return [sum(ch in "0123456789abcdefghijklm" for ch in c) / max(len(c), 1) for c in completions]


def _one_step(tmp_path, tiny_model, tiny_tokenizer, monkeypatch, *overrides):
    """One real training step on the fixed backend's rollout; returns (the gradient the update stepped on,
    a copy of the weights it started from, the samples the update trained on, the config, the step's
    metrics)."""
    base = [
        "train.max_steps=1",
        "train.prompts_per_step=2",
        "rollout.n=4",
        "rollout.max_new_tokens=12",
        "rollout.temperature=1.0",
        "algorithm.kl_coef=0",  # no reference model: the loss is the policy loss alone
        "train.per_device_train_batch_size=64",  # one micro-batch: the entropy quantile is over all tokens
        "train.learning_rate=1e-3",
        "reward.sources=[]",
        "reward.truncation=none",
        "train.report_to=none",
        "train.seed=5",
        f"run.output_dir={tmp_path / 'run'}",
    ]
    cfg = load_config(preset="grpo", overrides=base + list(overrides))
    backend = FixedBackend(tiny_tokenizer, seed=11)
    prompts = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(4)]
    grads: list[list[torch.Tensor]] = []
    step = update_module.optimizer_step

    def spy(params, optimizer, scheduler, max_grad_norm):
        params = list(params)
        grads.append([p.grad.detach().clone() for p in params])
        return step(params, optimizer, scheduler, max_grad_norm)

    monkeypatch.setattr(update_module, "optimizer_step", spy)
    trained: list[list[Generation]] = []
    prepare = update_module.PolicyUpdate.prepare

    def seen(self, r, step):
        trained.append(list(r.gens))
        return prepare(self, r, step)

    monkeypatch.setattr(update_module.PolicyUpdate, "prepare", seen)
    with RLTrainer(
        cfg,
        model=tiny_model,
        tokenizer=tiny_tokenizer,
        train_records=prompts,
        eval_records=[],
        reward_fns=[char_reward],
        backend=backend,
        console=None,
    ) as tr:
        start = copy.deepcopy(tr.policy)
        metrics = tr.train_step()
    assert len(grads) == 1 and len(trained) == 1 and "skipped_update" not in metrics  # one optimiser step
    return grads[0], start, trained[0], cfg, metrics


def _per_sample(model, gens, temperature):
    """Each sample's response log-probs (with gradient) and entropies, from its own unpadded forward pass."""
    logps, ents = [], []
    for g in gens:
        ids = torch.tensor([list(g.prompt_token_ids) + list(g.token_ids)])
        logits = model(input_ids=ids).logits[0].float() / temperature
        p = len(g.prompt_token_ids)
        lp = torch.log_softmax(logits[p - 1 : ids.shape[1] - 1], dim=-1)
        logps.append(lp.gather(-1, torch.tensor(g.token_ids)[:, None])[:, 0])
        ents.append(-(lp.exp() * lp).sum(-1).detach())
    return logps, ents


def _grpo_advantages(rewards: torch.Tensor, n: int, eps: float = 1e-6) -> torch.Tensor:
    """``(r - mean) / (std + eps)`` per group of ``n``, the unbiased std (DeepSeekMath's GRPO)."""
    r = rewards.view(-1, n).double()
    return ((r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + eps)).view(-1).float()


def _grad(model, loss):
    return [g.detach() for g in torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)]


def _rel(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """``|a - b| / |b|`` over all parameters."""
    num = sum(float(((x - y) ** 2).sum()) for x, y in zip(a, b, strict=True))
    den = sum(float((y**2).sum()) for y in b)
    return math.sqrt(num / den)


def _top_entropy_tokens(ents: list[torch.Tensor], quantile: float) -> list[torch.Tensor]:
    """The tokens at or above the ``1 - quantile`` quantile (linear interpolation) of all tokens' entropies,
    picked by sorting: with ``h = (N - 1)(1 - q)`` the threshold lies in ``[s_floor(h), s_ceil(h)]``, so the
    ``N - ceil(h)`` highest are selected when no two entropies tie at the boundary (asserted)."""
    flat = torch.cat(ents)
    n = len(flat)
    h = (n - 1) * (1 - Fraction(quantile).limit_denominator(1000))
    take = n - math.ceil(h)
    order = torch.sort(flat, descending=True)
    if take < n:  # a clear gap between the last token in and the first out: no tie decides the selection
        assert order.values[take - 1] - order.values[take] > 1e-4
    chosen = torch.zeros(n, dtype=torch.bool)
    chosen[order.indices[:take]] = True
    return list(torch.split(chosen.float(), [len(e) for e in ents]))


def _seq_mean_token_mean(per_token: list[torch.Tensor]) -> torch.Tensor:
    return sum(t.sum() / len(t) for t in per_token) / len(per_token)


def _token_mean(per_token: list[torch.Tensor]) -> torch.Tensor:
    return sum(t.sum() for t in per_token) / sum(len(t) for t in per_token)


# ------------------------------------------------------------------------------------ top_entropy_quantile


@pytest.mark.parametrize("quantile", [0.2, 1.0])
def test_entropy_quantile_gradient_of_a_real_update_is_the_masked_one(
    tmp_path, tiny_model, tiny_tokenizer, monkeypatch, quantile
):
    """The update's gradient is the hand-built loss's over the top ``quantile`` entropy tokens (1.0: every
    token), and with 0.2 far from the gradient over every token."""
    grad, start, gens, cfg, metrics = _one_step(
        tmp_path, tiny_model, tiny_tokenizer, monkeypatch, f"algorithm.top_entropy_quantile={quantile}"
    )
    assert len(gens) == 8 and metrics["num_loss_tokens"] == sum(len(g.token_ids) for g in gens)
    rewards = torch.tensor(char_reward(None, [g.text for g in gens], None))
    adv = _grpo_advantages(rewards, cfg.rollout.n)
    assert (adv.view(2, 4).abs().sum(-1) > 0.5).all()  # every group has a signal
    logps, ents = _per_sample(start, gens, cfg.rollout.temperature)
    ratio = [torch.exp(lp - lp.detach()) for lp in logps]
    everything = _seq_mean_token_mean([-a * r for a, r in zip(adv, ratio, strict=True)])
    chosen = _top_entropy_tokens(ents, quantile)
    masked = _seq_mean_token_mean([-a * r * c for a, r, c in zip(adv, ratio, chosen, strict=True)])
    g_all, g_masked = _grad(start, everything), _grad(start, masked)
    if quantile < 1:
        share = float(torch.cat(chosen).mean())
        assert 0.15 < share < 0.25  # about the top 20% of the tokens
        assert _rel(g_masked, g_all) > 0.3  # the masked gradient is another one
    assert _rel(grad, g_masked) < 1e-5, _rel(grad, g_masked)
    # the step's logged policy loss is the hand-built one's value (ratio 1)
    assert metrics["policy_loss"] == pytest.approx(float(masked.detach()), abs=1e-5)


# ------------------------------------------------------------------------------------------ tree weights


def _tree_references(start, gens, cfg):
    """(the flat estimator's loss: every sample on all its tokens; the hand-weighted tree loss: a branch's
    shared prefix weighted 0, the root's token j the weighted mean advantage of the samples through it and
    weight sum_s w_s / w_root; the same tree advantages with uniform weights)."""
    n, agg = cfg.rollout.n, cfg.algorithm.loss_agg_mode
    aggregate = _seq_mean_token_mean if agg == "seq-mean-token-mean" else _token_mean
    rewards = torch.tensor(char_reward(None, [g.text for g in gens], None))
    adv = _grpo_advantages(rewards, n)
    logps, _ = _per_sample(start, gens, cfg.rollout.temperature)
    ratio = [torch.exp(lp - lp.detach()) for lp in logps]
    flat = aggregate([-a * r for a, r in zip(adv, ratio, strict=True)])

    w = [1.0 / len(g.token_ids) if agg == "seq-mean-token-mean" else 1.0 for g in gens]
    tree_adv = [torch.full((len(g.token_ids),), float(a)) for g, a in zip(gens, adv, strict=True)]
    weight = [torch.ones(len(g.token_ids)) for g in gens]
    for i, g in enumerate(gens):
        if g.branch is None:
            continue
        weight[i][: g.branch[1]] = 0  # trained once, in its root's row
    for r, g in enumerate(gens):
        if g.branch is not None:
            continue
        through = [(r, len(g.token_ids))] + [
            (b, gb.branch[1]) for b, gb in enumerate(gens) if gb.branch and (b // n) * n + gb.branch[0] == r
        ]
        for j in range(len(g.token_ids)):
            samples = [s for s, p in through if j < p]
            total = sum(w[s] for s in samples)
            tree_adv[r][j] = sum(w[s] * float(adv[s]) for s in samples) / total
            weight[r][j] = total / w[r]
    tree = aggregate([-a * r * c for a, r, c in zip(tree_adv, ratio, weight, strict=True)])
    uniform = aggregate([-a * r for a, r in zip(tree_adv, ratio, strict=True)])
    return _grad(start, flat), _grad(start, tree), _grad(start, uniform)


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "token-mean"])
def test_tree_weights_give_a_real_update_the_flat_gradient(
    tmp_path, tiny_model, tiny_tokenizer, monkeypatch, agg
):
    """A tree rollout's update: its gradient is the hand-weighted tree loss's and the flat estimator's (every
    sample trained on all its tokens: a branch's prefix has the root's context, so the same log-probs), and
    not that of the same advantages with uniform weights."""
    grad, start, gens, cfg, metrics = _one_step(
        tmp_path,
        tiny_model,
        tiny_tokenizer,
        monkeypatch,
        "rollout.n=6",
        "rollout.tree.roots=2",
        "rollout.tree.branches=2",
        "rollout.tree.points=1",
        "rollout.tree.branch_at=uniform",
        f"algorithm.loss_agg_mode={agg}",
    )
    n = cfg.rollout.n
    assert len(gens) == 2 * n
    for i, g in enumerate(gens):  # each root, then its two branches, each sharing a prefix of its root
        if i % 3 == 0:
            assert g.branch is None
        else:
            root = gens[i - i % 3]
            assert g.branch == (i % n - i % 3, g.branch[1]) and g.branch[1] > 0
            assert g.token_ids[: g.branch[1]] == root.token_ids[: g.branch[1]]
    assert metrics["num_loss_tokens"] == sum(len(g.token_ids) for g in gens)
    g_flat, g_tree, g_uniform = _tree_references(start, gens, cfg)
    assert _rel(g_tree, g_flat) < 1e-5  # the weights' promise, on the hand-built loss
    assert _rel(g_uniform, g_flat) > 0.1  # uniform weights would train shared prefixes more than once
    assert _rel(grad, g_tree) < 1e-5, _rel(grad, g_tree)
    assert _rel(grad, g_flat) < 1e-5
