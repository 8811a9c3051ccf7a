"""The one warm pool (``rewardlab.scoring.WarmPool``): lazy build, retry of a failed build, error rows and a
rebuild after an engine failure, close, fork safety. Its users' behaviour is tested with them (RL's reward
sources, the TRL and verl integrations, the server)."""

from __future__ import annotations

import os

import pytest

from rewardlab.registry import UnknownNameError
from rewardlab.scoring import Closed, WarmPool
from rewardlab.types import Record

ROWS = [Record(completion="\\boxed{1}", reference="1"), Record(completion="\\boxed{2}", reference="1")]


@pytest.mark.parametrize("stream", [False, True])
def test_built_on_first_use_and_kept_warm(stream):
    pool = WarmPool("math", workers=1, stream=stream)
    try:
        assert pool.scorer is None
        assert [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0]
        scorer = pool.scorer
        assert [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0] and pool.scorer is scorer
    finally:
        pool.close()


@pytest.mark.parametrize("stream", [False, True])
def test_a_failed_build_is_error_rows_until_retried(stream):
    pool = WarmPool("no_such_verifier", workers=0, stream=stream, retry_s=3600)
    try:
        results = pool.score_batch(ROWS)
        assert [r.reward for r in results] == [0.0, 0.0]
        assert all(r.error.startswith("source error: no_such_verifier: UnknownNameError") for r in results)
        pool.name = "math"  # the source would build now
        assert all(r.error.startswith("source error: no_such_verifier") for r in pool.score_batch(ROWS))
        pool.retry_s = 0.0  # not tried again before retry_s; then it is
        assert [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0]
    finally:
        pool.close()


def test_build_raises_what_the_source_raises():
    with pytest.raises(UnknownNameError):
        WarmPool("no_such_verifier").build()


def test_an_engine_failure_is_error_rows_and_a_fresh_pool(monkeypatch):
    pool = WarmPool("math", workers=0)
    try:
        scorer = pool.build()

        def fail(records):
            raise RuntimeError("engine broke")

        monkeypatch.setattr(scorer, "score", fail)
        results = pool.score_batch(ROWS)
        assert [r.error for r in results] == ["scoring failed: RuntimeError: engine broke"] * 2
        assert pool.scorer is None and scorer._closed
        assert [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0] and pool.scorer is not scorer
    finally:
        pool.close()


def test_a_stream_whose_engine_failed_is_replaced():
    pool = WarmPool("math", workers=0, stream=True)
    try:
        stream = pool.build() and pool.stream
        assert [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0]
        stream.failures += 1  # as after a failed engine run
        assert [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0]
        assert pool.stream is not stream and stream.closed
    finally:
        pool.close()


@pytest.mark.parametrize("stream", [False, True])
def test_a_closed_pool_refuses(stream):
    pool = WarmPool("math", workers=0, stream=stream)
    pool.score_batch(ROWS)
    pool.close()
    assert pool.scorer is None
    assert all(r.error == "scoring failed: the reward pool is closed" for r in pool.score_batch(ROWS))
    with pytest.raises(Closed):
        pool.submit(ROWS)
    with pytest.raises(Closed):
        pool.build()


def test_discard_stops_the_workers_and_the_next_call_builds_again():
    pool = WarmPool("math", workers=1)
    try:
        pool.score_batch(ROWS)
        scorer = pool.scorer
        pool.discard()
        assert scorer._closed and pool.scorer is None
        assert [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0]
    finally:
        pool.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="this machine cannot have it: os.fork")
def test_a_forked_child_forgets_the_parents_pool():
    pool = WarmPool("math", workers=1, stream=True)
    try:
        pool.score_batch(ROWS)
        workers = [w.process.pid for w in pool.scorer._pool]
        pid = os.fork()
        if pid == 0:  # the child: nothing inherited, a pool of its own on first use
            code = 1
            try:
                fresh = pool.scorer is None and pool.stream is None
                ok = fresh and [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0]
                pool.close()
                code = 0 if ok else 1
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
        assert [w.process.pid for w in pool.scorer._pool] == workers
        assert all(w.process.is_alive() for w in pool.scorer._pool)
        assert [r.reward for r in pool.score_batch(ROWS)] == [1.0, 0.0]
    finally:
        pool.close()
