"""The options of PRM training (``rewardlab rm train --type prm``), apart from the trainer so that the CLI
builds its flags without importing torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rewardlab.config import Renamed
from rewardlab.rewardmodels.prm.model import PRMConfig
from rewardlab.training.config import BaseTrainingConfig


def _report_to(tensorboard: Any) -> dict[str, Any]:
    """The former ``tensorboard: true/false`` as ``report_to``."""
    return {"report_to": "tensorboard" if tensorboard else "none"}


@dataclass
class PRMTrainConfig(BaseTrainingConfig):
    """Options of :func:`train_prm` (the ``rewardlab rm train --type prm`` flags); the optimiser, schedule,
    logging and checkpoint fields are :class:`~rewardlab.training.config.BaseTrainingConfig`'s."""

    DEPRECATED = {
        "batch_size": "per_device_train_batch_size",
        "grad_accum": "gradient_accumulation_steps",
        "eval_every": "eval_steps",
        "log_every": "logging_steps",
        "tensorboard": Renamed("report_to", _report_to),
    }

    model: str = ""
    """Base model or PRM to start from (hub name or local path)."""
    head: str = "token"
    """``"token"`` (token-classification head, TRL) or ``"lm"`` ("+"/"-" next token, Math-Shepherd)."""
    train_file: str = ""
    """Step-labelled training data (JSONL in any layout of :mod:`.data`)."""
    eval_file: str | None = None
    """Held-out data evaluated after every epoch (and every ``eval_steps`` steps)."""
    output_dir: str | None = None
    """Where the trained PRM is saved (``None``: not saved)."""
    data_format: str = "auto"
    """Layout of the data files, ``"auto"`` to detect per row."""
    labels: str = "soft"
    """``"soft"`` trains on the labels as given; ``"hard"`` binarises them (> ``hard_threshold``)."""
    hard_threshold: float = 0.0
    """Soft labels above it count as right in ``hard`` mode (0.0: any rollout succeeded, Math-Shepherd's
    hard estimation)."""
    epochs: int = 1
    """Passes over the training data."""
    max_steps: int = 0
    """Stop after this many optimiser steps (<= 0: no limit)."""
    learning_rate: float = 2e-5
    """AdamW learning rate (peak; linear warmup then ``lr_scheduler_type`` decay)."""
    per_device_train_batch_size: int = 8
    """Sequences per micro-batch."""
    max_length: int = 2048
    """Longest input in tokens (longer inputs lose prompt tokens, then trailing steps)."""
    step_marker: str = "\n"
    """Text after every step whose last token is read (TRL ``"\\n"``; Math-Shepherd ``" ки"``)."""
    step_joiner: str = ""
    """Text between a step's marker and the next step."""
    prompt_separator: str = "\n"
    """Text between prompt and first step."""
    good_token: str = "+"
    """``lm`` head: the "right" token."""
    bad_token: str = "-"
    """``lm`` head: the "wrong" token."""
    aggregation: str = "min"
    """Default aggregation saved with the model (``min``, ``prod``, ``last``, ``mean``)."""
    threshold: float = 0.5
    """Score below which a step counts as wrong in evaluation."""
    neutral: float = 1.0
    """Label of PRM800K's neutral (rating 0) steps."""
    seed: int = 0
    """Random seed (data order, new head initialisation)."""
    eval_steps: int = 0
    """Evaluate every this many optimiser steps (0: only after each epoch)."""
    logging_steps: int = 0
    """Print the running loss every this many optimiser steps (0: silent; ``metrics.jsonl`` gets every step)."""
    save_steps: int = 0
    """Save a checkpoint (``output_dir/checkpoints/step-N``) every this many optimiser steps (0: none)."""
    resume_from_checkpoint: str | bool | None = None
    """A checkpoint folder, or ``True`` / ``"latest"`` for the newest one in ``output_dir``."""
    device: str | None = None
    """``"cpu"``, ``"cuda"``...; ``None`` picks CUDA when available."""

    def prm_config(self) -> PRMConfig:
        return PRMConfig(
            head=self.head,
            step_marker=self.step_marker,
            step_joiner=self.step_joiner,
            prompt_separator=self.prompt_separator,
            good_token=self.good_token,
            bad_token=self.bad_token,
            max_length=self.max_length,
            aggregation=self.aggregation,
            threshold=self.threshold,
        )


__all__ = ["PRMTrainConfig"]
