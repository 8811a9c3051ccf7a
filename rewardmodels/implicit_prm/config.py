"""The options of implicit-PRM training (``rewardlab rm train --type implicit_prm``), apart from the trainer so
that the CLI builds its flags without importing torch.

Defaults are PRIME's (Cui et al., 2025; github.com/PRIME-RL/PRIME, ``training/verl/trainer/config/
ppo_trainer.yaml``'s ``reward_model`` section and ``training/examples/run_prime_main.sh``) where PRIME sets
the value, else the shared ORM trainer's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rewardlab.config import build
from rewardlab.training.config import BaseTrainingConfig

DEFAULT_BETA = 0.05
"""PRIME's ``reward_model.prime_model.beta_train``."""
LOSS_TYPES = ("ce",)
"""The implicit PRM's losses: ``ce``, PRIME's ``loss_type`` (the only one its online update uses)."""


@dataclass
class ImplicitPRMTrainConfig(BaseTrainingConfig):
    """Options of :func:`~rewardlab.rewardmodels.implicit_prm.train.train_implicit_prm`; the optimiser,
    schedule, logging and checkpoint fields are :class:`~rewardlab.training.config.BaseTrainingConfig`'s."""

    model: str = ""
    """The causal LM the PRM starts from (PRIME: the SFT policy, ``reward_model.prime_model.path``); a saved
    implicit PRM continues training with its own reference."""
    reference: str | None = None
    """The frozen reference ``pi_ref`` (hub name or folder); ``None``: ``model`` itself (PRIME's
    ``ref_path``, the same SFT model, ``ref_type: freeze``)."""
    train_file: str = ""
    """Outcome-labelled rows: ``prompt``, ``completion`` and ``label`` (0/1) or ``reward`` (> 0: correct), in
    JSONL / JSON / Parquet / CSV or a ``datasets`` name."""
    output_dir: str = "implicit-prm-out"
    """Where checkpoints, ``metrics.jsonl`` and the final PRM (weights, tokenizer,
    ``rewardlab_implicit_prm.json``) go."""
    eval_file: str | None = None
    """Held-out rows of the same layout; ``None`` with ``eval_fraction > 0`` splits the training rows."""
    eval_fraction: float = 0.0
    """Share of the training rows held out for evaluation when there is no ``eval_file``."""
    train_split: str | None = None
    """Split to read when ``train_file`` is a ``datasets`` name."""
    beta: float = DEFAULT_BETA
    """The reward's scale in ``r = beta * log(pi_phi / pi_ref)`` (PRIME's ``beta_train``, 0.05)."""
    loss: str = "ce"
    """``ce``: cross-entropy of ``sigmoid(sum of token rewards)`` against the outcome label (PRIME's
    ``loss_type``)."""
    learning_rate: float = 1e-6
    """AdamW learning rate (PRIME's ``prime_model.optim.lr``)."""
    weight_decay: float = 0.0
    """AdamW weight decay (PRIME's ``optim.weight_decay``: 0)."""
    max_grad_norm: float = 10.0
    """Gradient clipping norm (PRIME's runs set ``optim.grad_clip=10.0``; its YAML default is 1.0)."""
    lr_scheduler_type: str = "constant"
    """Learning-rate schedule (PRIME: constant after a warm-up of ``lr_warmup_steps_ratio`` 0)."""
    per_device_train_batch_size: int = 8
    """Rows per forward/backward pass (PRIME's ``reward_model.micro_batch_size`` in its run script: 8)."""
    gradient_accumulation_steps: int = 32
    """Micro-batches per optimiser step: 8 x 32 = 256 rows, PRIME's ``reward_model.mini_batch_size``."""
    num_train_epochs: float = 1.0
    """Passes over the training rows."""
    max_steps: int = -1
    """Optimiser steps to run; > 0 overrides ``num_train_epochs``."""
    max_length: int | None = 4096
    """Longest prompt + completion in tokens; longer rows are dropped and counted (PRIME: 1024 prompt +
    3072 response tokens)."""
    use_chat_template: bool | None = None
    """Format the prompt with the tokenizer's chat template (the assistant turn opened, as a rollout's
    prompt); ``None``: when the tokenizer has one."""
    append_eos: bool = True
    """Append EOS to each completion (a finished rollout ends with it)."""
    eval_steps: int = 0
    """Evaluate every this many optimiser steps (0: only at the end)."""
    save_steps: int = 0
    """Save a checkpoint every this many optimiser steps (0: only the final model)."""
    save_total_limit: int | None = None
    """Checkpoints to keep under ``output_dir/checkpoints`` (oldest deleted first); ``None`` keeps all."""
    logging_steps: int = 10
    """Log train loss / accuracy every this many optimiser steps."""
    resume_from_checkpoint: str | bool | None = None
    """A checkpoint folder (``output_dir/checkpoints/step-N``), or ``True`` / ``"latest"`` for the newest one
    in ``output_dir``."""
    seed: int = 42
    """Seed of the data order and the held-out split."""
    dtype: str = "float32"
    """Precision of both models' weights (PRIME keeps the trained PRM in float32)."""
    bf16: bool = False
    """Run forward passes under ``torch.autocast(bfloat16)`` (PRIME's mixed precision on GPUs: float32
    weights and optimiser state, bfloat16 matmuls)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, slower)."""
    device: str | None = None
    """``cpu``, ``cuda``...; ``None`` picks CUDA when available."""
    num_threads: int | None = None
    """``torch.set_num_threads`` for CPU runs; ``None`` leaves torch's default."""
    log_to_stdout: bool = True
    """Print a console line per log / eval event (the events always go to ``metrics.jsonl``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.loss not in LOSS_TYPES:
            raise ValueError(f"loss: unknown {self.loss!r} (known: {', '.join(LOSS_TYPES)})")
        if not self.beta > 0:
            raise ValueError(f"beta must be > 0, got {self.beta}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ImplicitPRMTrainConfig:
        """A config from a mapping of fields (unknown keys and wrong types raise ``ConfigError``)."""
        return build(cls, values, "implicit PRM config")


__all__ = ["DEFAULT_BETA", "LOSS_TYPES", "ImplicitPRMTrainConfig"]
