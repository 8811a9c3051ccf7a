"""Issue 17's techniques inside the RL trainer, on the tiny model: asynchronous rollouts (the scheduler and
a run), prompt filters across epochs and resume, L1 budgets in the prompts, label-free reward sources and
GDPO with two sources."""

from __future__ import annotations

import json
import re
import threading

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.rl.config import load_config
from rewardlab.rl.overlap import OverlappedRollouts
from rewardlab.rl.trainer import RLTrainer, build_tensors
from rewardlab.training.metrics import read_metrics
from rewardlab.types import Record

PROMPTS = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(6)]


def digits_reward(prompts, completions, references):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def even_prompts_solved(prompts, completions, references):
    """Every sample of an even prompt is right, of an odd one wrong: every group has zero variance."""
    return [1.0 if int(p.split("+")[0]) % 2 == 0 else 0.0 for p in prompts]


def _cfg(tmp_path, *overrides):
    base = [
        "train.max_steps=3",
        "train.prompts_per_step=3",
        "rollout.n=4",
        "rollout.max_new_tokens=6",
        "train.learning_rate=1e-3",
        "train.per_device_train_batch_size=12",
        "reward.sources=[]",
        "reward.truncation=none",
        "train.report_to=none",
        "run.log_completions=12",
        f"run.output_dir={tmp_path / 'run'}",
    ]
    return load_config(preset="grpo", overrides=base + list(overrides))


def _train(cfg, reward_fns=(digits_reward,), **kw):
    with RLTrainer(cfg, train_records=PROMPTS, eval_records=[], reward_fns=reward_fns, console=None) as tr:
        tr.train(**kw)
        return tr


def _rows(tmp_path):
    return [json.loads(line) for line in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]


# -- asynchronous rollouts ------------------------------------------------------------------------------------
def test_overlapped_rollouts_bound_the_lag_and_overlap_the_update():
    started = {step: threading.Event() for step in range(5)}

    def produce(step, weights):
        started[step].set()
        return f"batch {step} with {weights}"

    rollouts = OverlappedRollouts(produce, staleness=1, start=0, stop=5)
    for step in range(5):
        got = rollouts.take(step)
        # exactly the weights of update step - 1 (the sampler's own copy for the first two batches)
        assert got.version == max(step - 1, 0)
        assert got.item == f"batch {step} with {f'w{step - 1}' if step >= 2 else None}"
        if step + 1 < 5:
            # the update waits for the next batch to start: it starts before this update ends (generation
            # overlaps it), an order, not a stopwatch (a sampler that waited for publish never would)
            assert started[step + 1].wait(30)
        rollouts.publish(step + 1, f"w{step + 1}")
    rollouts.close()
    assert all(event.is_set() for event in started.values())


def test_overlapped_rollouts_raise_the_threads_error_and_close_while_waiting():
    def produce(step, weights):
        if step == 1:
            raise ValueError("the sampler broke")
        return step

    rollouts = OverlappedRollouts(produce, staleness=2, start=0, stop=4)
    assert rollouts.take(0).item == 0
    with pytest.raises(RuntimeError, match="the sampler broke"):
        rollouts.take(1)
    rollouts.close()
    waiting = OverlappedRollouts(lambda s, w: s, staleness=1, start=0, stop=10)
    waiting.take(0)
    closer = threading.Thread(target=waiting.close)
    closer.start()
    closer.join(timeout=30)
    assert not closer.is_alive()  # the thread waiting for version 1 stops on close


def test_async_run_trains_one_step_behind_on_the_same_prompts(tmp_path):
    sync_dir, async_dir = tmp_path / "sync", tmp_path / "async"
    sync = _train(_cfg(sync_dir, "train.max_steps=4"))
    tr = _train(
        _cfg(async_dir, "train.max_steps=4", "rollout.async_staleness=1", "algorithm.rollout_is=token")
    )
    rows = read_metrics(async_dir / "run")
    assert [r["async/staleness"] for r in rows] == [0, 1, 1, 1]
    assert all("rollout_is/ratio_mean" in r and "timing/wait_rollout_s" in r for r in rows)
    assert rows[0]["rollout_is/ratio_max"] == pytest.approx(1.0, abs=1e-4)  # batch 0: the same weights
    assert rows[-1]["rollout_is/ratio_max"] != pytest.approx(1.0, abs=1e-6)  # later: one update of lag
    # the same prompts in the same order as the synchronous run, and the data position after the last batch
    prompts = [
        [r["prompt"] for r in _rows(d) if r["step"] == s] for d in (sync_dir, async_dir) for s in (1, 4)
    ]
    assert prompts[:2] == prompts[2:]
    position = ("data_epoch", "data_index")
    assert [tr.state_dict()[k] for k in position] == [sync.state_dict()[k] for k in position]
    assert tr.async_sampler.overlap is None  # the thread is stopped when train() returns


# -- prompt filters -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["band", "greso"])
def test_prompt_filter_skips_prompts_seen_solved_or_failed_and_resumes(tmp_path, mode):
    cfg = _cfg(tmp_path, "train.max_steps=6", f"algorithm.prompt_filter.mode={mode}", "train.save_steps=2")
    tr = _train(cfg, reward_fns=(even_prompts_solved,), steps=4)
    rows = read_metrics(tmp_path / "run")
    assert [r["prompt_filter/skipped"] for r in rows[:2]] == [0, 0]  # the first epoch: nothing is known
    assert sum(r["prompt_filter/skipped"] for r in rows[2:]) > 0
    assert rows[-1]["prompt_filter/known_prompts"] == len(PROMPTS)
    state = tr.prompt_filter.state_dict()
    resumed = _train(cfg, reward_fns=(even_prompts_solved,), resume=True, steps=0)
    assert resumed.prompt_filter.state_dict() == state


def test_band_filter_prefers_prompts_inside_the_band(tmp_path):
    def odd_prompts_mixed(prompts, completions, references):
        # even prompts always right (outside the band); odd ones right for half the samples (inside)
        return [
            1.0 if int(p.split("+")[0]) % 2 == 0 else float(len(c) % 2)
            for p, c in zip(prompts, completions, strict=True)
        ]

    cfg = _cfg(
        tmp_path,
        "train.max_steps=6",
        "algorithm.prompt_filter.mode=band",
        "algorithm.prompt_filter.max_draws=2",
    )
    _train(cfg, reward_fns=(odd_prompts_mixed,))
    late = [r for r in _rows(tmp_path) if r["step"] > 2]
    evens = [r for r in late if int(r["prompt"].split("+")[0]) % 2 == 0]
    assert len(evens) < len(late) / 2  # without the filter half the prompts are even


# -- length budgets ---------------------------------------------------------------------------------------------
def test_length_budget_goes_in_the_prompt_and_shrinks(tmp_path):
    cfg = _cfg(
        tmp_path,
        "train.max_steps=4",
        "reward.length_budget=max",
        "reward.length_budget_min=2",
        "reward.length_budget_max=40",
        "reward.length_budget_final_max=4",
    )
    tr = _train(cfg)
    budgets = {}
    for row in _rows(tmp_path):
        match = re.search(r" Think for maximum (\d+) tokens\.$", row["prompt"])
        assert match, row["prompt"]
        budgets.setdefault(row["step"], []).append(int(match.group(1)))
    assert all(2 <= b <= 40 for b in budgets[1]) and all(2 <= b <= 4 + (40 - 4) // 4 for b in budgets[4])
    # the reward is L1-Max of the digits verdict: 0 for a wrong sample, in [0, 1] for a right one
    assert all(0.0 <= r["shaped_reward"] <= 1.0 for r in _rows(tmp_path))
    record = tr._with_budget(PROMPTS[0], None, largest=True)
    assert tr._prompt_text(record).endswith(f"Think for maximum {record.metadata['length_budget']} tokens.")


# -- label-free rewards and GDPO ----------------------------------------------------------------------------------
def test_ttrl_and_gdpo_runs_log_each_source(tmp_path):
    ttrl = _cfg(
        tmp_path / "t", "reward.sources=[{name: math, weight: 0.0}, {name: ttrl, kwargs: {mode: auto}}]"
    )
    _train(ttrl, reward_fns=())
    row = read_metrics(tmp_path / "t" / "run")[-1]
    assert {"rewards/math/mean", "rewards/ttrl/mean"} <= set(row)
    assert all(set(r["rewards"]) == {"math", "ttrl"} for r in _rows(tmp_path / "t"))
    gdpo = _cfg(
        tmp_path / "g", "algorithm.adv_estimator=gdpo", "reward.sources=[{name: format, weight: 0.5}]"
    )
    _train(gdpo)
    assert "rewards/format/mean" in read_metrics(tmp_path / "g" / "run")[-1]


def test_self_certainty_source_scores_with_the_sampling_policy(tmp_path):
    cfg = _cfg(tmp_path, "reward.sources=[{name: self_certainty}]")
    with RLTrainer(cfg, train_records=PROMPTS, eval_records=[], console=None) as tr:
        timings = {"generate": 0.0, "score": 0.0}
        rollout = tr._rollout(PROMPTS[:2], 0, timings)
        tensors = build_tensors(rollout.gens, tr.pad_id)
        with torch.no_grad():
            keep = tensors["responses"].shape[1] + 1
            logits = tr.policy(
                input_ids=tensors["input_ids"],
                attention_mask=tensors["attention_mask"],
                position_ids=tensors["position_ids"],
                logits_to_keep=keep,
            ).logits[:, :-1]
        expected = ca.self_certainty(logits, tensors["loss_mask"])
        got = rollout.scored.per_source["self_certainty"]
        assert got == pytest.approx(expected.tolist(), abs=1e-5)
        assert rollout.rewards.tolist() == pytest.approx(expected.tolist(), abs=1e-5)


def test_is_weights_from_the_updates_own_pass_equal_a_separate_pass(tmp_path):
    """With one optimiser step per rollout the update's forward pass is pi_old, so the IS weights come from
    it (no second pass); the policy after training is the one a separate pi_old pass gives."""
    common = ("train.max_steps=3", "rollout.async_staleness=1", "algorithm.rollout_is=token")
    own = _train(_cfg(tmp_path / "own", *common))
    cfg = _cfg(tmp_path / "sep", *common)
    with RLTrainer(
        cfg, train_records=PROMPTS, eval_records=[], reward_fns=(digits_reward,), console=None
    ) as sep:
        original = sep.updater.importance_weights

        def separate_pass(u, m):  # pi_old from a pass of its own, as before
            u.old_logp = sep.passes.no_grad_logprobs(sep.policy, u.tensors)
            original(u, m)
            assert not u.is_per_micro_batch

        sep.updater.importance_weights = separate_pass
        sep.train()
    for a, b in zip(own.policy.parameters(), sep.policy.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    rows = read_metrics(tmp_path / "own" / "run")
    assert rows[-1]["rollout_is/ratio_max"] > 1.0 > rows[-1]["rollout_is/ratio_min"]
