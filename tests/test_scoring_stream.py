"""The scoring stream (``ScoringStream``): concurrent submitters, one warm pool, each request answered when
its own rows are done; the same rewards as ``score_records``; no barrier behind a hostile row; prompt
answers from idle; close, abort, limits, crashes, engine failures; no busy spin."""

from __future__ import annotations

import resource
import threading
import time

import pytest
from test_scoring import (  # tests/ is on the path
    CrashingVerifier,
    SleepyVerifier,
    SpinningVerifier,
    math_rows,
)
from time_bounds import HANG_S, eventually  # tests/time_bounds.py

from rewardlab.scoring import Closed, QueueFull, Scorer, ScoringStream, score_records
from rewardlab.scoring.jobs import RecordJob
from rewardlab.types import Record, Result


def _sleepy(n: int, seconds: float = 0.0) -> list[dict]:
    return [{"completion": str(seconds)} for _ in range(n)]


def _warm(stream) -> None:
    """Forks the workers and lets them finish starting (timings below measure scoring, not forking)."""
    assert [r.reward for r in stream.submit(_sleepy(4)).result(10)] == [1.0] * 4


class _HeldSource:
    """An in-process source recording its batches; the first one waits for ``release``."""

    name = "held"
    runs_in_process = True

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def score_batch(self, records):
        self.batches.append([r.completion for r in records])
        if len(self.batches) == 1:
            self.started.set()
            self.release.wait(60)
        return [Result(reward=float(len(r.completion))) for r in records]


def test_eight_threads_get_score_records_rewards_bit_for_bit():
    rows = math_rows(240)
    rows[7]["verifier"] = "sleepy-unknown"  # per-row routing holds: an error row in its place
    rows[8] = {"completion": "\\boxed{2}", "reference": "2", "verifier": "math"}
    expected = score_records(rows, "math", workers=2, timeout=10)
    slices = [rows[i : i + 30] for i in range(0, 240, 30)]
    start = threading.Barrier(8)
    answers: list = [None] * 8

    def submit(i: int) -> None:
        start.wait()
        answers[i] = stream.submit(slices[i]).result(30)

    stream = ScoringStream(Scorer("math", workers=2, timeout=10))
    try:
        threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        stream.close()
    got = [result for answer in answers for result in answer]
    assert [r.reward.hex() for r in got] == [r.reward.hex() for r in expected]
    assert got == expected  # errors and details too
    assert got[7].error == "unknown verifier: 'sleepy-unknown'" and got[8].details["method"] == "numeric"


def test_a_hostile_row_does_not_hold_a_later_clean_request():
    # Under a barrier (the old micro-batcher: one call per turn) the clean request would wait for the
    # hostile row's call to end, i.e. its timeout (30 s, past the clean request's 15 s wait); here a free
    # worker takes it at once. The order is the check, not a stopwatch: the clean request is answered while
    # the hostile row is still held, then abort kills it (the timeout itself is checked below).
    with ScoringStream(Scorer(SleepyVerifier(), workers=2, timeout=30.0)) as stream:
        _warm(stream)
        hostile = stream.submit(_sleepy(1, 60))
        clean = stream.submit(_sleepy(3)).result(15)
        assert not hostile.done()
        stream.abort()
        [aborted] = hostile.result(10)
    assert [r.reward for r in clean] == [1.0] * 3
    assert aborted.error == "scoring failed: the scoring stream was aborted"


def test_a_row_submitted_while_idle_is_answered_promptly_and_idle_costs_no_cpu():
    with ScoringStream(Scorer(SleepyVerifier(), workers=2, timeout=5)) as stream:
        _warm(stream)
        before = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(1.0)  # the stream's thread waits for a row
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        assert cpu < 0.1, cpu  # a busy spin would use ~1 s
        # answered at all (a lost wake-up would hang here); how promptly is bench/score_engine.py's
        # `stream` figure (idle against busy latency, a ratio), not a bound here
        assert [r.reward for r in stream.submit(_sleepy(1)).result(10)] == [1.0]


def test_close_answers_everything_submitted_then_refuses():
    stream = ScoringStream(Scorer(SleepyVerifier(), workers=2, timeout=5))
    futures = [stream.submit(_sleepy(3, 0.05)) for _ in range(4)]
    stream.close()
    assert all(f.done() for f in futures)
    assert [[r.reward for r in f.result()] for f in futures] == [[1.0] * 3] * 4
    assert stream.closed and not stream.running and stream.queued_rows == 0
    with pytest.raises(Closed):
        stream.submit(_sleepy(1))
    with pytest.raises(RuntimeError, match="closed"):  # the stream owned the scorer
        stream.scorer.score(_sleepy(1))


def test_abort_fails_what_is_left_and_kills_busy_workers():
    stream = ScoringStream(Scorer(SleepyVerifier(), workers=1, timeout=30))
    _warm(stream)
    future = stream.submit(_sleepy(2, 60))
    time.sleep(0.2)
    start = time.monotonic()
    stream.abort()
    # a hang guard: an abort that waited for the rows would take their 30 s timeout
    assert time.monotonic() - start < HANG_S
    assert future.done()  # answered by abort itself
    assert [r.error for r in future.result()] == ["scoring failed: the scoring stream was aborted"] * 2


def test_a_crash_or_a_timeout_costs_only_its_row():
    with ScoringStream(Scorer(CrashingVerifier(), workers=2, timeout=5)) as stream:
        crashing = stream.submit([{"completion": c} for c in ("ok", "crash", "ok", "ok")])
        other = stream.submit([{"completion": "ok"}] * 3)
        results = crashing.result(20)
        assert [r.reward for r in results] == [1.0, 0.0, 1.0, 1.0]
        assert results[1].error == "worker crashed: exit code 3"
        assert [r.reward for r in other.result(20)] == [1.0] * 3
    # a sleep uses no CPU: the wall-clock cap (set to 1 s here) stops it
    with ScoringStream(Scorer(SleepyVerifier(), workers=1, timeout=1.0, wall_timeout=1.0)) as stream:
        start = time.monotonic()
        results = stream.submit(_sleepy(1) + _sleepy(1, 60) + _sleepy(2)).result(30)
        assert [r.error for r in results] == [None, "timeout", None, None]
        assert results[1].details == {"wall_timeout_s": 1.0}
        assert time.monotonic() - start < HANG_S  # the 60 s row was killed at its 1 s timeout


def test_queue_limit_cancelled_requests_and_in_process_batches():
    source = _HeldSource()
    with ScoringStream(Scorer(source, workers=1), max_queued_rows=3) as stream:
        first = stream.submit([Record(completion="a")])
        assert source.started.wait(30)  # the first batch is being scored: what follows waits in the feed
        cancelled = stream.submit([Record(completion="bb")])
        kept = stream.submit([Record(completion="ccc")])
        with pytest.raises(QueueFull, match="3 rows are waiting"):
            stream.submit([Record(completion="d")])
        assert stream.queued_rows == 3 and cancelled.cancel()
        source.release.set()
        assert [r.reward for r in first.result(30)] == [1.0]
        assert [r.reward for r in kept.result(30)] == [3.0]
    assert source.batches == [["a"], ["ccc"]]  # the cancelled request was never scored


def test_an_engine_failure_makes_error_rows_and_the_next_rows_score(monkeypatch):
    with ScoringStream(Scorer(SleepyVerifier(), workers=1, timeout=5)) as stream:
        ensure_pool = stream.scorer._ensure_pool
        calls = []

        def failing_once() -> None:
            calls.append(1)
            if len(calls) == 1:
                raise OSError("fork failed")
            ensure_pool()

        monkeypatch.setattr(stream.scorer, "_ensure_pool", failing_once)
        failed = stream.submit(_sleepy(2)).result(10)
        assert [r.error for r in failed] == ["scoring failed: OSError: fork failed"] * 2
        assert stream.failures == 1 and stream.running
        assert [r.reward for r in stream.submit(_sleepy(2)).result(10)] == [1.0, 1.0]


def test_ray_engine_does_not_stream():
    with pytest.raises(ValueError, match="engine='local'"):
        ScoringStream(Scorer(SleepyVerifier(), engine="ray"))


def _spinning(*seconds: float) -> list[Record]:
    return [Record(id=i, completion=str(s)) for i, s in enumerate(seconds)]


def test_spare_workers_take_the_rows_behind_cpu_stragglers_and_stop_after():
    # One worker: without spares, the clean request would wait for the 6 hostile rows' timeouts, one after
    # the other (6 x 2 s of CPU: 12 s, past the 10 s bound below); with them, each straggler becomes a spare
    # after STRAGGLER_S of CPU and a fresh worker goes on, so the clean request costs no timeout at all.
    scorer = Scorer(SpinningVerifier(), workers=1, timeout=2.0, spare_workers=6)
    with ScoringStream(scorer) as stream:
        stream.submit(_spinning(0)).result(10)
        hostile = [stream.submit(_spinning(60)) for _ in range(6)]
        time.sleep(0.05)
        start = time.monotonic()
        clean = stream.submit(_spinning(0, 0, 0)).result(30)
        clean_s = time.monotonic() - start
        assert scorer.pool_size > 1  # stragglers hold spares
        timed_out = [future.result(30)[0] for future in hostile]

        def dispatched_and_drained() -> bool:  # the next dispatch stops the stragglers' workers (once reaped)
            stream.submit(_spinning(0)).result(10)
            return scorer.pool_size == 1

        assert eventually(dispatched_and_drained), scorer.pool_size
    assert [r.reward for r in clean] == [1.0] * 3
    assert clean_s < 10, clean_s  # 6 timeouts of 2 s in a row would be 12 s
    assert [r.error for r in timed_out] == ["timeout"] * 6


def test_a_slow_legitimate_row_among_stragglers_still_finishes():
    # 0.3 s of CPU is a straggler (demoted, run at low priority among the others least-CPU first), but it
    # finishes while the hostile rows still spin. The timeout is ample (30 s: the hostile rows never reach it
    # here, abort stops them), so the order is the check, not whether 0.3 s of CPU fits a loaded machine's
    # few seconds.
    with ScoringStream(Scorer(SpinningVerifier(), workers=1, timeout=30.0, spare_workers=8)) as stream:
        stream.submit(_spinning(0)).result(10)
        hostile = [stream.submit(_spinning(60)) for _ in range(4)]
        slow = stream.submit(_spinning(0.3))
        [result] = slow.result(20)  # a hang guard: held behind the hostile rows, it would wait for 30 s
        assert not any(future.done() for future in hostile)
        stream.abort()
        for future in hostile:
            [aborted] = future.result(HANG_S)
            assert aborted.error == "scoring failed: the scoring stream was aborted"
    assert result.reward == 1.0 and result.error is None


def test_spare_workers_on_by_default():
    assert Scorer("math", workers=2).spare_workers == 64  # SPARES_PER_WORKER per worker
    assert Scorer("math", workers=2, spare_workers=0).spare_workers == 0  # the plain pool
    with pytest.raises(ValueError, match="spare_workers"):
        Scorer("math", spare_workers=-1)


def _unordered_indices(spare_workers: int) -> list[int]:
    """The order in which one worker finishes a row spinning past its 3 s CPU timeout and the ten quick rows
    sent to it in the same chunk."""
    scorer = Scorer(SpinningVerifier(), workers=1, timeout=3.0, chunk_size=16, spare_workers=spare_workers)
    with scorer:
        rows = _spinning(60, *[0] * 10)
        return [index for index, _ in scorer.iter_unordered(rows, RecordJob())]


def test_a_stragglers_chunk_goes_back_to_the_queue():
    # With spares, the straggler's worker becomes a spare and the rest of its chunk goes to the fresh worker:
    # the quick rows are done before the straggler's timeout. The control (the plain pool) keeps them behind
    # it in the same worker until the timeout kills it.
    assert _unordered_indices(spare_workers=4)[-1] == 0
    assert _unordered_indices(spare_workers=0)[0] == 0
