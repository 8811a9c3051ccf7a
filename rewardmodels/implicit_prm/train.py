"""Training an implicit PRM from outcome labels (PRIME's cross-entropy loss), on the shared training layer.

The loss of a row ``(x, y, label)`` is ``BCE(sigmoid(r_phi(y)), label)`` with ``r_phi(y) = sum_t beta *
(log pi_phi(y_t | x, y_<t) - log pi_ref(y_t | x, y_<t))`` (:func:`rewardlab.core_algos.prime.implicit_prm_loss`):
an outcome reward model whose per-token terms are process rewards. ``pi_phi`` starts from ``model`` and
trains; ``pi_ref`` (``reference``, else ``model``) stays frozen. Micro-batches are accumulated weighted by
size into AdamW steps (clip, schedule); evaluation on held-out rows reports accuracy, ROC-AUC and ECE of
``sigmoid(r_phi(y))`` against the labels (the ORM's pointwise metrics); checkpoints every ``save_steps`` resume
exactly (weights, optimiser, schedule, RNG states, data position).

Files written to ``output_dir``: ``checkpoints/step-N/`` (``model/``, ``trainer_state.pt``, ``config.yaml``),
``metrics.jsonl``, and the final PRM: the trained causal LM, the tokenizer and ``rewardlab_implicit_prm.json``
(beta and the reference), which :meth:`ImplicitPRM.from_pretrained` and ``reward.process:
implicit_prm:PATH`` read.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rewardlab import config as config_io
from rewardlab.rewardmodels.implicit_prm.config import ImplicitPRMTrainConfig
from rewardlab.rewardmodels.implicit_prm.data import OutcomeExample, collate, encode_rows, load_rows
from rewardlab.rewardmodels.implicit_prm.model import ImplicitPRM
from rewardlab.rewardmodels.orm.evaluate import pointwise_metrics
from rewardlab.rewardmodels.orm.model import disable_dropout, load_tokenizer, resolve_dtype
from rewardlab.training import CheckpointManager, MetricsLogger, build_scheduler, optimizer_from_config
from rewardlab.training.checkpoint import load_pretrained_weights
from rewardlab.training.device import autocast, resolve_device, set_threads
from rewardlab.training.loop import SupervisedRun, SupervisedState
from rewardlab.training.optim import optimizer_step

__all__ = ["evaluate_implicit_prm", "train_implicit_prm"]

MODEL_DIR = "model"  # the trainable model's folder inside a checkpoint


@dataclass
class _Data:
    train: list[OutcomeExample]
    evals: list[OutcomeExample]
    dropped: int


def _split_eval(rows: list[dict], fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    held = set(order[: max(1, int(round(len(rows) * fraction)))])
    return [r for i, r in enumerate(rows) if i not in held], [rows[i] for i in sorted(held)]


def _load_data(config: ImplicitPRMTrainConfig, tokenizer: Any, train_rows, eval_rows) -> _Data:
    rows = train_rows if train_rows is not None else load_rows(config.train_file, split=config.train_split)
    if eval_rows is None and config.eval_file:
        eval_rows = load_rows(config.eval_file)
    if eval_rows is None and config.eval_fraction > 0:
        rows, eval_rows = _split_eval(list(rows), config.eval_fraction, config.seed)
    options = {"use_chat_template": config.use_chat_template, "append_eos": config.append_eos}
    train, dropped = encode_rows(rows, tokenizer, max_length=config.max_length, **options)
    if not train:
        raise ValueError(f"no training row fits max_length={config.max_length}")
    evals = encode_rows(eval_rows, tokenizer, **options)[0] if eval_rows else []
    return _Data(train, evals, dropped)


def _build_prm(config: ImplicitPRMTrainConfig, tokenizer: Any, checkpoint: Path | None) -> ImplicitPRM:
    """The PRM: the trainable model from ``model`` (its weights from the checkpoint when resuming) with
    dropout off, the reference frozen."""
    dtype = resolve_dtype(config.dtype)
    prm = ImplicitPRM.from_pretrained(
        config.model, reference=config.reference, beta=config.beta, tokenizer=tokenizer, dtype=dtype
    )
    if checkpoint is not None:
        load_pretrained_weights(prm.model, checkpoint / MODEL_DIR)
    disable_dropout(prm.model)  # a row's reward is a function of its tokens (TRL's reward trainer's choice)
    if config.gradient_checkpointing:
        prm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        prm.model.config.use_cache = False
    return prm


def evaluate_implicit_prm(
    prm: ImplicitPRM, examples: list[OutcomeExample], *, batch_size: int = 8, bf16: bool = False
) -> dict[str, Any]:
    """Accuracy, ROC-AUC and ECE of ``sigmoid(r_phi(y))`` against the labels (``pointwise_metrics``), with
    the mean outcome logit."""
    pad = prm.tokenizer.pad_token_id if prm.tokenizer is not None else 0
    logits: list[float] = []
    was_training = prm.model.training
    prm.model.eval()
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            batch = collate(examples[start : start + batch_size], pad)
            ids, att = batch["input_ids"].to(prm.device), batch["attention_mask"].to(prm.device)
            with autocast(prm.device, bf16):
                logits += prm.outcome_logits(ids, att, batch["response_mask"]).float().cpu().tolist()
    prm.model.train(was_training)
    return pointwise_metrics(logits, [e.label for e in examples])


class _ImplicitPRMRun(SupervisedRun):
    """One training run: the PRM, its optimiser state, the logger and checkpoints."""

    def __init__(
        self, config: ImplicitPRMTrainConfig, tokenizer: Any, data: _Data, callback: Callable | None
    ) -> None:
        self.config, self.tokenizer, self.data, self.callback = config, tokenizer, data, callback
        self.out_dir = Path(config.output_dir)
        self.checkpoints = CheckpointManager(self.out_dir, keep=config.save_total_limit)
        checkpoint = self.checkpoints.resolve(config.resume_from_checkpoint)
        self.device = resolve_device(config.device)
        self.prm = _build_prm(config, tokenizer, checkpoint).to(self.device)
        self.params = self.prm.parameters()
        self.batch_size, self.grad_accum = (
            config.per_device_train_batch_size,
            config.gradient_accumulation_steps,
        )
        self.save_steps = config.save_steps
        self.micro_per_epoch = math.ceil(len(data.train) / self.batch_size)
        self.total_steps = self._total_steps()
        self.window: list[tuple[float, float, int]] = []
        self.last_eval: dict[str, Any] | None = None
        self.started = time.perf_counter()
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
            train_examples=len(data.train),
            dropped=data.dropped,
            eval_examples=len(data.evals),
            total_steps=self.total_steps,
            resumed_from=str(checkpoint) if checkpoint else None,
        )

    def _total_steps(self) -> int:
        if self.config.max_steps > 0:
            return self.config.max_steps
        steps_per_epoch = math.ceil(self.micro_per_epoch / self.grad_accum)
        return max(1, math.ceil(self.config.num_train_epochs * steps_per_epoch))

    def _optimizer_and_schedule(self) -> tuple[Any, Any]:
        config = self.config
        optimizer = optimizer_from_config(self.params, config)
        warmup = config.warmup_steps or math.ceil(config.warmup_ratio * self.total_steps)
        scheduler = build_scheduler(
            optimizer, config.lr_scheduler_type, warmup_steps=warmup, total_steps=self.total_steps
        )
        return optimizer, scheduler

    def order_of_epoch(self, epoch: int) -> list[int]:
        generator = torch.Generator().manual_seed(self.config.seed + epoch)
        return torch.randperm(len(self.data.train), generator=generator).tolist()

    def train_step(self, group: list[list[int]]) -> None:
        """One optimiser step over a group of micro-batches (each weighted by its size: the gradient of the
        mean loss over the step's rows)."""
        n_group = sum(len(m) for m in group)
        self.state.optimizer.zero_grad(set_to_none=True)
        for idx in group:
            batch = collate([self.data.train[i] for i in idx], self.tokenizer.pad_token_id)
            with autocast(self.device, self.config.bf16):
                loss, rewards = self.prm.loss(
                    batch["input_ids"].to(self.device),
                    batch["attention_mask"].to(self.device),
                    batch["response_mask"].to(self.device),
                    batch["labels"],
                    self.config.loss,
                )
            (loss * (len(idx) / n_group)).backward()
            logits = (rewards * batch["response_mask"].to(rewards.device)).sum(-1).cpu()
            acc = float(((logits > 0) == (batch["labels"] > 0.5)).float().mean())
            self.window.append((float(loss.detach()), acc, len(idx)))
        optimizer_step(self.params, self.state.optimizer, self.state.scheduler, self.config.max_grad_norm)
        self.state.step += 1
        self.show(loss=f"{self.window[-1][0]:.4f}")

    def emit(self, event: dict[str, Any]) -> None:
        self.log.log(event["step"], {k: v for k, v in event.items() if k != "step"})
        if self.callback:
            self.callback(event)

    def evaluate(self) -> None:
        self.last_eval = evaluate_implicit_prm(
            self.prm, self.data.evals, batch_size=self.batch_size, bf16=self.config.bf16
        )
        self.prm.model.train()
        self.emit({"event": "eval", "step": self.state.step, **self.last_eval})

    def save(self) -> Path:
        return self.checkpoints.save(
            self.state.step,
            models={MODEL_DIR: self.prm.model},
            state=self.state.state_dict(),
            tokenizer=self.tokenizer,
            config_yaml=config_io.dump(self.config),
        )

    def after_step(self, ends_epoch: bool) -> None:
        config, step = self.config, self.state.step
        if config.logging_steps and step % config.logging_steps == 0 and self.window:
            n = sum(k for _, _, k in self.window)
            loss = sum(v * k for v, _, k in self.window) / n
            acc = sum(a * k for _, a, k in self.window) / n
            self.window = []
            lr = self.state.scheduler.get_last_lr()[0]
            self.emit({"event": "train", "step": step, "loss": loss, "accuracy": acc, "learning_rate": lr})
        if self.data.evals and config.eval_steps and step % config.eval_steps == 0:
            self.evaluate()
        if self.saves_at(step):
            self.save()

    def summary(self, *, stopped_early: bool) -> dict[str, Any]:
        return {
            "output_dir": str(self.out_dir),
            "steps": self.state.step,
            "train_examples": len(self.data.train),
            "dropped": self.data.dropped,
            "train_seconds": round(time.perf_counter() - self.started, 2),
            "stopped_early": stopped_early,
        }


def train_implicit_prm(
    config: ImplicitPRMTrainConfig,
    *,
    tokenizer: Any | None = None,
    train_rows: list[dict[str, Any]] | None = None,
    eval_rows: list[dict[str, Any]] | None = None,
    stop_after_steps: int | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Trains an implicit PRM; returns a summary (steps, timings, the final ``eval`` metrics, the ``prm``).

    ``train_rows`` / ``eval_rows`` replace the files; ``stop_after_steps`` ends the run early with a
    checkpoint at that step; ``callback`` gets every log event; ``progress``: a bar of optimiser steps
    (``None``: only on a terminal).
    """
    if not config.model:
        raise ValueError("no model: set model to a causal LM (the policy the PRM starts from)")
    set_threads(config.num_threads)
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer or load_tokenizer(config.model)
    run = _ImplicitPRMRun(config, tokenizer, _load_data(config, tokenizer, train_rows, eval_rows), callback)
    try:
        run.prm.model.train()
        if run.run(stop_after_steps, progress=progress, name="train implicit prm"):
            return {
                **run.summary(stopped_early=True),
                "checkpoint": str(run.checkpoints.path(run.state.step)),
            }
        step = run.state.step
        if run.data.evals and (run.last_eval is None or not config.eval_steps or step % config.eval_steps):
            run.evaluate()
        run.prm.model.eval()
        summary = run.summary(stopped_early=False)
        run.prm.save_pretrained(config.output_dir)
        run.log.event("end", **summary)
        return {**summary, "eval": run.last_eval, "prm": run.prm}
    finally:
        run.log.close()
