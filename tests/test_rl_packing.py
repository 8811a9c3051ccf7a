"""Padding-free training (``train.padding_free``): packing round trip, packed log-probs and values equal the
padded ones, and one full RL update gives the same loss, gradients and weights packed as padded."""

from __future__ import annotations

import copy

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.data.tiny import build_tiny_model
from rewardlab.generation import Generation
from rewardlab.rl import packing
from rewardlab.rl.config import load_config
from rewardlab.rl.packing import pack, unpack
from rewardlab.rl.trainer import RLTrainer, Rollout, ValueModel, build_tensors
from rewardlab.types import Record

# (prompt, response) lengths: mixed on both sides, a 1-token prompt and a 1-token response among them.
LENGTHS = [(3, 9), (17, 1), (1, 20), (40, 6), (8, 14), (25, 2), (5, 11), (12, 20)]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _gens(tokenizer, seed: int = 0) -> list[Generation]:
    g = torch.Generator().manual_seed(seed)
    chars = "0123456789+= abcdefxyz"

    def text(n: int) -> str:
        return "".join(chars[i] for i in torch.randint(len(chars), (n,), generator=g).tolist())

    out = []
    for k, (p, r) in enumerate(LENGTHS):
        prompt_ids = tokenizer.encode(text(p), add_special_tokens=False)
        ids = tokenizer.encode(text(r), add_special_tokens=False)
        finish = "length" if k == 2 else "stop"
        out.append(Generation(tokenizer.decode(ids), ids, prompt_ids, None, finish))
    return out


def test_pack_unpack_round_trip(tiny_tokenizer):
    b = build_tensors(_gens(tiny_tokenizer), pad_id=tiny_tokenizer.pad_token_id)
    att, resp = b["attention_mask"].bool(), b["response_mask"].bool()
    p = pack(b["input_ids"], b["attention_mask"], b["response_mask"])
    lengths = torch.tensor([a + r for a, r in LENGTHS])
    assert p.input_ids.shape == p.position_ids.shape == (1, int(lengths.sum()))
    assert p.offsets.tolist() == [0, *lengths.cumsum(0).tolist()]
    for s, e, n in zip(p.offsets[:-1], p.offsets[1:], lengths, strict=True):
        assert p.position_ids[0, s:e].tolist() == list(range(int(n)))
    # The flat row scatters back to the padded rows; the labels are the responses, each predicted by the
    # token just before it in the packed row.
    assert torch.equal(unpack(p.input_ids[0], att, fill=-1), torch.where(att, b["input_ids"], -1))
    assert torch.equal(p.labels, b["responses"][resp])
    assert torch.equal(p.input_ids[0, p.logit_index + 1], p.labels)
    assert torch.equal(p.unpack(p.labels), b["responses"] * resp)
    x = torch.randn(resp.shape, requires_grad=True)
    unpack(x[resp] * 2, resp).sum().backward()
    assert torch.equal(x.grad, 2 * resp.float())


def test_pack_refuses_a_response_without_a_prompt():
    ids = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match="prompt token"):
        pack(ids, torch.ones_like(ids), torch.ones(1, 3))


@pytest.mark.parametrize("name", ["qwen2-tiny", "llama-tiny"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_logprobs_and_values_equal_padded(name, attn, tiny_tokenizer):
    b = build_tensors(_gens(tiny_tokenizer), pad_id=tiny_tokenizer.pad_token_id)
    mask, T = b["response_mask"].bool(), b["responses"].shape[1]
    model = build_tiny_model(name, attn_implementation=attn).eval()
    p = pack(b["input_ids"], b["attention_mask"], b["response_mask"])
    with torch.no_grad():
        padded = model(
            input_ids=b["input_ids"], attention_mask=b["attention_mask"], position_ids=b["position_ids"],
            logits_to_keep=T + 1, use_cache=False,
        )  # fmt: skip
        lp_padded = ca.logprobs_from_logits(padded.logits[:, :-1], b["responses"])
        packed = model(**p.model_inputs(), use_cache=False)
        lp_packed = p.unpack(ca.logprobs_from_logits(packed.logits, p.labels[None])[0])
    assert packed.logits.shape[1] == int(mask.sum())  # only the logits that predict response tokens
    assert (lp_packed - lp_padded)[mask].abs().max() < 1e-5
    assert (lp_packed[~mask] == 0).all()

    value = ValueModel(model)
    torch.nn.init.normal_(value.head.weight)
    with torch.no_grad():
        v_padded = value(b["input_ids"], b["attention_mask"], b["position_ids"], T)
        v_packed = p.unpack(value(p.input_ids, None, p.position_ids, p.logit_index)[0])
    assert (v_packed - v_padded)[mask].abs().max() < 1e-5


def digits_reward(prompts, completions, references):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def _update(model, tokenizer, gens, preset, overrides, padding_free, out):
    """One update of a fresh trainer on a fixed rollout; returns (metrics, weights)."""
    base = [
        "train.max_steps=1", "train.prompts_per_step=2", "rollout.n=4", "rollout.max_new_tokens=20",
        "train.per_device_train_batch_size=3", "train.learning_rate=1e-5", "train.skip_zero_advantage=false",
        "reward.sources=[]", "train.report_to=none", f"run.output_dir={out}",
        f"train.padding_free={str(padding_free).lower()}",
    ]  # fmt: skip
    cfg = load_config(preset=preset, overrides=base + overrides)
    records = [
        Record(
            id=i, prompt=tokenizer.decode(g.prompt_token_ids), completion=g.text, metadata={"group": i // 4}
        )
        for i, g in enumerate(gens)
    ]
    with RLTrainer(
        cfg, model=model, tokenizer=tokenizer, train_records=records, eval_records=[],
        reward_fns=[digits_reward], console=None,
    ) as tr:  # fmt: skip
        m = tr._update(Rollout(gens, tr.reward_pipeline.score(records, gens)))
        weights = [p.detach().clone() for p in tr.policy.parameters()]
        if tr.value is not None:
            weights += [p.detach().clone() for p in tr.value.parameters()]
    return m, weights


@pytest.mark.parametrize(
    "preset,overrides",
    [
        ("grpo", ["algorithm.kl_coef=0.04", "algorithm.entropy_coef=0.01", "train.minibatches=2"]),
        ("ppo", []),
    ],
)  # fmt: skip
def test_one_update_packed_equals_padded(preset, overrides, tiny_tokenizer, monkeypatch, tmp_path):
    import rewardlab.rl.update as trainer_mod

    real_step = trainer_mod.optimizer_step
    grads: list[list[torch.Tensor]] = []

    def spy(params, *args, **kw):
        params = list(params)
        grads.append([p.grad.detach().clone() for p in params])
        return real_step(params, *args, **kw)

    packs = []
    monkeypatch.setattr(trainer_mod, "optimizer_step", spy)
    monkeypatch.setattr(packing, "pack", lambda *a: packs.append(1) or pack(*a))
    gens = _gens(tiny_tokenizer, seed=1)
    model = build_tiny_model(seed=0)
    runs = []
    for padding_free in (False, True):
        grads.clear()
        m, weights = _update(
            copy.deepcopy(model),
            tiny_tokenizer,
            gens,
            preset,
            overrides,
            padding_free,
            tmp_path / str(padding_free),
        )
        runs.append((m, weights, [g for step in grads for g in step]))
        assert bool(packs) == padding_free  # only the padding-free run packs
    (m0, w0, g0), (m1, w1, g1) = runs
    for key in ("loss", "policy_loss", "kl", "entropy", "value_loss", "grad_norm"):
        if key in m0:
            assert m1[key] == pytest.approx(m0[key], abs=1e-5), key
    assert len(g0) == len(g1) > 0
    assert max((a - b).abs().max().item() for a, b in zip(g0, g1, strict=True)) < 1e-5
    assert max((a - b).abs().max().item() for a, b in zip(w0, w1, strict=True)) < 1e-5


def test_token_budget_micro_batches_partition_by_tokens():
    from rewardlab.rl.packing import token_budget_micro_batches

    lengths = [90, 10, 40, 60, 30, 20, 50, 5]
    bins = token_budget_micro_batches(lengths, 100)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))  # every row once
    assert len(bins) == 4  # 305 tokens: first-fit decreasing needs 4 micro-batches of <= 100
    assert max(sum(lengths[i] for i in b) for b in bins) <= 100 * 4 / 3
    assert all(b == sorted(b) and b for b in bins)
    assert len(token_budget_micro_batches(lengths, 100, count=5)) == 5  # another rank needs 5
    assert len(token_budget_micro_batches(lengths, 100, count=50)) == len(lengths)  # never an empty one
    assert token_budget_micro_batches([500, 3], 100) == [[0], [1]]  # too long for the budget: alone
    with pytest.raises(ValueError):
        token_budget_micro_batches(lengths, 0)


@pytest.mark.parametrize(
    "preset,overrides",
    [("grpo", ["algorithm.kl_coef=0.04", "train.minibatches=2"]), ("ppo", [])],
)  # fmt: skip
def test_token_budget_micro_batches_give_the_padded_update(preset, overrides, tiny_tokenizer, tmp_path):
    """train.micro_batch_tokens regroups the forward passes (a varying number of samples each); the loss,
    gradients and weights stay those of the padded, fixed-size micro-batches."""
    gens = _gens(tiny_tokenizer, seed=2)
    model = build_tiny_model(seed=0)
    m0, w0 = _update(copy.deepcopy(model), tiny_tokenizer, gens, preset, overrides, False, tmp_path / "a")
    budget = ["train.micro_batch_tokens=60", *overrides]
    m1, w1 = _update(copy.deepcopy(model), tiny_tokenizer, gens, preset, budget, True, tmp_path / "b")
    # (logged per-micro-batch means such as kl are averaged over other groups: only the update must agree)
    for key in ("loss", "policy_loss", "value_loss", "grad_norm"):
        if key in m0:
            assert m1[key] == pytest.approx(m0[key], abs=1e-5), key
    assert max((a - b).abs().max().item() for a, b in zip(w0, w1, strict=True)) < 1e-5
