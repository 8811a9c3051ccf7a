"""The scoring engine's worker processes: the worker's loop, the parent's handle on one worker, and the
self-pipe that wakes the engine's wait.

A worker takes a chunk of items, scores them one by one and sends results back in batches (at least every
``REPORT_EVERY_S``). It writes the position and start time of its current item to shared memory, so the
parent times out an item (``SIGKILL``: it stops C-level loops that ``signal.alarm`` cannot interrupt) and
tells a straggler without a message per item. A worker dies with its parent, even on SIGKILL.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from rewardlab.runtime import mark_scoring_worker
from rewardlab.scoring.jobs import Job
from rewardlab.scoring.sources import Source, build_spec, last_line

BUILD_GRACE_S = 120.0
"""Extra seconds a worker may take to build a source (imports) before its first record's clock starts."""


STRAGGLER_NICE = 10
"""The CPU priority of a straggler's worker: low, so that the rows behind it go first, but not the lowest. On
2 CPUs with 64 clients flooding (bench/serve.py), legitimate slow rows at nice 19 starved past the wall-clock
cap (6-11 rows in 2,000 in 3 of 5 runs; p99 of clean requests 2.4-2.6 s); at nice 10, none in 4 runs (p99
3.6-3.9 s)."""

_NO_CUT = 1e18
"""The last position to run of a chunk that is not cut."""

REPORT_EVERY_S = 0.05
"""A worker sends the results it has at least this often, so slow chunks still stream."""


class Wakeup:
    """A self-pipe that another thread sets to wake the engine's wait (``multiprocessing.connection.wait``
    takes its ``fileno``) when it has fed a row; setting it never blocks."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def fileno(self) -> int:
        return self._read

    def set(self) -> None:
        if self._write < 0:  # closed: its run has stopped
            return
        with contextlib.suppress(BlockingIOError):  # a full pipe is readable already
            os.write(self._write, b"\0")

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 4096):
                pass

    def close(self) -> None:
        """Closes the pipe (once: a closed descriptor's number may belong to another file later)."""
        for fd in (self._read, self._write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._read = self._write = -1

    def __del__(self) -> None:
        self.close()


def _die_with_parent(parent_pid: int, main_thread: bool) -> None:
    """Makes this worker end when the process that started it ends, however it ends (SIGKILL included)."""
    forked_by_it = os.getppid() == parent_pid  # not so under forkserver: the server forked this worker
    if forked_by_it and main_thread and sys.platform.startswith("linux"):
        # The kernel sends SIGKILL when the forking thread exits: also during a C-level loop holding the GIL.
        with contextlib.suppress(Exception):
            import ctypes  # lazy: only here, once per Linux worker

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
            if os.getppid() != parent_pid:  # the parent died before the signal was armed
                os._exit(1)
            return

    def watch() -> None:  # elsewhere (another thread, forkserver, not Linux): poll for the parent
        while _alive(parent_pid):
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_main(
    conn: Connection, progress: Any, inherited: dict[str, Any], parent_pid: int, main_thread: bool
) -> None:
    """Worker loop: take a chunk, score its items one by one, send results in batches.

    ``progress`` is shared memory: ``[position in the chunk, start time of that item, the worker's CPU time
    then, the last position to run]`` (CLOCK_MONOTONIC, shared by all processes on Linux). The parent reads it to time out the current
    item (and tell a straggler) without a message per item; results go back at most every
    ``REPORT_EVERY_S`` and at the end of the chunk.
    """
    _die_with_parent(parent_pid, main_thread)
    mark_scoring_worker()
    # Ctrl-C reaches the whole process group: the parent handles it (keeps what it wrote, kills workers);
    # workers ignoring it avoids a traceback per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sources = dict(inherited)  # forked: the parent's sources, already built and warmed
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        key, spec, job, items = message
        if key not in sources:
            progress[1] = time.monotonic() + BUILD_GRACE_S  # imports are not the first item's time
            try:
                sources[key] = build_spec(spec)
            except Exception as exc:
                conn.send([(i, job.failure(i, p, f"source error: {last_line(exc)}")) for i, p in items])
                continue
        _run_chunk(conn, progress, sources[key], job, items)


def _run_chunk(conn: Connection, progress: Any, source: Any, job: Job, items: list[tuple[int, Any]]) -> None:
    batch: list[tuple[int, Any]] = []
    last_send = time.monotonic()
    for position, (index, payload) in enumerate(items):
        if position > progress[3]:  # the parent took the rest of the chunk back (a straggler's worker)
            break
        # Start before position: the parent reads the position first, so it never pairs it with an older start.
        progress[2] = time.process_time()
        progress[1] = time.monotonic()
        progress[0] = position
        batch.append((index, job.run(source, index, payload)))
        if time.monotonic() - last_send >= REPORT_EVERY_S:
            conn.send(batch)
            batch, last_send = [], time.monotonic()
    conn.send(batch)


class Worker:
    """One worker process and the chunk it is working through."""

    def __init__(self, ctx: Any, inherited: dict[str, Any]) -> None:
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        # [position in the chunk, wall start of that item, the worker's CPU time at that start, last position]
        self.progress = ctx.RawArray("d", [0.0, time.monotonic() + BUILD_GRACE_S, 0.0, _NO_CUT])
        main_thread = threading.current_thread() is threading.main_thread()
        args = (child_conn, self.progress, inherited, os.getpid(), main_thread)
        self.process = ctx.Process(target=worker_main, args=args, daemon=True)
        # Frozen objects are never scanned by the garbage collector: a forked worker then does not copy (and
        # walk) every page of the parent's heap at its first full collection, which costs more than scoring.
        gc.freeze()
        try:
            self.process.start()
        finally:
            gc.unfreeze()
        child_conn.close()
        self.conn = parent_conn
        self.ready = False
        self.source: Source | None = None
        self.chunk: list[tuple[int, Any]] = []
        self.waiting: set[int] = set()  # indices of the chunk without a result yet
        self.sent_at = 0.0
        self.demoted = False
        self.paused = False
        self.paused_s = 0.0  # seconds the engine has held it paused (SIGSTOP) since it was demoted
        self._paused_at = 0.0

    @property
    def busy(self) -> bool:
        return bool(self.waiting)

    def send(self, source: Source, job: Job, items: list[tuple[int, Any]]) -> None:
        self.source, self.chunk, self.waiting = source, items, {index for index, _ in items}
        self.sent_at = time.monotonic()
        self.progress[2] = self.cpu_seconds() or 0.0  # until the worker writes its own
        self.progress[1] = self.sent_at
        self.progress[0] = 0
        self.progress[3] = _NO_CUT
        self.conn.send((source.key, source.spec, job, items))

    def current(self) -> tuple[int, Any, float] | None:
        """(index, payload, start) of the item the worker is on, or ``None`` when it already reported it."""
        position = int(self.progress[0])
        start = self.progress[1]
        index, payload = self.chunk[min(position, len(self.chunk) - 1)]
        return (index, payload, start) if index in self.waiting else None

    def cpu_seconds(self) -> float | None:
        """CPU time the worker process has used (``None`` where the platform cannot tell)."""
        try:  # Linux: the process's CPU-time clock, read from outside (MAKE_PROCESS_CPUCLOCK(pid, SCHED))
            return time.clock_gettime((~self.process.pid << 3) | 2)
        except (OSError, AttributeError, TypeError):
            return None

    def item_cpu_seconds(self) -> float | None:
        """CPU time the worker has used on its current item (``None`` where the platform cannot tell)."""
        total = self.cpu_seconds()
        return None if total is None else total - self.progress[2]

    def demote(self, index: int) -> None:
        """Makes this worker a spare: it stops after item ``index`` (its straggler), whose position it is on,
        and drops to a low CPU priority (:data:`STRAGGLER_NICE`, for the rest of its life: it stops after that
        item). The priority only counts while other processes want the CPU: once the flood passes, the
        straggler has the CPU it needs, and since its limit counts its own CPU time, the wait cost it
        nothing."""
        self.demoted = True
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, self.process.pid, STRAGGLER_NICE)
        positions = [p for p, (i, _) in enumerate(self.chunk) if i == index]
        self.progress[3] = positions[0] if positions else _NO_CUT

    def pause(self, paused: bool) -> None:
        """Stops (SIGSTOP) or continues (SIGCONT) the worker; ``held_s`` counts the time it was held."""
        if paused != self.paused:
            self.paused = paused
            now = time.monotonic()
            if paused:
                self._paused_at = now
            else:
                self.paused_s += now - self._paused_at
            with contextlib.suppress(OSError):
                os.kill(self.process.pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def held_s(self, now: float) -> float:
        """Seconds the engine has held this worker paused (its item waits for its turn, through no fault of
        its own: the wall-clock cap does not count them)."""
        return self.paused_s + (now - self._paused_at if self.paused else 0.0)

    def kill(self, *, wait: bool = True) -> None:
        """SIGKILL; ``wait=False`` leaves the exit to be reaped later (:meth:`reaped`): on a loaded machine a
        killed low-priority process can take a while to exit, and the engine must not wait for it."""
        with contextlib.suppress(Exception):
            self.process.kill()
            if wait:
                self.process.join(timeout=5)
        self.conn.close()

    def reaped(self) -> bool:
        """Whether a killed worker has exited (and is reaped, so it leaves no zombie)."""
        with contextlib.suppress(Exception):
            self.process.join(timeout=0)
            return not self.process.is_alive()
        return True

    def stop(self) -> None:
        self.pause(False)
        with contextlib.suppress(Exception):
            self.conn.send(None)
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=2)
        self.conn.close()
