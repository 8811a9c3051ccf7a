"""`rewardlab score` never loses data: the input is never the output, a resume continues only its own run,
a malformed row is a row, workers die with their parent, and bad arguments are one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from scored_rows import untimed  # tests/scored_rows.py
from test_scoring import SleepyVerifier  # tests/ is on the path

from rewardlab.cli import main
from rewardlab.scoring import io as scoring_io
from rewardlab.scoring import score_file, score_records
from rewardlab.types import Record
from rewardlab.verifiers import register_verifier


def rows(n: int, reference_shift: int = 0) -> list[dict]:
    return [
        {"id": f"r{i}", "completion": f"so \\boxed{{{i % 4}}}", "reference": str((i + reference_shift) % 3)}
        for i in range(n)
    ]


def write(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items))
    return path


def one_line_error(capsys, code: int) -> str:
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rewardlab score: error: "), err
    return err


# ----------------------------------------------------------------------------------------------------------
# The input is never the output
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["same", "relative", "dot", "symlink", "hardlink"])
@pytest.mark.parametrize("resume", [False, True])
def test_output_that_is_the_input_is_refused(tmp_path, monkeypatch, capsys, spelling, resume):
    src = write(tmp_path / "same.jsonl", rows(50))
    before = src.read_bytes()
    monkeypatch.chdir(tmp_path)
    output = {
        "same": str(src),
        "relative": "same.jsonl",
        "dot": "./same.jsonl",
        "symlink": "link.jsonl",
        "hardlink": "hard.jsonl",
    }[spelling]
    if spelling == "symlink":
        os.symlink(src, tmp_path / "link.jsonl")
    if spelling == "hardlink":
        os.link(src, tmp_path / "hard.jsonl")
    argv = ["score", str(src), "-o", output, "--verifier", "math", "--workers", "1"]
    err = one_line_error(capsys, main(argv + (["--resume"] if resume else [])))
    assert "output is the input" in err
    assert src.read_bytes() == before
    assert not list(tmp_path.glob("*.run.json"))


# ----------------------------------------------------------------------------------------------------------
# A resume continues its own run only
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture
def cut_output(tmp_path):
    """A 100-row input scored in full, and its output cut to 40 rows (plus half a line)."""
    src = write(tmp_path / "in.jsonl", rows(100))
    full = tmp_path / "full.jsonl"
    score_file(src, full, "math", workers=1)
    out = tmp_path / "out.jsonl"
    lines = full.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:40]) + lines[40][:10])
    Path(f"{out}.run.json").write_bytes(Path(f"{full}.run.json").read_bytes())
    return src, full, out


def test_resume_of_the_same_run_completes_it(cut_output, tmp_path):
    src, full, out = cut_output
    copy = write(tmp_path / "moved.jsonl", rows(100))  # the same rows under another name also continue
    summary = score_file(copy, out, "math", workers=1, resume=True)
    assert summary.resumed == 40 and summary.scored == 60
    kept = full.read_bytes().splitlines(keepends=True)[:40]
    assert out.read_bytes().startswith(b"".join(kept)) and untimed(out) == untimed(full)


@pytest.mark.parametrize(
    "change", ["references", "other_file", "verifier", "config", "shorter_input", "no_record"]
)
def test_resume_refuses_an_output_of_another_run(cut_output, tmp_path, capsys, change):
    src, _, out = cut_output
    before = out.read_bytes()
    argv = ["score", str(src), "-o", str(out), "--verifier", "math", "--workers", "1", "--resume"]
    if change == "references":
        write(src, rows(100, reference_shift=1))
    elif change == "other_file":
        argv[1] = str(write(tmp_path / "other.jsonl", [{"completion": "\\boxed{7}", "reference": "7"}] * 100))
    elif change == "verifier":
        argv[5] = "format"
    elif change == "config":
        argv += ["--config", "mode=strict"]
    elif change == "shorter_input":
        argv[1] = str(write(tmp_path / "short.jsonl", rows(10)))
    elif change == "no_record":
        Path(f"{out}.run.json").unlink()
    err = one_line_error(capsys, main(argv))
    assert "cannot resume" in err and "without --resume" in err
    expected = {
        "references": "fields differ: reference",
        "other_file": "does not come from input row 1",
        "verifier": 'source="math"',
        "config": "config={}",
        "shorter_input": "more rows than the input",
        "no_record": "no run record",
    }[change]
    assert expected in err
    assert out.read_bytes() == before  # refused before anything was written


def test_resume_after_shaping_is_refused(tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", rows(8))
    out = tmp_path / "out.jsonl"
    argv = [
        "score",
        str(src),
        "-o",
        str(out),
        "--verifier",
        "math",
        "--workers",
        "1",
        "--shape",
        "clamp:-1,1",
    ]
    assert main(argv) == 0
    capsys.readouterr()
    err = one_line_error(capsys, main(argv + ["--resume"]))
    assert "already shaped" in err


# ----------------------------------------------------------------------------------------------------------
# Malformed rows are rows
# ----------------------------------------------------------------------------------------------------------
def test_invalid_utf8_is_an_error_row_and_a_bom_is_accepted(tmp_path):
    lines = [json.dumps(r).encode() for r in rows(10)]
    lines[0] = b"\xef\xbb\xbf" + lines[0]  # a UTF-8 byte order mark
    lines[4] = lines[4].replace(b"boxed", b"box\xffed")
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    summary = score_file(src, out, "math", workers=2)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(got) == 10 == summary.rows
    assert got[0]["id"] == "r0" and got[0]["error"] is None
    assert got[4]["error"] == "invalid UTF-8 at line 5"
    assert got[4]["details"]["line"] == 5 and "byte" in got[4]["details"]["reason"]
    assert [g["id"] for g in got[5:]] == [f"r{i}" for i in range(5, 10)]
    assert summary.errors["invalid UTF-8"] == 1


BAD_VERIFIERS = [["math"], {"name": "math"}, 5, ""]


def test_a_verifier_field_that_is_not_a_name_is_an_error_row(tmp_path):
    items = rows(12)
    for k, bad in enumerate(BAD_VERIFIERS):
        items[3 * k]["verifier"] = bad
    out = tmp_path / "out.jsonl"
    summary = score_file(write(tmp_path / "in.jsonl", items), out, "math", workers=2)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(got) == 12 == summary.rows
    for k, bad in enumerate(BAD_VERIFIERS):
        assert got[3 * k]["error"].startswith("invalid record: 'verifier' must be a verifier name")
        assert got[3 * k]["verifier"] == bad  # the input field is kept as it was
    assert all(g["error"] is None for i, g in enumerate(got) if i % 3)
    results = score_records([Record(completion="\\boxed{1}", reference="1", verifier=["math"])], "math")
    assert results[0].error.startswith("invalid record")


def test_input_fields_named_like_added_fields_are_kept(tmp_path, capsys):
    items = rows(4)
    items[0].update(reward=0.5, details="human note", error="none", input_reward=1)
    items[1]["reward"] = 2
    src = write(tmp_path / "in.jsonl", items)
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out), "--verifier", "math", "--workers", "1"]) == 0
    text = capsys.readouterr().out
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert got[0]["input_input_reward"] == 0.5 and got[0]["input_reward"] == 1
    assert got[0]["input_details"] == "human note" and got[0]["input_error"] == "none"
    assert got[1]["input_reward"] == 2 and set(got[1]) >= {"reward", "details", "error"}
    assert "'reward' kept as 'input_reward' (2 rows)" in text


def test_every_output_row_has_the_record_and_added_fields(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"id": 1, "completion": "\\\\boxed{1}", "reference": "1", "prompt": "p"}\n[1]\n{bad\n\xff\n'
    )
    out = tmp_path / "out.jsonl"
    score_file(src, out, "math", workers=1)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [set(g) for g in got] == [
        {"id", "prompt", "completion", "reference", "reward", "details", "error", "reward_time_s"}
    ] * 4


# ----------------------------------------------------------------------------------------------------------
# Arguments and paths: one line, exit 2
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("timeout", ["nan", "inf", "-1", "0"])
def test_timeouts_that_are_not_finite_and_positive_are_refused(tmp_path, capsys, timeout):
    src = write(tmp_path / "in.jsonl", rows(2))
    code = main(
        ["score", str(src), "-o", str(tmp_path / "o.jsonl"), "--verifier", "math", "--timeout", timeout]
    )
    assert "--timeout must be a finite number" in one_line_error(capsys, code)


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--wall-timeout", "nan", "--wall-timeout must be a finite number"),
        ("--wall-timeout", "0", "--wall-timeout must be a finite number"),
        ("--spare-workers", "-1", "--spare-workers must be >= 0"),
    ],
)
def test_bad_wall_timeouts_and_spare_counts_are_refused(tmp_path, capsys, flag, value, message):
    src = write(tmp_path / "in.jsonl", rows(2))
    code = main(["score", str(src), "-o", str(tmp_path / "o.jsonl"), "--verifier", "math", flag, value])
    assert message in one_line_error(capsys, code)


def test_score_passes_its_wall_timeout_and_spare_workers_to_the_scorer(tmp_path, monkeypatch):
    register_verifier("sleepy", override=True)(SleepyVerifier)  # a row that waits without using CPU
    built = []

    class Spy(scoring_io.Scorer):
        def __init__(self, *args, **kwargs):
            built.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(scoring_io, "Scorer", Spy)
    src = write(tmp_path / "in.jsonl", [{"id": i, "completion": c} for i, c in enumerate(["0", "30", "0"])])
    out = tmp_path / "o.jsonl"
    flags = ["--timeout", "1", "--wall-timeout", "2", "--spare-workers", "3", "--workers", "2"]
    assert main(["score", str(src), "-o", str(out), "--verifier", "sleepy", *flags]) == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["error"] for row in got] == [None, "timeout", None]
    # the default cap would be 10 x --timeout: the 2 s in the details is the flag's
    assert got[1]["details"] == {"wall_timeout_s": 2.0}
    assert built[0]["spare_workers"] == 3 and built[0]["wall_timeout"] == 2.0


def test_unwritable_outputs_are_one_line(tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", rows(2))
    (tmp_path / "folder").mkdir()
    cases = {
        str(tmp_path / "folder"): "output is a folder",
        str(src / "out.jsonl"): "is a file",
        "/proc/version": "cannot write output",  # not writable, even by root
    }
    for output, expected in cases.items():
        code = main(["score", str(src), "-o", output, "--verifier", "math", "--workers", "1"])
        assert expected in one_line_error(capsys, code)
    assert src.read_text().count("\n") == 2


def test_a_missing_input_that_could_be_a_hub_name_is_one_line_and_quick(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # read at import: as if set before it
    start = time.perf_counter()
    code = main(["score", "no_such_dataset_here", "-o", str(tmp_path / "o.jsonl"), "--verifier", "math"])
    err = one_line_error(capsys, code)
    assert "not a local file" in err and "hub is off" in err
    assert time.perf_counter() - start < 10


# ----------------------------------------------------------------------------------------------------------
# Processes and signals
# ----------------------------------------------------------------------------------------------------------
def _start_cli(src: Path, out: Path, workers: int = 2) -> subprocess.Popen:
    command = [sys.executable, "-m", "rewardlab.cli", "score", str(src), "-o", str(out), "--verifier", "math"]
    command += ["--workers", str(workers), "--no-progress"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or out.stat().st_size < 5_000):
        time.sleep(0.05)
    assert out.exists() and out.stat().st_size >= 5_000, proc.stderr.read() if proc.poll() is not None else ""
    return proc


def _workers_of(proc: subprocess.Popen) -> list[psutil.Process]:
    children = psutil.Process(proc.pid).children(recursive=True)
    assert len(children) >= 2
    return children


def _gone(processes: list[psutil.Process], within: float) -> bool:
    _, alive = psutil.wait_procs(processes, timeout=within)
    return not alive


def test_workers_die_with_a_killed_parent_and_release_its_pipes(tmp_path):
    src = write(tmp_path / "in.jsonl", rows(200_000))
    proc = _start_cli(src, tmp_path / "out.jsonl")
    workers = _workers_of(proc)
    os.kill(proc.pid, signal.SIGKILL)  # the parent alone, no chance to clean up
    start = time.time()
    proc.communicate(timeout=20)  # returns only once no worker holds the stdout/stderr pipes
    assert time.time() - start < 10
    assert _gone(workers, within=30)


def test_sigterm_stops_cleanly_and_the_run_resumes(tmp_path):
    src = write(tmp_path / "in.jsonl", rows(30_000))
    out = tmp_path / "out.jsonl"
    proc = _start_cli(src, out)
    workers = _workers_of(proc)
    proc.send_signal(signal.SIGTERM)  # to the parent only, as a job scheduler does
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and b"rewardlab score: terminated" in err
    assert b"Traceback" not in err
    assert _gone(workers, within=30)
    data = out.read_bytes()
    assert data.endswith(b"\n")  # every row written is whole
    done = [json.loads(line) for line in data.splitlines()]
    assert 0 < len(done) < 30_000 and [d["id"] for d in done] == [f"r{i}" for i in range(len(done))]
    assert score_file(src, out, "math", workers=2, resume=True).resumed == len(done)
    reference = tmp_path / "reference.jsonl"
    score_file(src, reference, "math", workers=2)
    assert out.read_bytes().startswith(data) and untimed(out) == untimed(reference)


def test_rm_score_refuses_its_input_as_output(tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", rows(3))
    before = src.read_bytes()
    code = main(["rm", "score", str(src), "-o", str(src), "--model", str(tmp_path / "no-model")])
    err = capsys.readouterr().err
    assert code == 2 and "output is the input" in err and err.count("\n") == 1
    assert src.read_bytes() == before
