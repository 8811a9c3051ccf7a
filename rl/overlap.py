"""Asynchronous, off-policy rollouts with bounded staleness: batches are generated in a thread while the
trainer updates on earlier ones (``rollout.async_staleness``).

Synchronous RL alternates: generate batch ``s`` with the weights after ``s`` updates, then update. Here a
producer thread generates batch ``s`` as soon as the trainer has published the weights of update
``s - staleness`` (verl's one-step-off-policy and AReaL's bounded staleness), so generation of the next
batch overlaps the current update. Batch ``s`` is then sampled by a policy at most ``staleness`` updates old;
the trainer's recomputed ``pi_old`` differs from the sampler's ``mu`` by that lag, which the rollout
importance weights (``algorithm.rollout_is``, :func:`rewardlab.core_algos.rollout_importance_weights`)
correct, with the sampler's own log-probabilities.

This module only schedules: what one batch is (generation, scoring) and how weights reach the sampler's
model are the caller's ``produce`` function.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["OverlappedRollouts", "Produced"]


@dataclass
class Produced:
    """One batch from the producer thread."""

    item: Any
    """What ``produce`` returned."""
    version: int
    """The number of updates behind the weights that sampled it: ``max(step - staleness, start)``."""
    wait_s: float = 0.0
    """Seconds the trainer waited for it (0 when it was ready)."""


class OverlappedRollouts:
    """Runs ``produce(step, weights)`` for ``step = start .. stop - 1`` in a daemon thread, each as soon as
    the trainer has published version ``v = max(step - staleness, start)``, with ``weights`` that version's
    (``None`` for ``start``: the sampler's copy already holds them). Every batch is sampled by exactly that
    version, never a newer one that happens to be ready, so a run does not depend on thread timing and a
    seed reproduces it. ``take(step)`` returns the batch of a step, in order; an exception in the thread is
    raised there.

    >>> rollouts = OverlappedRollouts(produce, staleness=1, start=0, stop=100)   # doctest: +SKIP
    >>> batch = rollouts.take(0); ...update...; rollouts.publish(1, policy_state)  # doctest: +SKIP
    """

    def __init__(
        self, produce: Callable[[int, Any | None], Any], *, staleness: int, start: int, stop: int
    ) -> None:
        if staleness < 1:
            raise ValueError(f"staleness must be at least 1, got {staleness}")
        self.produce = produce
        self.staleness = staleness
        self.version = start
        self._weights: dict[int, Any] = {}  # published, not yet loaded: at most staleness + 1 versions
        self._ready: dict[int, Produced] = {}
        self._error: BaseException | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(start, stop), daemon=True, name="rollouts")
        self._thread.start()

    def _run(self, start: int, stop: int) -> None:
        try:
            for step in range(start, stop):
                version = max(step - self.staleness, start)
                with self._cond:
                    while not self._closed and self.version < version:
                        self._cond.wait()
                    if self._closed:
                        return
                    weights = self._weights.pop(version, None)
                    for old in [v for v in self._weights if v < version]:
                        del self._weights[old]
                item = self.produce(step, weights)
                with self._cond:
                    self._ready[step] = Produced(item, version)
                    self._cond.notify_all()
        except BaseException as exc:  # handed to the trainer's next take(), never lost in the thread
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def take(self, step: int) -> Produced:
        """The batch of ``step``, waiting for the thread if needed."""
        t0 = time.perf_counter()
        with self._cond:
            while step not in self._ready and self._error is None:
                if not self._thread.is_alive():
                    raise RuntimeError(f"the rollout thread stopped before producing step {step}")
                self._cond.wait(timeout=1.0)
            if step not in self._ready:
                raise RuntimeError(f"asynchronous rollout failed: {self._error!r}") from self._error
            produced = self._ready.pop(step)
        produced.wait_s = time.perf_counter() - t0
        return produced

    def publish(self, version: int, weights: Any) -> None:
        """The trainer finished its ``version``-th update; ``weights`` reach the sampler for batch
        ``version + staleness``."""
        with self._cond:
            self.version = version
            self._weights[version] = weights
            self._cond.notify_all()

    def close(self) -> None:
        """Stops the thread after the batch it is generating (if any)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
