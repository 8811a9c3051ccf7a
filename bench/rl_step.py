"""One GRPO step (generate, score, update), rewardlab vs TRL's GRPOTrainer, same run, same everything.

Same tiny Qwen2 (same weights: a short supervised warm start on the demo's addition problems), same
prompts, group size, completion length, learning rate, loss (GRPO's per-sequence token mean, TRL
``loss_type="grpo"``), no KL (no reference model), the same math verifier as the reward, CPU, same torch
thread count. After one warm-up step each, ``--steps`` steps are timed; the script prints seconds per step
(median), the generation / scoring / update split, the share of groups with zero reward std, and the ratio.

Two operating points (``--points``), because rewardlab's update skips samples whose advantage is 0:

* ``skip``: a 68-token instruction prompt and a 175-step warm start: the model is rarely right, ~80% of
  the groups are all-wrong, and skipping their samples does much of the update's work.
* ``mixed``: a 31-token instruction prompt and a warm start stopped when greedy validation accuracy
  reaches 50%: most groups hold both right and wrong samples (<= 20% zero-std), so the ratio is not the
  skip.

``--brevity`` adds a small length reward to both, so that no group is degenerate at all.

    .venv/bin/python bench/rl_step.py [--points skip,mixed] [--steps 5] [--prompts 16] [--n 8] [--brevity]
    .venv/bin/python bench/rl_step.py --points mixed --only rewardlab --set train.logprob_chunk_tokens=0

TRL's phases are measured by wrapping its ``_generate_single_turn`` (generation) and ``_calculate_rewards``
(scoring) methods; its update is the rest of the step. rewardlab's come from its own step metrics.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import statistics
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")


def brevity(prompts, completions, **_):
    """A small second reward (shorter is better) so that no group is degenerate for a random model: both
    trainers then do the full update every step."""
    return [-len(c) / 100 for c in completions]


TEMPLATE = "Add the two numbers. Give only the final answer, in \\boxed{{}}.\n{prompt}"
SHORT_TEMPLATE = "Add. Answer in \\boxed{{}}.\n{prompt}"


@dataclasses.dataclass
class OperatingPoint:
    """A prompt template and the supervised warm start that sets how often the model is right."""

    template: str
    sft_steps: int
    """Most warm-start steps (all of them when ``target`` is None)."""
    lr: float
    schedule: str
    target: float | None = None
    """Stop the warm start once greedy accuracy on 200 validation problems reaches this (checked every 10
    steps)."""


POINTS = {
    # The 2-layer model learns slowly behind the long instruction: ~6% right after 600 steps.
    "skip": OperatingPoint(TEMPLATE, 175, 3e-3, "cosine"),
    # Behind the short one it learns the task in ~250 steps (constant lr 1e-3, as the demo's warm start).
    "mixed": OperatingPoint(SHORT_TEMPLATE, 600, 1e-3, "constant", target=0.5),
}


def make_prompts(count: int, template: str) -> list[dict]:
    from rewardlab.data import arithmetic

    rows = arithmetic.generate(count, seed=1, min_value=10, ops="+", carry=False)
    return [{"prompt": template.format(prompt=r["prompt"]), "answer": r["reference"]} for r in rows]


def run_rewardlab(model, tokenizer, rows, args) -> dict:
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.types import Record

    records = [Record(id=i, prompt=r["prompt"], reference=r["answer"]) for i, r in enumerate(rows)]
    cfg = load_config(
        preset="grpo",
        overrides=[
            "algorithm.kl_coef=0.0",
            f"train.prompts_per_step={args.prompts}",
            f"rollout.n={args.n}",
            f"rollout.max_new_tokens={args.max_new}",
            f"train.learning_rate={args.lr}",
            f"train.per_device_train_batch_size={args.prompts * args.n}",
            f"rollout.batch_size={args.prompts * args.n}",
            f"train.max_steps={args.steps + 1}",
            "reward.sources=[{name: math}]",
            "reward.truncation=none",  # TRL keeps truncated completions' rewards: the same rewards on both sides
            "reward.workers=1",
            "train.report_to=none",
            "data.shuffle=false",
            f"run.output_dir={tempfile.mkdtemp(prefix='rk-bench-')}",
            *args.set,
        ],
    )
    rows_out = []

    def brevity_rk(prompts, completions, references):
        return brevity(prompts, completions)

    with RLTrainer(
        cfg,
        model=model,
        tokenizer=tokenizer,
        train_records=records,
        eval_records=[],
        reward_fns=[brevity_rk] if args.brevity else [],
        console=None,
    ) as tr:
        for _ in range(args.steps + 1):
            t0 = time.perf_counter()
            m = tr.train_step()
            rows_out.append(
                {
                    "step": time.perf_counter() - t0,
                    "generate": m["timing/generate_s"],
                    "score": m["timing/score_s"],
                    "update": m["timing/train_s"],
                    "reward": m["reward"],
                    "length": m["completions/mean_length"],
                    "zero_std": m["frac_reward_zero_std"],
                }
            )
    return _summary(rows_out[1:])


def run_trl(model, tokenizer, rows, args) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rewardlab.types import Record
    from rewardlab.verifiers import get_verifier

    verifier = get_verifier("math")

    def math_reward(prompts, completions, answer, **_):
        return [
            verifier.score(Record(completion=c, reference=a)).reward
            for c, a in zip(completions, answer, strict=True)
        ]

    timings: dict[str, float] = {"generate": 0.0, "score": 0.0}
    steps: list[dict] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *a, **k):
            timings.update(generate=0.0, score=0.0, t0=time.perf_counter())

        def on_step_end(self, *a, **k):
            total = time.perf_counter() - timings["t0"]
            steps.append(
                {
                    "step": total,
                    "generate": timings["generate"],
                    "score": timings["score"],
                    "update": total - timings["generate"] - timings["score"],
                }
            )

    out = tempfile.mkdtemp(prefix="trl-bench-")
    config = GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=args.prompts * args.n,
        num_generations=args.n,
        max_completion_length=args.max_new,
        learning_rate=args.lr,
        beta=0.0,
        loss_type="grpo",
        temperature=1.0,
        max_steps=args.steps + 1,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        disable_dropout=True,
        shuffle_dataset=False,
        seed=0,
        dataloader_num_workers=0,
    )
    dataset = Dataset.from_list(rows)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[math_reward, brevity] if args.brevity else [math_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[Timer()],
    )

    def timed(name, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                timings[name] += time.perf_counter() - t0

        return wrapper

    trainer._generate_single_turn = timed("generate", trainer._generate_single_turn)
    trainer._calculate_rewards = timed("score", trainer._calculate_rewards)
    trainer.train()
    return _summary(steps[1:])


def _summary(rows: list[dict]) -> dict:
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def warm_start(point: OperatingPoint, args: argparse.Namespace):
    """The benchmark's starting model: ``point``'s supervised warm start of a fresh tiny model."""
    from rewardlab.data import arithmetic
    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.demos.rl import greedy_accuracy
    from rewardlab.rl.sft import SFTConfig, sft

    model, tokenizer = build_tiny_model(args.model, seed=0), load_tiny_tokenizer()
    dist = {"min_value": 10, "ops": "+", "carry": False}
    rows = arithmetic.generate(20000, seed=0, **dist)
    valid = [
        dict(r, prompt=point.template.format(prompt=r["prompt"]))
        for r in arithmetic.generate(200, seed=10_000, **dist)
    ]

    def reached_target(step: int) -> bool:
        return (
            point.target is not None
            and step % 10 == 0
            and greedy_accuracy(model, tokenizer, valid)[0] >= point.target
        )

    config = SFTConfig(
        max_steps=point.sft_steps,
        schedule_steps=600,
        learning_rate=point.lr,
        lr_scheduler_type=point.schedule,
        per_device_train_batch_size=64,
        logging_steps=0,
    )
    pairs = [(point.template.format(prompt=r["prompt"]), r["completion"]) for r in rows]
    losses = sft(model, tokenizer, pairs, config, callback=reached_target, log=None)
    return model, tokenizer, len(losses), greedy_accuracy(model, tokenizer, valid)[0]


def run_operating_point(args: argparse.Namespace, name: str) -> dict:
    """Both trainers from the same warm-started model; prints the table and returns the results."""
    point = POINTS[name]
    if args.template:
        point = dataclasses.replace(point, template=args.template)
    base, tokenizer, sft_steps, accuracy = warm_start(point, args)
    rows = make_prompts(args.prompts * (args.steps + 2), point.template)
    print(
        f"GRPO step: {args.model}, {args.prompts} prompts ({len(tokenizer(rows[0]['prompt'])['input_ids'])} "
        f"tokens) x {args.n} samples, <= {args.max_new} new tokens, "
        f"math verifier{' + brevity' if args.brevity else ''} reward; operating point '{name}': "
        f"{sft_steps}-step warm start, greedy validation accuracy {accuracy:.0%}; CPU, "
        f"{args.threads} thread(s); median of {args.steps} steps after 1 warm-up"
    )
    results = {}
    if args.only in (None, "rewardlab"):
        results["rewardlab"] = run_rewardlab(copy.deepcopy(base), tokenizer, rows, args)
    if args.only in (None, "trl"):
        import trl

        results[f"trl {trl.__version__}"] = run_trl(copy.deepcopy(base), copy.deepcopy(tokenizer), rows, args)
    print(f"{'':16} {'step s':>8} {'generate':>9} {'score':>7} {'update':>7}")
    for name, r in results.items():
        print(f"{name:16} {r['step']:8.3f} {r['generate']:9.3f} {r['score']:7.3f} {r['update']:7.3f}")
    if "rewardlab" in results:
        rk = results["rewardlab"]
        print(f"(rewardlab: reward {rk['reward']:.3f}, frac_reward_zero_std {rk['zero_std']:.2f})")
    if len(results) == 2:
        rk, trl_r = list(results.values())
        print(
            f"ratio (TRL / rewardlab): step {trl_r['step'] / rk['step']:.2f}x, generate "
            f"{trl_r['generate'] / rk['generate']:.2f}x, score {trl_r['score'] / max(rk['score'], 1e-9):.2f}x, "
            f"update {trl_r['update'] / max(rk['update'], 1e-9):.2f}x"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument(
        "--points",
        default="skip,mixed",
        help=f"Comma-separated operating points, of: {', '.join(POINTS)} (see the module docstring).",
    )
    p.add_argument("--brevity", action="store_true", help="Add a length reward (no degenerate groups).")
    p.add_argument(
        "--template",
        help="Replaces the operating points' prompt template ('{prompt}': the bare problem).",
    )
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--max-new", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both (1: the tiny model gains nothing from more)",
    )
    p.add_argument("--model", default="qwen2-tiny")
    p.add_argument("--only", choices=["rewardlab", "trl"])
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A rewardlab config override (repeatable), e.g. train.logprob_chunk_tokens=0",
    )
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    for name in args.points.split(","):
        if name not in POINTS:
            p.error(f"unknown operating point {name!r} (known: {', '.join(POINTS)})")
        run_operating_point(args, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
