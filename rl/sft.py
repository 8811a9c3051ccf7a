"""A short supervised warm start: next-token cross-entropy on (prompt, completion) pairs.

RL from a verifier only learns when the policy is sometimes right; from random weights it never is. The
demo therefore first imitates a few thousand solved problems, then hands over to GRPO. The loss covers the
completion tokens and the EOS token (so the model learns to stop), never the prompt.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from rewardlab.training import MetricsLogger, build_scheduler, optimizer_from_config, optimizer_step
from rewardlab.training.config import BaseTrainingConfig


@dataclass
class SFTConfig(BaseTrainingConfig):
    """Supervised warm-start settings (the shared fields of :class:`~rewardlab.training.config.BaseTrainingConfig`
    with this trainer's defaults)."""

    DEPRECATED = {
        "steps": "max_steps",
        "batch_size": "per_device_train_batch_size",
        "lr": "learning_rate",
        "schedule": "lr_scheduler_type",
        "log_every": "logging_steps",
    }
    UNSUPPORTED = {
        "gradient_accumulation_steps": "the warm start takes one optimiser step per batch",
        "warmup_ratio": "use warmup_steps",
        "save_steps": "the warm start saves nothing (save from the callback)",
        "save_total_limit": "the warm start saves nothing",
        "eval_steps": "the warm start evaluates nothing (evaluate from the callback)",
    }

    max_steps: int = 300
    """Optimiser steps."""
    per_device_train_batch_size: int = 32
    """Pairs per step."""
    learning_rate: float = 3e-3
    """Peak learning rate of AdamW."""
    lr_scheduler_type: str = "cosine"
    """Learning-rate schedule after the warm-up (``rewardlab.training.SCHEDULES``: ``cosine``, ``constant``...)."""
    warmup_steps: int = 20
    """Linear warm-up steps before the schedule."""
    min_lr_ratio: float = 0.1
    """The cosine decays to ``learning_rate * min_lr_ratio``."""
    seed: int = 0
    """Seeds batch order and dropout."""
    logging_steps: int = 50
    """Steps between log lines (0: silent)."""
    output_dir: str | None = None
    """Where the warm start writes ``metrics.jsonl`` (each step's ``loss``, ``learning_rate``, ``grad_norm``)
    and the trackers of ``report_to`` their local files; ``None``: no metrics file, no trackers."""
    report_to: list[str] = field(default_factory=list)
    """Experiment trackers that get the metrics (``tensorboard``, ``wandb``, ``trackio``, ``mlflow``; needs
    ``output_dir``); none by default: the warm start logs through its ``log`` function."""
    schedule_steps: int | None = None
    """Length of the cosine schedule (default ``max_steps``); longer than ``max_steps`` stops the warm start
    early on a still-high learning rate (a deliberately partial warm start)."""


Completion = str | Sequence[tuple[str, bool]]
"""A completion's text, or its segments with whether each is trained on: a multi-turn demonstration's tool
output is context, never a target (``[("<calculator>2*3</calculator>", True), ("<output>6</output>", False),
("\\boxed{6}", True)]``)."""


Encoded = tuple[list[int], list[int], list[bool]]
"""Prompt ids, completion ids (EOS last), and whether each completion token is a target."""


def encode_pairs(tokenizer: Any, pairs: Sequence[tuple[str, Completion]]) -> list[Encoded]:
    """Token ids of each prompt and of each completion followed by EOS (a target), with the target flags."""
    eos = tokenizer.eos_token_id
    out = []
    for prompt, completion in pairs:
        p = tokenizer(prompt)["input_ids"]
        segments = [(completion, True)] if isinstance(completion, str) else list(completion)
        if eos is not None:
            segments.append((None, True))
        c: list[int] = []
        trained: list[bool] = []
        for text, target in segments:
            ids = [eos] if text is None else tokenizer(text, add_special_tokens=False)["input_ids"]
            c += ids
            trained += [target] * len(ids)
        out.append((p, c, trained))
    return out


def collate(batch: Sequence[Encoded], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (-100 on the prompt, untrained
    segments and padding)."""
    width = max(len(p) + len(c) for p, c, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, (p, c, trained) in enumerate(batch):
        seq = p + c
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
        labels[row, len(p) : len(seq)] = torch.tensor(
            [t if keep else -100 for t, keep in zip(c, trained, strict=True)]
        )
    return ids, mask, labels


def sft(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[tuple[str, Completion]],
    config: SFTConfig | None = None,
    *,
    log: Callable[[str], None] | None = print,
    callback: Callable[[int], bool | None] | None = None,
) -> list[float]:
    """Trains ``model`` in place on ``pairs`` of (prompt, completion or segments); returns the loss of each
    step.

    ``callback(step)`` runs after every optimiser step (1-based), e.g. to evaluate or save; returning True
    stops the warm start there.
    """
    config = config or SFTConfig()
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    data = encode_pairs(tokenizer, pairs)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    opt = optimizer_from_config(model.parameters(), config)
    sched = build_scheduler(
        opt,
        config.lr_scheduler_type,
        warmup_steps=config.warmup_steps,
        total_steps=config.schedule_steps or config.max_steps,
        min_lr_ratio=config.min_lr_ratio,
    )
    model.train()
    order: list[int] = []
    losses = []
    start = time.perf_counter()
    batch_size = config.per_device_train_batch_size
    # metrics.jsonl and the trackers only with an output_dir (otherwise this logger writes nothing)
    metrics = MetricsLogger(config.output_dir, console=None, report_to=config.report_to, config=config)
    try:
        for step in range(config.max_steps):
            if len(order) < batch_size:
                more = list(range(len(data)))
                rng.shuffle(more)
                order += more
            batch = [data[i] for i in order[:batch_size]]
            del order[:batch_size]
            ids, mask, labels = collate(batch, pad_id)
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
            opt.zero_grad(set_to_none=True)
            out.loss.backward()
            lr = sched.get_last_lr()[0]
            grad_norm = optimizer_step(model.parameters(), opt, sched, config.max_grad_norm)
            losses.append(out.loss.item())
            metrics.log(step + 1, {"loss": losses[-1], "learning_rate": lr, "grad_norm": grad_norm})
            if callback is not None:
                stop = callback(step + 1)
                model.train()
                if stop:
                    break
            if log and config.logging_steps and (step + 1) % config.logging_steps == 0:
                recent = losses[-config.logging_steps :]
                log(
                    f"[sft] step {step + 1}/{config.max_steps} loss {sum(recent) / len(recent):.4f} "
                    f"({time.perf_counter() - start:.0f}s)"
                )
    finally:
        metrics.close()
    model.eval()
    return losses
