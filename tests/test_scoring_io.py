"""`rewardlab score` and score_file: one row out per row in, malformed lines, resume, exit codes, loaders."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scored_rows import untimed  # tests/scored_rows.py

from rewardlab.cli import main
from rewardlab.data import sample_path
from rewardlab.data.loaders import load_records
from rewardlab.scoring import score_file


def write_jsonl(path: Path, rows: list, extra_lines: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(r) for r in rows]
    for position, text in sorted((extra_lines or {}).items()):
        lines.insert(position, text)
    path.write_text("\n".join(lines) + "\n")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def rows(n: int) -> list[dict]:
    return [
        {
            "id": f"r{i}",
            "prompt": f"q{i}",
            "completion": f"so \\boxed{{{i % 4}}}",
            "reference": str(i % 3),
            "extra": i,
        }
        for i in range(n)
    ]


def test_one_row_out_per_row_in_fields_kept_and_invalid_json(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", rows(20), {3: "{not json", 10: "[1, 2]"})
    out = tmp_path / "out.jsonl"
    summary = score_file(src, out, "math", workers=2, timeout=10)
    got = read_jsonl(out)
    assert len(got) == 22 == summary.rows
    assert got[3].pop("reward_time_s") is None  # never scored
    assert all(isinstance(g["reward_time_s"], float) for k, g in enumerate(got) if k not in (3, 10))
    assert got[3] == {
        "id": None,
        "prompt": None,
        "completion": None,
        "reference": None,
        "reward": 0.0,
        "details": {
            "line": 4,
            "raw": "{not json",
            "reason": "Expecting property name enclosed in double quotes",
        },
        "error": "invalid JSON at line 4",
    }
    assert got[10]["error"] == "invalid JSON at line 11"
    valid = [g for g in got if g["error"] is None or not g["error"].startswith("invalid JSON")]
    assert [g["id"] for g in valid] == [f"r{i}" for i in range(20)]
    assert all(g["extra"] == i for i, g in enumerate(valid))
    assert [g["reward"] for g in valid] == [1.0 if i % 4 == i % 3 else 0.0 for i in range(20)]
    assert summary.errors["invalid JSON"] == 2


def test_resume_after_a_cut_equals_an_uninterrupted_run(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", rows(40), {7: "oops"})
    full = tmp_path / "full.jsonl"
    score_file(src, full, "math", workers=2)
    data = full.read_bytes()
    for cut in (0, len(data) // 3, len(data) // 3 + 17, len(data) - 5):  # mid-line cuts included
        part = tmp_path / f"part{cut}.jsonl"
        part.write_bytes(data[:cut])
        Path(f"{part}.run.json").write_bytes(Path(f"{full}.run.json").read_bytes())
        summary = score_file(src, part, "math", workers=2, resume=True)
        kept = data[: data.rfind(b"\n", 0, cut) + 1]
        assert part.read_bytes().startswith(kept)  # the rows before the cut are kept as they were
        assert untimed(part) == untimed(full)  # reward times differ from run to run
        assert summary.rows == 41 and summary.resumed == data[:cut].count(b"\n")


def test_resume_after_killing_the_cli(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", rows(3000))
    out = tmp_path / "out.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "rewardlab.cli",
        "score",
        str(src),
        "-o",
        str(out),
        "--verifier",
        "math",
        "--workers",
        "1",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or out.stat().st_size < 20_000):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # no clean-up at all: the worst interruption
    proc.wait()
    before = out.read_bytes()[: out.read_bytes().rfind(b"\n") + 1]
    done_before = before.count(b"\n")
    assert 0 < done_before < 3000
    assert main(["score", str(src), "-o", str(out), "--verifier", "math", "--workers", "1", "--resume"]) == 0
    reference = tmp_path / "reference.jsonl"
    assert main(["score", str(src), "-o", str(reference), "--verifier", "math", "--workers", "2"]) == 0
    assert out.read_bytes().startswith(before)
    assert untimed(out) == untimed(reference)


def test_cli_summary_and_exit_codes(tmp_path, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", rows(6))
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out), "--verifier", "math", "--workers", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 6 and summary["errors"] == {} and summary["rows_per_s"] > 0
    assert main(["score", str(tmp_path / "missing.jsonl"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rewardlab score: error: input not found: {tmp_path / 'missing.jsonl'}"
    assert main(["score", str(src), "-o", str(out), "--verifier", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown verifier 'nope'" in err and "\n" not in err
    assert main(["score", str(src), "-o", str(out), "--verifier", "math", "--config", "mode=bogus"]) == 2
    assert "unknown extraction mode" in capsys.readouterr().err


def test_cli_config_field_map_and_text_summary(tmp_path, capsys):
    src = write_jsonl(
        tmp_path / "in.jsonl",
        [{"response": "The answer is 4.", "answer": "4"}, {"response": "\\boxed{4}", "answer": "4"}],
    )
    out = tmp_path / "out.jsonl"
    argv = ["score", str(src), "-o", str(out), "--verifier", "math", "--config", "mode=strict"]
    argv += ["--field", "completion=response", "--field", "reference=answer", "--workers", "1"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "rows         2" in text and "no answer found: 1" in text and "rows/s" in text
    got = read_jsonl(out)
    assert [g["reward"] for g in got] == [0.0, 1.0] and got[0]["response"] == "The answer is 4."


def test_rows_without_a_verifier(tmp_path):
    src = write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"completion": "\\boxed{1}", "reference": "1"},
            {"completion": "\\boxed{1}", "reference": "1", "verifier": "math"},
        ],
    )
    out = tmp_path / "out.jsonl"
    summary = score_file(src, out, None, workers=1)
    got = read_jsonl(out)
    assert got[0]["error"].startswith("no verifier") and got[1]["reward"] == 1.0
    assert summary.errors == {"no verifier": 1}


def test_shipped_sample_scores(tmp_path):
    out = tmp_path / "out.jsonl"
    summary = score_file(sample_path("math", "sample.jsonl"), out, "math", workers=2)
    assert 50 <= summary.rows <= 100
    assert 0.3 < summary.mean_reward < 0.9  # a mix of right and wrong answers


def test_loaders_jsonl_saved_dataset_parquet(tmp_path):
    datasets = pytest.importorskip("datasets")
    data = [
        {"question": "q", "response": "\\boxed{2}", "answer": "2"},
        {"question": "r", "response": "3", "answer": "2"},
    ]
    field_map = {"prompt": "question", "completion": "response", "reference": "answer"}
    src = write_jsonl(tmp_path / "in.jsonl", data)
    from_jsonl = load_records(src, field_map=field_map)
    assert [r.completion for r in from_jsonl] == ["\\boxed{2}", "3"] and from_jsonl[1].id == 1
    ds = datasets.Dataset.from_list(data)
    ds.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"test": ds}).save_to_disk(str(tmp_path / "saved_dict"))
    ds.to_parquet(str(tmp_path / "data.parquet"))
    for where, split in (
        (tmp_path / "saved", None),
        (tmp_path / "saved_dict", "test"),
        (tmp_path / "data.parquet", None),
    ):
        records = load_records(where, field_map=field_map, split=split)
        assert [(r.prompt, r.completion, r.reference) for r in records] == [
            (r.prompt, r.completion, r.reference) for r in from_jsonl
        ]
    out = tmp_path / "out.jsonl"
    assert (
        main(
            [
                "score",
                str(tmp_path / "saved_dict"),
                "--split",
                "test",
                "-o",
                str(out),
                "--verifier",
                "math",
                "--field",
                "completion=response",
                "--field",
                "reference=answer",
                "--workers",
                "1",
            ]
        )
        == 0
    )
    assert [g["reward"] for g in read_jsonl(out)] == [1.0, 0.0]
    with pytest.raises(ValueError, match="invalid JSON at line 2"):
        load_records(write_jsonl(tmp_path / "bad.jsonl", [{"a": 1}], {1: "nope"}))
    assert len(load_records(tmp_path / "bad.jsonl", on_invalid="skip")) == 1


def test_ifeval_runs_report_instruction_and_prompt_accuracy(tmp_path):
    from rewardlab.data import sample_path
    from rewardlab.scoring.io import score_file

    out = tmp_path / "scored.jsonl"
    summary = score_file(sample_path("ifeval", "sample.jsonl"), out, "ifeval", workers=1, timeout=60)
    report = summary.to_dict()["ifeval"]
    assert report["n_prompts"] == 58 and 0 < report["prompt_level_strict_acc"] < 1
    assert "IFEval" in summary.format() and "prompt-level" in summary.format()
    # resuming counts the kept rows in the tally too
    again = score_file(
        sample_path("ifeval", "sample.jsonl"), out, "ifeval", workers=1, timeout=60, resume=True
    )
    assert again.to_dict()["ifeval"] == report
