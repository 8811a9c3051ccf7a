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
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rewardkit.rewardmodels.prm.data import StepExample, load_step_examples
from rewardkit.rewardmodels.prm.model import PRMConfig, ProcessRewardModel, load_backbone


@dataclass
class PRMTrainConfig:
    """Options of :func:`train_prm` (the ``rewardkit rm train --type prm`` flags).

    Attributes:
        model: Base model or PRM to start from (hub name or local path).
        head: ``"token"`` (token-classification head, TRL) or ``"lm"`` ("+"/"-" next token, Math-Shepherd).
        train_file: Step-labelled training data (JSONL in any layout of :mod:`.data`).
        eval_file: Held-out data evaluated after every epoch (and every ``eval_every`` steps).
        output_dir: Where the trained PRM is saved (``None``: not saved).
        data_format: Layout of the data files, ``"auto"`` to detect per row.
        labels: ``"soft"`` trains on the labels as given; ``"hard"`` binarises them (> ``hard_threshold``).
        hard_threshold: Soft labels above it count as right in ``hard`` mode (0.0: any rollout succeeded,
            Math-Shepherd's hard estimation).
        epochs: Passes over the training data.
        max_steps: Stop after this many optimiser steps (0: no limit).
        learning_rate: AdamW learning rate (peak; linear warmup then linear decay).
        weight_decay: AdamW weight decay.
        warmup_ratio: Fraction of the optimiser steps spent warming the learning rate up.
        batch_size: Sequences per micro-batch.
        grad_accum: Micro-batches per optimiser step.
        max_grad_norm: Gradient clipping norm (0: no clipping).
        max_length: Longest input in tokens (longer inputs lose prompt tokens, then trailing steps).
        step_marker: Text after every step whose last token is read (TRL ``"\\n"``; Math-Shepherd ``" ки"``).
        step_joiner: Text between a step's marker and the next step.
        prompt_separator: Text between prompt and first step.
        good_token: ``lm`` head: the "right" token.
        bad_token: ``lm`` head: the "wrong" token.
        aggregation: Default aggregation saved with the model (``min``, ``prod``, ``last``, ``mean``).
        threshold: Score below which a step counts as wrong in evaluation.
        neutral: Label of PRM800K's neutral (rating 0) steps.
        seed: Random seed (data order, new head initialisation).
        eval_every: Evaluate every this many optimiser steps (0: only after each epoch).
        log_every: Print the running loss every this many optimiser steps (0: silent).
        device: ``"cpu"``, ``"cuda"``...; ``None`` picks CUDA when available.
    """

    model: str = ""
    head: str = "token"
    train_file: str = ""
    eval_file: str | None = None
    output_dir: str | None = None
    data_format: str = "auto"
    labels: str = "soft"
    hard_threshold: float = 0.0
    epochs: int = 1
    max_steps: int = 0
    learning_rate: float = 2e-5
    weight_decay: float = 0.0
    warmup_ratio: float = 0.0
    batch_size: int = 8
    grad_accum: int = 1
    max_grad_norm: float = 1.0
    max_length: int = 2048
    step_marker: str = "\n"
    step_joiner: str = ""
    prompt_separator: str = "\n"
    good_token: str = "+"
    bad_token: str = "-"
    aggregation: str = "min"
    threshold: float = 0.5
    neutral: float = 1.0
    seed: int = 0
    eval_every: int = 0
    log_every: int = 0
    device: str | None = None

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
    from rewardkit.rewardmodels.prm.metrics import evaluate_step_scores

    scores = prm.score_examples(examples)
    return evaluate_step_scores(
        scores,
        examples,
        threshold=prm.config.threshold if threshold is None else threshold,
        group_by=group_by,
    )


def train_prm(
    config: PRMTrainConfig,
    *,
    train_examples: Sequence[StepExample] | None = None,
    eval_examples: Sequence[StepExample] | None = None,
    prm: ProcessRewardModel | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> PRMTrainResult:
    """Trains a PRM.

    Args:
        config: Options (data files are read unless ``train_examples`` / ``eval_examples`` are given).
        train_examples: Training data, overriding ``config.train_file``.
        eval_examples: Evaluation data, overriding ``config.eval_file``.
        prm: A PRM to continue training, overriding ``config.model``.
        callback: Called with every history entry and every evaluation.
    """
    import torch
    from transformers import AutoTokenizer

    started = time.perf_counter()
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    if config.labels not in ("soft", "hard"):
        raise ValueError("labels must be 'soft' or 'hard'")
    if train_examples is None:
        if not config.train_file:
            raise ValueError("no training data: set train_file")
        train_examples = load_step_examples(config.train_file, fmt=config.data_format, neutral=config.neutral)
    if eval_examples is None and config.eval_file:
        eval_examples = load_step_examples(config.eval_file, fmt=config.data_format, neutral=config.neutral)
    if prm is None:
        if not config.model:
            raise ValueError("no model: set model to a base model or PRM path")
        prm_file = Path(config.model) / "rewardkit_prm.json"
        if prm_file.exists():
            prm = ProcessRewardModel.from_pretrained(config.model, device=config.device)
        else:
            tokenizer = AutoTokenizer.from_pretrained(config.model)
            backbone = load_backbone(config.model, config.head)
            prm = ProcessRewardModel(backbone, tokenizer, config.prm_config(), device=config.device)
    model = prm.model

    data = []
    for ex in train_examples:
        if not ex.labels:
            continue
        enc = prm.encode(ex.prompt, ex.steps)
        targets = _targets(ex.labels, config.labels, config.hard_threshold)[: len(enc.positions)]
        if enc.positions and any(t is not None for t in targets):
            data.append((enc, targets))
    if not data:
        raise ValueError("no labelled steps in the training data")

    micro_per_epoch = math.ceil(len(data) / config.batch_size)
    total_steps = max(1, math.ceil(micro_per_epoch * config.epochs / config.grad_accum))
    if config.max_steps:
        total_steps = min(total_steps, config.max_steps)
    warmup = int(total_steps * config.warmup_ratio)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)

    def lr_lambda(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    result = PRMTrainResult(prm=prm)
    rng = random.Random(config.seed)

    def run_eval(step: int) -> None:
        if not eval_examples:
            return
        metrics = {"step": step, **evaluate_prm(prm, eval_examples, threshold=config.threshold)}
        result.evals.append(metrics)
        if callback:
            callback({"eval": metrics})
        model.train()

    model.train()
    step = micro = 0
    running = 0.0
    done = False
    for _epoch in range(max(1, config.epochs)):
        order = list(range(len(data)))
        rng.shuffle(order)
        for start in range(0, len(order), config.batch_size):
            batch = [data[i] for i in order[start : start + config.batch_size]]
            loss = prm_loss(prm, batch) / config.grad_accum
            loss.backward()
            running += float(loss.detach())
            micro += 1
            if micro % config.grad_accum:
                continue
            if config.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            entry = {"step": step, "loss": running, "lr": scheduler.get_last_lr()[0]}
            result.history.append(entry)
            if callback:
                callback(entry)
            if config.log_every and step % config.log_every == 0:
                print(f"step {step}/{total_steps} loss {running:.4f}", flush=True)
            running = 0.0
            if config.eval_every and step % config.eval_every == 0:
                run_eval(step)
            if step >= total_steps:
                done = True
                break
        if done:
            break
        if not config.eval_every:
            run_eval(step)
    if not result.evals or result.evals[-1]["step"] != step:
        run_eval(step)
    model.eval()
    if config.output_dir:
        result.output_dir = prm.save_pretrained(config.output_dir)
        summary = {"config": asdict(config), "history": result.history[-1:], "evals": result.evals}
        (Path(config.output_dir) / "train_summary.json").write_text(
            json.dumps(summary, indent=2, default=str)
        )
    result.seconds = time.perf_counter() - started
    return result


__all__ = ["PRMTrainConfig", "PRMTrainResult", "evaluate_prm", "prm_loss", "train_prm"]
