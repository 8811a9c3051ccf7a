"""FSDP2 (``train.strategy: fsdp``) on CPU: two gloo processes train exactly as one process, and resume exactly.

FSDP2 (``fully_shard``) runs on CPU with the gloo backend (torch 2.13), so these tests need no GPU; on GPUs
the same code runs with NCCL (``rewardlab.training.device.init_distributed`` picks the backend).

* Equivalence: each rank samples its own stride of the prompts, so two ranks with ``P`` prompts each see the
  global batch one process sees with ``2P``. A scripted backend makes the completions depend on the prompt
  only (not on the rank's sampling seed), so both runs train on the same samples; after 3 steps (2 optimiser
  steps each, gradient accumulation over micro-batches, a sharded reference for the KL term, gradient
  checkpointing on the sharded run only) the policies agree to 1e-5.
* Resume: PPO (policy, reference and value model sharded; the hf backend generating with the gathered
  policy) for 3 steps, against 1 step + checkpoint + a fresh trainer resuming for 2; the weights and the
  logged metrics agree, and the checkpoint loads with ``from_pretrained``.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from rewardlab.generation.base import Generation, RolloutBackend, SamplingParams
from rewardlab.types import Record

WORLD = 2
PROMPTS = [Record(id=i, prompt=f"{i}*{i}=", reference=str(i * i)) for i in range(16)]
COMMON = [
    "rollout.max_new_tokens=6",
    "train.learning_rate=1e-3",
    "train.max_grad_norm=0.5",
    "reward.sources=[]",
    "reward.truncation=none",
    "train.report_to=none",
    "run.device=cpu",
]


def digits_reward(prompts, completions, references):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


class ScriptedBackend(RolloutBackend):
    """Completions that depend only on the prompt and the sample's index, not on the rank, seed or weights."""

    name = "scripted"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Generation]]:
        return [[self._sample(p, k, params.max_new_tokens) for k in range(params.n)] for p in prompts]

    def _sample(self, prompt: str, k: int, max_tokens: int) -> Generation:
        rng = random.Random(f"{prompt}|{k}")
        text = "".join(rng.choice("0123456789+= ab") for _ in range(rng.randint(2, max_tokens)))
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][:max_tokens]
        prompt_ids = self.tokenizer(prompt)["input_ids"]
        return Generation(self.tokenizer.decode(ids), ids, prompt_ids, None, "stop")

    def update_weights(self, model: Any) -> None:
        pass


def _trainer(overrides: list[str], **kw: Any) -> Any:
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer

    cfg = load_config(preset=kw.pop("preset", "grpo"), overrides=COMMON + overrides)
    kw.setdefault("eval_records", [])
    return RLTrainer(cfg, train_records=PROMPTS, reward_fns=[digits_reward], console=None, **kw)


def _equivalence_overrides(world: int, out_dir: str) -> list[str]:
    return [
        "train.max_steps=3",
        f"train.prompts_per_step={4 // world}",
        "rollout.n=4",
        "train.epochs=2",
        "train.per_device_train_batch_size=3",
        f"run.output_dir={out_dir}",
    ]


def _spawn(worker: Any, port: int, *args: Any) -> None:
    mp.spawn(worker, args=(port, *args), nprocs=WORLD, join=True)


def _init(rank: int, port: int) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)


def _equivalence_worker(rank: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.training import parallel

    _init(rank, port)
    try:
        overrides = [*_equivalence_overrides(WORLD, out_dir), "train.strategy=fsdp"]
        overrides.append("model.gradient_checkpointing=true")
        with _trainer(overrides, backend=ScriptedBackend(load_tiny_tokenizer())) as tr:
            assert parallel.is_sharded(tr.policy) and parallel.is_sharded(tr.ref)
            norms = [tr.train_step()["grad_norm"] for _ in range(3)]
            weights = parallel.full_state_dict(tr.policy)
        if rank == 0:
            torch.save({"weights": weights, "grad_norms": norms}, os.path.join(out_dir, "fsdp.pt"))
        dist.barrier()  # no rank leaves while the other may still talk to it (a rank once died in teardown)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_fsdp_ranks_train_like_one_process(tmp_path, free_port):
    from rewardlab.data.tiny import load_tiny_tokenizer

    _spawn(_equivalence_worker, free_port, str(tmp_path))
    sharded = torch.load(tmp_path / "fsdp.pt")
    torch.set_num_threads(1)
    overrides = _equivalence_overrides(1, str(tmp_path / "single"))
    with _trainer(overrides, backend=ScriptedBackend(load_tiny_tokenizer())) as tr:
        initial = {k: v.clone() for k, v in tr.policy.state_dict().items()}
        norms = [tr.train_step()["grad_norm"] for _ in range(3)]
        single = tr.policy.state_dict()
    assert sharded["grad_norms"] == pytest.approx(norms, rel=1e-5)
    assert sharded["weights"].keys() == single.keys()
    for name, value in single.items():
        torch.testing.assert_close(sharded["weights"][name], value, rtol=0, atol=1e-5, msg=name)
    assert any(not torch.equal(initial[k], single[k]) for k in single), "the steps did not train"


def _resume_overrides(out_dir: str) -> list[str]:
    return [
        "train.max_steps=3",
        "train.prompts_per_step=2",
        "rollout.n=2",
        "train.epochs=2",
        "train.minibatches=2",
        "train.per_device_train_batch_size=1",
        "train.strategy=fsdp",
        f"run.output_dir={out_dir}",
    ]


def _ppo(overrides: list[str]) -> Any:
    """PPO with held-out prompts: the greedy evaluation before and after training runs on every rank."""
    return _trainer(overrides, preset="ppo", eval_records=PROMPTS[:2])


def _resume_worker(rank: int, port: int, root: str) -> None:
    import torch.distributed as dist

    from rewardlab.generation.vllm import VLLMBackend
    from rewardlab.training import parallel

    _init(rank, port)
    try:
        results = {}
        with _ppo(_resume_overrides(os.path.join(root, "full"))) as tr:
            assert all(parallel.is_sharded(m) for m in (tr.policy, tr.ref, tr.value))
            tr.train()
            results["full"] = _weights(tr)
            pushed = dict(VLLMBackend._weights(tr.policy))  # what a vllm engine would receive, on every rank
        resumed_dir = os.path.join(root, "resumed")
        with _ppo([*_resume_overrides(resumed_dir), "train.save_steps=1"]) as tr:
            tr.train(steps=1)
        torch.manual_seed(12345)  # disturb the global RNG: resume must restore it
        with _ppo([*_resume_overrides(resumed_dir), "train.save_steps=1"]) as tr:
            tr.train(resume=True)
            results["resumed"] = _weights(tr)
        if rank == 0:
            full = results["full"]["policy"]
            results["pushed_matches"] = all(torch.equal(pushed[k], full[k]) for k in full)
            torch.save(results, os.path.join(root, "resume.pt"))
        else:
            assert not results["full"]["policy"], "only rank 0 holds the gathered weights"
            assert pushed.keys() >= {"lm_head.weight"}
        dist.barrier()  # both ranks tear gloo down together
    finally:
        dist.destroy_process_group()


def _weights(tr: Any) -> dict[str, dict[str, torch.Tensor]]:
    from rewardlab.training import parallel

    return {"policy": parallel.full_state_dict(tr.policy), "value": parallel.full_state_dict(tr.value)}


@pytest.mark.slow
def test_fsdp_save_then_resume_matches_an_uninterrupted_run(tmp_path, free_port):
    from transformers import AutoModelForCausalLM

    from rewardlab.training.metrics import is_timing_key, read_metrics

    _spawn(_resume_worker, free_port, str(tmp_path))
    res = torch.load(tmp_path / "resume.pt")
    assert res["pushed_matches"], "the vllm weight push must see whole tensors"
    for model in ("policy", "value"):
        full, resumed = res["full"][model], res["resumed"][model]
        assert full.keys() == resumed.keys()
        for name in full:
            torch.testing.assert_close(resumed[name], full[name], rtol=0, atol=1e-6, msg=f"{model}.{name}")
    full_m, resumed_m = read_metrics(tmp_path / "full"), read_metrics(tmp_path / "resumed")
    assert [r["step"] for r in resumed_m] == [0, 1, 2, 3] and "eval/pass@1" in resumed_m[-1]
    for a, b in zip(full_m, resumed_m, strict=True):
        for key in (k for k in a if not is_timing_key(k)):
            expected = pytest.approx(a[key], rel=1e-6, abs=1e-9) if isinstance(a[key], float) else a[key]
            assert b[key] == expected, (a["step"], key)
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "full" / "checkpoints" / "step-3" / "policy")
    for name, value in saved.state_dict().items():
        torch.testing.assert_close(value, res["full"]["policy"][name], rtol=0, atol=0, msg=name)


# -- without a process group (fast) -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.strategy=zero3"], "train.strategy: unknown value 'zero3' (known: ddp, fsdp)"),
        (["train.fsdp_cpu_offload=true"], "train.fsdp_cpu_offload needs train.strategy: fsdp"),
        (["train.fsdp_mixed_precision=true"], "train.fsdp_mixed_precision needs train.strategy: fsdp"),
        (["train.strategy=fsdp", "model.lora.r=8"], "train.strategy: fsdp is not supported with LoRA"),
    ],
)
def test_strategy_options_are_validated_in_one_line(overrides, message):
    from rewardlab.rl.config import ConfigError, load_config

    with pytest.raises(ConfigError) as err:
        load_config(preset="grpo", overrides=overrides)
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_fsdp_options_load():
    from rewardlab.rl.config import load_config

    on = ["train.strategy=fsdp", "train.fsdp_cpu_offload=true", "train.fsdp_mixed_precision=false"]
    tc = load_config(preset="grpo", overrides=on).train
    assert (tc.strategy, tc.fsdp_cpu_offload, tc.fsdp_mixed_precision) == ("fsdp", True, "false")
    assert load_config(preset="grpo").train.strategy == "ddp"
    # a YAML boolean in a str field reads as YAML spells it (``true``), as the choices expect
    assert load_config(preset="grpo", overrides=["train.bf16=true"]).train.bf16 == "true"


def test_decoder_layers_are_the_units_of_sharding(tiny_model):
    from rewardlab.rl.trainer import ValueModel
    from rewardlab.training import parallel

    layers = parallel.decoder_layers(tiny_model)
    assert layers and all(type(m).__name__ == "Qwen2DecoderLayer" for m in layers)
    assert len(parallel.decoder_layers(ValueModel(tiny_model))) == len(layers)


def test_unwrapped_models_pass_through(tiny_model):
    from rewardlab.training import parallel

    assert not parallel.is_sharded(tiny_model)
    with parallel.no_sync(tiny_model), parallel.gathered(tiny_model):
        pass
    assert parallel.full_state_dict(tiny_model).keys() == tiny_model.state_dict().keys()


def test_optimizer_state_keyed_by_name_loads_into_a_plain_model(tiny_model):
    """An FSDP checkpoint's optimiser state (keyed by parameter name) resumes a single-process run exactly."""
    from rewardlab.data.tiny import build_tiny_model
    from rewardlab.training import parallel
    from rewardlab.training.optim import build_optimizer

    other = build_tiny_model()
    other.load_state_dict(tiny_model.state_dict())
    opt, opt2 = (build_optimizer(m.parameters(), lr=1e-2) for m in (tiny_model, other))
    x = torch.randint(0, 40, (2, 6))
    tiny_model(input_ids=x, labels=x).loss.backward()
    opt.step()
    by_name = parallel._keyed_by_name(tiny_model, opt.state_dict())
    assert all(isinstance(k, str) for k in by_name["state"])
    parallel.load_optimizer_state_dict(other, opt2, by_name)
    a, b = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k]["exp_avg"], b[k]["exp_avg"]) and torch.equal(
            a[k]["exp_avg_sq"], b[k]["exp_avg_sq"]
        )


pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="this machine cannot have it: torch.distributed"
)
