"""Reward time (issue 49): each row's scoring time (``Result.time_s``, a row's ``reward_time_s``), the slowest
rows in ``rewardlab score``'s summary, the ``/score`` answer, and the viewer's sort by it.

The references are independent of the code under test: verifiers that sleep a known, different time per row
(the slowest row is the one that slept most; a row's time is at least its sleep), a source that reports its
own per-row times (kept as they are), and numpy's percentiles. No wall-clock upper bound: a loaded machine
only makes rows slower.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from fastapi.testclient import TestClient
from test_scoring import SpinningVerifier  # tests/ is on the path

from rewardlab.scoring import Scorer, score_file, score_records
from rewardlab.scoring.io import RowJob
from rewardlab.scoring.jobs import RecordJob
from rewardlab.scoring.summary import Summary, percentile, time_stats
from rewardlab.types import Record, Result
from rewardlab.verifiers import Verifier

SLEEPS = [0.1, 1.2, 0.0, 0.6, 0.3]
"""Seconds each row sleeps: at least 0.1 s apart, so that a loaded machine's jitter keeps their order."""
SLOWEST_FIRST = [1, 3, 4, 0, 2]


class NappingVerifier(Verifier):
    """Sleeps ``completion`` seconds, then rewards 1 (a row whose reward time is known from below)."""

    name: ClassVar[str] = "napping"

    def verify(self, record: Record) -> Result:
        time.sleep(float(record.completion))
        return Result(reward=1.0)


class BatchSleeper:
    """An in-process batch source: sleeps ``seconds`` per batch; with ``report``, it says each row's time."""

    name = "batch-sleeper"
    runs_in_process = True

    def __init__(self, seconds: float, report: list[float] | None = None) -> None:
        self.seconds, self.report = seconds, report

    def score_batch(self, records):
        time.sleep(self.seconds)
        times = self.report or [None] * len(records)
        return [Result(reward=1.0, time_s=t) for t in times[: len(records)]]


def _slowest_first(times: list[float]) -> list[int]:
    return sorted(range(len(times)), key=lambda i: -times[i])


# ----------------------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------------------
def test_the_time_is_not_part_of_a_results_equality():
    assert Result(reward=1.0, time_s=0.5) == Result(reward=1.0, time_s=2.0) == Result(reward=1.0)
    assert Result(reward=1.0, time_s=0.5) != Result(reward=0.0, time_s=0.5)


def test_worker_rows_are_timed_each_and_the_slowest_is_the_one_that_slept_most():
    rows = [{"id": i, "completion": str(s)} for i, s in enumerate(SLEEPS)]
    results = score_records(rows, NappingVerifier(), workers=2, timeout=30)
    times = [r.time_s for r in results]
    assert all(isinstance(t, float) for t in times), times
    assert all(t >= s for t, s in zip(times, SLEEPS, strict=True)), times  # a sleep is a lower bound
    assert _slowest_first(times) == SLOWEST_FIRST, times


def test_an_in_process_batch_shares_its_wall_time_unless_the_source_times_its_rows():
    records = [Record(id=i, completion="x") for i in range(4)]
    with Scorer(BatchSleeper(0.4), workers=1) as scorer:
        start = time.perf_counter()
        shared = [r.time_s for r in scorer.score(records)]
        outside = time.perf_counter() - start
    assert len(set(shared)) == 1, shared  # one wall time, split evenly
    assert 0.4 <= sum(shared) <= outside, (shared, outside)  # the batch's time once, not once per row
    reported = [0.5, 0.25, 2.0, 0.125]
    with Scorer(BatchSleeper(0.0, reported), workers=1) as scorer:
        assert [r.time_s for r in scorer.score(records)] == reported  # the source's own times, as they are


def test_a_timeout_takes_about_its_limit_and_a_refused_row_takes_none():
    rows = [
        {"completion": "0"},
        {"completion": "30"},  # 30 s of CPU: killed at 1 s of CPU
        {"completion": "0", "verifier": "no-such-verifier"},
    ]
    with Scorer(SpinningVerifier(), workers=1, timeout=1.0) as scorer:
        results = scorer.score(rows)
    assert [r.error for r in results] == [None, "timeout", "unknown verifier: 'no-such-verifier'"]
    assert results[1].time_s >= 0.95, results[1]  # 1 s of CPU takes at least about 1 s
    assert results[1].time_s > results[0].time_s
    assert results[2].time_s is None  # never scored


def test_a_failure_carries_the_time_the_engine_gives_it():
    job = RowJob()
    line = job.failure(0, (1, b'{"id": "a"}'), "worker crashed: exit code 9", time_s=2.5).line
    row = json.loads(line)
    assert row["reward_time_s"] == 2.5 and row["details"] == {} and "time_s" not in row
    result = RecordJob().failure(0, Record(id="a"), "timeout", time_s=3.25, timeout_s=3.0)
    assert result.time_s == 3.25 and result.details == {"timeout_s": 3.0}
    # an engine that did not time a timeout: the row ran at least its limit
    assert RecordJob().failure(0, Record(), "timeout", timeout_s=3.0).time_s == 3.0
    assert RecordJob().failure(0, Record(), "unknown verifier: 'x'").time_s is None


# ----------------------------------------------------------------------------------------------------------
# rewardlab score: rows, summary, resume
# ----------------------------------------------------------------------------------------------------------
def _input(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    rows = [json.dumps({"id": f"r{i}", "completion": str(s)}) for i, s in enumerate(SLEEPS)]
    path.write_text("\n".join([*rows[:2], "{broken", *rows[2:]]) + "\n")
    return path


def test_score_rows_carry_their_time_and_the_summary_names_the_slowest(tmp_path):
    out = tmp_path / "out.jsonl"
    summary = score_file(_input(tmp_path), out, NappingVerifier(), workers=2, timeout=30)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[2]["error"].startswith("invalid JSON") and rows[2]["reward_time_s"] is None
    scored = [r for r in rows if r["reward_time_s"] is not None]
    assert [r["id"] for r in scored] == [f"r{i}" for i in range(5)]
    times = [r["reward_time_s"] for r in scored]
    assert all(t >= s for t, s in zip(times, SLEEPS, strict=True)), times
    assert all("reward_time_s" not in r["details"] for r in rows)  # its own field, not a detail
    slowest = summary.slowest_rows()
    assert [r["id"] for r in slowest] == [f"r{i}" for i in SLOWEST_FIRST]
    assert [r["seconds"] for r in slowest] == pytest.approx(sorted(times, reverse=True), abs=1e-4)
    assert slowest[0]["row"] == 1 and slowest[1]["row"] == 4  # positions in the output (the broken line: 2)
    stats = summary.to_dict()["reward_time_s"]
    assert stats["max"] == pytest.approx(max(times), abs=1e-4)
    assert stats["p50"] == pytest.approx(float(np.percentile(times, 50)), abs=1e-4)
    assert stats["p99"] == pytest.approx(float(np.percentile(times, 99)), abs=1e-4)
    text = summary.format()
    assert "reward time  p50" in text and text.index("id r1") < text.index("id r3") < text.index("id r4")


def test_resume_keeps_rows_written_before_they_carried_a_time(tmp_path):
    src, out = _input(tmp_path), tmp_path / "out.jsonl"
    score_file(src, out, NappingVerifier(), workers=2, timeout=30)
    lines = out.read_text().splitlines(keepends=True)
    old = [json.loads(line) for line in lines[:3]]
    for row in old:
        del row["reward_time_s"]  # an output from before reward times
    out.write_text("".join(json.dumps(row) + "\n" for row in old))
    summary = score_file(src, out, NappingVerifier(), workers=2, timeout=30, resume=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary.resumed == 3 and len(rows) == 6
    assert [("reward_time_s" in r) for r in rows] == [False] * 3 + [True] * 3
    assert [r["id"] for r in summary.slowest_rows()] == ["r3", "r4", "r2"]  # times of this run's rows only


def test_an_input_field_named_like_the_time_is_kept_aside(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"completion": "0", "reward_time_s": "mine"}) + "\n")
    out = tmp_path / "out.jsonl"
    summary = score_file(src, out, NappingVerifier(), workers=1, timeout=30)
    row = json.loads(out.read_text())
    assert row["input_reward_time_s"] == "mine" and isinstance(row["reward_time_s"], float)
    assert summary.moved == {"reward_time_s": 1}


def test_summary_slowest_rows_order_ties_and_positions():
    summary = Summary()
    times = [0.3, None, 2.0, 0.3, 5.0, 0.1, 2.0, 0.7]
    for i, t in enumerate(times):
        summary.add(1.0, "timeout: 5 s" if t == 5.0 else None, time_s=t, id=f"k{i}" if i != 6 else None)
    slowest = summary.slowest_rows()
    # slowest first; of equally slow rows the earlier first; a row without an id is named by its position
    assert [(r["id"], r["row"], r["seconds"]) for r in slowest] == [
        ("k4", 4, 5.0),
        ("k2", 2, 2.0),
        (6, 6, 2.0),
        ("k7", 7, 0.7),
        ("k0", 0, 0.3),
    ]
    assert slowest[0]["error"] == "timeout: 5 s" and slowest[1]["error"] is None
    assert summary.to_dict()["slowest"] == slowest
    assert Summary().to_dict().get("slowest") is None and "reward time" not in Summary().format()


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1001])
def test_time_stats_are_numpys_percentiles(n):
    values = np.random.default_rng(n).exponential(0.2, n).tolist()
    stats = time_stats([*values, None])  # an untimed row is left out
    assert stats["p50"] == pytest.approx(float(np.percentile(values, 50)), rel=1e-12)
    assert stats["p99"] == pytest.approx(float(np.percentile(values, 99)), rel=1e-12)
    assert stats["max"] == max(values)
    assert percentile(sorted(values), 0) == min(values)
    assert time_stats([None, None]) == {}


# ----------------------------------------------------------------------------------------------------------
# rewardlab serve
# ----------------------------------------------------------------------------------------------------------
def test_serve_score_answers_carry_the_time_get_reward_answers_do_not():
    from rewardlab.serve.app import build_app

    with TestClient(build_app("math", workers=1)) as client:
        records = [{"completion": "\\boxed{4}", "reference": "4"}, {"completion": "x", "verifier": "code"}]
        results = client.post("/score", json={"records": records}).json()["results"]
        body = {"query": ["Q? \\boxed{3}"], "prompts": ["Q? "], "labels": ["3"]}
        answer = client.post("/get_reward", json=body).json()
    assert isinstance(results[0]["reward_time_s"], float) and results[0]["reward_time_s"] >= 0
    assert results[1]["reward_time_s"] is None  # refused before scoring
    assert set(answer) == {"rewards", "scores", "extra_logs", "errors"}  # what OpenRLHF reads, nothing more
    assert set(answer["extra_logs"]) == {"reward_error"}


# ----------------------------------------------------------------------------------------------------------
# rewardlab view
# ----------------------------------------------------------------------------------------------------------
def test_view_sorts_a_scored_file_by_reward_time(tmp_path):
    from rewardlab.view.app import create_app

    out = tmp_path / "scored.jsonl"
    score_file(_input(tmp_path), out, NappingVerifier(), workers=2, timeout=30)
    client = TestClient(create_app(out))
    body = client.get("/api/s/0/rows", params={"sort": "reward_time_s", "dir": "desc", "size": 50}).json()
    ids = [row["id"] for row in body["data"]]
    assert ids == [f"r{i}" for i in SLOWEST_FIRST] + ["line 3"]  # the untimed broken line last
    assert all(isinstance(row["reward_time_s"], float) for row in body["data"][:5])
    ascending = client.get("/api/s/0/rows", params={"sort": "reward_time_s", "size": 50}).json()["data"]
    assert [row["id"] for row in ascending] == [f"r{i}" for i in reversed(SLOWEST_FIRST)] + ["line 3"]


def _rollout(step: int, group: int, index: int, seconds: float | None) -> dict:
    return {
        "step": step,
        "group": group,
        "index": index,
        "prompt": "p",
        "completion": f"c{group}{index}",
        "reward": 1.0,
        "details": {},
        "error": None,
        "reward_time_s": seconds,
    }


def test_view_orders_an_rl_steps_samples_by_reward_time(tmp_path):
    from rewardlab.view.app import create_app

    run = tmp_path / "rl"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 1.0}) + "\n")
    times = [0.2, None, 1.5, 0.05, 0.9, 0.4]
    rows = [_rollout(1, i // 3, i % 3, t) for i, t in enumerate(times)]
    (run / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    client = TestClient(create_app(run))
    plain = client.get("/api/s/0/samples", params={"step": 1}).json()["samples"]
    assert [s["reward_time_s"] for s in plain] == times  # as logged, by group
    slow = client.get("/api/s/0/samples", params={"step": 1, "sort": "reward_time_s"}).json()["samples"]
    assert [s["reward_time_s"] for s in slow] == [1.5, 0.9, 0.4, 0.2, 0.05, None]
    table = client.get("/api/s/0/rows", params={"sort": "reward_time_s", "dir": "desc"}).json()["data"]
    assert [row["reward_time_s"] for row in table] == [1.5, 0.9, 0.4, 0.2, 0.05, None]


# ----------------------------------------------------------------------------------------------------------
# RL: per-sample times and the step's metrics
# ----------------------------------------------------------------------------------------------------------
class _Timed:
    """A source with fixed results, each reporting its own time."""

    def __init__(self, name: str, times: list[float | None]) -> None:
        self.name, self.times = name, times

    def score_batch(self, records):
        return [Result(reward=1.0, time_s=t) for t in self.times[: len(records)]]


def test_rl_samples_times_sum_their_sources_and_feed_the_steps_metrics():
    pytest.importorskip("torch")
    from rewardlab.rl.rewards import RewardSources, ScoredBatch, reward_time_metrics

    a = _Timed("a", [0.5, None, 0.25, None, 2.0])
    b = _Timed("b", [1.0, 0.5, None, None, 0.125])
    scored = RewardSources([(a, 1.0), (b, 0.5)]).score([Record()] * 5)
    assert scored.times == [1.5, 0.5, 0.25, None, 2.125]
    # dynamic sampling's selection and rounds keep each time with its sample
    assert ScoredBatch.concat([scored.select([4, 3]), scored.select([0])]).times == [2.125, None, 1.5]
    timed = [1.5, 0.5, 0.25, 2.125]
    metrics = reward_time_metrics(scored.times)
    assert metrics == {
        "reward/time_p50": pytest.approx(float(np.percentile(timed, 50))),
        "reward/time_p99": pytest.approx(float(np.percentile(timed, 99))),
        "reward/time_max": 2.125,
    }
    assert reward_time_metrics([None, None]) == {}  # no source timed its samples: no metric
