"""Training configuration of an outcome reward model (defaults follow TRL's ``RewardConfig``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class ORMTrainConfig:
    """Everything ``train_orm`` needs. Field defaults follow TRL's ``RewardConfig`` / ``ModelConfig``.

    Attributes:
        model: Base model: a hub name or a local folder (a causal LM gets a new one-output score head;
            a saved reward model continues training).
        train_file: Training rows: JSONL / JSON / Parquet / CSV path or a ``datasets`` name (pairwise
            ``prompt, chosen, rejected[, margin]`` or pointwise ``prompt, completion, label``).
        output_dir: Where checkpoints, metrics (``metrics.jsonl``) and the final model go.
        eval_file: Held-out rows of the same kind; ``None`` with ``eval_fraction > 0`` splits the train set.
        eval_fraction: Share of the training rows held out for evaluation when there is no ``eval_file``.
        train_split: Split to read when ``train_file`` is a ``datasets`` name.
        loss: ``"auto"`` (from the rows: chosen/rejected -> pairwise, completion/label -> pointwise),
            ``"pairwise"`` (Bradley-Terry) or ``"pointwise"`` (BCE).
        center_rewards_coefficient: Weight of the reward-centering term ``mean((r_c + r_r)^2)``
            (Eisenstein et al., 2023); ``None`` disables it (TRL's default; 0.01 is the recommended value).
        max_length: Longest tokenised sequence; longer examples are dropped (TRL's behaviour) and counted.
        use_chat_template: Format prompt/completion with the tokenizer's chat template; ``None``: when the
            tokenizer has one.
        append_eos: Append EOS to plain (non-templated) texts so every reward is read at an EOS token.
        learning_rate: Peak AdamW learning rate (TRL's reward default 1e-4).
        weight_decay: AdamW weight decay.
        adam_beta1: AdamW beta1.
        adam_beta2: AdamW beta2.
        adam_epsilon: AdamW epsilon.
        max_grad_norm: Gradient clipping norm (0 disables).
        lr_scheduler_type: Any ``transformers.get_scheduler`` name (``linear``, ``cosine``, ``constant``...).
        warmup_ratio: Fraction of the optimizer steps spent warming up linearly.
        num_train_epochs: Passes over the training rows.
        max_steps: Optimizer steps to run; > 0 overrides ``num_train_epochs``.
        per_device_train_batch_size: Pairs (or pointwise rows) per micro-batch.
        gradient_accumulation_steps: Micro-batches per optimizer step.
        eval_steps: Evaluate every this many optimizer steps (0: only at the end).
        save_steps: Save a checkpoint every this many optimizer steps (0: only the final model).
        save_total_limit: Checkpoints to keep (oldest deleted first); ``None`` keeps all.
        logging_steps: Log train loss/accuracy every this many optimizer steps.
        resume_from_checkpoint: A checkpoint folder, or ``True`` for the newest one in ``output_dir``.
        seed: Seed of the score head's init and the data order.
        dtype: Precision the weights are loaded in (and AdamW keeps); ``float32`` is the safe choice.
        bf16: Run forward passes under ``torch.autocast(bfloat16)`` (mixed precision: float32 weights and
            optimizer state, bfloat16 matmuls; the loss is computed in float32).
        gradient_checkpointing: Recompute activations in the backward pass (less memory, ~30% slower).
        device: ``cpu``, ``cuda``...; ``None`` picks CUDA when available.
        disable_dropout: Turn off dropout (TRL's default True) so a pair's difference comes from the texts.
        use_lora: Train a LoRA adapter (peft) instead of all weights; the final model is saved merged.
        lora_r: LoRA rank (TRL default 16).
        lora_alpha: LoRA alpha (TRL default 32).
        lora_dropout: LoRA dropout (TRL default 0.05).
        lora_target_modules: Modules to adapt; ``None``: all linear layers.
        eval_token_budget: Token budget of one dynamic batch when scoring the eval set.
        num_threads: ``torch.set_num_threads`` for CPU runs; ``None`` leaves torch's default.
        log_to_stdout: Print one JSON line per log / eval event.
    """

    model: str = ""
    train_file: str = ""
    output_dir: str = "rm-out"
    eval_file: str | None = None
    eval_fraction: float = 0.0
    train_split: str | None = None
    loss: str = "auto"
    center_rewards_coefficient: float | None = None
    max_length: int | None = 1024
    use_chat_template: bool | None = None
    append_eos: bool = True
    learning_rate: float = 1e-4
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = 1.0
    lr_scheduler_type: str = "linear"
    warmup_ratio: float = 0.0
    num_train_epochs: float = 1.0
    max_steps: int = -1
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    eval_steps: int = 0
    save_steps: int = 0
    save_total_limit: int | None = None
    logging_steps: int = 10
    resume_from_checkpoint: str | bool | None = None
    seed: int = 42
    dtype: str = "float32"
    bf16: bool = False
    gradient_checkpointing: bool = False
    device: str | None = None
    disable_dropout: bool = True
    use_lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: list[str] | None = field(default=None)
    eval_token_budget: int = 16384
    num_threads: int | None = None
    log_to_stdout: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ORMTrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown ORM config field(s): {sorted(unknown)}")
        return cls(**values)
