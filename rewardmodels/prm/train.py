"""Training a process reward model on step-labelled data (Math-Shepherd / PRM800K / stepwise JSONL).

The loss is the cross-entropy between each labelled step's predicted distribution (right / wrong) and
its label, averaged over labelled steps:

    L = -mean_t [ y_t log p_t(right) + (1 - y_t) log p_t(wrong) ]

with ``y_t`` in {0, 1} (hard) or [0, 1] (soft: the fraction of Monte Carlo rollouts from step ``t`` that
reach the right answer; Math-Shepherd's "soft estimation"). ``labels="hard"`` turns a soft label into
Math-Shepherd's "hard estimation": 1 when it is above ``hard_threshold`` (0: any rollout succeeded).
For the ``token`` head ``p`` is the two-label softmax (TRL's ``PRMTrainer``); for the ``lm`` head it is
the full-vocabulary probability of the "+" and "-" tokens at the step's marker (Math-Shepherd's
language-modelling objective). Unlabelled steps and every other token carry no loss.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rewardlab import config as config_io
from rewardlab.rewardmodels.prm.config import PRMTrainConfig
from rewardlab.rewardmodels.prm.data import StepExample, load_step_examples
from rewardlab.rewardmodels.prm.metrics import evaluate_step_scores
from rewardlab.rewardmodels.prm.model import ProcessRewardModel, load_backbone
from rewardlab.training import CheckpointManager, MetricsLogger, build_scheduler, optimizer_from_config
from rewardlab.training.loop import SupervisedRun, SupervisedState
from rewardlab.training.optim import optimizer_step


@dataclass
class PRMTrainResult:
    """What :func:`train_prm` returns.

    Attributes:
        prm: The trained model.
        history: One entry per logged optimiser step (``step``, ``loss``, ``lr``).
        evals: One entry per evaluation (``step`` plus the metrics of :func:`evaluate_prm`).
        output_dir: Where the model was saved, if it was.
        seconds: Wall-clock training time.
    """

    prm: ProcessRewardModel
    history: list[dict[str, float]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    output_dir: str | None = None
    seconds: float = 0.0


def _targets(labels: Sequence[float | None], mode: str, hard_threshold: float) -> list[float | None]:
    out: list[float | None] = []
    for y in labels:
        if y is None:
            out.append(None)
        elif mode == "hard":
            out.append(1.0 if y > hard_threshold else 0.0)
        else:
            out.append(min(1.0, max(0.0, float(y))))
    return out


def prm_loss(prm: ProcessRewardModel, batch: Sequence[tuple[Any, list[float | None]]]) -> Any:
    """Mean cross-entropy over the labelled steps of a batch of ``(EncodedSteps, targets)`` pairs."""
    import torch

    encoded = [e for e, _ in batch]
    ids, mask = prm.collate(encoded)
    logp_wrong, logp_right = prm.step_log_probs(ids, mask)
    rows, cols, ys = [], [], []
    for i, (e, targets) in enumerate(batch):
        for pos, y in zip(e.positions, targets, strict=False):
            if y is not None:
                rows.append(i)
                cols.append(pos)
                ys.append(y)
    if not ys:
        return logp_right.sum() * 0.0
    r = torch.tensor(rows, device=ids.device)
    c = torch.tensor(cols, device=ids.device)
    y = torch.tensor(ys, device=ids.device, dtype=logp_right.dtype)
    return -(y * logp_right[r, c] + (1 - y) * logp_wrong[r, c]).mean()


def evaluate_prm(
    prm: ProcessRewardModel, examples: Sequence[StepExample], *, threshold: float | None = None, group_by=None
) -> dict[str, Any]:
    """Step accuracy / F1 and ProcessBench metrics of ``prm`` on labelled ``examples``."""

    scores = prm.score_examples(examples)
    return evaluate_step_scores(
        scores,
        examples,
        threshold=prm.config.threshold if threshold is None else threshold,
        group_by=group_by,
    )


MODEL_DIR = "model"  # the PRM's folder inside a checkpoint


def _load_model(config: PRMTrainConfig, checkpoint: Path | None) -> ProcessRewardModel:
    from transformers import AutoTokenizer

    source = str(checkpoint / MODEL_DIR) if checkpoint is not None else config.model
    if not source:
        raise ValueError("no model: set model to a base model or PRM path")
    if (Path(source) / "rewardlab_prm.json").exists():
        return ProcessRewardModel.from_pretrained(source, device=config.device)
    tokenizer = AutoTokenizer.from_pretrained(source)
    backbone = load_backbone(source, config.head)
    return ProcessRewardModel(backbone, tokenizer, config.prm_config(), device=config.device)


def _encode(prm: ProcessRewardModel, examples: Sequence[StepExample], config: PRMTrainConfig) -> list:
    """``(EncodedSteps, targets)`` of every example with at least one labelled step that fits."""
    data = []
    for ex in examples:
        if not ex.labels:
            continue
        enc = prm.encode(ex.prompt, ex.steps)
        targets = _targets(ex.labels, config.labels, config.hard_threshold)[: len(enc.positions)]
        if enc.positions and any(t is not None for t in targets):
            data.append((enc, targets))
    if not data:
        raise ValueError("no labelled steps in the training data")
    return data


def _epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """Epoch ``epoch``'s order: the ``epoch``-th shuffle of one ``random.Random(seed)`` stream (so a resumed
    run replays the same stream)."""
    rng = random.Random(seed)
    for _ in range(epoch + 1):
        order = list(range(n))
        rng.shuffle(order)
    return order


def _load_examples(config: PRMTrainConfig, train_examples, eval_examples) -> tuple[Sequence, Sequence | None]:
    if train_examples is None:
        if not config.train_file:
            raise ValueError("no training data: set train_file")
        train_examples = load_step_examples(config.train_file, fmt=config.data_format, neutral=config.neutral)
    if eval_examples is None and config.eval_file:
        eval_examples = load_step_examples(config.eval_file, fmt=config.data_format, neutral=config.neutral)
    return train_examples, eval_examples


class _PRMRun(SupervisedRun):
    """One PRM training run: the model, its optimiser state, logger, evaluation and checkpoints."""

    def __init__(
        self, config: PRMTrainConfig, prm: ProcessRewardModel | None, train_examples, eval_examples, callback
    ) -> None:
        self.config, self.eval_examples, self.callback = config, eval_examples, callback
        self.checkpoints = (
            CheckpointManager(config.output_dir, keep=config.save_total_limit) if config.output_dir else None
        )
        if config.resume_from_checkpoint and self.checkpoints is None:
            raise ValueError("resume_from_checkpoint needs output_dir")
        checkpoint = self.checkpoints.resolve(config.resume_from_checkpoint) if self.checkpoints else None
        self.prm = prm if prm is not None and checkpoint is None else _load_model(config, checkpoint)
        self.data = _encode(self.prm, train_examples, config)
        micro_per_epoch = math.ceil(len(self.data) / config.per_device_train_batch_size)
        total = max(1, math.ceil(micro_per_epoch * config.epochs / config.gradient_accumulation_steps))
        self.total_steps = min(total, config.max_steps) if config.max_steps > 0 else total
        self.batch_size, self.grad_accum, self.save_steps = (
            config.per_device_train_batch_size,
            config.gradient_accumulation_steps,
            config.save_steps,
        )
        self.params = [p for p in self.prm.model.parameters() if p.requires_grad]
        optimizer = optimizer_from_config(self.params, config)
        warmup = config.warmup_steps or int(self.total_steps * config.warmup_ratio)
        scheduler = build_scheduler(
            optimizer, config.lr_scheduler_type, warmup_steps=warmup, total_steps=self.total_steps
        )
        self.state = SupervisedState(optimizer, scheduler)
        self.result = PRMTrainResult(prm=self.prm)
        if checkpoint is not None:
            self.state.restore(checkpoint)
            self.result.history, self.result.evals = self.state.extra["history"], self.state.extra["evals"]
        self.state.extra = {"history": self.result.history, "evals": self.result.evals}
        self.log = MetricsLogger(
            config.output_dir,
            console=sys.stdout if config.logging_steps else None,
            report_to=config.report_to,
            config=config,
            resume_step=self.state.step if checkpoint is not None else None,
            log_every=config.logging_steps or 1,
        )

    def order_of_epoch(self, epoch: int) -> list[int]:
        return _epoch_order(len(self.data), self.config.seed, epoch)

    def train_step(self, group: list[list[int]]) -> None:
        """One optimiser step (each micro-batch's mean loss divided by ``gradient_accumulation_steps``); logs
        the step."""
        running = 0.0
        for idx in group:
            loss = prm_loss(self.prm, [self.data[i] for i in idx]) / self.config.gradient_accumulation_steps
            loss.backward()
            running += float(loss.detach())
        optimizer_step(self.params, self.state.optimizer, self.state.scheduler, self.config.max_grad_norm)
        self.state.optimizer.zero_grad(set_to_none=True)
        self.state.step += 1
        entry = {"step": self.state.step, "loss": running, "lr": self.state.scheduler.get_last_lr()[0]}
        self.result.history.append(entry)
        self.log.log(entry["step"], {"loss": running, "learning_rate": entry["lr"]})
        self.show(loss=f"{running:.4f}")
        if self.callback:
            self.callback(entry)

    def evaluate(self) -> None:
        if not self.eval_examples:
            return
        step = self.state.step
        metrics = {
            "step": step,
            **evaluate_prm(self.prm, self.eval_examples, threshold=self.config.threshold),
        }
        self.result.evals.append(metrics)
        if "processbench_f1" in metrics:
            self.show(pb_f1=f"{metrics['processbench_f1']:.3f}")
        self.log.log(step, {"event": "eval", **{k: v for k, v in metrics.items() if k != "step"}})
        if self.callback:
            self.callback({"eval": metrics})
        self.prm.model.train()

    def save(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.save(
                self.state.step,
                models={MODEL_DIR: self.prm},
                state=self.state.state_dict(),
                config_yaml=config_io.dump(self.config),
            )

    def after_step(self, ends_epoch: bool) -> None:
        """Evaluation (every ``eval_steps`` steps, else after each epoch) and checkpoints due now."""
        config, step = self.config, self.state.step
        due = step % config.eval_steps == 0 if config.eval_steps else ends_epoch and step < self.total_steps
        if due:
            self.evaluate()
        if self.saves_at(step):
            self.save()

    def finish(self) -> None:
        """The final evaluation (unless this step has one) and the trained PRM in ``output_dir``."""
        evals = self.result.evals
        if not evals or evals[-1]["step"] != self.state.step:
            self.evaluate()
        self.prm.model.eval()
        if self.config.output_dir:
            self.result.output_dir = self.prm.save_pretrained(self.config.output_dir)
            summary = {"config": asdict(self.config), "history": self.result.history[-1:], "evals": evals}
            (Path(self.config.output_dir) / "train_summary.json").write_text(
                json.dumps(summary, indent=2, default=str)
            )


def train_prm(
    config: PRMTrainConfig,
    *,
    train_examples: Sequence[StepExample] | None = None,
    eval_examples: Sequence[StepExample] | None = None,
    prm: ProcessRewardModel | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    stop_after_steps: int | None = None,
    progress: bool | None = None,
) -> PRMTrainResult:
    """Trains a PRM.

    Args:
        config: Options (data files are read unless ``train_examples`` / ``eval_examples`` are given).
        train_examples: Training data, overriding ``config.train_file``.
        eval_examples: Evaluation data, overriding ``config.eval_file``.
        prm: A PRM to continue training, overriding ``config.model`` (not with ``resume_from_checkpoint``).
        callback: Called with every history entry and every evaluation.
        stop_after_steps: End the run after this step, with a checkpoint (how the resume test interrupts).
        progress: A bar of optimiser steps on stderr with the last step's loss (``True`` / ``False``;
            ``None``: only when stderr is a terminal).
    """
    import torch

    started = time.perf_counter()
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    if config.labels not in ("soft", "hard"):
        raise ValueError("labels must be 'soft' or 'hard'")
    train_examples, eval_examples = _load_examples(config, train_examples, eval_examples)
    run = _PRMRun(config, prm, train_examples, eval_examples, callback)
    try:
        run.prm.model.train()
        if not run.run(stop_after_steps, progress=progress, name="train prm"):
            run.finish()
    finally:
        run.log.close()
    run.result.seconds = time.perf_counter() - started
    return run.result


__all__ = ["PRMTrainConfig", "PRMTrainResult", "evaluate_prm", "prm_loss", "train_prm"]
