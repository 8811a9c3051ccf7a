"""`rewardlab rl` commands: train (YAML + preset + --set), resume, plot, presets, config; metrics logger."""

from __future__ import annotations

import json

import pytest

from rewardlab.cli import main
from rewardlab.training.metrics import MetricsLogger, format_line, read_metrics


def test_train_plot_and_resume(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(
        "preset: grpo\n"
        "rollout: {n: 2, max_new_tokens: 6}\n"
        "train: {max_steps: 1, prompts_per_step: 2, per_device_train_batch_size: 4, report_to: none}\n"
        "data: {num_examples: 20, eval_path: arithmetic, eval_limit: 4}\n"
        "reward: {workers: 0}\n"
    )
    out = tmp_path / "run"
    assert main(["rl", "train", "--config", str(config), "-o", str(out), "--set", "algorithm.kl_coef=0"]) == 0
    rows = read_metrics(out)
    assert rows[0]["step"] == 0 and "eval/pass@1" in rows[0] and rows[-1]["step"] == 1
    assert main(["rl", "train", "--config", str(config), "-o", str(out), "--steps", "2", "--resume"]) == 0
    assert [r["step"] for r in read_metrics(out)] == [0, 1, 2]
    assert main(["rl", "plot", str(out)]) == 0
    assert (out / "curves.png").stat().st_size > 1000


def test_user_errors(tmp_path, capsys):
    assert main(["rl", "train", "--preset", "grpo", "--set", "algorithm.nope=1"]) == 2
    assert "unknown key 'nope'" in capsys.readouterr().err
    assert main(["rl", "train", "--preset", "nope"]) == 2
    assert main(["rl", "plot", str(tmp_path)]) == 2
    assert main(["rl", "train", "--preset", "grpo", "-o", str(tmp_path / "x"), "--resume"]) == 2


def test_presets_and_config_commands(capsys):
    assert main(["rl", "presets"]) == 0
    assert "--- dapo" in capsys.readouterr().out
    assert main(["rl", "config", "--preset", "dapo", "--set", "rollout.n=3"]) == 0
    text = capsys.readouterr().out
    assert "clip_ratio_high: 0.28" in text and "n: 3" in text


@pytest.mark.parametrize("resume", [False, True])
def test_metrics_logger(tmp_path, resume):
    with MetricsLogger(tmp_path, console=None, tensorboard=False) as log:
        for step in (1, 2, 3):
            log.log(step, {"reward": 0.1 * step, "grad_norm": 1.0})
    with MetricsLogger(tmp_path, console=None, tensorboard=False, resume_step=2 if resume else None) as log:
        log.log(9, {"reward": 1.0})
    steps = [r["step"] for r in read_metrics(tmp_path)]
    assert steps == ([1, 2, 9] if resume else [9])
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        json.loads(line)


def test_console_line_names_a_degenerate_step():
    line = format_line(
        3, {"reward": 0.0, "frac_reward_zero_std": 1.0, "warning": "all groups have zero reward std"}
    )
    assert "zero_std 1.000" in line and "WARNING" in line
