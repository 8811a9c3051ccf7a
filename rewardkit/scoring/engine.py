"""The scoring engine: records through reward sources in worker processes, with a per-item timeout that fires.

Design:

- A *source* is a verifier name, a :class:`~rewardkit.verifiers.Verifier`, or any object with
  ``score_batch(records)`` and ``name``. Rows choose their own verifier through ``Record.verifier``; the
  source given to the engine is the default.
- Sources with ``runs_in_process = False`` (rule verifiers: math, SQL, IFEval...) are scored in a pool of
  worker processes the engine manages itself. Records travel in small chunks (throughput), but each worker
  reports every item as it finishes, so the parent knows when the current item started: when it has run
  longer than ``timeout`` the worker is killed (``SIGKILL``: this stops C-level loops in sympy or bignum
  arithmetic that ``signal.alarm`` cannot interrupt), the item gets ``error="timeout"``, a fresh worker
  replaces it and the rest of the chunk is re-sent. A worker that dies (segfault, OOM) costs one item
  (``error="worker crashed: ..."``), never the run.
- Sources with ``runs_in_process = True`` (reward models on a GPU, a code verifier with its own sandbox) get
  ``score_batch`` called in this process with batches of ``batch_size``: no pool, their own timeouts.
- Results come back in input order (a bounded reorder buffer: at most ``window`` records are read ahead of
  the oldest unfinished one), so a file can be written and flushed row by row while the pool runs.

Workers are forked (where the platform allows): a worker, or the replacement of a killed one, starts in
milliseconds with the verifier already imported, so a timeout costs little.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
import traceback
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from rewardkit.registry import UnknownNameError
from rewardkit.types import Record, Result, jsonable

BUILD_GRACE_S = 120.0
"""Extra seconds a worker may take to build a source (imports) before its first record's clock starts."""

IN_WORKER_ENV = "REWARDKIT_SCORING_WORKER"
"""Set in engine worker processes: verifiers can skip their own soft timeouts, the engine enforces one."""


# ----------------------------------------------------------------------------------------------------------
# Sources
# ----------------------------------------------------------------------------------------------------------
@dataclass
class _Source:
    """A resolved source: the object, how to rebuild it in a worker, and whether it goes to the pool."""

    key: str
    obj: Any
    spec: tuple
    pooled: bool


def _spec_of(obj: Any) -> tuple:
    """A picklable recipe for rebuilding ``obj`` in a worker (a Verifier from its class and config)."""
    from rewardkit.verifiers.base import Verifier

    if isinstance(obj, Verifier):
        return ("class", type(obj), dict(obj.config))
    return ("object", obj)


def _build(spec: tuple) -> Any:
    if spec[0] == "class":
        return spec[1](**spec[2])
    if spec[0] == "name":
        from rewardkit.verifiers import get_verifier

        return get_verifier(spec[1], **spec[2])
    return spec[1]


def _is_pooled(obj: Any) -> bool:
    from rewardkit.verifiers.base import Verifier

    default = not isinstance(obj, Verifier)
    return not bool(getattr(obj, "runs_in_process", default))


def resolve_source(source: Any, config: dict[str, Any] | None = None) -> Any:
    """The source object for a verifier name (built with ``config``), a Verifier, or any ``score_batch`` object.

    Raises:
        UnknownNameError: for an unknown verifier name.
        TypeError: for an object without ``score_batch``.
    """
    if isinstance(source, str):
        from rewardkit.verifiers import get_verifier

        return get_verifier(source, **(config or {}))
    if not callable(getattr(source, "score_batch", None)):
        raise TypeError(f"a reward source needs score_batch(records); got {type(source).__name__}")
    return source


def _call_score_batch(obj: Any, records: Sequence[Record]) -> list[Result]:
    """``obj.score_batch(records)`` that never raises and always returns one Result per record."""
    try:
        results = list(obj.score_batch(records))
    except Exception as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return [Result.failure(f"source error: {last}") for _ in records]
    if len(results) != len(records):
        return [
            Result.failure(f"source error: score_batch returned {len(results)} results for {len(records)}")
            for _ in records
        ]
    return [_clean(r) for r in results]


def _clean(result: Any) -> Result:
    """A result with JSON-safe details (sympy objects, sets... become strings/lists)."""
    if not isinstance(result, Result):
        return Result.failure(f"source error: returned {type(result).__name__}, not Result")
    return Result(reward=float(result.reward), details=jsonable(result.details or {}), error=result.error)


def as_record(item: Any, index: int) -> Record:
    """``item`` as a :class:`Record` (dicts through ``Record.from_dict``); a missing id becomes ``index``."""
    if isinstance(item, Record):
        record = item
    elif isinstance(item, dict):
        record = Record.from_dict(item)
    else:
        raise TypeError(f"expected a Record or a dict, got {type(item).__name__}")
    if record.id is None:
        record.id = index
    return record


# ----------------------------------------------------------------------------------------------------------
# Worker processes
# ----------------------------------------------------------------------------------------------------------
def _worker_main(conn: Connection) -> None:
    """Worker loop: build sources on first use, score chunk items one by one, report each as it ends."""
    os.environ[IN_WORKER_ENV] = "1"
    # Ctrl-C reaches the whole process group: the parent handles it (keeps what it wrote, kills workers);
    # workers ignoring it avoids a traceback per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sources: dict[str, Any] = {}
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        key, spec, items = message
        if key not in sources:
            conn.send(("clock", time.monotonic() + BUILD_GRACE_S))
            try:
                sources[key] = _build(spec)
            except Exception as exc:
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                for index, _ in items:
                    conn.send((index, Result.failure(f"source error: {last}"), time.monotonic()))
                continue
            # Building (imports: sympy takes seconds in a spawned process) is not the first record's time.
            conn.send(("clock", time.monotonic()))
        source = sources[key]
        for index, record in items:
            result = _call_score_batch(source, [record])[0]
            # time.monotonic() is CLOCK_MONOTONIC, shared by all processes on Linux: the parent uses the end
            # of this item as the start of the next.
            conn.send((index, result, time.monotonic()))


class _Worker:
    """One worker process and the chunk it is working through."""

    def __init__(self, ctx: Any) -> None:
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_worker_main, args=(child_conn,), daemon=True)
        self.process.start()
        child_conn.close()
        self.conn = parent_conn
        self.ready = False
        self.chunk: list[tuple[int, Record]] | None = None
        self.key: str | None = None
        self.pos = 0
        self.item_start = 0.0

    @property
    def busy(self) -> bool:
        return self.chunk is not None

    def send(self, key: str, spec: tuple, items: list[tuple[int, Record]]) -> None:
        self.chunk, self.key, self.pos = items, key, 0
        self.item_start = time.monotonic()
        self.conn.send((key, spec, items))

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.join(timeout=5)
        except Exception:
            pass
        self.conn.close()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.send(None)
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=2)
        self.conn.close()


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
        timeout: Seconds one record may take in a worker before it is killed and gets ``error="timeout"``.
        engine: ``"local"`` (this machine's processes) or ``"ray"`` (Ray tasks; needs ``pip install ray``).
        config: Settings for the default source when it is given by name (``get_verifier(name, **config)``).
        chunk_size: Records sent to a worker at once (amortises inter-process messages).
        batch_size: Records per ``score_batch`` call for in-process sources.
        window: Records read ahead of the oldest unfinished one (bounds the reorder buffer).
        mp_context: multiprocessing start method for workers (default ``fork`` where available, else
            ``spawn``; ``forkserver`` preloads the source's module in the server).

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
        batch_size: int = 64,
        window: int | None = None,
        mp_context: str | None = None,
    ) -> None:
        if engine not in ("local", "ray"):
            raise ValueError(f"unknown engine {engine!r} (known: local, ray)")
        if workers < 0:
            raise ValueError("workers must be >= 0")
        if timeout is None or timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        self.workers = workers
        self.timeout = float(timeout)
        self.engine = engine
        self.chunk_size = max(1, chunk_size)
        self.batch_size = max(1, batch_size)
        self.window = window or max(1024, 8 * max(1, workers) * self.chunk_size)
        if mp_context is None:
            # fork: a worker (or a replacement for a killed one) starts in milliseconds with everything the
            # parent imported, and scripts need no ``if __name__ == "__main__"`` guard. Workers only run the
            # verifier (no torch, no threads), so forking a parent that holds threads is safe here.
            methods = multiprocessing.get_all_start_methods()
            mp_context = "fork" if "fork" in methods else "spawn"
        self._ctx = multiprocessing.get_context(mp_context)
        obj = resolve_source(source, config)
        name = source if isinstance(source, str) else getattr(obj, "name", type(obj).__name__)
        spec = ("name", source, dict(config or {})) if isinstance(source, str) else _spec_of(obj)
        self.default = _Source(key=f"default:{name}", obj=obj, spec=spec, pooled=_is_pooled(obj))
        self.default_name = name
        self._by_name: dict[str, _Source | str] = {}
        self._pool: list[_Worker] = []
        self._warmed = False
        self._ray = None
        self._closed = False
        if mp_context == "forkserver":
            # Workers fork from a server that already imported the engine and the source's module.
            modules = ["rewardkit.scoring.engine", type(obj).__module__]
            with contextlib.suppress(Exception):
                self._ctx.set_forkserver_preload([m for m in modules if m and m != "__main__"])

    # -- routing ------------------------------------------------------------------------------------------
    def _source_for(self, record: Record) -> _Source | str:
        """The source of a record, or an error message for a row whose verifier is unknown."""
        name = record.verifier
        if not name or name == self.default_name:
            return self.default
        if name not in self._by_name:
            try:
                obj = resolve_source(name)
                self._by_name[name] = _Source(
                    key=f"name:{name}", obj=obj, spec=("name", name, {}), pooled=_is_pooled(obj)
                )
            except UnknownNameError:
                self._by_name[name] = f"unknown verifier: {name!r}"
            except Exception as exc:
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                self._by_name[name] = f"source error: verifier {name!r} failed to load: {last}"
        return self._by_name[name]

    # -- public API ---------------------------------------------------------------------------------------
    def score(self, records: Iterable[Record | dict]) -> list[Result]:
        """One result per record, in order."""
        return list(self.iter_scores(records))

    def iter_scores(self, records: Iterable[Record | dict]) -> Iterator[Result]:
        """Results in input order, yielded as soon as every earlier record is done (streams large inputs)."""
        if self._closed:
            raise RuntimeError("Scorer is closed")
        if self.engine == "ray":
            from rewardkit.scoring.ray_engine import iter_scores_ray

            yield from iter_scores_ray(self, records)
            return
        yield from self._iter_local(records)

    def close(self) -> None:
        """Stops the worker processes."""
        for worker in self._pool:
            worker.stop()
        self._pool = []
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
    def _iter_local(self, records: Iterable[Record | dict]) -> Iterator[Result]:
        iterator = iter(records)
        done: dict[int, Result] = {}
        pending: dict[str, tuple[_Source, list[tuple[int, Record]]]] = {}
        in_process: dict[str, tuple[_Source, list[tuple[int, Record]]]] = {}
        queue: deque[tuple[_Source, list[tuple[int, Record]]]] = deque()
        n_read = next_out = 0
        exhausted = False
        try:
            while True:
                while not exhausted and n_read - next_out < self.window:
                    try:
                        item = next(iterator)
                    except StopIteration:
                        exhausted = True
                        break
                    index = n_read
                    n_read += 1
                    try:
                        record = as_record(item, index)
                    except TypeError as exc:
                        done[index] = Result.failure(f"invalid record: {exc}")
                        continue
                    source = self._source_for(record)
                    if isinstance(source, str):
                        done[index] = Result.failure(source)
                    elif source.pooled and self.workers > 0:
                        bucket = pending.setdefault(source.key, (source, []))[1]
                        bucket.append((index, record))
                        if len(bucket) >= self.chunk_size:
                            queue.append(pending.pop(source.key))
                    else:
                        bucket = in_process.setdefault(source.key, (source, []))[1]
                        bucket.append((index, record))
                        limit = self.batch_size if not source.pooled else 1
                        if len(bucket) >= limit:
                            self._run_in_process(*in_process.pop(source.key), done)
                if exhausted or n_read - next_out >= self.window:
                    # Nothing more will arrive before the oldest rows finish: send partial chunks now.
                    queue.extend(pending.values())
                    pending.clear()
                    for source, items in list(in_process.values()):
                        self._run_in_process(source, items, done)
                    in_process.clear()
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
                if exhausted and next_out == n_read:
                    return
                if queue or any(w.busy for w in self._pool):
                    self._dispatch(queue)
                    self._poll(queue, done)
        finally:
            # An abandoned generator (exception, break) leaves workers mid-chunk: replace them.
            if any(w.busy for w in self._pool):
                for worker in self._pool:
                    worker.kill()
                self._pool = []

    def _run_in_process(
        self, source: _Source, items: list[tuple[int, Record]], done: dict[int, Result]
    ) -> None:
        results = _call_score_batch(source.obj, [record for _, record in items])
        for (index, _), result in zip(items, results, strict=True):
            done[index] = result

    def _ensure_pool(self) -> None:
        if not self._pool and not self._warmed and self._ctx.get_start_method() == "fork":
            # Forked workers inherit what the parent has built (e.g. the LaTeX parser's caches): warm once here
            # instead of once per worker, and again after every worker a timeout replaces.
            self._warmed = True
            warmup = getattr(self.default.obj, "warmup", None)
            if self.default.pooled and callable(warmup):
                with contextlib.suppress(Exception):
                    warmup()
        while len(self._pool) < self.workers:
            self._pool.append(_Worker(self._ctx))

    def _dispatch(self, queue: deque) -> None:
        self._ensure_pool()
        for worker in self._pool:
            if not queue:
                return
            if worker.ready and not worker.busy:
                source, items = queue.popleft()
                try:
                    worker.send(source.key, source.spec, items)
                except (OSError, EOFError):
                    queue.appendleft((source, items))

    def _poll(self, queue: deque, done: dict[int, Result]) -> None:
        """Waits for worker messages (or the next deadline), records results, kills overrunning workers."""
        now = time.monotonic()
        deadlines = [w.item_start + self.timeout - now for w in self._pool if w.busy]
        wait_for = max(0.0, min(deadlines)) if deadlines else 1.0
        handles: list[Any] = []
        for worker in self._pool:
            handles.extend((worker.conn, worker.process.sentinel))
        readable = set(wait(handles, timeout=wait_for))
        for i, worker in enumerate(list(self._pool)):
            if worker.conn in readable:
                self._drain(worker, done)
            if worker.process.sentinel in readable or not worker.process.is_alive():
                self._drain(worker, done)  # results sent before it died are still in the pipe
                worker.process.join(timeout=1)  # reap it, so the exit code is known
                code = worker.process.exitcode
                self._replace(i, worker, queue, done, f"worker crashed: exit code {code}")
        now = time.monotonic()
        for i, worker in enumerate(list(self._pool)):
            if worker.busy and now - worker.item_start > self.timeout:
                self._replace(i, worker, queue, done, "timeout")

    def _drain(self, worker: _Worker, done: dict[int, Result]) -> None:
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                if message[0] == "ready":
                    worker.ready = True
                    continue
                if message[0] == "clock":
                    worker.item_start = message[1]
                    continue
                index, result, finished_at = message
                done[index] = result
                worker.pos += 1
                worker.item_start = finished_at
                if worker.chunk is not None and worker.pos >= len(worker.chunk):
                    worker.chunk = None
        except (EOFError, OSError):
            pass

    def _replace(self, i: int, worker: _Worker, queue: deque, done: dict[int, Result], error: str) -> None:
        """Kills ``worker``; its current item fails with ``error``; the rest of its chunk is re-queued."""
        if worker.chunk is not None and worker.pos < len(worker.chunk):
            index, _ = worker.chunk[worker.pos]
            details = {"timeout_s": self.timeout} if error == "timeout" else {}
            done[index] = Result.failure(error, **details)
            rest = worker.chunk[worker.pos + 1 :]
            if rest:
                source = self.default if worker.key == self.default.key else None
                if source is None:
                    source = next(
                        s for s in self._by_name.values() if isinstance(s, _Source) and s.key == worker.key
                    )
                queue.appendleft((source, rest))
        worker.chunk = None
        worker.kill()
        self._pool[i] = _Worker(self._ctx)


# ----------------------------------------------------------------------------------------------------------
# One-call helpers
# ----------------------------------------------------------------------------------------------------------
def score_records(
    records: Iterable[Record | dict] | Any,
    source: Any,
    *,
    workers: int = 1,
    timeout: float = 10.0,
    progress: bool = False,
    engine: str = "local",
    config: dict[str, Any] | None = None,
    chunk_size: int = 16,
) -> list[Result]:
    """Scores ``records`` (Records, dicts, or a ``datasets.Dataset``) with ``source``: one Result per record, in order.

    See :class:`Scorer` for the arguments; ``progress`` shows a tqdm bar.
    """
    total = len(records) if hasattr(records, "__len__") else None
    with Scorer(
        source, workers=workers, timeout=timeout, engine=engine, config=config, chunk_size=chunk_size
    ) as s:
        stream: Iterable[Result] = s.iter_scores(records)
        if progress:
            from tqdm.auto import tqdm

            stream = tqdm(stream, total=total, unit="row", desc=f"score[{s.default_name}]")
        return list(stream)


def score_dataset(dataset: Any, source: Any, **kwargs: Any) -> Any:
    """A copy of a ``datasets.Dataset`` with ``reward``, ``error`` and ``details`` (a JSON string) columns."""
    import json

    results = score_records(dataset, source, **kwargs)
    out = dataset
    for column in ("reward", "error", "details"):
        if column in out.column_names:
            out = out.remove_columns(column)
    out = out.add_column("reward", [r.reward for r in results])
    out = out.add_column("error", [r.error for r in results])
    return out.add_column("details", [json.dumps(r.details, ensure_ascii=False) for r in results])
