"""Tree rollouts (issue 35): branch positions, Tree-GRPO's intra-tree term, the shared-prefix loss weights on
a hand-built tree (the flat estimator's gradient; in the trainer's own update:
tests/test_update_through_trainer.py), the hf backend's prefix reuse, and a run."""

from __future__ import annotations

import json

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.generation import Generation, SamplingParams
from rewardlab.generation import prefix_cache as pc
from rewardlab.rl.config import ConfigError, TreeConfig, load_config
from rewardlab.rl.tree import grow_trees, tree_token_counts

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: one thread is much faster

# ------------------------------------------------------------------------------------------ branch points


def test_branch_positions_entropy_picks_the_highest_entropy_tokens_after_the_first():
    ent = torch.tensor([[9.0, 0.1, 3.0, 0.2, 2.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]])
    lengths = torch.tensor([5, 2])
    out = ca.branch_positions(ent, lengths, 2, "entropy")
    # row 0: position 0 never (nothing shared), 5 is past the end: 2 and 4; row 1: one eligible position
    assert out.tolist() == [[2, 4], [0, 1]]


def test_branch_positions_uniform_spreads_and_short_roots_start_fresh():
    out = ca.branch_positions(torch.zeros(3, 12), torch.tensor([12, 3, 1]), 3, "uniform")
    assert out[0].tolist() == [4, 6, 8] or out[0].tolist() == [3, 6, 8]
    assert out[1].tolist() == [0, 1, 2]  # two eligible positions: the third branch is a fresh sample
    assert out[2].tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="branch rule"):
        ca.branch_positions(torch.zeros(1, 2), torch.tensor([2]), 1, "random")


def test_intra_tree_term_is_grpo_within_each_tree():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])  # two trees of three
    intra = ca.tree_intra_advantages(scores, 3)
    assert torch.allclose(intra, ca.group_normalized_advantages(scores, 3))
    assert intra[3:].abs().sum() == 0  # a tree of equal rewards: no intra-tree signal
    assert intra[0] > 0 > intra[1]


# ----------------------------------------------------------------------- shared prefix on a hand-built tree


def _hand_built_tree():
    """One prompt, one root of 5 tokens, two branches at position 3 and one at position 1; advantages chosen
    by hand, lengths differ so that the length-normalised mean weighs samples differently.

    Every token position of every row maps to a parameter (its logit): a branch's shared tokens map to the
    root's, as a real policy gives one log-prob to one context."""
    T = 7
    root_len, branches = 5, [(3, 6), (3, 4), (1, 7)]  # (shared prefix, total length)
    B = 1 + len(branches)
    mask = torch.zeros(B, T)
    mask[0, :root_len] = 1
    index = torch.full((B, T), -1, dtype=torch.long)
    index[0, :root_len] = torch.arange(root_len)
    nxt = root_len
    for b, (p, length) in enumerate(branches, start=1):
        mask[b, :length] = 1
        index[b, :p] = index[0, :p]
        index[b, p:length] = torch.arange(nxt, nxt + length - p)
        nxt += length - p
    theta = torch.nn.Parameter(torch.linspace(-2.0, -0.5, nxt))
    root = torch.tensor([0, 0, 0, 0])
    shared = torch.tensor([0, 3, 3, 1])
    advantages = torch.tensor([0.5, 1.5, -1.0, -0.75])[:, None].expand(B, T).clone() * mask
    return theta, index, mask, root, shared, advantages


def _logp(theta, index):
    return torch.where(index >= 0, theta[index.clamp(min=0)], torch.zeros(()))


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_shared_prefix_weights_give_the_flat_gradient_at_ratio_one(agg):
    theta, index, mask, root, shared, adv = _hand_built_tree()
    per_token = torch.ones(4)
    if ca.aggregation_traits(agg).length_normalised:
        per_token = 1 / mask.sum(-1)
    new_adv, weights = ca.shared_prefix_weights(adv, mask, root, shared, per_token_of_sample=per_token)

    def grad(advantages, is_weights):
        theta.grad = None
        logp = _logp(theta, index)
        out = ca.ppo_policy_loss(
            logp, logp.detach(), advantages, mask, loss_agg_mode=agg, is_weights=is_weights, max_len=7
        )
        out.loss.backward()
        return theta.grad.clone()

    flat = grad(adv, None)
    tree = grad(new_adv, weights)
    assert torch.allclose(tree, flat, atol=1e-7), (tree, flat)
    assert flat.abs().sum() > 0
    # each shared token is trained once: the branches' copies weigh 0, the root's carry them
    assert weights[1, :3].sum() == 0 and weights[2, :3].sum() == 0 and weights[3, :1].sum() == 0
    assert (weights[1, 3:6] == 1).all() and (weights[3, 1:7] == 1).all()
    if agg == "token-mean":  # equal token weights: the root's token counts the samples through it
        assert weights[0, :5].tolist() == [4, 3, 3, 1, 1]
        assert new_adv[0, 0] == pytest.approx((0.5 + 1.5 - 1.0 - 0.75) / 4)
        assert new_adv[0, 1] == pytest.approx((0.5 + 1.5 - 1.0) / 3)
        assert new_adv[0, 3] == pytest.approx(0.5)


def test_shared_prefix_weights_leave_a_masked_root_to_its_branches():
    """A root without a reward is out of the loss: its branches keep training their own prefix."""
    theta, index, mask, root, shared, adv = _hand_built_tree()
    mask[0] = 0
    adv[0] = 0
    new_adv, weights = ca.shared_prefix_weights(adv, mask, root, shared, per_token_of_sample=torch.ones(4))
    assert torch.equal(weights, mask) and torch.equal(new_adv, adv)


def test_shared_prefix_weights_change_nothing_without_branches():
    adv = torch.randn(3, 4)
    mask = torch.ones(3, 4)
    new_adv, weights = ca.shared_prefix_weights(
        adv, mask, torch.arange(3), torch.zeros(3, dtype=torch.long), per_token_of_sample=torch.ones(3)
    )
    assert torch.equal(new_adv, adv) and torch.equal(weights, mask)


# -------------------------------------------------------------------------------------- the hf backend


@pytest.fixture()
def backend(tiny_model, tiny_tokenizer):
    from rewardlab.generation.hf import HFBackend

    torch.manual_seed(0)
    return HFBackend(tiny_model.eval(), tiny_tokenizer)


def _decode(tokenizer):
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)


def test_trees_layout_and_shared_prefixes(backend, tiny_tokenizer):
    tree = TreeConfig(roots=2, branches=2, points=2, branch_at="uniform")
    params = SamplingParams(n=tree.samples_per_prompt, max_new_tokens=10, seed=4)
    groups = grow_trees(
        backend, ["1+2=", "33+4="], params, tree, decode=_decode(tiny_tokenizer), entropies=None
    )
    assert [len(g) for g in groups] == [10, 10]
    for group in groups:
        for j in (0, 5):  # each root, then its points * branches branches
            root = group[j]
            # every root runs to the budget (this seed), so every branch shares a prefix: 2 points evenly
            # spaced over positions 1..9 (3.67 and 6.33, rounded), 2 branches each. (A root too short to
            # branch gives fresh samples: test_branch_positions_uniform_spreads_and_short_roots_start_fresh.)
            assert root.branch is None and len(root.token_ids) == 10
            assert [b.branch for b in group[j + 1 : j + 5]] == [(j, 4), (j, 4), (j, 6), (j, 6)]
            for b in group[j + 1 : j + 5]:
                p = b.branch[1]
                assert b.token_ids[:p] == root.token_ids[:p] and b.logprobs[:p] == root.logprobs[:p]
                assert b.prompt_token_ids == root.prompt_token_ids
                assert len(b.token_ids) <= 10 and len(b.logprobs) == len(b.token_ids)
                assert b.text == tiny_tokenizer.decode(b.token_ids, skip_special_tokens=True)
    counts = tree_token_counts(groups)
    assert 0 < counts["tree/shared_token_share"] < 1
    flat = sum(len(g.token_ids) for group in groups for g in group) / 20
    assert counts["tree/generated_tokens_per_sample"] < flat


def test_branches_reuse_the_roots_cache_and_match_a_fresh_prefill(backend, tiny_tokenizer, monkeypatch):
    """Greedy branches continued from the roots' kept keys and values are the tokens (and log-probs) a fresh
    prefill of the same prompts gives; every branch prompt found its root's prefix."""
    tree = TreeConfig(roots=1, branches=1, points=3, branch_at="uniform")
    params = SamplingParams(n=4, max_new_tokens=12, temperature=0.0)
    hits = []
    take = pc.PrefixStore._longest_start

    def counted(self, prompt, hashes):
        found = take(self, prompt, hashes)
        hits.append(found.length)
        return found

    monkeypatch.setattr(pc.PrefixStore, "_longest_start", counted)
    groups = grow_trees(
        backend, ["12+3=", "4+56="], params, tree, decode=_decode(tiny_tokenizer), entropies=None
    )
    branch_prompts = [
        list(g[0].prompt_token_ids) + g[0].token_ids[: b.branch[1]] for g in groups for b in g[1:] if b.branch
    ]
    assert branch_prompts and all(
        n == len(p) - 1
        for n, p in zip(hits[-len(branch_prompts) :], sorted(branch_prompts, key=len), strict=True)
    )
    fresh = backend.generate(branch_prompts, SamplingParams(n=1, max_new_tokens=12, temperature=0.0))
    mine = [b for g in groups for b in g[1:] if b.branch]
    for b, f in zip(mine, fresh, strict=True):
        p = b.branch[1]
        own = b.token_ids[p:]
        assert own == f[0].token_ids[: len(own)]
        assert b.logprobs[p:] == pytest.approx(f[0].logprobs[: len(own)], abs=1e-4)


def test_entropy_rule_reads_the_entropies(backend, tiny_tokenizer):
    tree = TreeConfig(roots=1, branches=1, points=1, branch_at="entropy")
    seen = []

    def entropies(roots: list[Generation]) -> torch.Tensor:
        seen.append(len(roots))
        width = max(len(r.token_ids) for r in roots)
        ent = torch.zeros(len(roots), width)
        ent[:, 2] = 5.0  # the forking token
        return ent

    params = SamplingParams(n=2, max_new_tokens=8, seed=1, stop=[])
    groups = grow_trees(backend, ["1+1="], params, tree, decode=_decode(tiny_tokenizer), entropies=entropies)
    assert seen == [1]
    assert len(groups[0][0].token_ids) == 8  # the root runs to the budget (this seed): position 2 is in it
    assert groups[0][1].branch == (0, 2)


# -------------------------------------------------------------------------------------------- config, run


def test_config_checks_the_group_size_and_defaults_off():
    assert load_config(preset="grpo").rollout.tree.roots == 0
    with pytest.raises(ConfigError, match=r"roots \* \(1 \+ points \* branches\) = 6"):
        load_config(preset="grpo", overrides=["rollout.n=8", "rollout.tree.roots=2"])
    with pytest.raises(ConfigError, match="branch_at"):
        load_config(
            preset="grpo", overrides=["rollout.n=6", "rollout.tree.roots=2", "rollout.tree.branch_at=x"]
        )
    with pytest.raises(ConfigError, match="environment episodes"):
        load_config(preset="grpo", overrides=["rollout.n=6", "rollout.tree.roots=2", "env.name=tools"])


@pytest.mark.parametrize("branch_at", ["entropy", "uniform"])
def test_tree_run_trains_and_logs(tmp_path, branch_at):
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.training.metrics import read_metrics
    from rewardlab.types import Record

    prompts = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(4)]

    def digits(prompts, completions, references):
        return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]

    cfg = load_config(
        preset="grpo",
        overrides=[
            "train.max_steps=2",
            "train.prompts_per_step=2",
            "rollout.n=6",
            "rollout.tree.roots=2",
            "rollout.tree.branches=2",
            f"rollout.tree.branch_at={branch_at}",
            "rollout.tree.intra_tree_coef=1.0",
            "rollout.max_new_tokens=8",
            "reward.sources=[]",
            "reward.truncation=none",
            "train.report_to=none",
            "run.log_completions=12",
            f"run.output_dir={tmp_path / 'run'}",
        ],
    )
    with RLTrainer(cfg, train_records=prompts, eval_records=[], reward_fns=[digits], console=None) as tr:
        tr.train()
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert len(rows) == 2
    for r in rows:
        assert 0 < r["tree/shared_token_share"] < 1  # every root branched
        assert r["tree/generated_tokens_per_sample"] <= r["completions/mean_length"]
    samples = [json.loads(line) for line in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    assert len(samples) == 24 and {s["group"] for s in samples} == {0, 1}
    # each group: 2 roots, each followed by its 2 branches; every root of this seed is long enough to branch
    assert [("branch" in s) for s in samples] == [False, True, True] * 8
    for k in range(0, len(samples), 3):
        root = samples[k]
        for offset, b in enumerate(samples[k + 1 : k + 3], start=1):
            assert (b["step"], b["group"]) == (root["step"], root["group"])
            assert b["branch"][0] == root["index"] and b["index"] == root["index"] + offset
            assert 0 < b["branch"][1] < root["length"]  # a shared prefix, and a token of its own at least
