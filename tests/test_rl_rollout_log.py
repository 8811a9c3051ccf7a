"""``rollouts.jsonl``: the RL trainer's logged samples (``run.log_completions``) on the tiny model: whole
groups, the row schema, steps as in metrics.jsonl, GRPO advantages, dynamic sampling, resume, off."""

from __future__ import annotations

import json
import statistics
from collections import Counter

import numpy as np
import pytest

from rewardlab.rl.config import ConfigError, load_config
from rewardlab.rl.trainer import RLTrainer
from rewardlab.training.metrics import read_metrics
from rewardlab.types import Record, Result

PROMPTS = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(12)]
N = 4
KEYS = {
    "step",
    "group",
    "index",
    "prompt",
    "completion",
    "reference",
    "reward",
    "shaped_reward",
    "rewards",
    "advantage",
    "length",
    "truncated",
    "correct",
    "answer",
    "details",
    "error",
    "reward_time_s",
    "finish_reason",
}


class DigitSource:
    """A verifier-like source: reward = share of digits, the first digit as the extracted answer, an error
    when there is no digit (so rows carry details, answers and errors)."""

    name = "digits"

    def score_batch(self, records):
        out = []
        for r in records:
            text = r.completion_text
            first = next((ch for ch in text if ch.isdigit()), None)
            if first is None:
                out.append(Result.failure("no answer found", extracted=None))
                continue
            reward = sum(ch.isdigit() for ch in text) / len(text)
            out.append(Result(reward=reward, details={"extracted": first, "correct": first == r.reference}))
        return out

    def close(self):
        pass


class TimedDigitSource(DigitSource):
    """:class:`DigitSource` that reports each row's reward time: a known function of the completion."""

    @staticmethod
    def seconds(text: str) -> float:
        return 0.125 * (1 + sum(ch.isdigit() for ch in text))

    def score_batch(self, records):
        results = super().score_batch(records)
        for record, result in zip(records, results, strict=True):
            result.time_s = self.seconds(record.completion_text)
        return results


def _cfg(tmp_path, *overrides, preset="grpo"):
    base = [
        "train.max_steps=2",
        "train.prompts_per_step=3",
        f"rollout.n={N}",
        "rollout.max_new_tokens=8",
        "train.learning_rate=1e-3",
        "train.per_device_train_batch_size=12",
        "reward.sources=[]",
        "train.report_to=none",
        "run.log_completions=5",  # rounded up to 2 whole groups of 4
        f"run.output_dir={tmp_path / 'run'}",
    ]
    return load_config(preset=preset, overrides=base + list(overrides))


def _train(cfg, reward_fns=None, **train_kw):
    with RLTrainer(
        cfg, train_records=PROMPTS, eval_records=[], reward_fns=reward_fns or (DigitSource(),), console=None
    ) as tr:
        tr.train(**train_kw)
        return tr


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "rollouts.jsonl").read_text().splitlines()]


def _group_normalised(rewards, eps):
    mean, std = statistics.fmean(rewards), statistics.stdev(rewards)
    return [(r - mean) / (std + eps) for r in rewards]


def test_rows_are_whole_groups_with_the_schema_and_grpo_advantages(tmp_path):
    cfg = _cfg(tmp_path, "reward.truncation=none")  # the tiny model's samples are all cut at 8 tokens
    tr = _train(cfg)
    rows = _rows(tmp_path / "run")
    steps = [r["step"] for r in read_metrics(tmp_path / "run")]
    assert steps == [1, 2]
    assert Counter(r["step"] for r in rows) == {1: 2 * N, 2: 2 * N}
    for row in rows:
        assert set(row) == KEYS
        assert row["rewards"].keys() == {"digits"}
        assert row["reward"] == row["rewards"]["digits"]  # one source, weight 1: the sum before shaping
        assert isinstance(row["length"], int) and isinstance(row["truncated"], bool)
        assert row["finish_reason"] in ("stop", "length")
        assert row["truncated"] == (row["finish_reason"] == "length")
        assert row["answer"] == row["details"]["extracted"]
        assert (row["error"] == "no answer found") == (row["answer"] is None)
        assert row["shaped_reward"] == pytest.approx(row["reward"])  # no shaping configured
    by_prompt = {tr._prompt_text(r): r for r in PROMPTS}  # the prompt as sent: template applied
    for step in steps:
        step_rows = [r for r in rows if r["step"] == step]
        assert [(r["group"], r["index"]) for r in step_rows] == [(g, j) for g in range(2) for j in range(N)]
        for g in range(2):
            group = [r for r in step_rows if r["group"] == g]
            assert len({r["prompt"] for r in group}) == 1
            assert all(r["reference"] == by_prompt[r["prompt"]].reference for r in group)
            expected = _group_normalised([r["shaped_reward"] for r in group], cfg.algorithm.adv_eps)
            assert [r["advantage"] for r in group] == pytest.approx(expected, abs=1e-5)
    assert (
        any(r["advantage"] for r in rows) and any(r["error"] for r in rows) and any(r["answer"] for r in rows)
    )


def test_rows_and_metrics_carry_the_reward_time(tmp_path):
    # every sample logged (3 prompts x 4), so that the step's metrics can be recomputed from its rows
    cfg = _cfg(tmp_path, "reward.truncation=none", "run.log_completions=12")
    _train(cfg, (TimedDigitSource(),))
    rows = _rows(tmp_path / "run")
    assert all(r["reward_time_s"] == TimedDigitSource.seconds(r["completion"]) for r in rows)
    for m in read_metrics(tmp_path / "run"):
        times = [r["reward_time_s"] for r in rows if r["step"] == m["step"]]
        assert len(times) == 12
        assert m["reward/time_max"] == max(times)
        assert m["reward/time_p50"] == pytest.approx(float(np.percentile(times, 50)))
        assert m["reward/time_p99"] == pytest.approx(float(np.percentile(times, 99)))


def test_an_untimed_source_logs_no_time(tmp_path):
    _train(_cfg(tmp_path, "train.max_steps=1"))
    assert all(r["reward_time_s"] is None for r in _rows(tmp_path / "run"))
    assert not any(k.startswith("reward/time") for m in read_metrics(tmp_path / "run") for k in m)


def test_dynamic_sampling_logs_the_first_round_and_dropped_groups_have_no_advantage(tmp_path):
    def even_prompts_constant(prompts, completions, references):
        # groups of even prompts all get 1.0: dynamic sampling drops them
        return [
            1.0 if int(p.split("+")[0]) % 2 == 0 else sum(ch.isdigit() for ch in c) / max(len(c), 1)
            for p, c in zip(prompts, completions, strict=True)
        ]

    cfg = _cfg(
        tmp_path,
        "train.max_steps=1",
        "algorithm.dynamic_sampling=true",
        "algorithm.max_refill_rounds=1",
        "reward.truncation=none",  # a penalised truncation would break the even groups' tie
        "run.log_completions=12",
    )
    tr = _train(cfg, reward_fns=(even_prompts_constant,))
    by_prompt = {tr._prompt_text(r): r for r in PROMPTS}
    rows = _rows(tmp_path / "run")
    assert len(rows) == 3 * N and {r["group"] for r in rows} == {0, 1, 2}
    for row in rows:
        if by_prompt[row["prompt"]].id % 2 == 0:
            assert row["advantage"] is None and row["shaped_reward"] == 1.0
        else:
            assert row["advantage"] is not None
    assert {by_prompt[r["prompt"]].id % 2 for r in rows} == {0, 1}  # dropped and kept groups both logged


def test_skipped_update_logs_no_advantage(tmp_path):
    cfg = _cfg(tmp_path, "train.max_steps=1", "algorithm.kl_coef=0", "reward.truncation=none")
    _train(cfg, reward_fns=(lambda p, c, r: [1.0] * len(c),))
    assert read_metrics(tmp_path / "run")[0]["skipped_update"] == 1
    rows = _rows(tmp_path / "run")
    assert len(rows) == 2 * N and all(r["advantage"] is None for r in rows)


def test_log_completions_zero_writes_no_file_and_negative_is_refused(tmp_path):
    _train(_cfg(tmp_path, "train.max_steps=1", "run.log_completions=0"))
    assert (tmp_path / "run" / "metrics.jsonl").exists()
    assert not (tmp_path / "run" / "rollouts.jsonl").exists()
    with pytest.raises(ConfigError, match="log_completions"):
        _cfg(tmp_path, "run.log_completions=-1")


def test_resume_drops_later_steps_and_a_fresh_run_starts_anew(tmp_path):
    cfg = _cfg(tmp_path, "train.max_steps=3")
    _train(cfg, steps=2)
    path = tmp_path / "run" / "rollouts.jsonl"
    with path.open("a") as f:  # the interrupted run got further than its last checkpoint
        f.write(json.dumps({"step": 3, "group": 0, "index": 0, "completion": "stale"}) + "\n")
    _train(cfg, resume=True)
    rows = _rows(tmp_path / "run")
    assert Counter(r["step"] for r in rows) == {1: 2 * N, 2: 2 * N, 3: 2 * N}
    assert all(r["completion"] != "stale" for r in rows)
    _train(_cfg(tmp_path, "train.max_steps=1"))
    assert Counter(r["step"] for r in _rows(tmp_path / "run")) == {1: 2 * N}
