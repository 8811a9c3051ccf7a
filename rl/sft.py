"""A short supervised warm start: next-token cross-entropy on (prompt, completion) pairs.

RL from a verifier only learns when the policy is sometimes right; from random weights it never is. The
demo therefore first imitates a few thousand solved problems, then hands over to GRPO. The loss covers the
completion tokens and the EOS token (so the model learns to stop), never the prompt.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rewardkit.training import build_optimizer, build_scheduler, optimizer_step


@dataclass
class SFTConfig:
    """Supervised warm-start settings."""

    steps: int = 300
    """Optimiser steps."""
    batch_size: int = 32
    """Pairs per step."""
    lr: float = 3e-3
    """Peak learning rate of AdamW."""
    schedule: str = "cosine"
    """Learning-rate schedule after the warm-up (``rewardkit.training.SCHEDULES``: ``cosine``, ``constant``...)."""
    warmup_steps: int = 20
    """Linear warm-up steps before the schedule."""
    min_lr_ratio: float = 0.1
    """The cosine decays to ``lr * min_lr_ratio``."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    seed: int = 0
    """Seeds batch order and dropout."""
    log_every: int = 50
    """Steps between log lines (0: silent)."""
    schedule_steps: int | None = None
    """Length of the cosine schedule (default ``steps``); longer than ``steps`` stops the warm start early on
    a still-high learning rate (a deliberately partial warm start)."""


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
    opt = build_optimizer(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sched = build_scheduler(
        opt,
        config.schedule,
        warmup_steps=config.warmup_steps,
        total_steps=config.schedule_steps or config.steps,
        min_lr_ratio=config.min_lr_ratio,
    )
    model.train()
    order: list[int] = []
    losses = []
    start = time.perf_counter()
    for step in range(config.steps):
        if len(order) < config.batch_size:
            more = list(range(len(data)))
            rng.shuffle(more)
            order += more
        batch = [data[i] for i in order[: config.batch_size]]
        del order[: config.batch_size]
        ids, mask, labels = collate(batch, pad_id)
        out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        optimizer_step(model.parameters(), opt, sched, config.max_grad_norm)
        losses.append(out.loss.item())
        if callback is not None:
            stop = callback(step + 1)
            model.train()
            if stop:
                break
        if log and config.log_every and (step + 1) % config.log_every == 0:
            recent = losses[-config.log_every :]
            log(
                f"[sft] step {step + 1}/{config.steps} loss {sum(recent) / len(recent):.4f} "
                f"({time.perf_counter() - start:.0f}s)"
            )
    model.eval()
    return losses
