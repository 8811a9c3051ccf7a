"""The resumable order of a supervised trainer's micro-batches (ORM, PRM).

An epoch's items are put in a seeded order (the trainer's ``order_of_epoch``), cut into micro-batches of
``batch_size`` and grouped ``grad_accum`` at a time into optimiser steps; a group never spans two epochs.
:class:`DataPosition` (epoch, micro-batches consumed) is all a checkpoint needs to continue the same
sequence exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class DataPosition:
    """Where a run is in its data: the epoch and how many of its micro-batches are done."""

    epoch: int = 0
    """Epochs completed."""
    micro: int = 0
    """Micro-batches of the current epoch already trained on."""

    def state_dict(self) -> dict[str, int]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.micro = int(state["epoch"]), int(state["micro"])


def optimizer_groups(
    order_of_epoch: Callable[[int], list[int]],
    batch_size: int,
    grad_accum: int,
    position: DataPosition,
) -> Iterator[tuple[list[list[int]], bool]]:
    """Yields ``(micro-batches of one optimiser step, ends_epoch)`` forever, from ``position`` on, and
    advances ``position`` before each yield (so a checkpoint taken after the step resumes after it)."""
    while True:
        order = order_of_epoch(position.epoch)
        micro = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        while position.micro < len(micro):
            group = micro[position.micro : position.micro + grad_accum]
            position.micro += len(group)
            yield group, position.micro >= len(micro)
        position.epoch += 1
        position.micro = 0


class SupervisedState:
    """What a supervised trainer's checkpoint restores besides the weights: optimiser, schedule, data position
    and step, plus anything the trainer adds to ``extra`` (a PRM's history)."""

    def __init__(self, optimizer: Any, scheduler: Any) -> None:
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.position = DataPosition()
        self.step = 0
        self.extra: dict[str, Any] = {}

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "data": self.position.state_dict(),
            **self.extra,
        }

    def restore(self, checkpoint: Any) -> None:
        """Loads a checkpoint's trainer state (and its RNG states) into this run."""
        from .checkpoint import load_state

        state = load_state(checkpoint)
        self.optimizer.load_state_dict(state.pop("optimizer"))
        self.scheduler.load_state_dict(state.pop("scheduler"))
        self.position.load_state_dict(state.pop("data"))
        self.step = state.pop("step")
        state.pop("rng", None)
        self.extra = state
