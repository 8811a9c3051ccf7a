"""Progress bars: shown on a terminal, quiet in a pipe, off with --no-progress; one style across commands;
and `rewardlab --help` without torch."""

from __future__ import annotations

import json

import pytest

from rewardlab.cli import main
from rewardlab.progress import progress_bar, quiet_libraries_off_terminal, track


@pytest.fixture
def terminal(monkeypatch):
    """stderr counts as a terminal, as it is when a person runs a command."""
    import rewardlab.progress

    monkeypatch.setattr(rewardlab.progress, "on_terminal", lambda: True)


def test_a_bar_is_quiet_off_a_terminal(capsys):
    with progress_bar(3, "work") as bar:
        bar.update(3)
    assert list(track(range(4), "items")) == [0, 1, 2, 3]
    assert capsys.readouterr().err == ""


def test_a_bar_on_a_terminal_counts_rate_and_total(capsys, terminal):
    assert list(track(range(5), "items", unit="thing")) == list(range(5))
    err = capsys.readouterr().err
    assert "items: 100%" in err and "5/5" in err and "thing/s" in err


def test_library_bars_off_a_terminal(monkeypatch):
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    monkeypatch.delenv("HF_DATASETS_DISABLE_PROGRESS_BARS", raising=False)
    quiet_libraries_off_terminal()
    import os

    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    assert os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1"


def _eval(tmp_path, model, *extra):
    argv = ["eval", "--model", model, "--benchmark", "sample:gsm8k", "--limit", "2", "--n", "2",
            "--max-new-tokens", "4", "--workers", "0", "--bootstrap", "0", "-o", str(tmp_path / "run"),
            "--no-resume", *extra]  # fmt: skip
    assert main(argv) == 0


def test_eval_shows_generation_and_scoring(tmp_path, tiny_model_dir, capsys, terminal):
    _eval(tmp_path, tiny_model_dir)
    err = capsys.readouterr().err
    assert "generate: 100%" in err and "2/2" in err and "problem/s" in err
    assert "score[math]: 100%" in err and "4/4" in err


def test_eval_no_progress_and_pipes_stay_quiet(tmp_path, tiny_model_dir, capsys, monkeypatch):
    _eval(tmp_path, tiny_model_dir)  # stderr is not a terminal here
    assert "generate:" not in capsys.readouterr().err
    import rewardlab.progress

    monkeypatch.setattr(rewardlab.progress, "on_terminal", lambda: True)
    _eval(tmp_path, tiny_model_dir, "--no-progress")
    assert "generate:" not in capsys.readouterr().err


def test_score_file_bar_is_named_after_the_command(tmp_path, capsys, terminal):
    from rewardlab.scoring.io import score_file

    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"completion": f"\\boxed{{{i}}}", "reference": str(i)}) + "\n" for i in range(3))
    )
    score_file(str(src), str(tmp_path / "out.jsonl"), "math", workers=0, progress_desc="judge")
    assert "judge: 100%" in capsys.readouterr().err


def test_rm_eval_shows_scoring(tmp_path, tiny_model_dir, capsys, terminal):
    from rewardlab.rewardmodels.orm import synthetic_preferences

    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in synthetic_preferences(6, seed=0)))
    assert main(["rm", "eval", "--model", tiny_model_dir, "--data", str(data)]) == 0
    err = capsys.readouterr().err
    assert "score: 100%" in err and "12/12" in err  # 6 pairs: 12 sequences
    assert main(["rm", "eval", "--model", tiny_model_dir, "--data", str(data), "--no-progress"]) == 0
    assert "score:" not in capsys.readouterr().err


def test_label_steps_in_rounds_with_a_bar(tmp_path, tiny_model_dir, capsys, terminal):
    """`rm label-steps` shows prefixes labelled; rounds of any size give the same labels (greedy policy)."""
    from pathlib import Path

    from rewardlab.rewardmodels.prm import load_step_examples
    from rewardlab.rewardmodels.prm.label import LabelConfig, label_steps_with_policy

    data = Path(__file__).resolve().parent.parent / "data" / "prm" / "arithmetic_processbench.jsonl"
    out = tmp_path / "labelled.jsonl"
    argv = ["rm", "label-steps", str(data), "-o", str(out), "--policy", tiny_model_dir, "--limit", "3",
            "--k", "1", "--max-new-tokens", "4", "--batch-size", "2"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "label steps: 100%" in err and "prefix/s" in err
    assert len(out.read_text().splitlines()) == 3

    examples = load_step_examples(str(data))[:3]
    labels = [
        [ex.labels for ex in label_steps_with_policy(
            examples, tiny_model_dir, "math", LabelConfig(k=2, temperature=0.0, max_new_tokens=4, batch_size=size)
        )]
        for size in (1, 256)
    ]  # fmt: skip
    assert labels[0] == labels[1]


def test_help_imports_no_torch():
    """`rewardlab --help` (every subcommand's parser) stays instant: torch and transformers load only when a
    command runs."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom rewardlab.cli import build_parser\nbuild_parser()\n"
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_reward_model_training_shows_steps(tmp_path, tiny_model_dir, capsys, terminal):
    """`rm train` (ORM and PRM alike, through the shared supervised loop): a bar of optimiser steps with the
    loss and the last evaluation."""
    from pathlib import Path

    from rewardlab.rewardmodels.orm import synthetic_preferences

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(row) + "\n" for row in synthetic_preferences(16, seed=0)))
    orm = ["rm", "train", "--model", tiny_model_dir, "--train-file", str(pairs), "--eval-file", str(pairs),
           "--output-dir", str(tmp_path / "orm"), "--max-steps", "3", "--save-steps", "0", "--eval-steps", "2"]  # fmt: skip
    assert main(orm) == 0
    err = capsys.readouterr().err
    assert "train orm: 100%" in err and "3/3" in err and "loss=" in err and "eval_acc=" in err
    steps = Path(__file__).resolve().parent.parent / "data" / "prm" / "arithmetic_train.jsonl"
    prm = ["rm", "train", "--type", "prm", "--model", tiny_model_dir, "--train-file", str(steps),
           "--output-dir", str(tmp_path / "prm"), "--max-steps", "2", "--per-device-train-batch-size", "4"]  # fmt: skip
    assert main(prm) == 0
    err = capsys.readouterr().err
    assert "train prm: 100%" in err and "2/2" in err and "loss=" in err
    assert main([*prm[:-6], "--output-dir", str(tmp_path / "prm2"), "--max-steps", "2", "--per-device-train-batch-size", "4",
                 "--no-progress"]) == 0  # fmt: skip
    assert "train prm:" not in capsys.readouterr().err
