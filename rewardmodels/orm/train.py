"""Training an outcome reward model: Bradley-Terry on preference pairs or BCE on labelled completions.

A plain PyTorch loop on the shared training layer (:mod:`rewardkit.training`), so every step is visible:
micro-batches of pairs (chosen and rejected in one forward pass), gradient accumulation weighted by
micro-batch size (the accumulated gradient equals the gradient of the mean over the whole optimizer batch),
AdamW and a learning-rate schedule, evaluation every ``eval_steps``, checkpoints every ``save_steps`` that a
later run resumes exactly (model, optimizer, scheduler, RNG states and the position in the data order).

Files written to ``output_dir``: ``checkpoints/step-N/`` (``model/`` -- the model or LoRA adapter --,
``trainer_state.pt``, ``config.yaml``; see :mod:`rewardkit.training.checkpoint`), ``metrics.jsonl`` (one
line per log / eval event), and the final model + tokenizer + ``rm_config.json`` at the top level (merged
when LoRA is used), loadable by ``AutoModelForSequenceClassification`` and ``rewardkit rm score``.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.training import CheckpointManager, MetricsLogger, build_optimizer, build_scheduler, load_state
from rewardkit.training import config as config_io
from rewardkit.training.device import autocast, resolve_device, set_threads
from rewardkit.training.loop import DataPosition, optimizer_groups
from rewardkit.training.optim import optimizer_step

from .config import ORMTrainConfig
from .data import collate_pairwise, collate_pointwise, detect_kind, load_rows, tokenize_rows
from .losses import bradley_terry_loss, pointwise_bce_loss

MODEL_DIR = "model"  # the model's folder inside a checkpoint


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of ``output_dir``, or ``None``."""
    return CheckpointManager(output_dir).latest()


def _build_model(config: ORMTrainConfig, tokenizer, checkpoint: Path | None):
    import torch
    from transformers import AutoModelForSequenceClassification

    from .model import add_lora, disable_dropout, resolve_dtype

    torch.manual_seed(config.seed)  # the new score head's init
    kwargs: dict[str, Any] = {"num_labels": 1}
    dtype = resolve_dtype(config.dtype)
    if dtype is not None:
        kwargs["dtype"] = dtype
    saved = str(checkpoint / MODEL_DIR) if checkpoint is not None else None
    source = saved if saved is not None and not config.use_lora else config.model
    model = AutoModelForSequenceClassification.from_pretrained(source, **kwargs)
    model.config.pad_token_id = tokenizer.pad_token_id
    if config.disable_dropout:
        disable_dropout(model)
    if config.gradient_checkpointing:
        # transformers 5 renamed gradient_checkpointing_enable; older versions only have that name
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if config.use_lora:
        if saved is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, saved, is_trainable=True)
        else:
            model = add_lora(
                model,
                r=config.lora_r,
                alpha=config.lora_alpha,
                dropout=config.lora_dropout,
                target_modules=config.lora_target_modules,
            )
    return model


def _split_eval(rows: list[dict], fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_eval = max(1, int(round(len(rows) * fraction)))
    held = set(order[:n_eval])
    return [r for i, r in enumerate(rows) if i not in held], [rows[i] for i in order[:n_eval]]


@dataclass
class _Data:
    kind: str
    train: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    dropped: int


def _load_data(config: ORMTrainConfig, tokenizer, train_rows, eval_rows) -> _Data:
    rows = train_rows if train_rows is not None else load_rows(config.train_file, split=config.train_split)
    if eval_rows is None and config.eval_file:
        eval_rows = load_rows(config.eval_file)
    if eval_rows is None and config.eval_fraction > 0:
        rows, eval_rows = _split_eval(list(rows), config.eval_fraction, config.seed)
    kind = detect_kind(rows)
    if config.loss not in ("auto", kind):
        raise ValueError(f"loss={config.loss!r} but the training rows are {kind}")
    tok_kwargs = {"use_chat_template": config.use_chat_template, "append_eos": config.append_eos}
    train, dropped = tokenize_rows(rows, tokenizer, kind=kind, max_length=config.max_length, **tok_kwargs)
    if not train:
        raise ValueError(f"no training example fits max_length={config.max_length}")
    evals: list[dict[str, Any]] = []
    if eval_rows:
        evals, _ = tokenize_rows(eval_rows, tokenizer, kind=kind, max_length=None, **tok_kwargs)
    return _Data(kind, train, evals, dropped)


def _micro_loss(model, batch: dict[str, Any], kind: str, config: ORMTrainConfig, device) -> tuple[Any, float]:
    """The loss of one micro-batch and its accuracy (chosen above rejected / sign matches the label)."""
    ids = batch["input_ids"].to(device)
    mask = batch["attention_mask"].to(device)
    with autocast(device, config.bf16):
        logits = model(input_ids=ids, attention_mask=mask).logits
    rewards = logits[:, 0].float()
    if kind == "pairwise":
        chosen, rejected = rewards.chunk(2)
        margin = batch["margin"].to(device) if "margin" in batch else None
        loss = bradley_terry_loss(chosen, rejected, margin, config.center_rewards_coefficient)
        return loss, (chosen > rejected).float().mean().item()
    labels = batch["labels"].to(device)
    loss = pointwise_bce_loss(rewards, labels)
    return loss, ((rewards >= 0).float() == (labels >= 0.5).float()).float().mean().item()


@dataclass
class _Window:
    """Running train loss / accuracy between two log lines, weighted by examples."""

    loss: float = 0.0
    acc: float = 0.0
    n: int = 0

    def add(self, loss: float, acc: float, n: int) -> None:
        self.loss += loss * n
        self.acc += acc * n
        self.n += n

    def pop(self) -> dict[str, float]:
        out = {"loss": self.loss / self.n, "accuracy": self.acc / self.n}
        self.loss, self.acc, self.n = 0.0, 0.0, 0
        return out


def _epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    import torch

    return torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()


def _evaluate(model, tokenizer, data: _Data, config: ORMTrainConfig) -> dict[str, Any]:
    from .evaluate import evaluate_examples
    from .scoring import RewardModel

    rm = RewardModel(model, tokenizer, max_tokens=config.eval_token_budget, max_length=None)
    metrics, _ = evaluate_examples(rm, data.evals, data.kind)
    model.train()
    return metrics


def _save_final(model, tokenizer, config: ORMTrainConfig, kind: str, steps: int) -> Any:
    out_dir = Path(config.output_dir)
    final = model.merge_and_unload() if config.use_lora else model
    final.config.pad_token_id = tokenizer.pad_token_id
    final.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    rm_config = {
        "kind": kind,
        "use_chat_template": config.use_chat_template,
        "append_eos": config.append_eos,
        "max_length": config.max_length,
        "base_model": config.model,
        "steps": steps,
    }
    (out_dir / "rm_config.json").write_text(json.dumps(rm_config, indent=2))
    return final


def train_orm(
    config: ORMTrainConfig,
    *,
    tokenizer: Any | None = None,
    train_rows: list[dict[str, Any]] | None = None,
    eval_rows: list[dict[str, Any]] | None = None,
    stop_after_steps: int | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Trains an outcome reward model; returns a summary (final eval metrics, steps, paths, timings).

    ``train_rows`` / ``eval_rows`` replace the files; ``stop_after_steps`` ends the run early after saving
    a checkpoint at that step (how the resume test interrupts a run); ``callback`` gets every log event.
    """
    from .model import load_tokenizer

    set_threads(config.num_threads)
    out_dir = Path(config.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer or load_tokenizer(config.model)
    data = _load_data(config, tokenizer, train_rows, eval_rows)
    checkpoints = CheckpointManager(out_dir, keep=config.save_total_limit)
    checkpoint = checkpoints.resolve(config.resume_from_checkpoint)

    device = resolve_device(config.device)
    model = _build_model(config, tokenizer, checkpoint).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(
        params,
        lr=config.learning_rate,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_epsilon,
        weight_decay=config.weight_decay,
    )
    bs, ga = config.per_device_train_batch_size, config.gradient_accumulation_steps
    micro_per_epoch = math.ceil(len(data.train) / bs)
    steps_per_epoch = math.ceil(micro_per_epoch / ga)
    total_steps = (
        config.max_steps if config.max_steps > 0 else math.ceil(config.num_train_epochs * steps_per_epoch)
    )
    scheduler = build_scheduler(
        optimizer,
        config.lr_scheduler_type,
        warmup_steps=math.ceil(config.warmup_ratio * total_steps),
        total_steps=total_steps,
        library="transformers",
    )
    position, step = DataPosition(), 0
    if checkpoint is not None:
        state = load_state(checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        position.load_state_dict(state["data"])
        step = state["step"]

    log = MetricsLogger(
        out_dir,
        console=sys.stdout if config.log_to_stdout else None,
        tensorboard=config.tensorboard,
        resume_step=step if checkpoint is not None else None,
    )

    def emit(event: dict[str, Any]) -> None:
        log.log(event["step"], {k: v for k, v in event.items() if k != "step"})
        if callback:
            callback(event)

    def save() -> Path:
        state = {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "data": position.state_dict(),
            "total_steps": total_steps,
        }
        return checkpoints.save(
            step,
            models={MODEL_DIR: model},
            state=state,
            tokenizer=tokenizer,
            config_yaml=config_io.dump(config),
        )

    log.event(
        "start",
        kind=data.kind,
        train_examples=len(data.train),
        dropped_too_long=data.dropped,
        eval_examples=len(data.evals),
        total_steps=total_steps,
        resumed_from=str(checkpoint) if checkpoint else None,
        trainable_params=sum(p.numel() for p in params),
    )
    model.train()
    window = _Window()
    last_eval: dict[str, Any] | None = None
    t0 = time.perf_counter()
    stopped_early = False
    collate = collate_pairwise if data.kind == "pairwise" else collate_pointwise
    order = lambda epoch: _epoch_order(len(data.train), config.seed, epoch)  # noqa: E731
    groups = optimizer_groups(order, bs, ga, position)
    try:
        while step < total_steps:
            group, _ = next(groups)
            n_group = sum(len(m) for m in group)
            optimizer.zero_grad(set_to_none=True)
            for idx in group:
                batch = collate([data.train[i] for i in idx], tokenizer.pad_token_id)
                loss, acc = _micro_loss(model, batch, data.kind, config, device)
                # size-weighted so the accumulated gradient is that of the mean over the optimizer batch
                (loss * (len(idx) / n_group)).backward()
                window.add(loss.item(), acc, len(idx))
            optimizer_step(params, optimizer, scheduler, config.max_grad_norm)
            step += 1
            if config.logging_steps and step % config.logging_steps == 0 and window.n:
                emit(
                    {
                        "event": "train",
                        "step": step,
                        "epoch": position.epoch + position.micro / micro_per_epoch,
                        **window.pop(),
                        "learning_rate": scheduler.get_last_lr()[0],
                        "elapsed_s": round(time.perf_counter() - t0, 2),
                    }
                )
            if data.evals and config.eval_steps and step % config.eval_steps == 0:
                last_eval = _evaluate(model, tokenizer, data, config)
                emit({"event": "eval", "step": step, **last_eval})
            saved = bool(config.save_steps and step % config.save_steps == 0)
            if saved:
                save()
            if stop_after_steps is not None and step >= stop_after_steps:
                if not saved:
                    save()
                stopped_early = True
                break

        summary: dict[str, Any] = {
            "output_dir": str(out_dir),
            "kind": data.kind,
            "steps": step,
            "train_examples": len(data.train),
            "dropped_too_long": data.dropped,
            "train_seconds": round(time.perf_counter() - t0, 2),
            "stopped_early": stopped_early,
        }
        if stopped_early:
            summary["checkpoint"] = str(checkpoints.path(step))
            return summary
        if data.evals and (last_eval is None or not config.eval_steps or step % config.eval_steps):
            last_eval = _evaluate(model, tokenizer, data, config)
            emit({"event": "eval", "step": step, **last_eval})
        summary["eval"] = last_eval
        final = _save_final(model, tokenizer, config, data.kind, step)
        log.event("end", **{k: v for k, v in summary.items() if k != "eval"})
        summary["model"] = final
        return summary
    finally:
        log.close()
