"""Training an outcome reward model: Bradley-Terry on preference pairs or BCE on labelled completions.

A plain PyTorch loop on the shared training layer (:mod:`rewardlab.training`), so every step is visible:
micro-batches of pairs (chosen and rejected in one forward pass), gradient accumulation weighted by
micro-batch size (the accumulated gradient equals the gradient of the mean over the whole optimizer batch),
AdamW and a learning-rate schedule, evaluation every ``eval_steps``, checkpoints every ``save_steps`` that a
later run resumes exactly (model, optimizer, scheduler, RNG states and the position in the data order).

Files written to ``output_dir``: ``checkpoints/step-N/`` (``model/`` -- the model or LoRA adapter --,
``trainer_state.pt``, ``config.yaml``; see :mod:`rewardlab.training.checkpoint`), ``metrics.jsonl`` (one
line per log / eval event), and the final model + tokenizer + ``rm_config.json`` at the top level (merged
when LoRA is used), loadable by ``AutoModelForSequenceClassification`` and ``rewardlab rm score``.
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

from rewardlab import config as config_io
from rewardlab.training import CheckpointManager, MetricsLogger, build_scheduler, optimizer_from_config
from rewardlab.training.device import autocast, resolve_device, set_threads
from rewardlab.training.loop import SupervisedRun, SupervisedState
from rewardlab.training.optim import optimizer_step

from .config import ORMTrainConfig
from .data import collate_pairwise, collate_pointwise, detect_kind, load_rows, tokenize_rows
from .evaluate import evaluate_examples
from .losses import bradley_terry_loss, pointwise_bce_loss
from .model import add_lora, disable_dropout, load_tokenizer, resolve_dtype
from .scoring import RewardModel

MODEL_DIR = "model"  # the model's folder inside a checkpoint


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of ``output_dir``, or ``None``."""
    return CheckpointManager(output_dir).latest()


def _build_model(config: ORMTrainConfig, tokenizer, checkpoint: Path | None):
    import torch
    from transformers import AutoModelForSequenceClassification

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


class _ORMRun(SupervisedRun):
    """One ORM training run: the model, its optimiser state, the logger and checkpoints, as methods."""

    def __init__(
        self, config: ORMTrainConfig, tokenizer: Any, data: _Data, callback: Callable | None
    ) -> None:
        self.config, self.tokenizer, self.data, self.callback = config, tokenizer, data, callback
        self.out_dir = Path(config.output_dir)
        self.checkpoints = CheckpointManager(self.out_dir, keep=config.save_total_limit)
        checkpoint = self.checkpoints.resolve(config.resume_from_checkpoint)
        self.device = resolve_device(config.device)
        self.model = _build_model(config, tokenizer, checkpoint).to(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.batch_size, self.grad_accum = (
            config.per_device_train_batch_size,
            config.gradient_accumulation_steps,
        )
        self.save_steps = config.save_steps
        self.micro_per_epoch = math.ceil(len(data.train) / self.batch_size)
        self.total_steps = self._total_steps()
        self.window, self.last_eval, self.started = _Window(), None, time.perf_counter()
        self.state = SupervisedState(*self._optimizer_and_schedule())
        if checkpoint is not None:
            self.state.restore(checkpoint)
        self.log = MetricsLogger(
            self.out_dir,
            console=sys.stdout if config.log_to_stdout else None,
            report_to=config.report_to,
            config=config,
            resume_step=self.state.step if checkpoint is not None else None,
        )
        self.log.event(
            "start",
            kind=data.kind,
            train_examples=len(data.train),
            dropped_too_long=data.dropped,
            eval_examples=len(data.evals),
            total_steps=self.total_steps,
            resumed_from=str(checkpoint) if checkpoint else None,
            trainable_params=sum(p.numel() for p in self.params),
        )

    def _total_steps(self) -> int:
        config = self.config
        if config.max_steps > 0:
            return config.max_steps
        steps_per_epoch = math.ceil(self.micro_per_epoch / self.grad_accum)
        return math.ceil(config.num_train_epochs * steps_per_epoch)

    def _optimizer_and_schedule(self) -> tuple[Any, Any]:
        config = self.config
        optimizer = optimizer_from_config(self.params, config)
        scheduler = build_scheduler(
            optimizer,
            config.lr_scheduler_type,
            warmup_steps=config.warmup_steps or math.ceil(config.warmup_ratio * self.total_steps),
            total_steps=self.total_steps,
            library="transformers",
        )
        return optimizer, scheduler

    def order_of_epoch(self, epoch: int) -> list[int]:
        return _epoch_order(len(self.data.train), self.config.seed, epoch)

    def train_step(self, group: list[list[int]]) -> None:
        """One optimiser step over a group of micro-batches (size-weighted accumulation: the gradient is that
        of the mean over the optimizer batch)."""
        collate = collate_pairwise if self.data.kind == "pairwise" else collate_pointwise
        n_group = sum(len(m) for m in group)
        self.state.optimizer.zero_grad(set_to_none=True)
        for idx in group:
            batch = collate([self.data.train[i] for i in idx], self.tokenizer.pad_token_id)
            loss, acc = _micro_loss(self.model, batch, self.data.kind, self.config, self.device)
            (loss * (len(idx) / n_group)).backward()
            self.window.add(loss.item(), acc, len(idx))
        optimizer_step(self.params, self.state.optimizer, self.state.scheduler, self.config.max_grad_norm)
        self.state.step += 1
        self.show(loss=f"{loss.item():.4f}")

    def emit(self, event: dict[str, Any]) -> None:
        self.log.log(event["step"], {k: v for k, v in event.items() if k != "step"})
        if self.callback:
            self.callback(event)

    def evaluate(self) -> None:
        self.last_eval = _evaluate(self.model, self.tokenizer, self.data, self.config)
        if isinstance(self.last_eval.get("accuracy"), float):
            self.show(eval_acc=f"{self.last_eval['accuracy']:.3f}")
        self.emit({"event": "eval", "step": self.state.step, **self.last_eval})

    def save(self) -> Path:
        return self.checkpoints.save(
            self.state.step,
            models={MODEL_DIR: self.model},
            state={**self.state.state_dict(), "total_steps": self.total_steps},
            tokenizer=self.tokenizer,
            config_yaml=config_io.dump(self.config),
        )

    def after_step(self, ends_epoch: bool) -> None:
        """Logging, evaluation and checkpoints due at this step."""
        config, step = self.config, self.state.step
        if config.logging_steps and step % config.logging_steps == 0 and self.window.n:
            position = self.state.position
            epoch = position.epoch + position.micro / self.micro_per_epoch
            lr = self.state.scheduler.get_last_lr()[0]
            event = {"event": "train", "step": step, "epoch": epoch, **self.window.pop(), "learning_rate": lr}
            self.emit({**event, "elapsed_s": round(time.perf_counter() - self.started, 2)})
        if self.data.evals and config.eval_steps and step % config.eval_steps == 0:
            self.evaluate()
        if self.saves_at(step):
            self.save()

    def summary(self, *, stopped_early: bool) -> dict[str, Any]:
        return {
            "output_dir": str(self.out_dir),
            "kind": self.data.kind,
            "steps": self.state.step,
            "train_examples": len(self.data.train),
            "dropped_too_long": self.data.dropped,
            "train_seconds": round(time.perf_counter() - self.started, 2),
            "stopped_early": stopped_early,
        }


def train_orm(
    config: ORMTrainConfig,
    *,
    tokenizer: Any | None = None,
    train_rows: list[dict[str, Any]] | None = None,
    eval_rows: list[dict[str, Any]] | None = None,
    stop_after_steps: int | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Trains an outcome reward model; returns a summary (final eval metrics, steps, paths, timings).

    ``train_rows`` / ``eval_rows`` replace the files; ``stop_after_steps`` ends the run early after saving
    a checkpoint at that step (how the resume test interrupts a run); ``callback`` gets every log event;
    ``progress``: a bar of optimiser steps (``None``: only on a terminal).
    """

    set_threads(config.num_threads)
    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer or load_tokenizer(config.model)
    run = _ORMRun(config, tokenizer, _load_data(config, tokenizer, train_rows, eval_rows), callback)
    try:
        run.model.train()
        if run.run(stop_after_steps, progress=progress, name="train orm"):
            checkpoint = str(run.checkpoints.path(run.state.step))
            return {**run.summary(stopped_early=True), "checkpoint": checkpoint}
        step = run.state.step
        if run.data.evals and (run.last_eval is None or not config.eval_steps or step % config.eval_steps):
            run.evaluate()
        summary = run.summary(stopped_early=False)
        final = _save_final(run.model, tokenizer, config, run.data.kind, step)
        run.log.event("end", **summary)
        return {**summary, "eval": run.last_eval, "model": final}
    finally:
        run.log.close()
