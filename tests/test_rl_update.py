"""The update's stages: one inputs object for every advantage estimator, the KL controller wired into the
loss and the checkpoint."""

from __future__ import annotations

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.rl.config import load_config
from rewardlab.rl.trainer import RLTrainer
from rewardlab.training.metrics import read_metrics
from rewardlab.types import Record

PROMPTS = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(12)]


def digits_reward(prompts, completions, references):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


@pytest.mark.parametrize("name", ca.ADVANTAGE_ESTIMATORS.names())
def test_one_inputs_object_serves_every_estimator(name):
    """Each estimator reads what it needs from AdvantageInputs: the same numbers as a direct call with only
    its own arguments (what the trainer's if-chain on the name used to pass)."""
    g = torch.Generator().manual_seed(0)
    rewards = torch.zeros(6, 4)
    mask = torch.ones(6, 4)
    mask[1, 3:] = 0
    rewards[torch.arange(6), mask.sum(-1).long() - 1] = torch.rand(6, generator=g)
    values = torch.rand(6, 4, generator=g) * mask
    process = torch.rand(6, 4, generator=g) * mask
    valid = torch.tensor([True, True, False, True, True, True])
    own = {
        "grpo": {"group_size": 3, "valid": valid, "eps": 1e-6, "scale": "group"},
        "dr_grpo": {"group_size": 3, "valid": valid},
        "rloo": {"group_size": 3, "valid": valid},
        "reinforce_pp": {"valid": valid, "gamma": 0.9},
        "reinforce_pp_baseline": {"group_size": 3, "valid": valid},
        "gae": {"values": values, "gamma": 0.9, "lam": 0.95},
        "step_return": {"group_size": 3, "valid": valid, "baseline": "rloo", "scale": "group", "gamma": 0.9},
        "passk": {"group_size": 3, "valid": valid, "k": 4},
        "grpo_passk": {"group_size": 3, "valid": valid, "scale": "group"},
        "gdpo": {"group_size": 3, "valid": valid},
        "reinforce_signed": {"valid": valid},
        "prime": {"group_size": 3, "valid": valid, "gamma": 0.9, "process_rewards": process},
    }.get(name)
    if own is None:
        pytest.skip(f"no reference call written for {name}")
    inputs = ca.AdvantageInputs(
        rewards,
        mask,
        group_size=3,
        valid=valid,
        values=values,
        gamma=0.9,
        lam=0.95,
        scale="group",
        process_rewards=process,
    )
    adv, ret = inputs.estimate(name)
    ref_adv, ref_ret = ca.compute_advantages(name, rewards, mask, **own)
    assert torch.allclose(adv, ref_adv) and torch.allclose(ret, ref_ret)


def _train(tmp_path, model, tokenizer, *overrides):
    """A short GRPO run on the tiny model; returns the config and the final KL coefficient."""
    base = [
        "train.max_steps=2", "train.prompts_per_step=3", "rollout.n=4", "rollout.max_new_tokens=8",
        "train.learning_rate=1e-2", "reward.sources=[]", "train.report_to=none", f"run.output_dir={tmp_path}",
    ]  # fmt: skip
    cfg = load_config(preset="grpo", overrides=base + list(overrides))
    with RLTrainer(
        cfg, model=model, tokenizer=tokenizer, train_records=PROMPTS, eval_records=[],
        reward_fns=[digits_reward], console=None,
    ) as trainer:  # fmt: skip
        trainer.train()
        return cfg, trainer.kl_ctrl.value


def test_adaptive_kl_controller_moves_the_coefficient_and_is_checkpointed(
    tmp_path, tiny_model, tiny_tokenizer
):
    _, final = _train(
        tmp_path, tiny_model, tiny_tokenizer,
        "algorithm.kl_ctrl=adaptive", "algorithm.kl_coef=0.05", "algorithm.kl_target=1e-9",
        "algorithm.kl_horizon=10",
    )  # fmt: skip
    rows = read_metrics(tmp_path)
    # Step 1 measures KL 0 (the policy is the reference until its first update): beta falls by the capped
    # 20% * n / horizon. Step 2's KL is far above the tiny target: beta rises by the same factor.
    assert rows[0]["kl"] == 0.0 and rows[1]["kl"] > 1e-9
    assert rows[0]["kl_coef"] == pytest.approx(0.05 * (1 - 0.2 * 12 / 10))
    assert rows[1]["kl_coef"] == pytest.approx(rows[0]["kl_coef"] * (1 + 0.2 * 12 / 10))
    assert final == pytest.approx(rows[-1]["kl_coef"])
    state = torch.load(tmp_path / "checkpoints" / "step-2" / "trainer_state.pt", weights_only=False)
    assert state["kl_coef"] == pytest.approx(final)


def test_fixed_kl_controller_keeps_the_coefficient(tmp_path, tiny_model, tiny_tokenizer):
    cfg, final = _train(tmp_path, tiny_model, tiny_tokenizer)
    assert read_metrics(tmp_path)[0]["kl_coef"] == cfg.algorithm.kl_coef == 0.04 == final
