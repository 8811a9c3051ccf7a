"""Training configuration of an outcome reward model (defaults follow TRL's ``RewardConfig``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rewardlab.config import Renamed, build
from rewardlab.training.config import BaseTrainingConfig


def _report_to(tensorboard: Any) -> dict[str, Any]:
    """The former ``tensorboard: true/false`` as ``report_to``."""
    return {"report_to": "tensorboard" if tensorboard else "none"}


@dataclass
class ORMTrainConfig(BaseTrainingConfig):
    """Everything ``train_orm`` needs. Field defaults follow TRL's ``RewardConfig`` / ``ModelConfig``; the
    optimiser, schedule, logging and checkpoint fields are :class:`~rewardlab.training.config.BaseTrainingConfig`'s."""

    DEPRECATED = {"tensorboard": Renamed("report_to", _report_to)}

    model: str = ""
    """Base model: a hub name or a local folder (a causal LM gets a new one-output score head; a saved
    reward model continues training)."""
    train_file: str = ""
    """Training rows: JSONL / JSON / Parquet / CSV path or a ``datasets`` name (pairwise ``prompt, chosen,
    rejected[, margin]`` or pointwise ``prompt, completion, label``)."""
    output_dir: str = "rm-out"
    """Where checkpoints, metrics (``metrics.jsonl``) and the final model go."""
    eval_file: str | None = None
    """Held-out rows of the same kind; ``None`` with ``eval_fraction > 0`` splits the train set."""
    eval_fraction: float = 0.0
    """Share of the training rows held out for evaluation when there is no ``eval_file``."""
    train_split: str | None = None
    """Split to read when ``train_file`` is a ``datasets`` name."""
    loss: str = "auto"
    """``"auto"`` (from the rows: chosen/rejected -> pairwise, completion/label -> pointwise),
    ``"pairwise"`` (Bradley-Terry) or ``"pointwise"`` (BCE)."""
    center_rewards_coefficient: float | None = None
    """Weight of the reward-centering term ``mean((r_c + r_r)^2)`` (Eisenstein et al., 2023); ``None``
    disables it (TRL's default; 0.01 is the recommended value)."""
    max_length: int | None = 1024
    """Longest tokenised sequence; longer examples are dropped (TRL's behaviour) and counted."""
    use_chat_template: bool | None = None
    """Format prompt/completion with the tokenizer's chat template; ``None``: when the tokenizer has one."""
    append_eos: bool = True
    """Append EOS to plain (non-templated) texts so every reward is read at an EOS token."""
    learning_rate: float = 1e-4
    """Peak AdamW learning rate (TRL's reward default 1e-4)."""
    lr_scheduler_type: str = "linear"
    """Any ``transformers.get_scheduler`` name (``linear``, ``cosine``, ``constant``...), with its conventions
    (warm-up from lr 0, as TRL)."""
    num_train_epochs: float = 1.0
    """Passes over the training rows."""
    max_steps: int = -1
    """Optimizer steps to run; > 0 overrides ``num_train_epochs``."""
    per_device_train_batch_size: int = 8
    """Pairs (or pointwise rows) per micro-batch."""
    eval_steps: int = 0
    """Evaluate every this many optimizer steps (0: only at the end)."""
    save_steps: int = 0
    """Save a checkpoint every this many optimizer steps (0: only the final model)."""
    save_total_limit: int | None = None
    """Checkpoints to keep under ``output_dir/checkpoints`` (oldest deleted first); ``None`` keeps all."""
    logging_steps: int = 10
    """Log train loss/accuracy every this many optimizer steps."""
    resume_from_checkpoint: str | bool | None = None
    """A checkpoint folder (``output_dir/checkpoints/step-N``), or ``True`` / ``"latest"`` for the newest one
    in ``output_dir``."""
    seed: int = 42
    """Seed of the score head's init and the data order."""
    dtype: str = "float32"
    """Precision the weights are loaded in (and AdamW keeps); ``float32`` is the safe choice."""
    bf16: bool = False
    """Run forward passes under ``torch.autocast(bfloat16)`` (mixed precision: float32 weights and optimizer
    state, bfloat16 matmuls; the loss is computed in float32)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, ~30% slower)."""
    device: str | None = None
    """``cpu``, ``cuda``...; ``None`` picks CUDA when available."""
    disable_dropout: bool = True
    """Turn off dropout (TRL's default True) so a pair's difference comes from the texts."""
    use_lora: bool = False
    """Train a LoRA adapter (peft) instead of all weights; the final model is saved merged."""
    lora_r: int = 16
    """LoRA rank (TRL default 16)."""
    lora_alpha: int = 32
    """LoRA alpha (TRL default 32)."""
    lora_dropout: float = 0.05
    """LoRA dropout (TRL default 0.05)."""
    lora_target_modules: list[str] | None = field(default=None)
    """Modules to adapt; ``None``: all linear layers."""
    eval_token_budget: int = 16384
    """Token budget of one dynamic batch when scoring the eval set."""
    num_threads: int | None = None
    """``torch.set_num_threads`` for CPU runs; ``None`` leaves torch's default."""
    log_to_stdout: bool = True
    """Print a console line per log / eval event (the events always go to ``metrics.jsonl``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ORMTrainConfig:
        """A config from a mapping of fields (unknown keys and wrong types raise ``ConfigError``)."""

        return build(cls, values, "ORM config")
