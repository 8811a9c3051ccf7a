"""Pretrains the tiny "reader" base that ``scripts/demo-search`` starts from: a tiny Qwen2 that can copy an
answer out of passages it is given, as any real language model can, but has never seen a search tool.

A random tiny model cannot learn to read within a demo's minutes, so this runs once, offline, and its
weights ship in ``data/tiny/models/qwen2-tiny-reader``. It trains on reading-comprehension text from
knowledge bases of other seeds (``rewardlab.data.kb.reading_examples``): a question, then the passages in
Search-R1's ``Doc i(Title: ...)`` form, then the answer. No search tags, no tool call, and none of the
demo's knowledge bases (their seeds are the demo's; these are drawn from another stream).

``python -m rewardlab.demos.reader --out data/tiny/models/qwen2-tiny-reader``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rewardlab.data import kb
from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
from rewardlab.envs.search import Passage, format_passages

PRETRAIN_SEED = 1_000_003
"""The reading examples' stream (far from the demo's seeds 0, 1, 2, ...)."""


def reading_pair(example: dict[str, Any]) -> tuple[str, str]:
    """A reading example as a (prompt, completion) pair."""
    passages = [Passage(p["id"], p["title"], p["text"]) for p in example["passages"]]
    docs = format_passages(passages, max_words=10_000)
    return f"{example['question']}\n{docs}\nAnswer: ", example["answer"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rewardlab.demos.reader", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="data/tiny/models/qwen2-tiny-reader")
    p.add_argument("--model", default="qwen2-tiny")
    p.add_argument("--examples", type=int, default=200_000)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--check-every", type=int, default=250)
    p.add_argument("--threads", type=int, default=1)
    return p


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    # lazy: torch (rewardlab.rl), not needed for --help
    import torch

    from rewardlab.generation import SamplingParams, get_backend
    from rewardlab.rl.sft import SFTConfig, sft

    torch.set_num_threads(args.threads)
    tokenizer = load_tiny_tokenizer()
    # language modelling on the whole text (every token a target), as a base model pretrains: titles
    # repeated in their passages are copying practice too, not only the answer
    pairs = [("", "".join(reading_pair(e))) for e in kb.reading_examples(args.examples, PRETRAIN_SEED)]
    checks = [reading_pair(e) for e in kb.reading_examples(300, PRETRAIN_SEED + 1)]
    model = build_tiny_model(args.model, seed=0)
    history: list[dict[str, float]] = []

    def check(step: int) -> bool:
        if step % args.check_every:
            return False
        probe = get_backend("hf", model, tokenizer, batch_size=300)
        out = probe.generate([p for p, _ in checks], SamplingParams(temperature=0.0, max_new_tokens=24))
        exact = sum(o[0].text.strip() == a for o, (_, a) in zip(out, checks, strict=True)) / len(checks)
        history.append({"step": step, "exact_match": exact, "seconds": time.perf_counter() - t0})
        print(
            f"[reader] step {step}: greedy exact match {exact:.1%} ({history[-1]['seconds']:.0f}s)",
            flush=True,
        )
        return False

    t0 = time.perf_counter()
    config = SFTConfig(
        max_steps=args.steps,
        learning_rate=args.lr,
        per_device_train_batch_size=args.batch,
        seed=0,
        logging_steps=100,
        lr_scheduler_type="cosine",
        warmup_steps=50,
    )
    sft(model, tokenizer, pairs, config, callback=check)
    out = Path(args.out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    summary = {"args": vars(args), "history": history, "seconds": time.perf_counter() - t0}
    (out / "pretraining.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    main()
