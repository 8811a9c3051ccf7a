"""In-process batches: the ``score_batch`` calls of sources that run in the engine's process
(``runs_in_process = True``: the code verifier with its own sandbox, ``http:`` sources, reward models), run
in threads so that the engine goes on dispatching, polling and timing out the pooled rows meanwhile.

A source that takes several batches at once (``concurrent_batches = True``: its ``score_batch`` is safe to
call from several threads, as the ``http:`` source's client is) gets a batch per group (a server's
request): a slow batch (a remote row that takes long) holds back only its own group's rows. Any other source
(a reward model on a GPU, the code verifier, whose sandbox one caller drives) gets one batch at a time, the
rows that arrive meanwhile waiting for the next, large batch.

The run state (``run``) is the engine's: ``sources``, ``in_process`` (rows waiting, by source key),
``batches`` (running: future -> (key, rows)), ``batch_done`` (a :class:`~rewardlab.scoring.workers.Wakeup`
the engine waits on), ``done``, ``job``, ``group_of``, ``on_chunk``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

THREADS = 16
"""Threads that run in-process batches."""


class BatchThreads:
    """Starts and collects the in-process batches of the engine's runs (one per Scorer)."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self._threads: ThreadPoolExecutor | None = None  # lazy: most runs have no in-process source

    def start(self, run: Any, key: str, *, inline: bool = False) -> None:
        """Starts a batch of ``key``'s waiting rows (at most ``batch_size``); ``inline``: scores it now, in
        this thread (the engine's ``workers=0``, for debugging)."""
        source = run.sources[key].obj
        concurrent = getattr(source, "concurrent_batches", False)
        if not concurrent and any(running == key for running, _ in run.batches.values()):
            return  # the next batch starts when this one is done (collect)
        bucket = run.in_process.pop(key)
        items, rest = bucket[: self.batch_size], bucket[self.batch_size :]
        if rest:
            run.in_process[key] = rest
        if inline:
            _record(run, items, _outputs(run.job, source, items))
            return
        if self._threads is None:
            self._threads = ThreadPoolExecutor(THREADS, thread_name_prefix="rewardlab-batch")
        for part in split_groups(items, run.group_of) if concurrent else [items]:
            if run.on_chunk is not None:
                run.on_chunk(len(part))
            future = self._threads.submit(_outputs, run.job, source, part)
            run.batches[future] = (key, part)
            future.add_done_callback(lambda _: run.batch_done.set())

    def collect(self, run: Any) -> None:
        """Records the batches that are done, and starts the rows that waited for them."""
        for future in [f for f in run.batches if f.done()]:
            key, items = run.batches.pop(future)
            _record(run, items, future.result())
            if run.in_process.get(key):
                self.start(run, key)

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None


def split_groups(items: list[tuple[int, Any]], group_of: Callable[[int], Any] | None) -> list[list]:
    """``items`` cut into one part per group, in order of first appearance (one part without groups)."""
    if group_of is None:
        return [items]
    parts: dict[Any, list[tuple[int, Any]]] = {}
    for index, payload in items:
        parts.setdefault(group_of(index), []).append((index, payload))
    return list(parts.values())


def _outputs(job: Any, source: Any, items: list[tuple[int, Any]]) -> list[Any]:
    """``job``'s outputs for a batch; a batch that fails as a whole gives error rows, never a stopped run."""
    try:
        return job.run_batch(source, items)
    except Exception as exc:  # noqa: BLE001
        return [job.failure(i, p, f"source error: {type(exc).__name__}: {exc}") for i, p in items]


def _record(run: Any, items: list[tuple[int, Any]], outputs: list[Any]) -> None:
    for (index, _), output in zip(items, outputs, strict=True):
        run.done[index] = output


__all__ = ["BatchThreads", "split_groups"]
