"""``engine="ray"``: chunks of records as Ray tasks, each scored by the local engine inside the task.

Every task runs a one-worker local :class:`~rewardkit.scoring.Scorer` on its chunk, so per-row timeouts,
crash isolation and per-row verifiers behave exactly as on one machine, and the results equal the local
engine's; Ray only spreads the chunks over the CPUs of a cluster. ``ray.init`` is called with
``num_cpus=workers`` when Ray is not initialised yet (connect to a cluster first with ``ray.init(address=...)``
to use one). Sources with ``runs_in_process = True`` (reward models on a GPU) are not shipped to Ray: they are
scored by the local engine in this process.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rewardkit.types import Record, Result

RAY_CHUNK = 128
"""Records per Ray task: large enough that task overhead (milliseconds) is small against the scoring."""

_remote_fn = None


def _score_chunk(spec: tuple, records: list[Record], timeout: float, chunk_size: int) -> list[Result]:
    from rewardkit.scoring.engine import Scorer, _build

    with Scorer(_build(spec), workers=1, timeout=timeout, chunk_size=chunk_size) as scorer:
        return scorer.score(records)


def _remote() -> Any:
    global _remote_fn
    if _remote_fn is None:
        import ray

        _remote_fn = ray.remote(num_cpus=1, max_retries=1)(_score_chunk)
    return _remote_fn


def iter_scores_ray(scorer: Any, records: Iterable[Record | dict]) -> Iterator[Result]:
    """Results in input order, with chunks scored as Ray tasks (at most 2 per CPU in flight)."""
    import ray

    from rewardkit.scoring.engine import as_record

    if not scorer.default.pooled:
        yield from scorer._iter_local(records)
        return
    if not ray.is_initialized():
        ray.init(num_cpus=max(1, scorer.workers), include_dashboard=False, log_to_driver=False)
    cpus = max(1, int(ray.available_resources().get("CPU", scorer.workers or 1)))
    max_in_flight = 2 * cpus
    remote = _remote()
    in_flight: list[Any] = []  # object refs, in submission (= input) order
    chunk: list[Record] = []

    def submit(items: list[Record]) -> None:
        in_flight.append(remote.remote(scorer.default.spec, items, scorer.timeout, scorer.chunk_size))

    for index, item in enumerate(records):
        try:
            chunk.append(as_record(item, index))
        except TypeError:
            chunk.append(item)  # the task's local engine turns it into the same "invalid record" row
        if len(chunk) >= RAY_CHUNK:
            submit(chunk)
            chunk = []
            while len(in_flight) >= max_in_flight:
                yield from _results(ray.get(in_flight.pop(0)))
    if chunk:
        submit(chunk)
    while in_flight:
        yield from _results(ray.get(in_flight.pop(0)))


def _results(results: list[Result]) -> Iterator[Result]:
    yield from results
