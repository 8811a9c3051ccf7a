"""The RL loop end to end on the tiny model: metrics, failure handling, dynamic sampling, resume, checkpoints."""

from __future__ import annotations

import json

import pytest
import torch

from rewardlab.rl.config import load_config
from rewardlab.rl.trainer import RLTrainer
from rewardlab.training.metrics import is_timing_key, read_metrics
from rewardlab.types import Record

PROMPTS = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(12)]


def digits_reward(prompts, completions, references):
    """Deterministic, varied reward: fraction of digits in the completion."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def _cfg(tmp_path, *overrides, preset="grpo"):
    base = [
        "train.max_steps=2",
        "train.prompts_per_step=3",
        "rollout.n=4",
        "rollout.max_new_tokens=8",
        "train.learning_rate=1e-3",
        "train.per_device_train_batch_size=5",
        "reward.sources=[]",
        "train.report_to=none",
        f"run.output_dir={tmp_path / 'run'}",
    ]
    return load_config(preset=preset, overrides=base + list(overrides))


def _train(cfg, reward_fns=(digits_reward,), **kw):
    with RLTrainer(
        cfg, train_records=PROMPTS, eval_records=[], reward_fns=reward_fns, console=None, **kw
    ) as tr:
        last = tr.train()
        return tr, last


def test_step_metrics_use_trl_names_and_move_weights(tmp_path, tiny_model, tiny_tokenizer):
    before = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    _, last = _train(_cfg(tmp_path), model=tiny_model, tokenizer=tiny_tokenizer)
    for key in (
        "reward",
        "reward_std",
        "rewards/digits_reward/mean",
        "frac_reward_zero_std",
        "kl",
        "entropy",
        "clip_ratio/low_mean",
        "clip_ratio/high_mean",
        "completions/mean_length",
        "completions/clipped_ratio",
        "grad_norm",
        "learning_rate",
        "loss",
        "num_tokens",
        "timing/generate_s",
        "timing/score_s",
        "timing/train_s",
        "tokens_per_s",
    ):
        assert key in last, key
    assert last["grad_norm"] > 0
    assert any(not torch.equal(before[k], v) for k, v in tiny_model.state_dict().items())
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]


def test_crashing_reward_is_a_scored_error_and_none_excludes(tmp_path):
    calls = {"n": 0}

    def flaky(prompts, completions, references):
        calls["n"] += 1
        out = []
        for p in prompts:
            if p.startswith("1+"):
                raise RuntimeError("boom")
            out.append(None if p.startswith("2+") else 0.5 + 0.1 * len(p))
        return out

    cfg = _cfg(tmp_path, "train.max_steps=1", "train.prompts_per_step=4", "data.shuffle=false")
    _, last = _train(cfg, reward_fns=(flaky, digits_reward))
    # Prompts 0..3: "1+1=" crashes (4 samples, reward 0 + error), "2+2=" has no reward (4 samples excluded).
    assert last["scoring/errors"] == 4
    assert last["scoring/error/reward function crashed"] == 4
    assert last["scoring/missing_reward"] == 4
    assert last["samples/masked_from_loss"] >= 4
    assert all(v == v for v in last.values() if isinstance(v, float))  # no NaN anywhere


def test_all_degenerate_batch_is_reported(tmp_path):
    # truncation kept as it is: a random model's cut-off completions would otherwise be penalised (not all equal)
    cfg = _cfg(tmp_path, "train.max_steps=1", "algorithm.kl_coef=0", "reward.truncation=none")
    _, last = _train(cfg, reward_fns=(lambda p, c, r: [1.0] * len(c),))
    assert last["frac_reward_zero_std"] == 1.0
    assert "zero reward std" in last["warning"]
    assert last["skipped_update"] == 1


@pytest.mark.parametrize("mode", ["mask", "penalize"])
def test_truncation_is_counted(tmp_path, mode):
    cfg = _cfg(tmp_path, "train.max_steps=1", "rollout.max_new_tokens=3", f"reward.truncation={mode}")
    _, last = _train(cfg)
    assert last["completions/clipped_ratio"] > 0.5
    assert last["completions/num_truncated"] >= 6
    if mode == "mask":
        assert last["samples/masked_from_loss"] == last["completions/num_truncated"]


def test_dynamic_sampling_refills(tmp_path):
    def half_degenerate(prompts, completions, references):
        # Prompts with an even number: all-equal rewards (dropped by DAPO); odd: varied.
        return [
            1.0 if int(p.split("+")[0]) % 2 == 0 else sum(ch.isdigit() for ch in c) / 8 + 0.01 * i
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]

    cfg = _cfg(tmp_path, "train.max_steps=1", "train.prompts_per_step=4", "data.shuffle=false", preset="dapo")
    cfg.reward.truncation = "none"
    cfg.rollout.n = 4
    _, last = _train(cfg, reward_fns=(half_degenerate,))
    assert last["dynamic_sampling/rounds"] == 2  # 2 of 4 groups kept in round 1, refilled in round 2
    assert last["dynamic_sampling/kept_groups"] == 4
    assert last["dynamic_sampling/kept_frac"] == pytest.approx(0.5)


def test_ppo_with_value_model(tmp_path):
    cfg = _cfg(tmp_path, "train.max_steps=1", "train.minibatches=2", "train.epochs=2", preset="ppo")
    tr, last = _train(cfg)
    assert tr.value is not None and "value_loss" in last and last["grad_norm"] > 0
    assert (tmp_path / "run" / "checkpoints" / "step-1" / "value" / "value_model.pt").exists()


def test_checkpoint_loads_with_from_pretrained(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tr, _ = _train(_cfg(tmp_path, "train.max_steps=1"))
    path = tmp_path / "run" / "checkpoints" / "step-1" / "policy"
    model = AutoModelForCausalLM.from_pretrained(path)
    AutoTokenizer.from_pretrained(path)
    for (name, a), b in zip(model.state_dict().items(), tr.policy.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_resume_gives_identical_metrics(tmp_path):
    full_dir, resumed_dir = tmp_path / "full", tmp_path / "resumed"
    common = [
        "train.max_steps=4",
        "train.save_steps=2",
        "algorithm.kl_coef=0.01",
        "train.epochs=2",
        "train.minibatches=2",
    ]
    cfg = _cfg(tmp_path, *common, f"run.output_dir={full_dir}")
    _train(cfg)
    full = read_metrics(full_dir)

    # Interrupted run: stops after step 2 (checkpoint), then a fresh process-like trainer resumes.
    cfg2 = _cfg(tmp_path, *common, f"run.output_dir={resumed_dir}")
    with RLTrainer(
        cfg2, train_records=PROMPTS, eval_records=[], reward_fns=(digits_reward,), console=None
    ) as tr:
        tr.train(steps=2)
    torch.manual_seed(12345)  # disturb the global RNG: resume must restore it
    with RLTrainer(
        cfg2, train_records=PROMPTS, eval_records=[], reward_fns=(digits_reward,), console=None
    ) as tr:
        tr.train(resume=True)
    resumed = read_metrics(resumed_dir)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]
    for a, b in zip(full, resumed, strict=True):
        ka = {k: v for k, v in a.items() if not is_timing_key(k)}
        kb = {k: v for k, v in b.items() if not is_timing_key(k)}
        assert ka.keys() == kb.keys()
        for key in ka:
            assert ka[key] == pytest.approx(kb[key], rel=1e-6, abs=1e-9), (a["step"], key)


def test_config_saved_and_jsonl_valid(tmp_path):
    _train(_cfg(tmp_path, "train.max_steps=1"))
    run = tmp_path / "run"
    assert (run / "config.yaml").exists()
    for line in (run / "metrics.jsonl").read_text().splitlines():
        json.loads(line)


def test_process_rewards_grpo_prm(tmp_path):
    cfg = _cfg(tmp_path, "train.max_steps=1", "reward.process=correct_looking", preset="grpo_prm")
    _, last = _train(cfg)
    assert "steps/mean_count" in last and "steps/shaped_sum_mean" in last
    assert last["grad_norm"] > 0


def test_rollout_is_correction_logged(tmp_path):
    cfg = _cfg(tmp_path, "train.max_steps=1", "algorithm.rollout_is=token", "algorithm.rollout_is_mask=true")
    _, last = _train(cfg)
    # hf rollout log-probs equal the trainer's (same model, fp32): the ratio is 1 and nothing is masked.
    assert last["rollout_is/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert last["rollout_is/masked_frac"] == 0.0


@pytest.mark.parametrize("minibatches", [1, 2])
def test_skipping_zero_advantage_samples_keeps_the_update(tmp_path, minibatches, tiny_tokenizer):
    tok = tiny_tokenizer
    from rewardlab.data.tiny import build_tiny_model

    def half_degenerate(prompts, completions, references):
        return [
            1.0 if int(p.split("+")[0]) % 2 == 0 else sum(ch.isdigit() for ch in c) / 8
            for p, c in zip(prompts, completions, strict=True)
        ]

    weights = []
    for skip in (True, False):
        cfg = _cfg(
            tmp_path,
            "train.max_steps=2",
            "train.prompts_per_step=4",
            "algorithm.kl_coef=0",
            f"train.minibatches={minibatches}",
            f"train.skip_zero_advantage={str(skip).lower()}",
            f"run.output_dir={tmp_path / str(skip)}",
        )
        tr, last = _train(cfg, reward_fns=(half_degenerate,), model=build_tiny_model(seed=0), tokenizer=tok)
        weights.append(torch.cat([p.detach().flatten() for p in tr.policy.parameters()]))
        if skip:
            assert last["samples/skipped_zero_advantage"] > 0
    # Equal up to float rounding (the batched matmuls sum in a different order), amplified a little by Adam.
    assert (weights[0] - weights[1]).abs().max() < 2e-5


def test_reward_model_source(tmp_path, tiny_tokenizer):
    from transformers import AutoModelForSequenceClassification

    from rewardlab.data.tiny import tiny_model_config

    torch.manual_seed(0)
    rm = AutoModelForSequenceClassification.from_config(tiny_model_config(num_labels=1))
    rm.save_pretrained(tmp_path / "rm")
    tiny_tokenizer.save_pretrained(tmp_path / "rm")
    cfg = _cfg(tmp_path, "train.max_steps=1", f"reward.sources=[{{name: 'rm:{tmp_path / 'rm'}'}}]")
    _, last = _train(cfg, reward_fns=())
    assert f"rewards/rm:{tmp_path / 'rm'}/mean" in last
    assert last["reward_std"] > 0 and last["scoring/errors"] == 0


def test_the_gpu_bench_model_config_is_qwen2_5_1_5b():
    """bench/rl_gpu.py's real-size model: Qwen2.5-1.5B's architecture, 1,543,714,304 parameters as published
    (built on the meta device: no memory)."""
    import torch
    from transformers import AutoModelForCausalLM

    from rewardlab.data.tiny import tiny_model_config

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(tiny_model_config("qwen2.5-1.5b"))
    assert sum(p.numel() for p in model.parameters()) == 1_543_714_304
