"""The RL step's asynchronous rollout stage (``rollout.async_staleness``): a thread samples the next steps'
batches with a copy of the policy while the trainer updates on earlier ones.

:class:`AsyncSampler` owns what the trainer's synchronous path does not need: the copy of the policy on the
hf backend, the :class:`~rewardlab.rl.overlap.OverlappedRollouts` scheduler that runs the thread, and the
data state (position, curriculum) after the last batch trained (the thread draws ahead of it). Generation
and scoring are the :class:`~rewardlab.rl.sampling.Sampler`'s, called with the step a batch is for.
"""

from __future__ import annotations

from typing import Any

import torch

from rewardlab.generation import get_backend
from rewardlab.rl.batch import Rollout
from rewardlab.rl.overlap import OverlappedRollouts
from rewardlab.rl.policy import frozen_copy
from rewardlab.rl.sampling import Sampler

__all__ = ["AsyncSampler"]


class AsyncSampler:
    """The rollout thread of a run: :meth:`start` it for steps ``step .. end - 1``, :meth:`take` each step's
    batch, :meth:`publish` the policy after each update, :meth:`stop` it when the loop ends."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self.overlap: OverlappedRollouts | None = None
        self._model: Any | None = None  # the thread's copy of the policy, kept across train() calls
        self._state: dict[str, Any] | None = None

    @property
    def running(self) -> bool:
        return self.overlap is not None

    def start(self, step: int, end: int) -> None:
        """A copy of the policy samples batches ``step .. end - 1`` at most ``rollout.async_staleness``
        updates behind (:class:`OverlappedRollouts`)."""
        sampler, cfg = self.sampler, self.sampler.cfg
        if self._model is None:
            self._model = frozen_copy(sampler.policy)
        backend = get_backend("hf", self._model, sampler.tokenizer, batch_size=cfg.rollout.batch_size)

        def produce(step: int, weights: dict[str, torch.Tensor] | None) -> tuple[Rollout, dict, tuple]:
            if weights is not None:
                self._model.load_state_dict(weights)
            timings = {"generate": 0.0, "score": 0.0}
            prompts = sampler.prompts.draw(cfg.train.prompts_per_step)
            rollout = sampler.rollout(prompts, 0, timings, step=step, backend=backend)
            # the data state once this batch is drawn and observed: what a run resumed after it starts from
            return rollout, timings, sampler.prompts.state_dict()

        staleness = cfg.rollout.async_staleness
        self.overlap = OverlappedRollouts(produce, staleness=staleness, start=step, stop=end)

    def take(self, step: int, timings: dict[str, float], metrics: dict[str, Any]) -> Rollout:
        """Step ``step``'s batch from the thread; its generation and scoring ran during earlier updates."""
        produced = self.overlap.take(step)
        rollout, produced_timings, self._state = produced.item
        timings.update(produced_timings)
        metrics["async/staleness"] = step - produced.version
        metrics["timing/wait_rollout_s"] = produced.wait_s
        return rollout

    def publish(self, step: int) -> None:
        """The trainer finished update ``step``: a copy of the policy's weights for the thread's model."""
        if self.overlap is not None:
            weights = {k: v.detach().clone() for k, v in self.sampler.policy.state_dict().items()}
            self.overlap.publish(step, weights)

    @property
    def trained_state(self) -> dict[str, Any]:
        """The data state (position, curriculum) after the last batch trained: the thread has drawn ahead,
        and a resumed run must start after what was trained, not after what was generated."""
        if self.overlap is not None and self._state is not None:
            return self._state
        return self.sampler.prompts.state_dict()

    def stop(self) -> None:
        """Stops the thread; the next run draws after the last batch trained."""
        if self.overlap is None:
            return
        self.overlap.close()
        self.overlap = None
        if self._state is not None:
            self.sampler.prompts.load_state_dict(self._state)
            self._state = None
