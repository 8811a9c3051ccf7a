"""Reward-model scoring throughput: length-sorted dynamic batches vs fixed batches in input order.

5,000 texts with heavy-tailed lengths (log-normal, median ~150 tokens, cut to [8, 1500]) are scored by the
same one-output sequence classifier twice in the same run:

* **rewardlab**: ``RewardModel.score_ids`` with its default length-sorted dynamic batches, each holding at
  most ``--token-budget`` padded tokens;
* **baseline**: the same model and padding code over fixed batches of ``--batch-size`` texts in input
  order (what a plain ``for i in range(0, n, bs)`` loop does).

Both must give the same scores (padding does not change a causal model's reading of the real tokens);
the rates (texts/s) and their ratio are printed. Target: ratio >= 2.

    python bench/rm_score.py [--n 5000] [--model PATH] [--config qwen2-small] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import tempfile
import time


def texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz     .,"
    out = []
    for _ in range(n):
        length = int(min(1500, max(8, rng.lognormvariate(math.log(150), 0.9))))
        out.append("".join(rng.choice(alphabet) for _ in range(length)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=5000, help="texts to score")
    parser.add_argument("--model", default=None, help="reward model path (default: a tiny model built here)")
    parser.add_argument(
        "--config", default="qwen2-tiny", help="shipped tiny config when --model is not given"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="baseline: texts per fixed batch")
    parser.add_argument("--token-budget", type=int, default=16384, help="rewardlab: padded tokens per batch")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--device", default=None)
    args = parser.parse_args()

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    from rewardlab.rewardmodels.orm import RewardModel, fixed_batches, length_sorted_batches

    if args.threads:
        torch.set_num_threads(args.threads)
    model = args.model
    if model is None:
        from rewardlab.data.tiny import save_tiny_model

        model = save_tiny_model(tempfile.mkdtemp(prefix="rm-bench-"), name=args.config)
    rm = RewardModel(
        model, max_tokens=args.token_budget, max_batch_size=None, max_length=None, device=args.device
    )
    data = texts(args.n)
    ids = [rm.encode_pair("", t) for t in data]
    lengths = [len(x) for x in ids]
    dyn_batches = length_sorted_batches(lengths, args.token_budget)
    fix_batches = fixed_batches(len(ids), args.batch_size)

    def padded(batches: list[list[int]]) -> int:
        return sum(max(lengths[i] for i in b) * len(b) for b in batches)

    rm.score_ids(ids[:64])  # warm-up (allocator, kernels)
    t0 = time.perf_counter()
    dyn = rm.score_ids(ids, batches=dyn_batches)
    t_dyn = time.perf_counter() - t0
    t0 = time.perf_counter()
    fixed = rm.score_ids(ids, batches=fix_batches)
    t_fix = time.perf_counter() - t0

    diff = max(abs(a - b) for a, b in zip(dyn, fixed, strict=True))
    real = sum(lengths)
    print(f"texts: {len(ids)}  tokens: {real}  mean length {real / len(ids):.0f}  max {max(lengths)}")
    print(f"model: {model}  threads: {torch.get_num_threads()}")
    print(
        f"rewardlab (length-sorted, <= {args.token_budget} tokens/batch): {len(dyn_batches)} batches, "
        f"{padded(dyn_batches) / real:.2f}x padded/real tokens, {t_dyn:.2f} s, {len(ids) / t_dyn:.1f} texts/s"
    )
    print(
        f"baseline  (fixed {args.batch_size}/batch, input order):        {len(fix_batches)} batches, "
        f"{padded(fix_batches) / real:.2f}x padded/real tokens, {t_fix:.2f} s, {len(ids) / t_fix:.1f} texts/s"
    )
    print(f"max |score difference|: {diff:.2e}")
    print(f"ratio (rewardlab / baseline): {t_fix / t_dyn:.2f}x")


if __name__ == "__main__":
    main()
