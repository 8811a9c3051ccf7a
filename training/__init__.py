"""The training layer every trainer shares (RL, ORM, PRM, SFT).

* :mod:`.config` -- one config convention: dataclasses with attribute docstrings, YAML + ``--set``;
* :mod:`.optim` -- AdamW, the learning-rate schedules, one optimiser step;
* :mod:`.device` -- device, dtype, bf16 autocast, the torchrun process group;
* :mod:`.parallel` -- data parallelism: DDP or FSDP2 wrapping, no-sync accumulation, gathered weights and
  optimiser state for checkpoints;
* :mod:`.checkpoint` -- one checkpoint layout with exact resume and keep-last-N;
* :mod:`.metrics` -- one metrics logger (JSONL, console, and the trackers of ``report_to``);
* :mod:`.trackers` -- the experiment trackers (TensorBoard, wandb, trackio, MLflow) behind one interface;
* :mod:`.lora` -- LoRA / QLoRA adapters (peft), their merged weights and checkpoint folders.

The trainers keep only what is theirs: the RL loop (:mod:`rewardlab.rl.trainer`), the reward-model losses
(:mod:`rewardlab.rewardmodels.orm.train`, :mod:`rewardlab.rewardmodels.prm.train`), the SFT warm start
(:mod:`rewardlab.rl.sft`).
"""

from __future__ import annotations

import importlib
from typing import Any

# Names load on first use, so importing ``rewardlab.training.config`` (every CLI's flags) does not import
# torch, which the other modules need.
_HOMES = {
    "CheckpointManager": "checkpoint",
    "load_state": "checkpoint",
    "rng_state": "checkpoint",
    "set_rng_state": "checkpoint",
    "MetricsLogger": "metrics",
    "read_metrics": "metrics",
    "TRACKERS": "trackers",
    "Tracker": "trackers",
    "build_optimizer": "optim",
    "optimizer_from_config": "optim",
    "build_scheduler": "optim",
    "optimizer_step": "optim",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


__all__ = [
    "CheckpointManager",
    "ConfigError",
    "MetricsLogger",
    "build_optimizer",
    "optimizer_from_config",
    "build_scheduler",
    "load_state",
    "optimizer_step",
    "read_metrics",
    "rng_state",
    "set_rng_state",
    "TRACKERS",
    "Tracker",
]
