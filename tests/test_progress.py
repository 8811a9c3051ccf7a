"""Progress bars: shown on a terminal, quiet in a pipe, off with --no-progress; one style across commands."""

from __future__ import annotations

import json

import pytest

from rewardkit.cli import main
from rewardkit.progress import progress_bar, quiet_libraries_off_terminal, track


@pytest.fixture
def terminal(monkeypatch):
    """stderr counts as a terminal, as it is when a person runs a command."""
    import rewardkit.progress

    monkeypatch.setattr(rewardkit.progress, "on_terminal", lambda: True)


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
    import rewardkit.progress

    monkeypatch.setattr(rewardkit.progress, "on_terminal", lambda: True)
    _eval(tmp_path, tiny_model_dir, "--no-progress")
    assert "generate:" not in capsys.readouterr().err


def test_score_file_bar_is_named_after_the_command(tmp_path, capsys, terminal):
    from rewardkit.scoring.io import score_file

    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"completion": f"\\boxed{{{i}}}", "reference": str(i)}) + "\n" for i in range(3))
    )
    score_file(str(src), str(tmp_path / "out.jsonl"), "math", workers=0, progress_desc="judge")
    assert "judge: 100%" in capsys.readouterr().err


def test_rm_eval_shows_scoring(tmp_path, tiny_model_dir, capsys, terminal):
    from rewardkit.rewardmodels.orm import synthetic_preferences

    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in synthetic_preferences(6, seed=0)))
    assert main(["rm", "eval", "--model", tiny_model_dir, "--data", str(data)]) == 0
    err = capsys.readouterr().err
    assert "score: 100%" in err and "12/12" in err  # 6 pairs: 12 sequences
    assert main(["rm", "eval", "--model", tiny_model_dir, "--data", str(data), "--no-progress"]) == 0
    assert "score:" not in capsys.readouterr().err
