"""Micro-batching: concurrent requests share one warm :class:`~rewardkit.scoring.Scorer` pool.

The Scorer is not thread-safe (one pool, one run at a time), and the server answers many requests at once.
One thread owns the Scorer. Requests queue their records; each turn, the thread takes everything queued
(up to ``max_batch_rows``) and scores it as ONE call, so eight concurrent one-row requests cost one trip to
the workers, not eight. Results stream back in order, and a request is answered as soon as the stream has
passed its last row, not when the whole batch is done.

The engine's per-row timeout holds inside a batch: a row that runs past it is killed and becomes an error
row (``timeout``) while the other workers go on with the other rows. A batch is a barrier, though: records
that arrive while one runs wait for it to end, so a hostile row delays requests that arrive during its
batch by at most the timeout.
"""

from __future__ import annotations

import itertools
import threading
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from rewardkit.types import Record, Result


class QueueFull(Exception):
    """More rows are waiting than the server keeps (the client should retry later: 503)."""


class Closed(Exception):
    """The server is shutting down and takes no new rows (503)."""


@dataclass
class _Job:
    records: Sequence[Record]
    future: Future


class MicroBatcher:
    """Scores records from many threads or event loops through one ``scorer`` (an object with
    ``iter_scores(records)`` and ``close()``, as :class:`~rewardkit.scoring.Scorer`).

    Args:
        scorer: The warm pool; this object owns it from now on (``close`` closes it).
        max_batch_rows: Most rows in one call of the pool (a request is never split: a larger one goes alone).
        max_queued_rows: Most rows waiting; a request beyond it is refused with :class:`QueueFull`.
        on_batch: Called with the number of rows of each call (metrics).
    """

    def __init__(
        self,
        scorer: Any,
        *,
        max_batch_rows: int = 4096,
        max_queued_rows: int = 65536,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self.scorer = scorer
        self.max_batch_rows = max(1, max_batch_rows)
        self.max_queued_rows = max(1, max_queued_rows)
        self.on_batch = on_batch
        self.queued_rows = 0
        self._queue: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def running(self) -> bool:
        """Started and not closed."""
        return self._thread is not None and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Starts the pool's thread (``submit`` starts it too, when nothing did)."""
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._loop, name="rewardkit-serve-pool", daemon=True)
                self._thread.start()

    def submit(self, records: Sequence[Record]) -> Future:
        """A future of one :class:`Result` per record, in order (it never fails: a failure is error rows).

        Raises:
            QueueFull: too many rows are waiting. Closed: the batcher is closed.
        """
        future: Future = Future()
        if not records:
            future.set_result([])
            return future
        self.start()
        with self._cond:
            if self._closed:
                raise Closed("the server is shutting down")
            if self._queue and self.queued_rows + len(records) > self.max_queued_rows:
                raise QueueFull(f"{self.queued_rows} rows are waiting; retry later")
            self._queue.append(_Job(records, future))
            self.queued_rows += len(records)
            self._cond.notify()
        return future

    def close(self) -> None:
        """Scores what is queued, stops the thread and closes the pool."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
        self.scorer.close()

    # -- the pool's thread -----------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            jobs = self._take()
            if jobs is None:
                return
            if jobs:
                self._run(jobs)

    def _take(self) -> list[_Job] | None:
        """The next batch: queued requests up to ``max_batch_rows`` (``None``: closed and drained)."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None
            jobs: list[_Job] = []
            rows = 0
            while self._queue and (not jobs or rows + len(self._queue[0].records) <= self.max_batch_rows):
                job = self._queue.popleft()
                self.queued_rows -= len(job.records)
                # A request whose client went away (its future cancelled) is not scored at all.
                if job.future.set_running_or_notify_cancel():
                    jobs.append(job)
                    rows += len(job.records)
            return jobs

    def _run(self, jobs: list[_Job]) -> None:
        """Scores the jobs' records as one call, answering each job once the stream has passed its rows."""
        records = [record for job in jobs for record in job.records]
        ends = list(itertools.accumulate(len(job.records) for job in jobs))
        if self.on_batch is not None:
            self.on_batch(len(records))
        results: list[Result] = []
        done = 0  # jobs answered
        try:
            for result in self.scorer.iter_scores(records):
                results.append(result)
                while done < len(jobs) and len(results) >= ends[done]:
                    _answer(jobs[done], results[ends[done] - len(jobs[done].records) : ends[done]])
                    done += 1
        except Exception as exc:  # the engine itself failed: the rows not yet answered are error rows
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            for job in jobs[done:]:
                _answer(job, [Result.failure(f"scoring failed: {last}") for _ in job.records])
            return
        for job in jobs[done:]:  # the engine returned fewer results than rows (never expected)
            _answer(job, [Result.failure("scoring failed: no result") for _ in job.records])


def _answer(job: _Job, results: list[Result]) -> None:
    if not job.future.done():
        job.future.set_result(results)
