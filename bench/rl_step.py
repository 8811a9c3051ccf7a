"""One GRPO step (generate, score, update), rewardkit vs TRL's GRPOTrainer, same run, same everything.

Same tiny Qwen2 (same weights: a short supervised warm start on the demo's addition problems, so that the
model is right ~30% of the time and its groups look like real GRPO groups, some all-wrong), same prompts,
group size, completion length, learning rate, loss (GRPO's per-sequence token mean, TRL
``loss_type="grpo"``), no KL (no reference model), the same math verifier as the reward, CPU, same torch
thread count. After one warm-up step each, ``--steps`` steps are timed; the script prints seconds per step
(median), the generation / scoring / update split, and the ratio. ``--brevity`` adds a small length reward
to both, so that no group is degenerate (the case where rewardkit's skipping of zero-advantage samples
cannot help).

    .venv/bin/python bench/rl_step.py [--steps 5] [--prompts 16] [--n 8] [--max-new 16] [--brevity]

TRL's phases are measured by wrapping its ``_generate_single_turn`` (generation) and ``_calculate_rewards``
(scoring) methods; its update is the rest of the step. rewardkit's come from its own step metrics.
"""

from __future__ import annotations

import argparse
import copy
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


def make_prompts(count: int, template: str) -> list[dict]:
    from rewardkit.data import arithmetic

    rows = arithmetic.generate(count, seed=1, min_value=10, ops="+", carry=False)
    return [{"prompt": template.format(prompt=r["prompt"]), "answer": r["reference"]} for r in rows]


def run_rewardkit(model, tokenizer, rows, args) -> dict:
    from rewardkit.rl.config import load_config
    from rewardkit.rl.trainer import RLTrainer
    from rewardkit.types import Record

    records = [Record(id=i, prompt=r["prompt"], reference=r["answer"]) for i, r in enumerate(rows)]
    cfg = load_config(
        preset="grpo",
        overrides=[
            "algorithm.kl_coef=0.0",
            f"train.prompts_per_step={args.prompts}",
            f"rollout.n={args.n}",
            f"rollout.max_new_tokens={args.max_new}",
            f"train.lr={args.lr}",
            f"train.micro_batch_size={args.prompts * args.n}",
            f"rollout.batch_size={args.prompts * args.n}",
            f"train.steps={args.steps + 1}",
            "reward.sources=[{name: math}]",
            "reward.truncation=none",  # TRL keeps truncated completions' rewards: the same rewards on both sides
            "reward.workers=1",
            "run.tensorboard=false",
            "data.shuffle=false",
            f"run.output_dir={tempfile.mkdtemp(prefix='rk-bench-')}",
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

    from rewardkit.types import Record
    from rewardkit.verifiers import get_verifier

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


def run_operating_point(args: argparse.Namespace, warm_start: int) -> dict:
    """Both trainers from the same ``warm_start``-step model; prints the table and returns the results."""
    from rewardkit.tiny import build_tiny_model, load_tiny_tokenizer

    tokenizer = load_tiny_tokenizer()
    base = build_tiny_model(args.model, seed=0)
    if warm_start:
        from rewardkit.data import arithmetic
        from rewardkit.rl.sft import SFTConfig, sft

        rows = arithmetic.generate(20000, seed=0, min_value=10, ops="+", carry=False)
        sft(
            base,
            tokenizer,
            [(args.template.format(prompt=r["prompt"]), r["completion"]) for r in rows],
            SFTConfig(steps=warm_start, schedule_steps=600, lr=3e-3, batch_size=64, log_every=0),
            log=None,
        )
    rows = make_prompts(args.prompts * (args.steps + 2), args.template)
    print(
        f"GRPO step: {args.model}, {args.prompts} prompts ({len(tokenizer(rows[0]['prompt'])['input_ids'])} "
        f"tokens) x {args.n} samples, <= {args.max_new} new tokens, "
        f"math verifier{' + brevity' if args.brevity else ''} reward, {warm_start}-step warm start, CPU, "
        f"{args.threads} thread(s); median of {args.steps} steps after 1 warm-up"
    )
    results = {}
    if args.only in (None, "rewardkit"):
        results["rewardkit"] = run_rewardkit(copy.deepcopy(base), tokenizer, rows, args)
    if args.only in (None, "trl"):
        import trl

        results[f"trl {trl.__version__}"] = run_trl(copy.deepcopy(base), copy.deepcopy(tokenizer), rows, args)
    print(f"{'':16} {'step s':>8} {'generate':>9} {'score':>7} {'update':>7}")
    for name, r in results.items():
        print(f"{name:16} {r['step']:8.3f} {r['generate']:9.3f} {r['score']:7.3f} {r['update']:7.3f}")
    if "rewardkit" in results:
        rk = results["rewardkit"]
        print(f"(rewardkit: reward {rk['reward']:.3f}, frac_reward_zero_std {rk['zero_std']:.2f})")
    if len(results) == 2:
        rk, trl_r = list(results.values())
        print(
            f"ratio (TRL / rewardkit): step {trl_r['step'] / rk['step']:.2f}x, generate "
            f"{trl_r['generate'] / rk['generate']:.2f}x, score {trl_r['score'] / max(rk['score'], 1e-9):.2f}x, "
            f"update {trl_r['update'] / max(rk['update'], 1e-9):.2f}x"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument(
        "--warm-start",
        default="175",
        help="Comma-separated SFT step counts before the benchmark, one operating point each (0: random). "
        "175: ~75-80%% of groups have zero reward std (skipping their samples does much of the work); with "
        "the 68-token instruction prompt this tiny model is still right only ~6%% of the time after 600.",
    )
    p.add_argument("--brevity", action="store_true", help="Add a length reward (no degenerate groups).")
    p.add_argument(
        "--template",
        default=TEMPLATE,
        help="Prompt template around the problem (an instruction, as RL prompts have; '{prompt}' for bare).",
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
    p.add_argument("--only", choices=["rewardkit", "trl"])
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    for warm_start in [int(w) for w in args.warm_start.split(",")]:
        run_operating_point(args, warm_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
