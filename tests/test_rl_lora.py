"""LoRA on the RL policy: only adapters train, the reference is the base model without a copy, the merged
weights equal peft's ``merge_and_unload``, the hf backend samples the adapted model, checkpoints hold the
merged model and the adapter and resume exactly, and a bad ``model.lora`` config is refused in one line."""

from __future__ import annotations

import copy
import types

import pytest
import torch

from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
from rewardlab.generation import SamplingParams
from rewardlab.generation.hf import HFBackend
from rewardlab.rl import policy as policy_module
from rewardlab.rl.config import ConfigError, load_config
from rewardlab.rl.trainer import RLTrainer, ValueModel
from rewardlab.training import lora
from rewardlab.training.metrics import is_timing_key, read_metrics
from rewardlab.types import Record

pytest.importorskip("peft")

PROMPTS = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(12)]


def digits_reward(prompts, completions, references):
    """Deterministic and varied even for an untrained model's completions (so groups are not degenerate)."""
    return [sum(map(ord, c)) % 7 / 7 for c in completions]


def _cfg(tmp_path, *overrides, name="run"):
    base = [
        "train.max_steps=1",
        "train.prompts_per_step=2",
        "rollout.n=4",
        "rollout.max_new_tokens=6",
        "train.learning_rate=1e-2",
        "train.per_device_train_batch_size=8",
        "reward.sources=[]",
        "reward.truncation=none",
        "train.report_to=none",
        "model.lora.r=4",
        f"run.output_dir={tmp_path / name}",
    ]
    return load_config(preset="grpo", overrides=base + list(overrides))  # grpo: kl_coef 0.04


def _trainer(cfg, **kw):
    return RLTrainer(
        cfg, train_records=PROMPTS, eval_records=[], reward_fns=(digits_reward,), console=None, **kw
    )


def _adapted(seed=0, **kw):
    """A tiny model with a LoRA adapter whose B matrices are not zero (so it changes the outputs)."""
    model = lora.add_lora(build_tiny_model(), r=4, dropout=0.0, **kw)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model


def test_only_adapters_train_and_the_reference_is_the_base_model(tmp_path, monkeypatch):
    def no_deepcopy(obj, memo=None):
        raise AssertionError("the LoRA reference must not be a copy")

    monkeypatch.setattr(policy_module, "copy", types.SimpleNamespace(deepcopy=no_deepcopy))
    base = build_tiny_model()
    before = {k: v.clone() for k, v in base.state_dict().items()}
    tr = _trainer(_cfg(tmp_path), model=base, tokenizer=load_tiny_tokenizer())
    try:
        assert tr.lora and tr.ref is tr.policy
        trainable = [p for p in tr.policy.parameters() if p.requires_grad]
        assert {id(p) for p in tr.opt.param_groups[0]["params"]} == {id(p) for p in trainable}
        last = tr.train()
        assert last["grad_norm"] > 0
        merged = dict(lora.merged_weights(tr.policy))
        changed = [k for k, v in tr.policy.state_dict().items() if "lora_B" in k and v.abs().sum() > 0]
        assert changed  # B starts at zero: a non-zero B is a trained adapter
        seen = set()
        for key, value in tr.policy.state_dict().items():
            if "lora_" not in key:  # the frozen base, bitwise
                seen.add(name := key.removeprefix("base_model.model.").replace(".base_layer", ""))
                assert torch.equal(value, before[name]), name
        assert seen == set(before)
        assert any(not torch.equal(merged[k], before[k]) for k in before)

        # The reference pass: the policy with its adapters off gives the base model's log-probs.
        u = tr.updater.batch(tr._rollout(tr.prompts.next(2), 0, {"generate": 0.0, "score": 0.0}), tr.step)
        tr.policy.train()
        tr.updater.reference_passes(u)
        assert tr.policy.training  # the mode is restored
        fresh = build_tiny_model()
        expected = tr.passes.no_grad_logprobs(fresh, u.tensors)
        assert torch.allclose(u.ref_logp, expected, atol=1e-6)
        assert not torch.allclose(tr.passes.no_grad_logprobs(tr.policy, u.tensors), expected, atol=1e-3)
    finally:
        tr.close()


@pytest.mark.parametrize("targets", ["all-linear", ["q_proj", "v_proj"]])
def test_merged_weights_equal_merge_and_unload(targets):
    model = _adapted(target_modules=targets)
    merged = list(lora.merged_weights(model))
    reference = copy.deepcopy(model).merge_and_unload().state_dict()
    assert [name for name, _ in merged] == list(reference)  # the base names, in order
    assert not any("base_model" in n or "base_layer" in n or "lora_" in n for n, _ in merged)
    for name, value in merged:
        assert torch.allclose(value, reference[name], atol=1e-6, rtol=0), name
    assert not any(getattr(m, "merged", False) for m in model.modules())  # nothing merged in place
    q = "model.layers.0.self_attn.q_proj.weight"  # adapted in both cases: the adapter is in the merge
    assert not torch.equal(dict(merged)[q], build_tiny_model().state_dict()[q])


def test_hf_backend_samples_the_adapted_model(tiny_tokenizer):
    model = _adapted()
    merged = build_tiny_model()
    merged.load_state_dict(dict(lora.merged_weights(model)))
    params = SamplingParams(n=3, temperature=0.0, max_new_tokens=6, logprobs=True)
    prompts = ["12+34=", "7+8="]
    peft_backend = HFBackend(model, tiny_tokenizer, share_prefix=True)  # n > 1: the prompt-cache path
    assert peft_backend._cache_kw == HFBackend(merged, tiny_tokenizer)._cache_kw
    got = peft_backend.generate(prompts, params)
    want = HFBackend(merged, tiny_tokenizer, share_prefix=False).generate(prompts, params)
    base = HFBackend(build_tiny_model(), tiny_tokenizer).generate(prompts, params)
    for g, w, b in zip(got, want, base, strict=True):
        assert [s.token_ids for s in g] == [s.token_ids for s in w]
        assert torch.allclose(torch.tensor(g[0].logprobs), torch.tensor(w[0].logprobs), atol=1e-5)
        assert g[0].token_ids != b[0].token_ids or g[0].logprobs != pytest.approx(b[0].logprobs, abs=1e-3)


def test_value_model_copies_the_base_body_not_the_adapters():
    model = _adapted()
    value = ValueModel(model)
    names = list(value.body.state_dict())
    assert names == list(build_tiny_model().get_decoder().state_dict())
    assert all(p.requires_grad for p in value.parameters())
    assert torch.equal(
        value.body.state_dict()["layers.0.self_attn.q_proj.weight"],
        build_tiny_model().get_decoder().state_dict()["layers.0.self_attn.q_proj.weight"],
    )
    assert any(hasattr(m, "lora_A") for m in model.modules())  # the policy keeps its adapters


def test_gradient_checkpointing_reaches_the_adapters(tiny_tokenizer):
    model = lora.add_lora(build_tiny_model(), r=4, gradient_checkpointing=True)
    model.gradient_checkpointing_enable()
    model.train()
    ids = torch.tensor([tiny_tokenizer("1+2=3")["input_ids"]])
    model(input_ids=ids, labels=ids).loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if "lora_B" in n]  # B = 0: A's gradient is 0
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads)


def test_checkpoint_holds_the_merged_model_and_the_adapter(tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _trainer(_cfg(tmp_path)) as tr:
        tr.train()
        merged = dict(lora.merged_weights(tr.policy))
    step = tmp_path / "run" / "checkpoints" / "step-1"
    plain = AutoModelForCausalLM.from_pretrained(step / "policy")
    AutoTokenizer.from_pretrained(step / "policy")
    assert not any("lora" in k for k in plain.state_dict())
    for name, value in plain.state_dict().items():
        assert torch.allclose(value, merged[name], atol=1e-6), name
    assert (step / "adapter" / "adapter_config.json").is_file()
    reloaded = PeftModel.from_pretrained(build_tiny_model(), step / "adapter")
    for name, value in lora.merged_weights(reloaded):
        assert torch.allclose(value, merged[name], atol=1e-6), name


def test_resume_continues_exactly(tmp_path):
    common = ["train.max_steps=2", "train.save_steps=1", "train.epochs=2"]
    with _trainer(_cfg(tmp_path, *common, name="full")) as tr:
        tr.train()
        full_adapter = {k: v.clone() for k, v in tr.policy.state_dict().items() if "lora_" in k}
    with _trainer(_cfg(tmp_path, *common, name="part")) as tr:
        tr.train(steps=1)
    torch.manual_seed(12345)  # resume must restore the RNG states
    with _trainer(_cfg(tmp_path, *common, name="part")) as tr:
        tr.train(resume=True)
        resumed_adapter = {k: v for k, v in tr.policy.state_dict().items() if "lora_" in k}
        assert tr.opt.state  # Adam moments came back with the adapter
    assert full_adapter.keys() == resumed_adapter.keys()
    for key, value in full_adapter.items():
        assert torch.allclose(value, resumed_adapter[key], atol=1e-6), key
    full, resumed = read_metrics(tmp_path / "full"), read_metrics(tmp_path / "part")
    assert [r["step"] for r in resumed] == [1, 2]
    for a, b in zip(full, resumed, strict=True):
        assert a.keys() == b.keys()
        for key in (k for k in a if not is_timing_key(k)):
            expected = pytest.approx(b[key], rel=1e-6, abs=1e-9) if isinstance(b[key], float) else b[key]
            assert a[key] == expected, (a["step"], key)


def test_an_adapter_of_another_layout_is_refused(tmp_path):
    _adapted().save_pretrained(tmp_path)
    other = lora.add_lora(build_tiny_model(), r=4, target_modules=["q_proj"])
    with pytest.raises(ValueError, match="does not match"):
        lora.load_adapter_weights(other, tmp_path)


@pytest.mark.parametrize(
    "overrides, field",
    [
        (["model.lora.r=-1"], "model.lora.r"),
        (["model.lora.alpha=0", "model.lora.r=8"], "model.lora.alpha"),
        (["model.lora.dropout=1.5"], "model.lora.dropout"),
        (["model.lora.target_modules=[]"], "model.lora.target_modules"),
        (["model.lora.load_in_4bit=true"], "model.lora.load_in_4bit"),
        (["model.lora.load_in_4bit=true", "model.lora.r=8", "run.device=cpu"], "model.lora.load_in_4bit"),
    ],
)
def test_bad_lora_config_is_one_line(overrides, field):
    with pytest.raises(ConfigError) as err:
        load_config(overrides=overrides)
    message = str(err.value)
    assert message.startswith(field) and "\n" not in message


def test_qlora_is_refused_without_cuda_or_bitsandbytes():
    if lora.qlora_unavailable() is None:
        pytest.skip(
            "this machine cannot have it: a CPU-only torch (CUDA and bitsandbytes are here, so QLoRA is allowed)"
        )
    with pytest.raises(ConfigError, match=r"QLoRA needs (a CUDA device|bitsandbytes)"):
        load_config(overrides=["model.lora.r=8", "model.lora.load_in_4bit=true"])
