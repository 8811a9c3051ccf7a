"""The scoring engine: records through reward sources in worker processes, with a per-item timeout that fires.

This module schedules: :class:`Scorer` reads items, routes them, sends chunks to workers, polls, times out,
replaces workers and orders the outputs. What it schedules lives beside it: sources in
:mod:`~rewardlab.scoring.sources`, jobs in :mod:`~rewardlab.scoring.jobs`, the worker processes in
:mod:`~rewardlab.scoring.workers`.

Design:

- A *source* is a verifier name, a :class:`~rewardlab.verifiers.Verifier`, or any object with
  ``score_batch(records)`` and ``name``. Rows choose their own verifier through ``Record.verifier``; the
  source given to the engine is the default.
- A *job* says what an item is and what comes back: :class:`~rewardlab.scoring.jobs.RecordJob` (Records in,
  Results out: the API and RL runs) or ``scoring.io.RowJob`` (raw JSONL lines in, finished output lines out:
  ``rewardlab score``, so that parsing and serialising happen in the workers, not in the one process that
  reads and writes).
- Sources with ``runs_in_process = False`` (rule verifiers: math, SQL, IFEval...) are scored in a pool of
  worker processes the engine manages itself. Items travel in chunks sized to about ``CHUNK_SECONDS`` of
  work, and results come back in batches, so a fast verifier costs two messages per chunk, not per row. The
  per-item timeout needs no message: each worker writes the position and start time of its current item to
  shared memory, and when that item has run longer than ``timeout`` the parent kills the worker
  (``SIGKILL``: this stops C-level loops in sympy or bignum arithmetic that ``signal.alarm`` cannot
  interrupt). The item gets ``error="timeout"``, a fresh worker replaces the old one, and the chunk's other
  unreported items are queued again. A worker that dies (segfault, OOM) costs one item
  (``error="worker crashed: ..."``), never the run. Workers die with their parent, even on SIGKILL.
- Sources with ``runs_in_process = True`` (reward models on a GPU, a code verifier with its own sandbox) get
  ``score_batch`` called in this process with batches of ``batch_size``: no pool, their own timeouts.
- Results come back in input order (a bounded reorder buffer: at most ``window`` items are read ahead of
  the oldest unfinished one), so a file can be written and flushed row by row while the pool runs.
- A *feed* (``rewardlab.scoring.stream``) runs one long-lived run over rows that other threads submit: the
  feed yields :data:`IDLE` while it is momentarily empty (the run waits instead of ending), a
  :class:`~rewardlab.scoring.workers.Wakeup` handle wakes the engine's wait when a row arrives, and outputs
  come back unordered, as ``(index, output)`` pairs, each as soon as its row is done.

Workers are forked (where the platform allows): a worker, or the replacement of a killed one, starts in
milliseconds with the parent's sources already built and warmed.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from multiprocessing.connection import wait
from typing import Any

from rewardlab.progress import track
from rewardlab.scoring import ray_engine
from rewardlab.scoring.batches import BatchThreads
from rewardlab.scoring.chunks import ChunkSizer
from rewardlab.scoring.jobs import Done, Job, RecordJob
from rewardlab.scoring.sources import Source, SourceTable, build_spec, default_source
from rewardlab.scoring.workers import Wakeup, Worker
from rewardlab.types import Record, Result

CHUNK_SECONDS = 0.05
"""Work per chunk once the engine knows how long a source's items take: long enough that the two messages
per chunk cost little, short enough that workers finish together and output keeps flowing."""

MAX_CHUNK = 512
"""Most items in one chunk."""


STRAGGLER_S = 0.05
"""An item that has used this much CPU time is a straggler: its worker becomes a spare and a fresh worker
takes its place (rule verifiers score a typical row in milliseconds)."""

WALL_TIMEOUT_FACTOR = 10.0
"""The default wall-clock cap of an item, in multiples of its CPU-time ``timeout``: far above it, so that an
item waiting for its CPU share (a paused straggler, a loaded machine) is not cut short; it only stops an item
that waits without using CPU."""

SPARES_PER_WORKER = 32
"""Default spare workers per worker: how many stragglers may hold workers of their own at once. A hostile
row holds its spare until it has used its CPU timeout, at a low priority, so a flood needs many: 64
closed-loop clients can each wait on a hostile row at once (bench/serve.py), which 16 spares would not
cover; 64 and 128 did equally well there."""


class _Idle:
    def __repr__(self) -> str:
        return "IDLE"


IDLE: Any = _Idle()
"""What a feed yields when it has no item right now but more may come: the run waits (on its
:class:`Wakeup`) instead of ending; in-process partial batches are scored first."""


# ----------------------------------------------------------------------------------------------------------
# The scorer
# ----------------------------------------------------------------------------------------------------------
class Scorer:
    """Scores records with a source, keeping a warm worker pool between calls (one per RL run).

    Args:
        source: The default reward source: a verifier name, a Verifier, or any object with ``score_batch``
            and ``name``. A record whose ``verifier`` field names another verifier is scored by that one
            (built with default settings, once).
        workers: Worker processes for pooled sources (``runs_in_process = False``). ``0`` scores in this
            process with no timeout (debugging).
        timeout: CPU seconds one record may use in a worker (the worker's own CPU clock) before it is killed
            and gets ``error="timeout"``. CPU time, not wall time: a row's verdict does not depend on how
            loaded the machine is or how long it waited for its share (where the platform cannot read a
            process's CPU clock, wall time).
        wall_timeout: Wall-clock seconds a record may take in any case (``None``: ``WALL_TIMEOUT_FACTOR`` x
            ``timeout``); it stops an item that waits without using CPU.
        engine: ``"local"`` (this machine's processes) or ``"ray"`` (Ray actors; needs ``pip install ray``).
        config: Settings for the default source when it is given by name (``get_verifier(name, **config)``).
        chunk_size: Records in a worker's first chunk; later chunks are sized to about ``CHUNK_SECONDS`` of
            work from the time items took so far (fast items travel in large chunks, slow ones alone).
        batch_size: Records per ``score_batch`` call for in-process sources.
        window: Records read ahead of the oldest unfinished one (bounds the reorder buffer; by default at
            least ``batch_size``, so that in-process batches fill).
        mp_context: multiprocessing start method for workers (default ``fork`` where available, else
            ``spawn``; ``forkserver`` preloads the source's module in the server).
        ray_address: Ray cluster to join with ``engine="ray"`` (``None``: the one already initialised in this
            process, else a local one with ``workers`` CPUs).
        spare_workers: How many stragglers (items that used more than :data:`STRAGGLER_S` of CPU time) may
            hold workers beyond ``workers`` (``None``: ``SPARES_PER_WORKER`` x ``workers``; 0: the plain
            pool). A straggler keeps its worker, which becomes a spare, and a fresh worker takes its place at
            once; the rest of its chunk goes back to the queue. Stragglers run at a low priority, least CPU
            first, ``workers`` at a time, the others paused: a hostile row costs its CPU ``timeout`` in spare
            time, not a worker that other rows need, and a legitimate slow row gets its CPU before the hostile
            ones that used more. Since the timeout counts CPU time and the wall cap does not count the pauses,
            waiting for a turn costs a row nothing: the rewards equal the plain pool's.

    Use as a context manager, or call :meth:`close`::

        with Scorer("math", workers=2, timeout=5) as scorer:
            results = scorer.score(records)
    """

    def __init__(
        self,
        source: Any,
        *,
        workers: int = 1,
        timeout: float = 10.0,
        engine: str = "local",
        config: dict[str, Any] | None = None,
        chunk_size: int = 16,
        batch_size: int = 256,
        window: int | None = None,
        mp_context: str | None = None,
        ray_address: str | None = None,
        spare_workers: int | None = None,
        wall_timeout: float | None = None,
    ) -> None:
        if spare_workers is None:
            spare_workers = SPARES_PER_WORKER * workers
        if wall_timeout is None and timeout is not None:
            wall_timeout = WALL_TIMEOUT_FACTOR * timeout
        _check_settings(engine, workers, spare_workers, timeout, wall_timeout)
        self.workers = workers
        self.spare_workers = spare_workers if workers else 0
        self.timeout = float(timeout)
        self.wall_timeout = max(float(wall_timeout), self.timeout)
        self.engine = engine
        self.ray_address = ray_address
        self.chunk_size = max(1, chunk_size)
        self.batch_size = max(1, batch_size)
        self.window = window or max(4096, 4 * max(1, workers) * MAX_CHUNK, self.batch_size)
        self.default_name, self.default = default_source(source, config)
        self._ctx = _mp_context(mp_context, type(self.default.obj).__module__)
        self._sources = SourceTable(self.default, self.default_name)
        self._pool: list[Worker] = []
        self._dying: list[Worker] = []  # killed, not yet exited
        self._sizers: dict[str, ChunkSizer] = {}  # by source key
        self._warmed = False
        self._ray: Any = None  # the Ray actors (engine="ray")
        self.ray_nodes: list[str] = []  # the Ray node of each actor
        self._batches = BatchThreads(self.batch_size)  # in-process sources' batches, off this thread
        self._closed = False
        self._owner_pid = os.getpid()

    # -- public API ---------------------------------------------------------------------------------------
    def score(self, records: Iterable[Record | dict]) -> list[Result]:
        """One result per record, in order."""
        return list(self.iter_scores(records))

    def iter_scores(self, records: Iterable[Record | dict]) -> Iterator[Result]:
        """Results in input order, yielded as soon as every earlier record is done (streams large inputs)."""
        return self.iter_outputs(records, RecordJob())

    @classmethod
    def warm_single_worker(cls, spec: tuple, timeout: float) -> Scorer:
        """A one-worker scorer of the source ``spec`` describes, its worker forked now (a Ray actor's)."""
        scorer = cls(build_spec(spec), workers=1, timeout=timeout, chunk_size=16)
        scorer._ensure_pool()
        return scorer

    def iter_outputs(self, items: Iterable[Any], job: Job, first_index: int = 0) -> Iterator[Any]:
        """``job``'s outputs for ``items``, in input order (``iter_scores`` is this with :class:`RecordJob`).

        Items are numbered from ``first_index`` (a resumed file's rows keep their positions)."""
        if self._closed:
            raise RuntimeError("Scorer is closed")
        if self.engine == "ray":
            return ray_engine.iter_outputs_ray(self, items, job, first_index)
        return self._iter_local(items, job, first_index)

    @property
    def pool_size(self) -> int:
        """Worker processes running now (``workers``, plus spares while stragglers hold workers)."""
        return len(self._pool)

    def close(self) -> None:
        """Stops the worker processes. In a process forked from the one that built this scorer it only
        forgets them: they are the parent's, and stopping them would stop the parent's scoring."""
        if os.getpid() != self._owner_pid:
            self._pool, self._ray, self._closed = [], None, True
            return
        for worker in self._pool:
            worker.stop()
        for worker in self._dying:
            worker.kill()
        self._pool, self._dying = [], []
        if self._ray is not None:
            ray_engine.close_actors(self)
        self._batches.close()
        self._closed = True

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    # -- local engine -------------------------------------------------------------------------------------
    def iter_unordered(
        self,
        feed: Iterable[Any],
        job: Job,
        *,
        wakeup: Wakeup | None = None,
        on_chunk: Callable[[int], None] | None = None,
        group_of: Callable[[int], Any] | None = None,
    ) -> Iterator[tuple[int, Any]]:
        """``(index, output)`` for the items of ``feed`` (numbered from 0 in the order read), each as soon as
        its item is done: the engine of :class:`~rewardlab.scoring.stream.ScoringStream`.

        ``feed`` may yield :data:`IDLE` when it has nothing right now: the run then waits for a worker, a
        deadline or ``wakeup`` (set it after feeding an item), and ends only when ``feed`` does.
        ``on_chunk(rows)`` is called for every chunk sent to a worker and every in-process batch.
        ``group_of(index)``: items of different groups (a stream's requests) never share a chunk, so that a
        slow item holds back only its own group's items, which wait for it anyway.

        Raises:
            ValueError: with ``engine="ray"`` (streaming runs on the local engine only).
        """
        if self._closed:
            raise RuntimeError("Scorer is closed")
        if self.engine == "ray":
            raise ValueError("streaming (iter_unordered, ScoringStream) needs engine='local'")
        run = _Run(iter(feed), job, 0, ordered=False, wakeup=wakeup, on_chunk=on_chunk, group_of=group_of)
        return self._iter_run(run)

    def _iter_local(self, items: Iterable[Any], job: Job, first_index: int = 0) -> Iterator[Any]:
        yield from self._iter_run(_Run(iter(items), job, first_index))

    def _iter_run(self, run: _Run) -> Iterator[Any]:
        try:
            while True:
                self._read(run)
                if run.ordered:
                    while run.next_out in run.done:
                        yield run.done.pop(run.next_out)
                        run.next_out += 1
                else:  # next_out counts what was yielded, so the window and the end test hold as ordered
                    for index in list(run.done):
                        yield index, run.done.pop(index)
                        run.next_out += 1
                if run.exhausted and run.next_out == run.n_read:
                    return
                if any(run.pooled.values()) or any(w.busy for w in self._pool) or run.batches:
                    self._dispatch(run)
                    self._poll(run)
                elif run.idle:
                    self._poll(run)  # nothing to do: sleep until a row is fed (or a deadline, a dead worker)
        finally:
            # An abandoned generator (exception, break, Ctrl-C) leaves workers mid-chunk: replace them.
            if any(w.busy for w in self._pool):
                for worker in self._pool:
                    worker.kill()
                self._pool = []
            for future in run.batches:  # in-process batches not started yet never start
                future.cancel()
            run.batch_done.close()

    def _read(self, run: _Run) -> None:
        """Reads items up to the window, routes them, and scores the in-process ones when a batch is full."""
        while not run.exhausted and run.n_read - run.next_out < self.window:
            try:
                item = next(run.items)
            except StopIteration:
                run.exhausted = True
                break
            run.idle = item is IDLE
            if run.idle:
                break
            index = run.n_read
            run.n_read += 1
            routed = run.job.prepare(item, index)
            if isinstance(routed, Done):
                run.done[index] = routed.output
                continue
            name, payload = routed
            source = self._sources.for_name(name)
            if isinstance(source, str):
                run.done[index] = run.job.failure(index, payload, source)
            elif source.pooled and self.workers > 0:
                run.sources[source.key] = source
                run.pooled.setdefault(source.key, deque()).append((index, payload))
            else:
                run.sources[source.key] = source
                bucket = run.in_process.setdefault(source.key, [])
                bucket.append((index, payload))
                if len(bucket) >= (self.batch_size if not source.pooled else 1):
                    self._run_in_process(run, source.key)
        if run.exhausted or run.idle or run.n_read - run.next_out >= self.window:
            # Nothing more will arrive before the oldest rows finish (or the feed has nothing right now):
            # score partial batches now.
            for key in list(run.in_process):
                self._run_in_process(run, key)

    def _run_in_process(self, run: _Run, key: str) -> None:
        self._batches.start(run, key, inline=self.workers == 0)

    def _ensure_pool(self) -> None:
        """Forks the workers the pool lacks: ``workers`` that no straggler holds (stragglers' workers, at most
        ``spare_workers``, are extra)."""
        if not self._pool and not self._warmed and self._ctx.get_start_method() == "fork":
            # Forked workers inherit what the parent has built (e.g. the LaTeX parser's caches): warm once here
            # instead of once per worker, and again after every worker a timeout replaces.
            self._warmed = True
            warmup = getattr(self.default.obj, "warmup", None)
            if self.default.pooled and callable(warmup):
                with contextlib.suppress(Exception):
                    warmup()
        regular = sum(not worker.demoted for worker in self._pool)
        wanted = min(self.workers + self.spare_workers, len(self._pool) + self.workers - regular)
        while len(self._pool) < wanted:
            self._pool.append(Worker(self._ctx, self._inherited()))

    def _inherited(self) -> dict[str, Any]:
        """Sources a forked worker starts with (its copy of the parent's objects); none for spawned workers."""
        return self._sources.pooled_objects() if self._ctx.get_start_method() == "fork" else {}

    def _sizer(self, key: str) -> ChunkSizer:
        if key not in self._sizers:
            self._sizers[key] = ChunkSizer(CHUNK_SECONDS, self.chunk_size, MAX_CHUNK)
        return self._sizers[key]

    def _chunk_size(self, key: str, pending: int) -> int:
        """Items for the next chunk: about CHUNK_SECONDS of work, and a fair share of what is left."""
        share = -(-pending // max(1, self.workers))
        return max(1, min(self._sizer(key).size(), share))

    def _dispatch(self, run: _Run) -> None:
        pending = sum(len(bucket) for bucket in run.pooled.values())
        if not pending and not self._pool:  # only in-process batches run: no worker is needed
            return
        if self.spare_workers:
            _demote_stragglers(self._pool, self.spare_workers, run)
            _schedule_stragglers(self._pool, self.workers)
        self._ensure_pool()
        for worker in list(self._pool):
            if not worker.ready or worker.busy:
                continue
            if worker.demoted:  # its chunk is done, and it keeps its low priority for good
                self._pool.remove(worker)
                self._kill(worker)
                continue
            buckets = [(bucket[0][0], key) for key, bucket in run.pooled.items() if bucket]
            if not buckets:
                return
            key = min(buckets)[1]  # the source holding the oldest waiting item: output order moves on
            bucket = run.pooled[key]
            size = min(len(bucket), self._chunk_size(key, pending))
            if run.group_of is not None:
                size = _same_group(bucket, size, run.group_of)
            chunk = [bucket.popleft() for _ in range(size)]
            try:
                worker.send(run.sources[key], run.job, chunk)
            except (OSError, EOFError):
                bucket.extendleft(reversed(chunk))
                worker.waiting = set()
                continue
            if run.on_chunk is not None:
                run.on_chunk(len(chunk))

    def _poll(self, run: _Run) -> None:
        """Waits for worker messages, in-process batches (or the next deadline), records results, kills
        overrunning workers."""
        if self._dying:
            self._dying = _reap(self._dying)
        now = time.monotonic()
        deadlines = [_time_left(w, now, self.timeout, self.wall_timeout) for w in self._pool if w.busy]
        if self.spare_workers:  # look again when an item may have become a straggler, or to rotate them
            deadlines += [_straggler_check_in(w, now) for w in self._pool if w.busy]
        wait_for = min(max(0.0, min(deadlines)), 1.0) if deadlines else 1.0
        handles: list[Any] = [run.batch_done]
        for worker in self._pool:
            handles.extend((worker.conn, worker.process.sentinel))
        if run.wakeup is not None:
            handles.append(run.wakeup)
        readable = set(wait(handles, timeout=wait_for))
        if run.wakeup is not None and run.wakeup in readable:
            run.wakeup.clear()  # the fed rows are read next, before the next wait
        if run.batch_done in readable:
            run.batch_done.clear()
        self._batches.collect(run)
        for worker in list(self._pool):
            if worker.conn in readable:
                self._drain(worker, run)
            if worker.process.sentinel in readable or not worker.process.is_alive():
                self._drain(worker, run)  # results sent before it died are still in the pipe
                worker.process.join(timeout=1)  # reap it, so the exit code is known
                self._replace(worker, run, f"worker crashed: exit code {worker.process.exitcode}")
        now = time.monotonic()
        for worker in list(self._pool):
            if (
                worker.busy
                and worker.current() is not None
                and _time_left(worker, now, self.timeout, self.wall_timeout) < 0
            ):
                wall = now - worker.progress[1] - worker.held_s(now) > self.wall_timeout
                limit = {"wall_timeout_s": self.wall_timeout} if wall else {"timeout_s": self.timeout}
                self._replace(worker, run, "timeout", **limit)

    def _kill(self, worker: Worker) -> None:
        worker.kill(wait=False)
        self._dying.append(worker)

    def _drain(self, worker: Worker, run: _Run) -> None:
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                if isinstance(message, tuple):  # ("ready",)
                    worker.ready = True
                    continue
                had_work = worker.busy
                for index, output in message:
                    if index in worker.waiting:
                        worker.waiting.discard(index)
                        run.done[index] = output
                if had_work and not worker.busy:
                    self._learn_speed(worker)
        except (EOFError, OSError):
            pass

    def _learn_speed(self, worker: Worker) -> None:
        assert worker.source is not None
        self._sizer(worker.source.key).observe(time.monotonic() - worker.sent_at, len(worker.chunk))

    def _replace(self, worker: Worker, run: _Run, error: str, **details: Any) -> None:
        """Kills ``worker``: its current item fails with ``error`` (and ``details``), its other unreported
        items are re-queued, and a fresh worker takes its place."""
        current = worker.current() if worker.busy else None
        if current is not None:
            index, payload, start = current
            spent = max(0.0, time.monotonic() - start)
            run.done[index] = run.job.failure(index, payload, error, time_s=spent, **details)
            worker.waiting.discard(index)
            # A slow item makes its source's chunks small, so one hostile row does not hold many others.
            self._sizer(worker.source.key).per_item = self.timeout  # type: ignore[union-attr]
        rest = [(index, payload) for index, payload in worker.chunk if index in worker.waiting]
        if rest and worker.source is not None:
            run.pooled.setdefault(worker.source.key, deque()).extendleft(reversed(rest))
        worker.waiting = set()
        self._kill(worker)
        i = self._pool.index(worker)
        if worker.demoted:  # a straggler's worker: a fresh one took its place when it was demoted
            del self._pool[i]
        else:
            self._pool[i] = Worker(self._ctx, self._inherited())


def _check_settings(
    engine: str, workers: int, spare_workers: int, timeout: float, wall_timeout: float | None
) -> None:
    """Raises ValueError for settings no Scorer runs with."""
    if engine not in ("local", "ray"):
        raise ValueError(f"unknown engine {engine!r} (known: local, ray)")
    if workers < 0:
        raise ValueError("workers must be >= 0")
    if spare_workers < 0:
        raise ValueError("spare_workers must be >= 0")
    if timeout is None or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout}")
    if wall_timeout is None or not math.isfinite(wall_timeout) or wall_timeout <= 0:
        raise ValueError(f"wall_timeout must be a finite number of seconds > 0, got {wall_timeout}")


def _mp_context(method: str | None, source_module: str) -> Any:
    """The multiprocessing context workers start in (``fork`` where available, else ``spawn``)."""
    if method is None:
        # fork: a worker (or a replacement for a killed one) starts in milliseconds with everything the
        # parent imported and built, and scripts need no ``if __name__ == "__main__"`` guard. Workers only
        # run the verifier (no torch, no threads), so forking a parent that holds threads is safe here.
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        # Workers fork from a server that already imported the engine and the source's module.
        modules = ["rewardlab.scoring.engine", source_module]
        with contextlib.suppress(Exception):
            ctx.set_forkserver_preload([m for m in modules if m and m != "__main__"])
    return ctx


def _time_left(worker: Worker, now: float, timeout: float, wall_timeout: float) -> float:
    """Seconds before ``worker``'s item reaches a limit: its CPU time (a process's CPU clock cannot run
    faster than the wall clock but for its threads), or the wall-clock cap, which does not count the time
    the engine held the item paused for its turn."""
    start = worker.progress[1]
    if start > now:  # the worker builds its source: BUILD_GRACE_S, before its first item's clock starts
        return start - now
    cpu = worker.item_cpu_seconds()
    used = now - start if cpu is None else cpu
    return min(timeout - used, start + wall_timeout + worker.held_s(now) - now)


def _demote_stragglers(pool: list[Worker], spare_workers: int, run: _Run) -> None:
    """Makes spares of the workers whose item is a straggler, up to ``spare_workers`` of them: the rest
    of a spare's chunk goes back to the queue (its worker stops after the straggler)."""
    now = time.monotonic()
    spares = sum(worker.demoted for worker in pool)
    for worker in pool:
        if spares >= spare_workers:
            return
        if worker.demoted or not _straggling(worker, now):
            continue
        current = worker.current()
        assert current is not None and worker.source is not None
        worker.demote(current[0])
        spares += 1
        rest = [(index, payload) for index, payload in worker.chunk if index in worker.waiting]
        rest = [(index, payload) for index, payload in rest if index != current[0]]
        worker.waiting = {current[0]}
        if rest:  # a result it still sends for these is dropped: they are no longer waited for
            run.pooled.setdefault(worker.source.key, deque()).extendleft(reversed(rest))


def _schedule_stragglers(pool: list[Worker], lanes: int) -> None:
    """Runs the stragglers least CPU first, ``lanes`` at a time (the others paused): a slow but legitimate
    row (some math rows take 0.1-0.4 s in a fresh worker) gets its turn before the hostile rows that have
    used more (least-attained-service scheduling), and a paused row's CPU-time limit does not run on.
    Measured with bench/serve.py (64 clients, 1 row in 25 hostile, 2 CPUs): ``workers`` lanes at nice 19
    kept clean requests fastest (p99 2.3-2.6 s) but starved legitimate slow rows (workers.STRAGGLER_NICE);
    one lane at normal priority while other rows wait, 3.8 s; a later demotion (0.2 or 0.5 s of CPU), 4.3
    and 7.1 s."""
    stragglers = [worker for worker in pool if worker.demoted and worker.busy]
    stragglers.sort(key=lambda worker: worker.item_cpu_seconds() or 0.0)
    for rank, worker in enumerate(stragglers):
        worker.pause(rank >= lanes)


def _reap(dying: list[Worker]) -> list[Worker]:
    """The killed workers that have not exited yet."""
    return [worker for worker in dying if not worker.reaped()]


def _straggler_check_in(worker: Worker, now: float) -> float:
    """Seconds until ``worker``'s item may be a straggler (a demoted one's: until the stragglers rotate)."""
    if worker.demoted:
        return STRAGGLER_S
    wall = STRAGGLER_S - (now - worker.progress[1])
    cpu = worker.item_cpu_seconds()
    return max(wall if cpu is None else STRAGGLER_S - cpu, 0.005)


def _straggling(worker: Worker, now: float) -> bool:
    """Whether ``worker``'s current item has used more than :data:`STRAGGLER_S` of CPU time (of wall time
    where CPU time cannot be read)."""
    current = worker.current() if worker.busy else None
    if current is None or now - current[2] <= STRAGGLER_S:
        return False
    cpu = worker.item_cpu_seconds()
    return cpu is None or cpu > STRAGGLER_S


def _same_group(bucket: deque[tuple[int, Any]], size: int, group_of: Callable[[int], Any]) -> int:
    """How many of the first ``size`` items of ``bucket`` belong to the first one's group."""
    group = group_of(bucket[0][0])
    for i in range(1, size):
        if group_of(bucket[i][0]) != group:
            return i
    return size


class _Run:
    """The state of one ``iter_outputs`` (or ``iter_unordered``) call: what was read, what is waiting where,
    what is done.

    ``ordered``: outputs in input order (else as done, ``next_out`` counting those yielded); ``idle``: the
    feed's last answer was :data:`IDLE`; ``wakeup``: waited on with the workers; ``on_chunk``: told the
    size of every chunk sent to a worker and every in-process batch; ``group_of``: items of different groups
    go in different chunks."""

    def __init__(
        self,
        items: Iterator[Any],
        job: Job,
        first_index: int,
        *,
        ordered: bool = True,
        wakeup: Wakeup | None = None,
        on_chunk: Callable[[int], None] | None = None,
        group_of: Callable[[int], Any] | None = None,
    ) -> None:
        self.items = items
        self.job = job
        self.ordered = ordered
        self.idle = False
        self.wakeup = wakeup
        self.on_chunk = on_chunk
        self.group_of = group_of
        self.done: dict[int, Any] = {}
        self.sources: dict[str, Source] = {}
        self.pooled: dict[str, deque[tuple[int, Any]]] = {}  # waiting for a worker, by source key
        self.in_process: dict[str, list[tuple[int, Any]]] = {}  # waiting for a batch, by source key
        self.batches: dict[Future, tuple[str, list[tuple[int, Any]]]] = {}  # in-process, in batch threads
        self.batch_done = Wakeup()  # set by a batch thread when its batch is done
        self.n_read = self.next_out = first_index
        self.exhausted = False


# ----------------------------------------------------------------------------------------------------------
# One-call helpers
# ----------------------------------------------------------------------------------------------------------
def score_records(
    records: Iterable[Record | dict] | Any,
    source: Any,
    *,
    workers: int = 1,
    timeout: float = 10.0,
    progress: bool | None = False,
    engine: str = "local",
    config: dict[str, Any] | None = None,
    chunk_size: int = 16,
    wall_timeout: float | None = None,
    spare_workers: int | None = None,
) -> list[Result]:
    """Scores ``records`` (Records, dicts, or a ``datasets.Dataset``) with ``source``: one Result per record, in order.

    See :class:`Scorer` for the arguments; ``progress`` shows a bar (``None``: only on a terminal).
    """
    total = len(records) if hasattr(records, "__len__") else None
    with Scorer(
        source,
        workers=workers,
        timeout=timeout,
        engine=engine,
        config=config,
        chunk_size=chunk_size,
        wall_timeout=wall_timeout,
        spare_workers=spare_workers,
    ) as s:
        return list(track(s.iter_scores(records), f"score[{s.default_name}]", total=total, enabled=progress))


def score_dataset(dataset: Any, source: Any, **kwargs: Any) -> Any:
    """A copy of a ``datasets.Dataset`` with ``reward``, ``error`` and ``details`` (a JSON string) columns."""
    results = score_records(dataset, source, **kwargs)
    out = dataset
    for column in ("reward", "error", "details"):
        if column in out.column_names:
            out = out.remove_columns(column)
    out = out.add_column("reward", [r.reward for r in results])
    out = out.add_column("error", [r.error for r in results])
    return out.add_column("details", [json.dumps(r.details, ensure_ascii=False) for r in results])
