"""One warm pool: a reward source behind a warm :class:`~rewardlab.scoring.Scorer`, for whatever holds one for
long (an RL run, a trainer's reward function, a reward server).

A :class:`WarmPool` builds its Scorer on first use, or when :meth:`~WarmPool.build` is called (a server
builds at start, so that a bad source fails before it serves). A source that failed to build is tried again
after ``retry_s``; its rows are error rows meanwhile. :meth:`~WarmPool.score_batch` never raises: a failure of
the engine itself makes the rows error rows, and the next call builds a fresh pool.

With ``stream=True`` the Scorer sits behind a :class:`~rewardlab.scoring.ScoringStream`: callers in many
threads share its workers, each answered as soon as its own rows are done, and a caller interrupted while it
waits (a SIGALRM timeout, Ctrl-C) aborts the stream, so that its rows do not keep the workers busy. Without a
stream, calls take turns on the pool.

A pool inherited through ``fork`` forgets what it held (the workers are the parent's, a stream's thread does
not survive a fork): the child builds its own on first use.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from rewardlab.scoring.engine import Scorer
from rewardlab.scoring.stream import Closed, QueueFull, ScoringStream
from rewardlab.types import Record, Result
from rewardlab.verifiers.sources import build_source, source_kind

log = logging.getLogger(__name__)

BUILD_RETRY_S = 60.0
"""Seconds before a source that failed to build is tried again (its rows are error rows meanwhile)."""

CHUNK_SIZE = 64
"""Records in a worker's first chunk: a caller's batch arrives all at once, and fewer messages to the workers
is what matters (the engine still reports, and times out, each record apart)."""


class WarmPool:
    """A reward source (``score_batch``) whose records go through one warm Scorer; see the module docstring.

    Args:
        name: The source's name (``math``, ``http:URL``, ``rm:PATH``, ...): what is built, and the source's
            ``name`` (a label only when ``build`` is given).
        config: The source's settings.
        workers: Worker processes of the pool.
        timeout: Seconds one record may take in a worker before it is an error row (``timeout``).
        run: Objects of an RL run that run-only kinds take (see ``build_source``; ``{}`` when there are none):
            with it, run-only names (``rm:PATH``, ``py:module:fn``...) are built too; without it, names are
            taken as ``rewardlab score`` takes them.
        build: Builds the source object instead of ``name`` (no arguments).
        stream: Concurrent callers share the workers through a :class:`ScoringStream`.
        max_queued_rows, on_chunk: The stream's options (see :class:`ScoringStream`).
        spare_workers: The Scorer's ``spare_workers`` (``None``: its default, on).
        retry_s: Seconds before a failed build is tried again by a call.
    """

    def __init__(
        self,
        name: str,
        config: Mapping[str, Any] | None = None,
        *,
        workers: int = 1,
        timeout: float = 10.0,
        run: Mapping[str, Any] | None = None,
        build: Callable[[], Any] | None = None,
        stream: bool = False,
        max_queued_rows: int | None = None,
        on_chunk: Callable[[int], None] | None = None,
        spare_workers: int | None = None,
        retry_s: float = BUILD_RETRY_S,
    ) -> None:
        self.name = name
        self.config = dict(config or {})
        self.run = run
        self.retry_s = retry_s
        self.build_error: str | None = None
        """Why the last build failed (``None``: it did not)."""
        self.closed = False
        self.stream: ScoringStream | None = None
        """The stream in front of the Scorer (``stream=True``, once built)."""
        self._builder = build
        self._options = {"workers": workers, "timeout": timeout, "spare_workers": spare_workers}
        self._streaming = {"max_queued_rows": max_queued_rows, "on_chunk": on_chunk} if stream else None
        self._scorer: Scorer | None = None  # without a stream
        self._built_at = -math.inf  # monotonic time of the last build
        self._lock = threading.Lock()
        _LIVE.add(self)

    # -- state --------------------------------------------------------------------------------------------
    @property
    def scorer(self) -> Scorer | None:
        """The warm Scorer (``None`` before the first build, after a failed one and after :meth:`discard`)."""
        return self.stream.scorer if self.stream is not None else self._scorer

    @property
    def pool_size(self) -> int:
        """Worker processes running now."""
        scorer = self.scorer
        return scorer.pool_size if scorer is not None else 0

    @property
    def queued_rows(self) -> int:
        """Rows submitted to the stream and not yet answered."""
        return self.stream.queued_rows if self.stream is not None else 0

    @property
    def running(self) -> bool:
        """Whether the stream's thread runs (never without a stream)."""
        return self.stream is not None and self.stream.running

    # -- building -----------------------------------------------------------------------------------------
    def build(self) -> Scorer:
        """The warm Scorer, built now if there is none (without waiting ``retry_s`` after a failed build).

        Raises:
            What building the source raises (UnknownNameError, ValueError, TypeError...); Closed: the pool
            is closed.
        """
        with self._lock:
            self._check_open()
            if self.scorer is None:
                self._build()
            return self.scorer  # type: ignore[return-value]

    def start(self) -> None:
        """Starts the stream's thread now (a first submit starts it otherwise)."""
        stream = self.stream
        if stream is not None:
            stream.start()

    def _check_open(self) -> None:
        if self.closed:
            raise Closed("the reward pool is closed")

    def _build(self) -> None:
        """Builds the Scorer (and its stream); under the lock."""
        self._built_at = time.monotonic()
        try:
            scorer = self._new_scorer()
            stream = None if self._streaming is None else ScoringStream(scorer, **self._streaming)
        except Exception as exc:
            self.build_error = f"source error: {self.name}: {type(exc).__name__}: {exc}"
            raise
        self.build_error = None
        self._scorer, self.stream = (scorer, None) if stream is None else (None, stream)

    def _new_scorer(self) -> Scorer:
        options = {**self._options, "chunk_size": CHUNK_SIZE}
        if self._builder is not None:
            return Scorer(self._builder(), **options)
        if self.run is not None and source_kind(self.name).run_only:
            # The engine resolves only names a file run may give: a run-only source goes in built.
            return Scorer(build_source(self.name, self.config, run=self.run), **options)
        return Scorer(self.name, config=self.config or None, **options)

    def _warm(self) -> None:
        """Builds when nothing is built and no failed build is recent; under the lock. A failure is logged and
        kept in :attr:`build_error`."""
        recent = time.monotonic() - self._built_at <= self.retry_s
        if self.scorer is not None or (self.build_error is not None and recent):
            return
        try:
            self._build()
        except Exception:
            log.warning("rewardlab: cannot build reward source: %s", self.build_error)

    # -- scoring ------------------------------------------------------------------------------------------
    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """One Result per record, in order; never raises (failures are error rows)."""
        if self._streaming is None:
            return self._score_in_turn(records)
        try:
            stream, future = self._submit(records)
        except (QueueFull, Closed) as exc:
            return _failures(len(records), f"scoring failed: {exc}")
        return self._wait(stream, future, len(records))

    def submit(self, records: Sequence[Record]) -> Future:
        """A future of :meth:`score_batch`'s answer (answered at once without a stream).

        Raises:
            QueueFull: too many rows wait in the stream. Closed: the pool is closed.
        """
        if self._streaming is None:
            self._check_open()
            return _answered(self._score_in_turn(records))
        return self._submit(records)[1]

    def _score_in_turn(self, records: Sequence[Record]) -> list[Result]:
        with self._lock:
            if self.closed:
                return _failures(len(records), "scoring failed: the reward pool is closed")
            self._warm()
            scorer = self._scorer
            if scorer is None:
                return _failures(len(records), self.build_error or "source error: not built")
            try:
                return scorer.score(records)
            except Exception as exc:  # the engine itself failed: every record is an error row; rebuild next
                self._scorer = None
                _stop(scorer)
                return _failures(len(records), f"scoring failed: {type(exc).__name__}: {exc}")

    def _submit(self, records: Sequence[Record]) -> tuple[ScoringStream | None, Future]:
        for _ in range(2):  # a second time when another thread closed the stream just now
            stream = self._live_stream()
            if stream is None:
                return None, _answered(_failures(len(records), self.build_error or "source error: not built"))
            try:
                return stream, stream.submit(records)
            except Closed:
                self._discard(stream)
        return None, _answered(_failures(len(records), "scoring failed: the reward pool closed"))

    def _live_stream(self) -> ScoringStream | None:
        """The stream to submit to: built now if there is none, a fresh one after an engine failure."""
        with self._lock:
            self._check_open()
            failed = self.stream if self.stream is not None and self.stream.failures else None
        if failed is not None:  # its failed rows are error rows; it answers the rows it holds, then stops
            self._discard(failed)
        with self._lock:
            self._check_open()
            self._warm()
            return self.stream

    def _wait(self, stream: ScoringStream | None, future: Future, rows: int) -> list[Result]:
        try:
            return future.result()
        except Exception as exc:  # interrupted while waiting: a caller's SIGALRM timeout (TimeoutError)
            if stream is not None:
                self._discard(stream, abort=True)
            return _failures(rows, f"scoring failed: {type(exc).__name__}: {exc}")
        except BaseException:  # Ctrl-C
            if stream is not None:
                self._discard(stream, abort=True)
            raise

    # -- stopping -----------------------------------------------------------------------------------------
    def _discard(self, stream: ScoringStream, *, abort: bool = False) -> None:
        with self._lock:
            if self.stream is stream:
                self.stream = None
        _stop(stream, abort=abort)

    def discard(self) -> None:
        """Stops the workers (a stream first answers the rows it holds); the next call builds a fresh pool."""
        with self._lock:
            held = self.stream if self.stream is not None else self._scorer
            self.stream, self._scorer = None, None
        if held is not None:
            _stop(held)

    def close(self) -> None:
        """Stops the workers for good: later calls get error rows, :meth:`submit` and :meth:`build` raise
        :class:`Closed`."""
        with self._lock:
            self.closed = True
        self.discard()

    def _forget(self) -> None:
        """Drops what a forked child inherited, without stopping it: it is the parent's."""
        self.stream, self._scorer = None, None
        self._lock = threading.Lock()  # another thread may have held it at the fork


def _stop(held: Scorer | ScoringStream, *, abort: bool = False) -> None:
    try:
        held.abort() if abort and isinstance(held, ScoringStream) else held.close()
    except Exception:
        log.debug("rewardlab: closing a reward pool failed", exc_info=True)


def _failures(rows: int, error: str) -> list[Result]:
    return [Result.failure(error) for _ in range(rows)]


def _answered(results: list[Result]) -> Future:
    future: Future = Future()
    future.set_result(results)
    return future


_LIVE: weakref.WeakSet[WarmPool] = weakref.WeakSet()


def _forget_inherited() -> None:
    for pool in list(_LIVE):
        with contextlib.suppress(Exception):
            pool._forget()


os.register_at_fork(after_in_child=_forget_inherited)
