"""Streaming: many threads share one warm :class:`~rewardlab.scoring.Scorer` without waiting for each other.

The Scorer is not thread-safe (one pool, one run at a time), while a server answers many requests at once and
verl calls its reward function from several threads. A :class:`ScoringStream` owns the Scorer and runs ONE
long-lived engine run (``Scorer.iter_unordered``) in its own thread over a feed of submitted rows:

- a row submitted while the run goes on enters it at once: the feed yields ``IDLE`` when it is momentarily
  empty (the run waits instead of ending) and a :class:`~rewardlab.scoring.workers.Wakeup` wakes the engine's
  wait when a row arrives, so a free worker takes it within milliseconds, whatever the other workers do;
- rows come out as each is done, not in input order, and rows of different requests never share a chunk
  of work, so a request never waits behind another request's slow (hostile) row, only for its own rows (and
  for free workers: dispatch is oldest row first);
- a request's future resolves when all its rows are done, with one Result per row in the request's order.

The engine's per-row timeout, worker replacement, chunk sizing and per-row ``verifier`` routing work as in
``rewardlab score``, and rewards are the same bit for bit. In-process sources (reward models) get the rows
that arrived together as one ``score_batch``. ``engine="ray"`` does not stream.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from rewardlab.scoring.engine import IDLE, Scorer
from rewardlab.scoring.jobs import RecordJob, as_record
from rewardlab.scoring.sources import last_line
from rewardlab.scoring.workers import Wakeup
from rewardlab.types import Record, Result

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """More rows are waiting than the stream keeps (the caller should retry later; a server answers 503)."""


class Closed(Exception):
    """The stream is closed (or shutting down) and takes no new rows."""


class _Aborted(Exception):
    """Raised by the feed inside the engine's run: the run ends at once, its busy workers killed."""


@dataclass(eq=False)
class _Request:
    records: list[Any]
    future: Future
    results: list[Result | None] = field(default_factory=list)
    left: int = 0

    def __post_init__(self) -> None:
        self.results = [None] * len(self.records)
        self.left = len(self.records)


class ScoringStream:
    """Scores records submitted from many threads through one ``scorer`` (see the module docstring).

    Args:
        scorer: The warm pool (``engine="local"``); the stream owns it from now on (``close`` closes it).
        max_queued_rows: Most rows submitted and not yet answered; a request beyond it is refused with
            :class:`QueueFull` (``None``: no limit). A request larger than the limit is taken when nothing
            else waits.
        on_chunk: Called (in the stream's thread) with the rows of every chunk sent to a worker and of every
            in-process batch (metrics).

    Raises:
        ValueError: a Scorer with ``engine="ray"``.
    """

    def __init__(
        self,
        scorer: Scorer,
        *,
        max_queued_rows: int | None = None,
        on_chunk: Callable[[int], None] | None = None,
    ) -> None:
        if scorer.engine != "local":
            raise ValueError(f"streaming needs engine='local', not {scorer.engine!r}")
        self.scorer = scorer
        self.max_queued_rows = None if max_queued_rows is None else max(1, max_queued_rows)
        self.on_chunk = on_chunk
        self.queued_rows = 0
        """Rows submitted and not yet answered (waiting for a worker or being scored)."""
        self.failures = 0
        """Engine runs that failed (their rows became error rows; the next rows start a fresh run)."""
        self._lock = threading.Lock()
        self._queue: deque[_Request] = deque()  # requests none of whose rows the engine has read
        self._current: _Request | None = None  # the request being fed, from row ``_position``
        self._position = 0
        self._fed: dict[int, tuple[_Request, int]] = {}  # the run's row index -> (request, position)
        self._next_index = 0
        self._wakeup = Wakeup()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._aborted = False
        self._pid = os.getpid()

    @property
    def running(self) -> bool:
        """Started and not closed."""
        return self._thread is not None and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Starts the stream's thread (``submit`` starts it too, when nothing did)."""
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._loop, name="rewardlab-scoring-stream", daemon=True
                )
                self._thread.start()

    def submit(self, records: Sequence[Record | dict]) -> Future:
        """A future of one :class:`Result` per record, in order; it never fails (a failure is error rows).
        A record without an id gets its position in ``records``, as in ``Scorer.score``.

        Raises:
            QueueFull: too many rows are waiting. Closed: the stream is closed (or was built in another
            process: a forked copy has no thread).
        """
        if os.getpid() != self._pid:
            raise Closed("this stream belongs to another process (it was inherited through fork)")
        request = _Request([_numbered(item, i) for i, item in enumerate(records)], Future())
        if not request.records:
            request.future.set_result([])
        self.start()
        with self._lock:
            if self._closed:
                raise Closed("the stream is closed")
            if not request.records:
                return request.future
            waiting = self.queued_rows
            if self.max_queued_rows is not None and waiting and waiting + request.left > self.max_queued_rows:
                raise QueueFull(f"{waiting} rows are waiting; retry later")
            self._queue.append(request)
            self.queued_rows += request.left
            self._wakeup.set()  # under the lock: close() closes the pipe under it
        return request.future

    def close(self) -> None:
        """Answers every request submitted so far, then stops the thread and closes the scorer."""
        self._stop(abort=False)

    def abort(self) -> None:
        """Stops now: rows not yet answered become error rows (``scoring failed: the scoring stream was
        aborted``), workers busy with them are killed, and the scorer is closed (a caller that gave up on its
        rows, e.g. interrupted by its own timeout, must not leave them holding the workers)."""
        self._stop(abort=True)

    def _stop(self, *, abort: bool) -> None:
        with self._lock:
            self._closed = True
            self._aborted = self._aborted or abort
            self._wakeup.set()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self.scorer.close()
        with self._lock:
            self._wakeup.close()

    def __enter__(self) -> ScoringStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the stream's thread -------------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while self._run_once():
                pass
        finally:  # the thread ends: nothing submitted may wait forever
            with self._lock:
                self._closed = True
                why = "was aborted" if self._aborted else "stopped"
            self._fail_outstanding(f"scoring failed: the scoring stream {why}")

    def _run_once(self) -> bool:
        """One engine run over the feed, until the stream is closed and drained (``False``) or the engine
        fails (``True``: the rows it had become error rows, and a fresh run takes the next ones)."""
        with self._lock:
            self._next_index = 0
        try:
            outputs = self.scorer.iter_unordered(
                self._feed(),
                RecordJob(),
                wakeup=self._wakeup,
                on_chunk=self.on_chunk,
                group_of=self._request_of,
            )
            for index, result in outputs:
                self._answer(index, result)
        except _Aborted:
            return False
        except Exception as exc:
            last = last_line(exc)
            log.warning("rewardlab: the scoring engine failed: %s", last)
            self.failures += 1
            had_rows = bool(self._fed)
            self._fail_fed(f"scoring failed: {last}")
            return had_rows  # a run that failed before taking any row would fail again: stop
        return False

    def _request_of(self, index: int) -> int:
        # The engine's thread alone changes ``_fed`` (this is called from it): no lock.
        return id(self._fed[index][0])

    def _feed(self) -> Iterator[Any]:
        """The rows of the submitted requests, oldest first; ``IDLE`` while none waits; ends once closed and
        empty."""
        while True:
            with self._lock:
                if self._aborted:
                    raise _Aborted
                row = self._next_row()
            if row is None:
                return
            yield row

    def _next_row(self) -> Any:
        while self._current is None:
            if not self._queue:
                return None if self._closed else IDLE
            request = self._queue.popleft()
            # A request whose caller went away (its future cancelled) is not scored at all.
            if request.future.set_running_or_notify_cancel():
                self._current, self._position = request, 0
            else:
                self.queued_rows -= request.left
        request, position = self._current, self._position
        self._position += 1
        if self._position == len(request.records):
            self._current = None
        self._fed[self._next_index] = (request, position)
        self._next_index += 1
        return request.records[position]

    def _answer(self, index: int, result: Result) -> None:
        with self._lock:
            request, position = self._fed.pop(index)
            request.results[position] = result
            request.left -= 1
            self.queued_rows -= 1
            finished = request.left == 0
        if finished:
            request.future.set_result(request.results)

    def _fail_fed(self, error: str) -> None:
        """Answers the rows the engine took and did not answer with ``error``."""
        with self._lock:
            indices = list(self._fed)
        for index in indices:
            self._answer(index, Result.failure(error))

    def _fail_outstanding(self, error: str) -> None:
        self._fail_fed(error)
        with self._lock:
            requests = list(self._queue)
            self._queue.clear()
            current, position = self._current, self._position
            self._current = None
        if current is not None:  # rows of it the engine never took
            for i in range(position, len(current.records)):
                current.results[i] = Result.failure(error)
            self._settle(current, len(current.records) - position)
        for request in requests:
            if request.future.set_running_or_notify_cancel():
                request.results = [Result.failure(error) for _ in request.records]
                self._settle(request, request.left)
            else:
                self._settle(request, request.left, answer=False)

    def _settle(self, request: _Request, rows: int, *, answer: bool = True) -> None:
        with self._lock:
            request.left -= rows
            self.queued_rows -= rows
            finished = request.left == 0
        if finished and answer:
            request.future.set_result(request.results)


def _numbered(item: Any, position: int) -> Any:
    """``item`` as a Record whose missing id is its position in its request; an item that is not a record
    stays as it is (the engine makes it an error row)."""
    try:
        return as_record(item, position)
    except (TypeError, ValueError):
        return item
