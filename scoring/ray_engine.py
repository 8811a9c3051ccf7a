"""``engine="ray"``: chunks of items scored by Ray actors, each running the local engine with one worker.

One actor per CPU of the cluster (``num_cpus=1`` each). An actor builds the source once and keeps a
one-worker local :class:`~rewardlab.scoring.Scorer` for its lifetime, so per-row timeouts, crash isolation
and per-row verifiers behave exactly as on one machine and the outputs equal the local engine's; Ray only
spreads the chunks over the machines. The driver keeps at most two chunks per actor in flight (one running,
one queued), sizes chunks to about ``RAY_CHUNK_SECONDS`` of work from the times seen so far, and sends a
chunk to whichever actor is free first: a slow (hostile) row holds one small chunk on one actor, not a
large share of the file.

``ray.init`` joins ``ray_address`` when given (a cluster started with ``ray start --head``), else the
cluster already initialised in this process, else starts a local one with ``workers`` CPUs. Sources with
``runs_in_process = True`` (reward models on a GPU, the code verifier's own sandbox) are not shipped to
Ray: they are scored by the local engine in this process. See ``docs/scoring.md`` for a multi-node recipe.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from rewardlab.extras import require
from rewardlab.scoring.chunks import ChunkSizer

RAY_CHUNK_SECONDS = 0.2
"""Work per chunk: Ray's round trip is about a millisecond, so this keeps it under 1% of the time."""

FIRST_CHUNK = 64
"""Items in the first chunk sent to each actor, before the time per item is known."""

MAX_RAY_CHUNK = 4096


class ScoringActor:
    """A Ray actor (wrapped with ``ray.remote`` at first use): a one-worker local Scorer kept warm."""

    def __init__(self, spec: tuple, timeout: float, scorer_class: type) -> None:
        # The class comes from the driver's Scorer (this module sits under the engine, which imports it);
        # its worker forks now, while the other actors start.
        self.scorer = scorer_class.warm_single_worker(spec, timeout)

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def score(self, items: list[Any], job: Any, first_index: int) -> tuple[list[Any], float]:
        """The outputs of ``items`` (global positions from ``first_index``) and the seconds they took."""
        start = time.perf_counter()
        outputs = list(self.scorer._iter_local(items, job, first_index))
        return outputs, time.perf_counter() - start


_actor_class: Any = None


def _actors(scorer: Any) -> list[Any]:
    """The scorer's actors, created on first use: one per CPU of the cluster."""
    global _actor_class
    ray = require("ray", extra="ray", what="scoring with engine='ray'")

    if scorer._ray is not None:
        return scorer._ray
    if not ray.is_initialized():
        if scorer.ray_address:
            ray.init(address=scorer.ray_address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, scorer.workers), include_dashboard=False, log_to_driver=False)
    if _actor_class is None:
        _actor_class = ray.remote(num_cpus=1, max_restarts=1, max_task_retries=1)(ScoringActor)
    cpus = max(1, int(ray.cluster_resources().get("CPU", scorer.workers or 1)))
    scorer._ray = [
        _actor_class.remote(scorer.default.spec, scorer.timeout, type(scorer)) for _ in range(cpus)
    ]
    scorer.ray_nodes = ray.get([actor.node.remote() for actor in scorer._ray])
    return scorer._ray


def close_actors(scorer: Any) -> None:
    import ray

    for actor in scorer._ray or []:
        ray.kill(actor)
    scorer._ray = None


def iter_outputs_ray(scorer: Any, items: Iterable[Any], job: Any, first_index: int = 0) -> Iterator[Any]:
    """``job``'s outputs in input order, with chunks scored by the scorer's Ray actors."""
    import ray

    if not scorer.default.pooled:
        yield from scorer._iter_local(items, job, first_index)
        return
    actors = _actors(scorer)
    free = deque(actor for actor in actors for _ in range(2))  # two slots per actor: one runs, one waits
    iterator = iter(items)
    in_flight: dict[Any, tuple[int, Any]] = {}  # ref -> (chunk number, actor)
    finished: dict[int, list[Any]] = {}
    n_chunks = next_chunk = 0
    n_read = first_index
    sizer, exhausted = ChunkSizer(RAY_CHUNK_SECONDS, FIRST_CHUNK, MAX_RAY_CHUNK), False
    ahead = 8 * len(actors)  # chunks done or running beyond the oldest unfinished one (bounds memory)
    while True:
        while free and not exhausted and n_chunks - next_chunk < ahead:
            size = sizer.size()
            chunk = list(itertools.islice(iterator, size))
            exhausted = len(chunk) < size
            if not chunk:
                break
            actor = free.popleft()
            in_flight[actor.score.remote(chunk, job, n_read)] = (n_chunks, actor)
            n_chunks, n_read = n_chunks + 1, n_read + len(chunk)
        while next_chunk in finished:
            yield from finished.pop(next_chunk)
            next_chunk += 1
        if not in_flight:
            return
        [ref], _ = ray.wait(list(in_flight), num_returns=1)
        number, actor = in_flight.pop(ref)
        outputs, seconds = ray.get(ref)
        finished[number] = outputs
        free.append(actor)
        sizer.observe(seconds, len(outputs))
