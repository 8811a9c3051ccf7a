"""In-process sources' batches in the engine's batch threads: a slow batch holds back only its own request's
rows when the source takes several batches at once, and a source that does not gets one batch at a time."""

from __future__ import annotations

import contextlib
import threading
import time

from time_bounds import HANG_S  # tests/time_bounds.py

from rewardlab.scoring import Scorer, ScoringStream
from rewardlab.types import Record, Result


class _GatedSource:
    """An in-process source whose rows with completion "hold" wait for ``release`` (a program looping until
    its limit); it records how many of its batches ran at once."""

    name = "gated"
    runs_in_process = True

    def __init__(self, concurrent: bool) -> None:
        self.concurrent_batches = concurrent
        self.release = threading.Event()
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def score_batch(self, records):
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            if any(record.completion == "hold" for record in records):
                self.release.wait(60)
            return [Result(reward=1.0) for _ in records]
        finally:
            with self._lock:
                self.running -= 1


def _clean_answer_while_held(concurrent: bool) -> tuple[bool, _GatedSource]:
    """Whether a clean request was answered while another request's batch was held (HANG_S to answer)."""
    source = _GatedSource(concurrent)
    with ScoringStream(Scorer(source, workers=1)) as stream:
        held = stream.submit([Record(completion="hold")])
        time.sleep(0.2)  # the held batch starts first
        clean = stream.submit([Record(completion="ok")] * 3)
        with contextlib.suppress(TimeoutError):
            clean.result(HANG_S)
        answered = clean.done()
        source.release.set()
        assert [r.reward for r in held.result(30)] == [1.0]
        assert [r.reward for r in clean.result(30)] == [1.0] * 3
    return answered, source


def test_a_held_batch_holds_back_only_its_own_request():
    answered, source = _clean_answer_while_held(concurrent=True)
    assert answered and source.most_at_once == 2


def test_a_source_that_takes_one_batch_at_a_time_gets_one():
    # the control: the same rows with a source that is not safe from several threads wait for the held one
    answered, source = _clean_answer_while_held(concurrent=False)
    assert not answered and source.most_at_once == 1
