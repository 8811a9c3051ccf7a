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

from rewardlab.progress import progress_bar


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
        # lazy: pulls in torch
        from .checkpoint import load_state

        state = load_state(checkpoint)
        self.optimizer.load_state_dict(state.pop("optimizer"))
        self.scheduler.load_state_dict(state.pop("scheduler"))
        self.position.load_state_dict(state.pop("data"))
        self.step = state.pop("step")
        state.pop("rng", None)
        self.extra = state


class SupervisedRun:
    """The loop a supervised trainer (ORM, PRM) shares: optimiser steps over :func:`optimizer_groups` up to
    ``total_steps``, the trainer's logging / evaluation / checkpoints after each, and a checkpoint when the
    run is interrupted early.

    A subclass sets ``state`` (:class:`SupervisedState`), ``total_steps``, ``batch_size``, ``grad_accum`` and
    ``save_steps``, and implements :meth:`order_of_epoch`, :meth:`train_step`, :meth:`after_step` and
    :meth:`save`. :meth:`run` shows a progress bar of optimiser steps (``progress``: ``None`` only on a
    terminal); the subclass puts its loss and evaluation next to the count with :meth:`show`.
    """

    state: SupervisedState
    total_steps: int
    batch_size: int
    grad_accum: int
    save_steps: int
    bar: Any = None
    """The progress bar while :meth:`run` runs."""
    shown: dict[str, str]
    """What the bar shows after its count."""

    def show(self, **values: str) -> None:
        """Values shown after the bar's count (kept until replaced: the last loss, the last evaluation)."""
        if self.bar is not None:
            self.shown.update(values)
            self.bar.set_postfix(self.shown, refresh=False)

    def order_of_epoch(self, epoch: int) -> list[int]:  # pragma: no cover - abstract
        raise NotImplementedError

    def train_step(self, group: list[list[int]]) -> None:  # pragma: no cover - abstract
        """One optimiser step over the micro-batches of ``group``; advances ``state.step``."""
        raise NotImplementedError

    def after_step(self, ends_epoch: bool) -> None:  # pragma: no cover - abstract
        """Logging, evaluation and checkpoints due at ``state.step``."""
        raise NotImplementedError

    def save(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def saves_at(self, step: int) -> bool:
        """Whether ``after_step`` writes a checkpoint at ``step`` (every ``save_steps``)."""
        return bool(self.save_steps and step % self.save_steps == 0)

    def run(
        self, stop_after_steps: int | None = None, *, progress: bool | None = None, name: str = "train"
    ) -> bool:
        """Trains up to ``total_steps``; returns True when it stopped at ``stop_after_steps`` instead (with a
        checkpoint at that step, so a later run resumes there). ``progress``: a bar named ``name``."""

        groups = optimizer_groups(self.order_of_epoch, self.batch_size, self.grad_accum, self.state.position)
        self.shown = {}
        with progress_bar(self.total_steps, name, unit="step", enabled=progress) as self.bar:
            self.bar.update(self.state.step)  # a resumed run starts at its checkpoint's step
            while self.state.step < self.total_steps:
                group, ends_epoch = next(groups)
                self.train_step(group)
                self.after_step(ends_epoch)
                self.bar.update(1)
                if stop_after_steps is not None and self.state.step >= stop_after_steps:
                    if not self.saves_at(self.state.step):
                        self.save()
                    return True
        return False
