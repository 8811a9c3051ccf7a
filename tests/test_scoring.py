"""The scoring engine: order, per-row verifiers, timeouts that fire, crashes, in-process sources, datasets."""

from __future__ import annotations

import os
import time
from typing import ClassVar

import pytest
from time_bounds import HANG_S, ROOM_S  # tests/time_bounds.py

from rewardlab.scoring import Scorer, score_dataset, score_records, summarize
from rewardlab.types import Record, Result
from rewardlab.verifiers import Verifier, get_verifier


class SleepyVerifier(Verifier):
    """Sleeps ``completion`` seconds (a stand-in for a runaway check), then rewards 1."""

    name: ClassVar[str] = "sleepy"

    def verify(self, record: Record) -> Result:
        time.sleep(float(record.completion))
        return Result(reward=1.0, details={"pid": os.getpid()})


class SpinningVerifier(Verifier):
    """Burns ``completion`` seconds of CPU (a hostile row, or a slow legitimate one), then rewards 1."""

    name: ClassVar[str] = "spinning"

    def verify(self, record: Record) -> Result:
        end = time.process_time() + float(record.completion)
        while time.process_time() < end:
            pass
        return Result(reward=1.0)


class CrashingVerifier(Verifier):
    """Kills its own process on "crash" (a segfault stand-in), else rewards 1."""

    name: ClassVar[str] = "crashing"

    def verify(self, record: Record) -> Result:
        if record.completion == "crash":
            os._exit(3)
        return Result(reward=1.0)


class BatchingSource:
    """Not a Verifier: a reward-model-like source that scores whole batches in this process."""

    name = "batching"

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.pid = os.getpid()

    def score_batch(self, records):
        self.batches.append(len(records))
        return [Result(reward=float(len(r.completion_text)), details={"pid": os.getpid()}) for r in records]


def math_rows(n: int) -> list[dict]:
    return [{"completion": f"\\boxed{{{i % 7}}}", "reference": str(i % 5)} for i in range(n)]


def test_results_in_order_one_per_record():
    rows = math_rows(100)
    results = score_records(rows, "math", workers=2, timeout=10)
    assert len(results) == 100
    expected = [1.0 if i % 7 == i % 5 else 0.0 for i in range(100)]
    assert [r.reward for r in results] == expected
    assert results == score_records(rows, "math", workers=0)  # same as in-process scoring


def test_accepts_records_dicts_and_verifier_instances():
    verifier = get_verifier("math", mode="strict")
    records = [
        Record(completion="The answer is 2", reference="2"),
        {"completion": "\\boxed{2}", "reference": "2"},
    ]
    results = score_records(records, verifier, workers=1)
    assert results[0].error == "no answer found"  # strict config travelled to the worker
    assert results[1].reward == 1.0


def test_per_row_verifier_field():
    rows = [
        {"completion": "0"},
        {"completion": "0", "reference": None, "verifier": "sleepy-unknown"},
        {"completion": "\\boxed{2}", "reference": "2", "verifier": "math"},
    ]
    results = score_records(rows, SleepyVerifier(), workers=1, timeout=10)
    assert results[0].reward == 1.0 and "pid" in results[0].details  # default source
    assert results[1].error == "unknown verifier: 'sleepy-unknown'"
    assert results[2].details["method"] == "numeric"  # row chose math


def test_timeout_fires_on_cpu_time_and_the_run_goes_on():
    rows = [Record(id=i, completion=seconds) for i, seconds in enumerate(["0", "30", "0", "30", "0"])]
    start = time.monotonic()
    with Scorer(SpinningVerifier(), workers=2, timeout=1.0, spare_workers=0) as scorer:
        results = scorer.score(rows)
    elapsed = time.monotonic() - start
    assert [r.error for r in results] == [None, "timeout", None, "timeout", None]
    assert results[1].details == {"timeout_s": 1.0}
    assert elapsed < HANG_S, elapsed  # two rows spinning for 30 s of CPU were killed at ~1 s of CPU


def test_the_wall_clock_cap_stops_a_row_that_waits_without_using_cpu():
    rows = [{"completion": "0"}, {"completion": "30"}, {"completion": "0"}]
    start = time.monotonic()
    results = score_records(rows, SleepyVerifier(), workers=2, timeout=1.0)  # wall cap: 10 x timeout
    elapsed = time.monotonic() - start
    assert [r.error for r in results] == [None, "timeout", None]
    assert results[1].details == {"wall_timeout_s": 10.0}
    assert elapsed < 10.0 + HANG_S, elapsed  # killed at the 10 s cap (not killed: 30 s)


def test_the_timeout_counts_cpu_time_not_waiting():
    # 2 s of sleep use no CPU: the 1 s CPU limit lets it finish (a wall-clock limit of 1 s would not), so
    # a row's verdict does not depend on how long it waits for its CPU share on a loaded machine.
    results = score_records([{"completion": "2"}], SleepyVerifier(), workers=1, timeout=1.0)
    assert results[0].error is None and results[0].reward == 1.0
    capped = score_records([{"completion": "2"}], SleepyVerifier(), workers=1, timeout=1.0, wall_timeout=1.0)
    assert capped[0].error == "timeout"  # the control: the same row under a 1 s wall cap


def test_math_pathological_inputs_time_out_within_the_timeout():
    big = "+".join(f"x^{{{i}}}" for i in range(10_000))  # a 10,000-term expression: ~50 s in math-verify
    rows = [
        {"completion": f"\\boxed{{{big}}}", "reference": "1"},
        {"completion": "\\boxed{9^{9^{9^{9}}}}", "reference": "1"},
        {"completion": "$9^9^9^9$", "reference": "1"},
        {"completion": "\\boxed{3}", "reference": "3"},
    ]
    timeout = 2.0
    with Scorer("math", workers=2, timeout=timeout) as scorer:
        start = time.monotonic()
        results = scorer.score(rows)
        elapsed = time.monotonic() - start
    assert results[0].error == "timeout"
    for result in results[1:3]:  # either math-verify gives up quickly, or the engine kills it
        assert result.error == "timeout" or (result.reward == 0.0 and result.error is None), result
    assert results[3].reward == 1.0
    # not killed: ~50 s. Each row is killed after 2 s of its own CPU, so on a machine loaded by other work
    # the wall time stretches: the room is ROOM_S.
    assert elapsed < ROOM_S, elapsed


def test_worker_crash_costs_one_row():
    rows = [{"completion": "ok"}, {"completion": "crash"}, {"completion": "ok"}, {"completion": "ok"}]
    results = score_records(rows, CrashingVerifier(), workers=1, timeout=10)
    assert [r.reward for r in results] == [1.0, 0.0, 1.0, 1.0]
    assert results[1].error == "worker crashed: exit code 3"


def test_in_process_sources_get_batches_and_no_pool():
    source = BatchingSource()
    rows = [{"completion": "x" * i} for i in range(10)]
    with Scorer(source, workers=2, batch_size=4) as scorer:
        results = scorer.score(rows)
        assert scorer._pool == []  # no worker processes for an in-process source
    assert [r.reward for r in results] == [float(i) for i in range(10)]
    assert {r.details["pid"] for r in results} == {os.getpid()}
    assert source.batches == [4, 4, 2]


def test_in_process_flag_on_a_verifier_subclass():
    class InProcess(SleepyVerifier):
        runs_in_process = True

    results = score_records([{"completion": "0"}], InProcess(), workers=2)
    assert results[0].details["pid"] == os.getpid()


def test_source_errors_become_rows():
    class Broken:
        name = "broken"

        def score_batch(self, records):
            raise RuntimeError("model on fire")

    results = score_records([{"completion": "a"}, {"completion": "b"}], Broken())
    assert [r.error for r in results] == ["source error: RuntimeError: model on fire"] * 2


def test_warm_scorer_is_reused_across_calls():
    with Scorer(SleepyVerifier(), workers=2, timeout=5) as scorer:
        first = scorer.score([{"completion": "0"}] * 8)
        pids = {p.process.pid for p in scorer._pool}
        second = scorer.score([{"completion": "0"}] * 8)
        assert {p.process.pid for p in scorer._pool} == pids
    assert {r.details["pid"] for r in first + second} <= pids


def test_datasets_dataset_in_and_out():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(math_rows(12))
    results = score_records(ds, "math", workers=1)
    assert len(results) == 12
    scored = score_dataset(ds, "math", workers=1)
    assert scored.column_names[-3:] == ["reward", "error", "details"]
    assert scored["reward"] == [r.reward for r in results]


def test_summary_counts_errors_by_kind():
    results = [Result(1.0), Result.failure("timeout"), Result.failure("invalid JSON at line 3"), Result(0.0)]
    summary = summarize(results, seconds=2.0)
    assert summary.rows == 4 and summary.mean_reward == 0.25
    assert dict(summary.errors) == {"timeout": 1, "invalid JSON": 1}
    assert summary.rows_per_s == 2.0
    assert "timeout: 1" in summary.format()


def test_bad_arguments():
    with pytest.raises(KeyError, match="unknown verifier 'nope'"):
        Scorer("nope")
    with pytest.raises(TypeError):
        Scorer(object())
    with pytest.raises(ValueError):
        Scorer("math", timeout=0)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_other_start_methods(method):
    rows = [{"completion": "\\boxed{2}", "reference": "2"}, {"completion": "\\boxed{3}", "reference": "2"}]
    with Scorer("math", workers=1, timeout=5, mp_context=method) as scorer:
        # the import of math-verify in a fresh worker is not charged to the first record
        assert [r.reward for r in scorer.score(rows)] == [1.0, 0.0]


def test_a_forked_copy_closed_leaves_the_parents_workers_running():
    # verl forks reward workers from a process that may already hold a warm scorer: the child's copy,
    # closed or collected, must not stop the parent's workers.
    records = [Record(id=0, completion="\\boxed{4}", reference="4")]
    with Scorer("math", workers=1, timeout=10) as scorer:
        assert scorer.score(records)[0].reward == 1.0
        workers = [w.process.pid for w in scorer._pool]
        pid = os.fork()
        if pid == 0:
            scorer.close()
            os._exit(0)
        os.waitpid(pid, 0)
        # A round trip instead of a sleep: whatever the child sent its workers (a stop message, a signal) was
        # sent before it exited, so a worker reads it before this request and is gone (or replaced) after it,
        # however slowly it stops.
        assert scorer.score(records)[0].reward == 1.0
        assert [w.process.pid for w in scorer._pool] == workers
        assert all(w.process.is_alive() for w in scorer._pool)
