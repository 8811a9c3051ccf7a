#!/usr/bin/env python
"""Reward hacking by a process reward, and Gao et al.'s fix, in a short tiny-model RL run (issue 7).

Task: sums of three digits, solved in steps (``3+4=7`` / ``7+5=12`` / ``Answer: 12``). The reward is the
verifier's success (the answer is right) plus the per-step scores of a scripted PRM with a real PRM's flaw:
every correct-looking step scores +1, repeated ones included (``CorrectLookingStepScorer``). The tiny
Qwen2 policy is warm-started on solutions of which some repeat a step once or twice, then trained with
GRPO (rewardlab's ``RLTrainer``) twice from the same weights:

* ``none``: reward = success + sum of the raw step scores -> every repeated step pays, so the mean length
  and the number of repeated steps grow;
* ``clip+delta``: the step scores are shaped by Clip then Delta (``min(r_t, 0)``, then ``c_t - c_{t+1}``),
  so the return is ``success + min(r_1, 0)`` and repeating steps earns nothing; they do not grow.

Prints the start / end mean length and repeated-step count of both runs and saves a PNG of the curves.
Not a test: about 8 minutes on a loaded 2-core CPU (the warm start is most of it): ``python bench/reward_hacking.py [--steps 40] [--out runs/reward_hacking]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from pathlib import Path

import torch

from rewardlab.rl.step_rewards import (
    CorrectLookingStepScorer,
    count_repeated_steps,
    step_token_rewards_from_scores,
)
from rewardlab.types import Record


def problem(rng: random.Random) -> tuple[str, list[str], int]:
    a, b, c = (rng.randint(1, 9) for _ in range(3))
    s = a + b
    return f"{a}+{b}+{c}=", [f"{a}+{b}={s}", f"{s}+{c}={s + c}"], s + c


def solution(steps: list[str], answer: int, repeats: int, rng: random.Random) -> str:
    lines = list(steps)
    for _ in range(repeats):
        j = rng.randrange(len(lines))
        lines.insert(j + 1, lines[j])
    return "\n".join(lines + [f"Answer: {answer}"])


def warm_start_pairs(n: int, rng: random.Random) -> list[tuple[str, str]]:
    pairs = []
    for _ in range(n):
        prompt, steps, ans = problem(rng)
        repeats = rng.choices([0, 1, 2], weights=[0.6, 0.25, 0.15])[0]
        pairs.append((prompt, solution(steps, ans, repeats, rng)))
    return pairs


def answer_of(text: str) -> str | None:
    for line in reversed(text.strip().split("\n")):
        if line.startswith("Answer:"):
            return line[len("Answer:") :].strip()
    return None


class HackableReward:
    """success + step_weight * sum of (shaped) per-step scores; records length and repeats per call."""

    def __init__(self, shaping: str, step_weight: float = 1.0) -> None:
        self.shaping = shaping
        self.step_weight = step_weight
        self.scorer = CorrectLookingStepScorer()
        self.history: list[dict[str, float]] = []
        self.__name__ = f"success+prm[{shaping}]"

    def __call__(self, prompts, completions, references):
        records = [Record(prompt=p, completion=c) for p, c in zip(prompts, completions, strict=True)]
        scores = self.scorer.score_steps(records)
        # one "token" per step is enough for the sum; the loop's GRPO advantage uses the total return
        width = max([len(s) for s in scores] + [1])
        mask = torch.ones(len(scores), width)
        ends = [list(range(len(s))) for s in scores]
        shaped, _ = step_token_rewards_from_scores(scores, ends, mask, shaping=self.shaping)
        success = [float(answer_of(c) == str(ref)) for c, ref in zip(completions, references, strict=True)]
        rewards = [s + self.step_weight * float(x) for s, x in zip(success, shaped.sum(-1), strict=True)]
        self.history.append(
            {
                "length": sum(len(c) for c in completions) / len(completions),
                "repeats": sum(count_repeated_steps(c) for c in completions) / len(completions),
                "accuracy": sum(success) / len(success),
                "reward": sum(rewards) / len(rewards),
            }
        )
        return rewards


def run(shaping: str, warm_model, tokenizer, records, args) -> list[dict[str, float]]:
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer

    cfg = load_config(preset="grpo")
    cfg.reward.sources = []
    cfg.algorithm.kl_coef = 0.0
    cfg.algorithm.loss_agg_mode = "token-mean"
    cfg.rollout.n = args.n
    cfg.rollout.max_new_tokens = args.max_new_tokens
    cfg.rollout.temperature = 1.0
    cfg.rollout.stop = []
    cfg.train.max_steps = args.steps
    cfg.train.prompts_per_step = args.prompts_per_step
    cfg.train.per_device_train_batch_size = args.n * args.prompts_per_step
    cfg.train.learning_rate = args.lr
    cfg.train.seed = args.seed
    cfg.run.output_dir = str(Path(args.out) / shaping.replace("+", "_"))
    cfg.train.report_to = "none"
    cfg.run.num_threads = args.threads
    reward = HackableReward(shaping, step_weight=args.step_weight)
    trainer = RLTrainer(
        cfg,
        model=copy.deepcopy(warm_model),
        tokenizer=tokenizer,
        train_records=records,
        eval_records=[],
        reward_fns=[reward],
        console=None,
    )
    t0 = time.perf_counter()
    for step in range(args.steps):
        trainer.train_step()
        h = reward.history[-1]
        if (step + 1) % max(1, args.steps // 8) == 0 or step == 0:
            print(
                f"  [{shaping:>10}] step {step + 1:3d}  length {h['length']:6.1f}  repeats {h['repeats']:5.2f}  "
                f"accuracy {h['accuracy']:.2f}  reward {h['reward']:6.2f}  ({time.perf_counter() - t0:.0f}s)",
                flush=True,
            )
    trainer.close()
    return reward.history


def smooth(values: list[float], k: int) -> float:
    window = values[:k] if k > 0 else values
    return sum(window) / max(len(window), 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="RL steps per run")
    ap.add_argument("--n", type=int, default=8, help="samples per prompt (group size)")
    ap.add_argument("--prompts-per-step", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--step-weight", type=float, default=1.0, help="weight of the PRM term")
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1 is fastest on a loaded 2-core machine)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/reward_hacking")
    args = ap.parse_args(argv)

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.rl.sft import SFTConfig, sft

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tiny_tokenizer()
    model = build_tiny_model()
    t0 = time.perf_counter()
    print(f"warm start: {args.sft_steps} SFT steps on step-wise solutions (40% repeat a step)", flush=True)
    sft(
        model,
        tokenizer,
        warm_start_pairs(4000, rng),
        SFTConfig(max_steps=args.sft_steps, learning_rate=3e-3, logging_steps=100),
    )
    print(f"warm start done in {time.perf_counter() - t0:.0f}s", flush=True)

    records = []
    for i in range(2000):
        prompt, _, ans = problem(rng)
        records.append(Record(id=str(i), prompt=prompt, reference=str(ans)))

    histories = {}
    for shaping in ("none", "clip+delta"):
        print(f"RL with process reward shaping = {shaping}", flush=True)
        histories[shaping] = run(shaping, model, tokenizer, records, args)

    k = max(1, args.steps // 8)  # average the first / last k steps (single steps are noisy)
    print(
        f"\n{'shaping':>11} | {'length start':>12} {'length end':>10} | {'repeats start':>13} {'repeats end':>11}"
        f" | {'accuracy start':>14} {'accuracy end':>12}"
    )
    summary = {}
    for shaping, h in histories.items():
        row = {}
        for key in ("length", "repeats", "accuracy"):
            values = [x[key] for x in h]
            row[f"{key}_start"], row[f"{key}_end"] = smooth(values, k), smooth(values[::-1], k)
        summary[shaping] = row
        print(
            f"{shaping:>11} | {row['length_start']:12.1f} {row['length_end']:10.1f} | "
            f"{row['repeats_start']:13.2f} {row['repeats_end']:11.2f} | "
            f"{row['accuracy_start']:14.2f} {row['accuracy_end']:12.2f}"
        )
    print(f"(means over the first / last {k} steps; length in characters)")
    (out / "reward_hacking.json").write_text(json.dumps({"summary": summary, "history": histories}, indent=1))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for shaping, h in histories.items():
        steps = range(1, len(h) + 1)
        label = "success + raw PRM" if shaping == "none" else "success + PRM, Clip+Delta"
        axes[0].plot(steps, [x["length"] for x in h], label=label)
        axes[1].plot(steps, [x["repeats"] for x in h], label=label)
        axes[2].plot(steps, [x["accuracy"] for x in h], label=label)
    titles = ["mean completion length (chars)", "repeated steps per completion", "accuracy"]
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_xlabel("RL step")
        ax.legend()
    fig.tight_layout()
    png = out / "reward_hacking.png"
    fig.savefig(png, dpi=100)
    print(f"saved {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
