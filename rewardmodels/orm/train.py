"""Training an outcome reward model: Bradley-Terry on preference pairs or BCE on labelled completions.

A plain PyTorch loop (no ``Trainer``), so every step is visible: micro-batches of pairs (chosen and rejected
in one forward pass), gradient accumulation weighted by micro-batch size (the accumulated gradient equals
the gradient of the mean over the whole optimizer batch), AdamW with a ``transformers`` scheduler,
evaluation every ``eval_steps``, checkpoints every ``save_steps`` that a later run resumes exactly (model,
optimizer, scheduler, RNG state and the position in the epoch's data order).

Files written to ``output_dir``: ``checkpoint-<step>/`` (``trainer_state.json``, ``optimizer.pt``,
``scheduler.pt``, ``rng.pt`` and the model or LoRA adapter), ``metrics.jsonl`` (one line per log / eval
event), and the final model + tokenizer + ``rm_config.json`` at the top level (merged when LoRA is used),
loadable by ``AutoModelForSequenceClassification`` and ``rewardkit rm score``.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import ORMTrainConfig
from .data import collate_pairwise, collate_pointwise, detect_kind, load_rows, tokenize_rows
from .losses import bradley_terry_loss, pointwise_bce_loss

STATE_FILE = "trainer_state.json"


def _device(name: str | None):
    import torch

    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The checkpoint folder with the highest step in ``output_dir``, or ``None``."""
    found = []
    for path in Path(output_dir).glob("checkpoint-*"):
        if (path / STATE_FILE).is_file():
            try:
                found.append((int(path.name.split("-")[-1]), path))
            except ValueError:
                continue
    return max(found)[1] if found else None


def _build_model(config: ORMTrainConfig, tokenizer, checkpoint: Path | None):
    import torch
    from transformers import AutoModelForSequenceClassification

    from .model import add_lora, disable_dropout, resolve_dtype

    torch.manual_seed(config.seed)  # the new score head's init
    kwargs: dict[str, Any] = {"num_labels": 1}
    dtype = resolve_dtype(config.dtype)
    if dtype is not None:
        kwargs["dtype"] = dtype
    source = str(checkpoint) if checkpoint is not None and not config.use_lora else config.model
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
        if checkpoint is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(checkpoint), is_trainable=True)
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


class _Logger:
    def __init__(self, path: Path, to_stdout: bool, resume: bool) -> None:
        self.path = path
        self.to_stdout = to_stdout
        self.history: list[dict[str, Any]] = []
        if not resume and path.exists():
            path.unlink()

    def __call__(self, event: dict[str, Any]) -> None:
        self.history.append(event)
        line = json.dumps(event, default=float)
        with self.path.open("a") as fh:
            fh.write(line + "\n")
        if self.to_stdout:
            print(line, flush=True)


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
    import torch
    from transformers import get_scheduler

    from .evaluate import evaluate_examples
    from .model import load_tokenizer
    from .scoring import RewardModel

    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    out_dir = Path(config.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer or load_tokenizer(config.model)

    # ---- data
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

    # ---- resume
    checkpoint: Path | None = None
    if config.resume_from_checkpoint:
        checkpoint = (
            latest_checkpoint(out_dir)
            if config.resume_from_checkpoint is True or config.resume_from_checkpoint == "latest"
            else Path(str(config.resume_from_checkpoint))
        )
        if checkpoint is None or not (checkpoint / STATE_FILE).is_file():
            raise FileNotFoundError(f"no checkpoint to resume from ({config.resume_from_checkpoint})")

    device = _device(config.device)
    model = _build_model(config, tokenizer, checkpoint).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params,
        lr=config.learning_rate,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_epsilon,
        weight_decay=config.weight_decay,
    )
    bs, ga = config.per_device_train_batch_size, config.gradient_accumulation_steps
    micro_per_epoch = math.ceil(len(train) / bs)
    steps_per_epoch = math.ceil(micro_per_epoch / ga)
    total_steps = (
        config.max_steps if config.max_steps > 0 else math.ceil(config.num_train_epochs * steps_per_epoch)
    )
    scheduler = get_scheduler(
        config.lr_scheduler_type,
        optimizer,
        num_warmup_steps=math.ceil(config.warmup_ratio * total_steps),
        num_training_steps=total_steps,
    )
    global_step, epoch, micro_done = 0, 0, 0
    if checkpoint is not None:
        state = json.loads((checkpoint / STATE_FILE).read_text())
        global_step, epoch, micro_done = state["global_step"], state["epoch"], state["micro_in_epoch"]
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device))
        scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt"))
        rng = torch.load(checkpoint / "rng.pt", weights_only=False)
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])

    def autocast():
        if config.bf16:
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    log = _Logger(out_dir / "metrics.jsonl", config.log_to_stdout, resume=checkpoint is not None)
    collate = collate_pairwise if kind == "pairwise" else collate_pointwise
    pad_id = tokenizer.pad_token_id

    def evaluate() -> dict[str, Any]:
        rm = RewardModel(model, tokenizer, max_tokens=config.eval_token_budget, max_length=None)
        metrics, _ = evaluate_examples(rm, evals, kind)
        model.train()
        return metrics

    def save_checkpoint() -> Path:
        path = out_dir / f"checkpoint-{global_step}"
        path.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        torch.save(optimizer.state_dict(), path / "optimizer.pt")
        torch.save(scheduler.state_dict(), path / "scheduler.pt")
        torch.save({"torch": torch.get_rng_state(), "python": random.getstate()}, path / "rng.pt")
        state = {
            "global_step": global_step,
            "epoch": epoch,
            "micro_in_epoch": micro_done,
            "total_steps": total_steps,
            "config": config.to_dict(),
        }
        (path / STATE_FILE).write_text(json.dumps(state, indent=2, default=str))
        if config.save_total_limit is not None:
            ckpts = sorted(
                (int(p.name.split("-")[-1]), p)
                for p in out_dir.glob("checkpoint-*")
                if (p / STATE_FILE).is_file()
            )
            for _, old in ckpts[: max(0, len(ckpts) - config.save_total_limit)]:
                shutil.rmtree(old, ignore_errors=True)
        return path

    log(
        {
            "event": "start",
            "kind": kind,
            "train_examples": len(train),
            "dropped_too_long": dropped,
            "eval_examples": len(evals),
            "total_steps": total_steps,
            "resumed_from": str(checkpoint) if checkpoint else None,
            "trainable_params": sum(p.numel() for p in params),
        }
    )
    model.train()
    window = {"loss": 0.0, "acc": 0.0, "n": 0}
    last_eval: dict[str, Any] | None = None
    t0 = time.perf_counter()
    stopped_early = False
    while global_step < total_steps:
        gen = torch.Generator().manual_seed(config.seed + epoch)
        order = torch.randperm(len(train), generator=gen).tolist()
        micro = [order[i : i + bs] for i in range(0, len(order), bs)]
        while micro_done < len(micro) and global_step < total_steps:
            group = micro[micro_done : micro_done + ga]
            n_group = sum(len(m) for m in group)
            optimizer.zero_grad(set_to_none=True)
            for idx in group:
                batch = collate([train[i] for i in idx], pad_id)
                ids = batch["input_ids"].to(device)
                mask = batch["attention_mask"].to(device)
                with autocast():
                    logits = model(input_ids=ids, attention_mask=mask).logits
                rewards = logits[:, 0].float()
                if kind == "pairwise":
                    chosen, rejected = rewards.chunk(2)
                    margin = batch["margin"].to(device) if "margin" in batch else None
                    loss = bradley_terry_loss(chosen, rejected, margin, config.center_rewards_coefficient)
                    acc = (chosen > rejected).float().mean().item()
                else:
                    labels = batch["labels"].to(device)
                    loss = pointwise_bce_loss(rewards, labels)
                    acc = ((rewards >= 0).float() == (labels >= 0.5).float()).float().mean().item()
                # size-weighted so the accumulated gradient is that of the mean over the optimizer batch
                (loss * (len(idx) / n_group)).backward()
                window["loss"] += loss.item() * len(idx)
                window["acc"] += acc * len(idx)
                window["n"] += len(idx)
            if config.max_grad_norm and config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            global_step += 1
            micro_done += len(group)
            if config.logging_steps and global_step % config.logging_steps == 0 and window["n"]:
                event = {
                    "event": "train",
                    "step": global_step,
                    "epoch": epoch + micro_done / len(micro),
                    "loss": window["loss"] / window["n"],
                    "accuracy": window["acc"] / window["n"],
                    "lr": scheduler.get_last_lr()[0],
                    "elapsed_s": round(time.perf_counter() - t0, 2),
                }
                window = {"loss": 0.0, "acc": 0.0, "n": 0}
                log(event)
                if callback:
                    callback(event)
            if evals and config.eval_steps and global_step % config.eval_steps == 0:
                last_eval = evaluate()
                event = {"event": "eval", "step": global_step, **last_eval}
                log(event)
                if callback:
                    callback(event)
            if config.save_steps and global_step % config.save_steps == 0:
                save_checkpoint()
            if stop_after_steps is not None and global_step >= stop_after_steps:
                if not (config.save_steps and global_step % config.save_steps == 0):
                    save_checkpoint()
                stopped_early = True
                break
        if stopped_early:
            break
        if micro_done >= len(micro):
            epoch += 1
            micro_done = 0

    summary: dict[str, Any] = {
        "output_dir": str(out_dir),
        "kind": kind,
        "steps": global_step,
        "train_examples": len(train),
        "dropped_too_long": dropped,
        "train_seconds": round(time.perf_counter() - t0, 2),
        "stopped_early": stopped_early,
    }
    if stopped_early:
        summary["checkpoint"] = str(out_dir / f"checkpoint-{global_step}")
        return summary
    if evals and (last_eval is None or not config.eval_steps or global_step % config.eval_steps):
        last_eval = evaluate()
        log({"event": "eval", "step": global_step, **last_eval})
    summary["eval"] = last_eval
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
        "steps": global_step,
    }
    (out_dir / "rm_config.json").write_text(json.dumps(rm_config, indent=2))
    log({"event": "end", **{k: v for k, v in summary.items() if k != "eval"}})
    summary["model"] = final
    return summary
