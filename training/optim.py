"""The optimiser and learning-rate schedule every trainer builds, and one optimiser step.

Schedules: ``constant``, ``linear`` and ``cosine`` (decaying to ``min_lr_ratio`` of the peak) after a linear
warm-up whose first step already trains (``(step + 1) / warmup``: the RL, PRM and SFT trainers). Any other
name, and every name with ``library="transformers"``, is ``transformers.get_scheduler``'s: its warm-up starts
at 0 (``step / warmup``) and its ``constant`` has none. The ORM trainer keeps that convention because its
config follows TRL's ``RewardConfig``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

SCHEDULES = ("constant", "linear", "cosine")


def build_optimizer(
    params: Iterable[torch.nn.Parameter],
    *,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> torch.optim.AdamW:
    """AdamW over the parameters that require a gradient."""
    trainable = [p for p in params if p.requires_grad]
    return torch.optim.AdamW(trainable, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)


def lr_multiplier(
    step: int, *, schedule: str, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0
) -> float:
    """The factor on the peak learning rate at optimiser step ``step`` (0-based)."""
    if warmup_steps and step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if schedule == "linear":
        decay = 1.0 - progress
    elif schedule == "cosine":
        decay = 0.5 * (1 + math.cos(math.pi * progress))
    elif schedule == "constant":
        return 1.0
    else:
        raise ValueError(f"unknown schedule {schedule!r} (known: {', '.join(SCHEDULES)})")
    return min_lr_ratio + (1 - min_lr_ratio) * decay


def optimizer_from_config(params: Iterable[torch.nn.Parameter], config: Any) -> torch.optim.AdamW:
    """AdamW with a training config's shared fields (``learning_rate``, ``adam_beta1``/``adam_beta2``,
    ``adam_epsilon``, ``weight_decay``: :class:`~rewardlab.training.config.BaseTrainingConfig`)."""
    return build_optimizer(
        params,
        lr=config.learning_rate,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_epsilon,
        weight_decay=config.weight_decay,
    )


def build_scheduler(
    optimizer: torch.optim.Optimizer,
    schedule: str,
    *,
    warmup_steps: int,
    total_steps: int,
    min_lr_ratio: float = 0.0,
    library: str = "rewardlab",
) -> Any:
    """The learning-rate scheduler of ``schedule`` (stepped once per optimiser step); ``library`` is
    ``rewardlab`` (the schedules above) or ``transformers`` (``get_scheduler``'s, for TRL-style configs)."""
    if library not in ("rewardlab", "transformers"):
        raise ValueError(f"unknown scheduler library {library!r} (rewardlab, transformers)")
    if schedule in SCHEDULES and library == "rewardlab":
        kwargs = {
            "schedule": schedule,
            "warmup_steps": warmup_steps,
            "total_steps": total_steps,
            "min_lr_ratio": min_lr_ratio,
        }
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, **kwargs))
    from transformers import get_scheduler

    return get_scheduler(schedule, optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)


def optimizer_step(
    params: Iterable[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None,
    max_grad_norm: float,
) -> float:
    """Clips the gradient norm (when ``max_grad_norm > 0``), steps the optimiser and the schedule (``None``: a
    constant learning rate); returns the norm before clipping (``nan`` when not clipped)."""
    norm = math.nan
    if max_grad_norm and max_grad_norm > 0:
        norm = float(torch.nn.utils.clip_grad_norm_(list(params), max_grad_norm))
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return norm
