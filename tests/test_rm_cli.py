"""`rewardlab rm` (train / eval / score) and `rewardlab score --reward-model / --shape` end to end."""

from __future__ import annotations

import json

import pytest

from rewardlab.cli import main


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir):
    from rewardlab.rewardmodels.orm import synthetic_preferences

    d = tmp_path_factory.mktemp("rmcli")
    train = _write(d / "train.jsonl", synthetic_preferences(160, seed=1))
    test = _write(d / "test.jsonl", synthetic_preferences(40, seed=2))
    cfg = d / "cfg.yaml"
    cfg.write_text(
        f"type: orm\nmodel: {tiny_model_dir}\nlearning_rate: 0.001\nper_device_train_batch_size: 16\n"
    )
    rc = main(
        [
            "rm", "train", "--config", str(cfg), "--train-file", train, "--eval-file", test,
            "--output-dir", str(d / "rm"), "--max-steps", "10", "--logging-steps", "5",
            "--num-threads", "1", "--disable-dropout", "--save-steps", "0",
        ]
    )  # fmt: skip
    assert rc == 0
    return d


def test_train_writes_model_and_metrics(trained):
    out = trained / "rm"
    assert (out / "config.json").exists() and (out / "rm_config.json").exists()
    events = [json.loads(x)["event"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert events[0] == "start" and "eval" in events and events[-1] == "end"


def test_eval_prints_metrics_and_writes_scores(trained, capsys):
    rc = main(["rm", "eval", "--model", str(trained / "rm"), "--data", str(trained / "test.jsonl"),
               "-o", str(trained / "scores.jsonl"), "--json"])  # fmt: skip
    assert rc == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["kind"] == "pairwise" and metrics["n"] == 40
    assert set(metrics["subsets"]) == {"short", "long"}
    assert {"accuracy", "roc_auc", "ece"} <= set(metrics)
    assert len((trained / "scores.jsonl").read_text().splitlines()) == 40


def test_eval_group_by_prints_a_line_per_group(trained, capsys):
    """`--group-by FIELD`: per-group metrics in the text output too, for any row field (ORM)."""
    rows = [json.loads(x) for x in (trained / "test.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        row["generator"] = ["model-a", "model-b"][i % 2]
    data = _write(trained / "by_generator.jsonl", rows)
    rc = main(["rm", "eval", "--model", str(trained / "rm"), "--data", data, "--group-by", "generator"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    assert "  by generator:" in lines
    groups = {line.split(":")[0].strip(): line for line in lines if line.startswith("    ")}
    assert set(groups) == {"model-a", "model-b"} and all("n=20" in line for line in groups.values())
    assert (
        main(
            [
                "rm",
                "eval",
                "--model",
                str(trained / "rm"),
                "--data",
                data,
                "--group-by",
                "generator",
                "--json",
            ]
        )
        == 0
    )
    assert set(json.loads(capsys.readouterr().out)["subsets"]) == {"model-a", "model-b"}


def test_rm_score_with_shaping(trained):
    rows = [
        {"prompt": "Q1: ", "completion": c, "metadata": {"group": i // 2}}
        for i, c in enumerate(["aeiou", "bcdfg", "aaa", "zzz"])
    ]
    src = _write(trained / "comp.jsonl", rows)
    out = trained / "scored.jsonl"
    assert (
        main(
            [
                "rm",
                "score",
                src,
                "-o",
                str(out),
                "--model",
                str(trained / "rm"),
                "--shape",
                "group_norm:scale_by_std=false",
            ]
        )
        == 0
    )
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["completion"] for g in got] == ["aeiou", "bcdfg", "aaa", "zzz"]
    assert got[0]["reward"] + got[1]["reward"] == pytest.approx(0.0, abs=1e-5)
    assert got[0]["details"]["shaping"]["raw_reward"] == pytest.approx(got[0]["details"]["score"])


def test_score_cli_reward_model_and_shape(trained):
    rows = [{"prompt": "Q1: ", "completion": c} for c in ["aeiou", "bcdfg"]]
    src = _write(trained / "comp2.jsonl", rows)
    out = trained / "scored2.jsonl"
    rc = main(
        [
            "score",
            src,
            "-o",
            str(out),
            "--reward-model",
            str(trained / "rm"),
            "--shape",
            "scale:2,1",
            "--no-progress",
        ]
    )
    assert rc == 0
    got = [json.loads(x) for x in out.read_text().splitlines()]
    for row in got:
        assert row["reward"] == pytest.approx(2 * row["details"]["score"] + 1, rel=1e-5)


def test_user_errors(trained, capsys):
    assert (
        main(
            [
                "rm",
                "train",
                "--type",
                "prm",
                "--center-rewards-coefficient",
                "0.1",
                "--model",
                "x",
                "--train-file",
                "y",
            ]
        )
        == 2
    )
    assert "not an option of rm train --type prm" in capsys.readouterr().err
    assert (
        main(
            [
                "rm",
                "score",
                str(trained / "comp.jsonl"),
                "-o",
                str(trained / "x.jsonl"),
                "--model",
                str(trained / "rm"),
                "--shape",
                "nope",
            ]
        )
        == 2
    )
    assert "unknown shaping transform" in capsys.readouterr().err
    assert main(["rm", "train", "--max-steps", "1"]) == 2
    assert main(["rm", "eval", "--model", str(trained / "rm"), "--data", str(trained / "missing.jsonl")]) == 2


def test_field_docs_become_help():
    from rewardlab.config import attribute_docs as _field_docs
    from rewardlab.rewardmodels.orm.config import ORMTrainConfig

    docs = _field_docs(ORMTrainConfig)
    assert docs["center_rewards_coefficient"].startswith("Weight of the reward-centering term")
    assert set(docs) >= {f for f in ORMTrainConfig.__dataclass_fields__}


def test_prm_dispatch_train_eval_score(tmp_path, tiny_model_dir, capsys):
    """`--type prm` reaches the PRM package's trainer; eval and score detect a PRM folder by itself."""
    from pathlib import Path

    data = Path(__file__).resolve().parent.parent / "data" / "prm"
    out = tmp_path / "prm"
    rc = main(
        [
            "rm", "train", "--type", "prm", "--model", tiny_model_dir, "--train-file",
            str(data / "arithmetic_train.jsonl"), "--output-dir", str(out), "--max-steps", "2", "--per-device-train-batch-size", "4",
        ]
    )  # fmt: skip
    assert rc == 0 and (out / "rewardlab_prm.json").exists()
    capsys.readouterr()
    assert (
        main(
            [
                "rm",
                "eval",
                "--model",
                str(out),
                "--data",
                str(data / "arithmetic_processbench.jsonl"),
                "--limit",
                "8",
                "--json",
            ]
        )
        == 0
    )
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["kind"] == "prm" and "processbench_f1" in metrics
    bench = str(data / "arithmetic_processbench.jsonl")
    assert (
        main(["rm", "eval", "--model", str(out), "--data", bench, "--limit", "8", "--group-by", "generator"])
        == 0
    )
    text = capsys.readouterr().out
    assert "  by generator:" in text and "    synthetic: " in text and "processbench_f1=" in text
    scored = tmp_path / "scored.jsonl"
    rows = [{"prompt": "Compute 1+1.", "completion": "1+1=2\nThe answer is 2.", "metadata": {"group": 0}}] * 2
    src = _write(tmp_path / "in.jsonl", rows)
    assert main(["rm", "score", src, "-o", str(scored), "--model", str(out), "--shape", "delta"]) == 0
    got = [json.loads(x) for x in scored.read_text().splitlines()]
    steps = got[0]["details"]["shaping"]["step_rewards"]
    assert len(steps) == len(got[0]["details"]["step_scores"]) >= 1
    assert got[0]["reward"] == pytest.approx(
        got[0]["details"]["step_scores"][0], abs=1e-5
    )  # Delta: return = r_1
