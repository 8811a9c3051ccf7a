"""`rewardlab rm score` is `rewardlab score --reward-model` (the scoring engine's file path): a preference file is
refused in one line, a malformed line is an error row, ``--resume`` continues, every row goes to the model."""

from __future__ import annotations

import json

import pytest

from rewardlab.cli import main

ROWS = [
    {"id": i, "prompt": "Q: 1+1? ", "completion": c}
    for i, c in enumerate(["2", "two", "It is 2.", "3", "eleven", "2!"])
]


def _write(path, rows, extra=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + extra)
    return str(path)


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_preference_file_is_refused_in_one_line(tmp_path, capsys):
    rows = [{"prompt": "Q", "chosen": "good", "rejected": "bad"}] * 3
    src = _write(tmp_path / "prefs.jsonl", rows, extra="not json\n")
    out = tmp_path / "out.jsonl"
    code = main(["rm", "score", src, "-o", str(out), "--model", str(tmp_path / "no-model")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "preference file" in err and "--field completion=chosen" in err and "rm eval" in err
    assert not out.exists()
    # The same refusal for `rewardlab score --reward-model` (the same path).
    code = main(["score", src, "-o", str(out), "--reward-model", str(tmp_path / "no-model")])
    assert code == 2 and "preference file" in capsys.readouterr().err


def test_one_side_of_a_preference_file_and_malformed_lines(tmp_path, rm_dir, capsys):
    rows = [{"prompt": "Q", "chosen": "good", "rejected": "bad", "verifier": "math"}] * 2
    src = _write(tmp_path / "prefs.jsonl", rows[:1], extra="not json\n" + json.dumps(rows[1]) + "\n")
    out = tmp_path / "out.jsonl"
    argv = ["rm", "score", src, "-o", str(out), "--model", rm_dir, "--field", "completion=chosen"]
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["rows"] == 3 and summary["errors"] == {"invalid JSON": 1}
    got = _rows(out)
    assert got[1]["error"] == "invalid JSON at line 2" and got[1]["details"]["raw"] == "not json"
    for row in (got[0], got[2]):
        # Every input field kept; the reward model scored the row (its verifier field is not used).
        assert {k: row[k] for k in rows[0]} == rows[0]
        assert row["error"] is None and row["reward"] == pytest.approx(row["details"]["score"])
    assert got[0]["reward"] == pytest.approx(got[2]["reward"], abs=1e-5)


def test_resume_continues_and_checks_the_model_settings(tmp_path, rm_dir, capsys):
    src = _write(tmp_path / "in.jsonl", ROWS)
    full, part = tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    base = ["--model", rm_dir, "--normalize", "sigmoid", "--no-progress"]
    assert main(["rm", "score", src, "-o", str(full), *base]) == 0
    assert main(["rm", "score", src, "-o", str(part), *base]) == 0
    lines = part.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[:2]) + lines[2][:10])  # stopped while writing row 3
    capsys.readouterr()
    assert main(["rm", "score", src, "-o", str(part), *base, "--resume", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["rows"] == 6 and summary["resumed"] == 2 and summary["scored"] == 4
    assert [r["id"] for r in _rows(part)] == list(range(6))
    for a, b in zip(_rows(part), _rows(full), strict=True):
        assert a["reward"] == pytest.approx(b["reward"], abs=1e-5) and 0 < a["reward"] < 1
    # A resume with other model settings would mix rewards: refused, the output untouched.
    before = part.read_bytes()
    other = ["--model", rm_dir, "--normalize", "none", "--no-progress", "--resume"]
    assert main(["rm", "score", src, "-o", str(part), *other]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # after the model's loading messages
    assert err.startswith("rewardlab rm: error: cannot resume") and "reward_model_options" in err
    assert part.read_bytes() == before
