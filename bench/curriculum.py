#!/usr/bin/env python
"""Curricula against uniform sampling on leveled arithmetic, same budget, several seeds (issue 50).

The task is ``data.path=arithmetic_levels``: additions and subtractions of 1- to 4-digit operands, one source
per level (``digits1`` .. ``digits4``, difficulty 1 .. 4), each with a worked column solution
(``7+5=12 c1\\n4+8+1=13 c1\\n3+2+1=6\\n\\boxed{632}``); the reward is the math verifier's verdict on the
last ``\\boxed{}`` (the demo's source), the figure greedy pass@1 on the 188 held-out problems
(``data.eval_path=arithmetic_levels``: 50 a level, 38 at level 1, a quarter of its 155 prompts), overall and
per level, every ``--eval-every`` steps.

**Warm start** (once per seed, shared by every arm): the demo's tiny Qwen2 (``rewardlab.demos.rl``: 0.4M
parameters, random weights from the seed, the demo's SFT settings: lr 1e-3, batch 64, constant) imitates
worked solutions of a mix that is mostly levels 1-2 (``--sft-mix``, 35/35/15/15%), stopped once greedy
accuracy on 50 level-2 validation problems (never held out) reaches ``--sft-target`` (60%), checked every 25
steps. Level 2 is the stop because its problems are unseen; level 1 has only 117 training prompts, which the
model memorises. This tiny model learns the column rule in a jump whose timing varies by seed, so the stop
is an accuracy, never a step count (as the demo's). Seeds 0, 1, 2 stopped after 375 steps each (125-135 s),
at held-out greedy pass@1 for levels 1 / 2 / 3 / 4:

====  =================  ==========================
seed  greedy             sampled (temperature 1)
====  =================  ==========================
0     84 / 62 / 40 / 18  73 / 32 / 14 / 1
1     74 / 62 / 34 / 20  61 / 40 / 12 / 8
2     89 / 64 / 24 / 6   55 / 40 / 9 / 1
====  =================  ==========================

Level 1 mostly solved, level 4 seldom (1-8% of its samples right at temperature 1), so the levels differ in
what a group of 8 samples can teach, and a curriculum has something to choose. ``OUT/seed-N/sft.json`` has
each seed's figures.

**RL** (every arm from its seed's warm start): the demo's GRPO (``grpo`` preset, no KL, group-normalised
advantages, temperature 1, truncation penalised) for ``--steps`` steps of ``--prompts`` prompts x ``--group``
samples (the same rollouts for every arm; GHPO's hinted re-samples come on top and are counted), at most 64
new tokens (the longest worked solution is 59 characters, one token each, then EOS), on a pool of
``--pool`` problems (a quarter a level), lr ``--rl-lr`` 1e-4: with the demo's 2.5e-4, tuned for its 12-token
answers, held-out pass@1 stayed flat (49 -> 48% in 40 steps of 32 x 8; seed 1, a 40/40/10/10 warm start),
5e-4 collapsed it (to 21%), 1e-4 gained 7 points (to 56%). The arms change one thing, the curriculum
(``algorithm.curriculum``):

==============  ==========================================================================================
arm             what draws the prompts (rewardlab config)
==============  ==========================================================================================
uniform         the seeded epoch order over the pool (``name: none``; the reference)
adarft          a target difficulty that follows the batch's mean reward (toward 0.5); the batch is the
                prompts nearest it (Shi et al. 2025)
dump            UCB over the four sources on their samples' mean |advantage|, softmax at 0.1 (Wang et al.)
sec             a TD(0) bandit over the four difficulty levels, Boltzmann at 0.4 (Chen et al. 2025)
vcrl            groups whose reward variance is high go to a memory bank, up to half a batch is replayed
                from it (Jiang et al. 2025)
reverse         R^3 ``staged``: rollouts start after the first k lines of the worked solution, k shrinking
                stage by stage when the batch's mean reward reaches 0.5 (Xi et al. 2024)
guided_hints    GHPO: a group that solved nothing is re-sampled with 25%, then 50%, then 75% of the worked
                solution as the start of the response (``hint_style: prefix``: the tiny model never saw
                GHPO's hint sentence, which would only be noise in its prompt; Liu et al. 2025)
==============  ==========================================================================================

Per run (``OUT/seed-N/ARM/result.json``): held-out pass@1 overall and per level before and after, the eval
curve and the first eval step at or above ``--target`` (52%: steps to a fixed accuracy; granularity
``--eval-every``; ``--report --target X`` re-reads the curves at another accuracy), the mean share of
zero-variance groups (``frac_reward_zero_std``; for guided_hints taken after hinted groups replaced unsolved
ones), the curriculum's state at each step (the ``curriculum/...`` keys
of ``metrics.jsonl``), the samples generated (hinted re-samples included), wall and step time. Writes
``OUT/results.json``, ``OUT/table.md`` (medians over seeds, min-max in brackets; the gain is paired with
uniform on the same seed) and ``OUT/curriculum.png`` (per arm its state over the steps, medians over seeds:
target difficulty, per-source probabilities, share replayed, prefix share, hinted groups; held-out pass@1
curves overall and per level). Each run is a subprocess with one torch thread; ``--jobs`` run at once, the
runs of a seed as soon as its warm start is saved (``--warm-starts DIR`` reuses an earlier run's).

**Operating point** (this 2-core machine, shared with other jobs): one run alone takes 2.0 s a step at 32 x 8
(uniform; 3.3 s at 64 x 8) and guided_hints about 5 s (its hinted re-samples: ~60% more samples); two runs
at once, 2.0-2.3 s (guided_hints 4.9 s). bench/algorithms.py's budget (100 steps x 64 x 8) would take about
1.5 hours here for 7 arms x 3 seeds, so the default is what fits in 25 minutes: ``--steps 30`` x 32 x 8
(7,680 rollouts an arm, 15% of that budget), eval every 5 steps (~1.2 s an eval, 5% of a run). Measured:
one seed's 7 arms took 5.6 minutes with ``--jobs 2``, a warm start 2.1-2.3 minutes, so the whole bench
takes about 21 minutes (more while other jobs share the cores).

``python bench/curriculum.py [--seeds 0,1,2] [--arms all] [--steps 30] [--jobs 2]
[--out runs/bench-curriculum]``;
``--smoke`` runs 4 tiny steps of uniform and guided_hints on one seed (checks the bench, measures nothing).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import algorithms as bench  # bench/algorithms.py: this folder is on sys.path when run as a script

LEVELS = (1, 2, 3, 4)
SOURCES = tuple(f"digits{d}" for d in LEVELS)
MAX_NEW_TOKENS = 64  # the longest worked solution (9999+9999) is 59 characters, one token each, + EOS
VALID_PROBLEMS = 50  # the warm start's validation problems (level 2, not held out)
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")

ARMS: dict[str, list[str]] = {
    "uniform": ["algorithm.curriculum.name=none"],
    "adarft": ["algorithm.curriculum.name=adarft"],
    "dump": ["algorithm.curriculum.name=dump", "algorithm.curriculum.arms=source"],
    "sec": ["algorithm.curriculum.name=sec", "algorithm.curriculum.arms=difficulty"],
    "vcrl": ["algorithm.curriculum.name=vcrl"],
    "reverse": ["algorithm.curriculum.name=reverse", "algorithm.curriculum.reverse_schedule=staged"],
    "guided_hints": ["algorithm.curriculum.name=guided_hints", "algorithm.curriculum.hint_style=prefix"],
}

# Where each paper finds its gain, for the table's last column.
SETTINGS = {
    "uniform": "reference",
    "adarft": "competition math with per-problem difficulty scores (DeepScaleR), several model sizes: "
    "up to 2x fewer steps to the same accuracy, most on skewed (easy- or hard-heavy) training sets",
    "dump": "Knights-and-Knaves puzzles in 12 distributions (number of characters), GRPO on a 7B model: "
    "faster convergence, higher test scores, most on the mid-to-hard distributions",
    "sec": "Countdown, Zebra, ARC-1D and math with Qwen2.5 3B/7B: harder, out-of-distribution test "
    "problems, and skill balance when training several domains at once",
    "vcrl": "DAPO-Math-17k with Qwen3-4B/8B base: five math benchmarks (AIME, MATH500, ...), +4.7 points "
    "average over GSPO at 8B",
    "reverse": "sparse outcome reward over multi-step chains (8 reasoning tasks with Llama2-7B, "
    "program-based GSM8K): +4.1 points average over outcome-only RL",
    "guided_hints": "training problems beyond the model (NuminaMath with Qwen2.5 7B models): ~+5 points "
    "average on six math benchmarks, steadier training",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/bench-curriculum")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--arms", default="all", help=f"comma-separated, or all: {', '.join(ARMS)}")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--pool", type=int, default=2000, help="training problems per seed (a quarter a level)")
    p.add_argument("--eval-every", type=int, default=5, help="steps between held-out evaluations")
    p.add_argument(
        "--rl-lr",
        type=float,
        default=1e-4,
        help="RL learning rate (the demo's 2.5e-4 is tuned for 12 tokens)",
    )
    p.add_argument(
        "--target", type=float, default=0.52, help="the held-out pass@1 'steps to reach' counts to"
    )
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--sft-mix", default="0.35,0.35,0.15,0.15", help="share of each level in the warm start's data"
    )
    p.add_argument("--sft-target", type=float, default=0.6, help="stop at this level-2 validation accuracy")
    p.add_argument("--sft-steps", type=int, default=800, help="most warm-start steps")
    p.add_argument("--sft-check-every", type=int, default=25)
    p.add_argument(
        "--warm-starts",
        help="folder of an earlier run of this bench whose seed-N/sft to reuse (default: --out)",
    )
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], help="extra RL config overrides, every arm"
    )
    p.add_argument("--smoke", action="store_true", help="2 arms, 1 seed, 4 tiny steps: checks the bench runs")
    p.add_argument("--report", action="store_true", help="only collect the runs' results into the table")
    p.add_argument("--worker", choices=["sft", "rl"], help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    p.add_argument("--arm", help=argparse.SUPPRESS)
    return p


SMOKE = {
    "seeds": "0",
    "arms": "uniform,guided_hints",
    "steps": 4,
    "prompts": 8,
    "group": 4,
    "pool": 200,
    "eval_every": 2,
    "sft_steps": 40,
    "sft_check_every": 20,
}


def demo_args(args: argparse.Namespace) -> argparse.Namespace:
    """The demo's settings (SFT and GRPO hyper-parameters) with this bench's budget."""
    more = (f"--sft-steps={args.sft_steps}", f"--eval-every={args.eval_every}", f"--rl-lr={args.rl_lr}")
    return bench.demo_args(args, *more)


def warm_folder(args: argparse.Namespace, seed: int) -> Path:
    return Path(args.warm_starts or args.out) / f"seed-{seed}" / "sft"


# ----------------------------------------------------------------------------------------------------------
# Workers (one process each)
# ----------------------------------------------------------------------------------------------------------
def level_accuracy(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    *,
    n: int = 1,
    temperature: float = 0.0,
    seed: int = 0,
) -> dict[str, float]:
    """Per source, the share of samples whose last ``\\boxed{}`` holds the answer and that ended before
    ``MAX_NEW_TOKENS`` (what the RL reward and the held-out eval count)."""
    from rewardlab.generation import SamplingParams, get_backend

    probe = get_backend("hf", model, tokenizer, batch_size=256)
    params = SamplingParams(n=n, temperature=temperature, max_new_tokens=MAX_NEW_TOKENS, seed=seed)
    out = probe.generate([r["prompt"] for r in rows], params)
    hits: dict[str, list[bool]] = {}
    for row, group in zip(rows, out, strict=True):
        for g in group:
            boxed = BOXED.findall(g.text)
            hits.setdefault(row["source"], []).append(
                bool(boxed) and boxed[-1] == row["reference"] and not g.truncated
            )
    return {s: sum(v) / len(v) for s, v in sorted(hits.items())}


def warm_start(args: argparse.Namespace) -> None:
    """SFT on worked solutions of ``--sft-mix``, stopped at ``--sft-target`` level-2 validation accuracy;
    saves the model and ``sft.json`` (steps, seconds, validation and held-out accuracy per level)."""
    import torch

    torch.set_num_threads(1)
    from rewardlab.data.arithmetic import levels
    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.demos import rl as demo
    from rewardlab.rl.sft import sft

    folder = warm_folder(args, args.seed)
    tokenizer = load_tiny_tokenizer()
    mix = [float(x) for x in args.sft_mix.split(",")]
    rows: list[dict[str, Any]] = []
    for level, share in zip(LEVELS, mix, strict=True):
        if share > 0:  # a seed of its own (1000 + seed): not the RL pool's problems, where levels allow
            rows += levels.generate_levels(round(20000 * share), seed=1000 + args.seed, levels=(level,))
    # the stop reads level 2: its problems are unseen (level 1 has 117 training prompts, all memorised)
    valid = levels.generate_levels(VALID_PROBLEMS, seed=10_000 + args.seed, levels=(2,))
    model = build_tiny_model("qwen2-tiny", seed=args.seed)
    history: list[dict[str, Any]] = []

    def check(step: int) -> bool:
        if step % args.sft_check_every:
            return False
        acc = level_accuracy(model, tokenizer, valid)["digits2"]
        history.append({"step": step, "digits2": acc})
        print(f"[sft] step {step}: validation greedy accuracy digits2 {acc:.0%}", flush=True)
        return acc >= args.sft_target

    t0 = time.perf_counter()
    sft(
        model,
        tokenizer,
        [(r["prompt"], r["completion"]) for r in rows],
        demo.sft_config(demo_args(args), args.seed),
        callback=check,
    )
    seconds = time.perf_counter() - t0
    held = levels.heldout_levels()
    summary = {
        "seed": args.seed,
        "mix": dict(zip(SOURCES, mix, strict=True)),
        "steps": history[-1]["step"] if history else args.sft_steps,
        "seconds": seconds,
        "validation": history,
        "heldout_greedy": level_accuracy(model, tokenizer, held),
        "heldout_sampled": level_accuracy(model, tokenizer, held, n=4, temperature=1.0, seed=args.seed),
    }
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder.parent / "sft.json").write_text(json.dumps(summary, indent=2))
    print(f"[sft] done in {seconds:.0f}s: {json.dumps(summary['heldout_greedy'])}")


def train_arm(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM

    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.demos import rl as demo
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer

    out = Path(args.out) / f"seed-{args.seed}" / args.arm
    extra = [
        *ARMS[args.arm],
        "data.path=arithmetic_levels",
        "data.eval_path=arithmetic_levels",
        f"data.num_examples={args.pool}",
        f"rollout.max_new_tokens={MAX_NEW_TOKENS}",
        f"run.output_dir={out}",  # after the demo's own (OUT/grpo): one folder per arm
        "train.save_steps=0",
        "train.save_total_limit=1",
        "run.log_completions=0",
        *args.overrides,
    ]
    cfg = load_config(preset="grpo", overrides=demo.grpo_overrides(demo_args(args), args.seed, out, extra))
    model = AutoModelForCausalLM.from_pretrained(warm_folder(args, args.seed))
    t0 = time.perf_counter()
    with RLTrainer(cfg, model=model, tokenizer=load_tiny_tokenizer()) as trainer:
        trainer.train()
        wall = time.perf_counter() - t0
    result = summarise_run(out, args, wall)
    (out / "result.json").write_text(json.dumps(result, indent=2))


def steps_to(evals: list[dict[str, Any]], target: float) -> int | None:
    """The first evaluated step whose held-out pass@1 is at least ``target`` (``None``: never)."""
    return next((e["step"] for e in evals if e["pass@1"] >= target), None)


def summarise_run(out: Path, args: argparse.Namespace, wall: float) -> dict[str, Any]:
    from rewardlab.training.metrics import read_metrics

    rows = read_metrics(out)
    train = [r for r in rows if r.get("step", 0) > 0 and "reward" in r]
    evals = [
        {"step": r["step"], "pass@1": r["eval/pass@1"], **{s: r[f"eval/pass@1/{s}"] for s in SOURCES}}
        for r in rows
        if "eval/pass@1" in r
    ]
    reached = steps_to(evals, args.target)
    hint_samples = sum(r.get("curriculum/hint_samples", 0.0) for r in train)
    state = [
        {"step": r["step"], **{k: v for k, v in r.items() if k.startswith("curriculum/")}} for r in train
    ]
    for s, r in zip(state, train, strict=True):
        s["frac_reward_zero_std"] = r["frac_reward_zero_std"]
    return {
        "arm": args.arm,
        "seed": args.seed,
        "heldout_before": evals[0]["pass@1"],
        "heldout_after": evals[-1]["pass@1"],
        "levels_before": {s: evals[0][s] for s in SOURCES},
        "levels_after": {s: evals[-1][s] for s in SOURCES},
        "evals": evals,
        "steps_to_target": reached,
        "zero_std_share": bench._mean(r["frac_reward_zero_std"] for r in train),
        "train_accuracy_first10": bench._mean(r["accuracy"] for r in train[:10]),
        "train_accuracy_last10": bench._mean(r["accuracy"] for r in train[-10:]),
        "samples": len(train) * args.prompts * args.group + hint_samples,
        "hint_samples": hint_samples,
        "completion_tokens": train[-1]["num_completion_tokens"],
        "wall_s": wall,
        "step_s_median": statistics.median(r["timing/step_s"] for r in train),
        "state": state,
    }


# ----------------------------------------------------------------------------------------------------------
# The driver
# ----------------------------------------------------------------------------------------------------------
def run_bench(args: argparse.Namespace) -> tuple[dict[str, Any], list[str], Path]:
    """The warm starts not on disk yet, then every (seed, arm) run, unless ``--report``; their results,
    written to ``OUT/results.json`` with the operating point and the warm starts' summaries."""
    out = Path(args.out)
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = list(ARMS) if args.arms == "all" else args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"--arms: unknown {unknown} (known: {', '.join(ARMS)})")
    common = [
        f"--out={out}",
        f"--steps={args.steps}",
        f"--prompts={args.prompts}",
        f"--group={args.group}",
        f"--pool={args.pool}",
        f"--eval-every={args.eval_every}",
        f"--rl-lr={args.rl_lr}",
        f"--target={args.target}",
        f"--sft-mix={args.sft_mix}",
        f"--sft-target={args.sft_target}",
        f"--sft-steps={args.sft_steps}",
        f"--sft-check-every={args.sft_check_every}",
        *([f"--warm-starts={args.warm_starts}"] if args.warm_starts else []),
        *[f"--set={o}" for o in args.overrides],
    ]
    t0 = time.perf_counter()
    if not args.report:
        # the warm starts first, then the runs of a seed as soon as its warm start is there, the slowest arm
        # (guided_hints: its hinted re-samples) first, so that the last jobs to start are short ones
        jobs: list[tuple[str, list[str], Path, str | None]] = []
        for s in seeds:
            if not (warm_folder(args, s) / "config.json").exists():
                jobs.append(
                    (
                        f"warm start seed {s}",
                        [*common, "--worker=sft", f"--seed={s}"],
                        out / f"seed-{s}" / "sft.log",
                        None,
                    )
                )
        waits = {
            s: f"warm start seed {s}" if any(j[0] == f"warm start seed {s}" for j in jobs) else None
            for s in seeds
        }
        for a in sorted(arms, key=lambda a: a != "guided_hints"):
            for s in seeds:
                argv = [*common, "--worker=rl", f"--seed={s}", f"--arm={a}"]
                jobs.append((f"seed {s} {a}", argv, out / f"seed-{s}" / f"{a}.log", waits[s]))
        bench.run_jobs(jobs, args.jobs, script=__file__)
    summary = {
        "operating_point": {
            "seeds": seeds,
            "steps": args.steps,
            "prompts_per_step": args.prompts,
            "group_size": args.group,
            "pool": args.pool,
            "eval_every": args.eval_every,
            "rl_lr": args.rl_lr,
            "target": args.target,
            "jobs": args.jobs,
            "max_new_tokens": MAX_NEW_TOKENS,
            "heldout_per_level": heldout_counts(),
            "sft_mix": args.sft_mix,
            "sft_target": args.sft_target,
        },
        "warm_starts": [json.loads((warm_folder(args, s).parent / "sft.json").read_text()) for s in seeds],
        "runs": [
            json.loads((out / f"seed-{s}" / a / "result.json").read_text()) for s in seeds for a in arms
        ],
        "seconds": time.perf_counter() - t0,
    }
    for run in summary["runs"]:  # --report --target X re-reads the curves at another accuracy
        run["steps_to_target"] = steps_to(run["evals"], args.target)
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    return summary, arms, out


def heldout_counts() -> dict[str, int]:
    """Held-out problems per level (level 1 holds out a quarter of its 155 prompts: 38)."""
    from rewardlab.data.arithmetic import levels

    rows = levels.heldout_levels()
    return {s: sum(r["source"] == s for r in rows) for s in SOURCES}


def _med(runs: list[dict[str, Any]], arm: str, get: Any) -> tuple[float, float, float]:
    values = [get(r) for r in runs if r["arm"] == arm]
    return statistics.median(values), min(values), max(values)


def _paired_gain(runs: list[dict[str, Any]], arm: str) -> float | None:
    """Median over seeds of the arm's held-out pass@1 after RL minus uniform's on the same seed (same warm
    start)."""
    after = {(r["seed"], r["arm"]): r["heldout_after"] for r in runs}
    pairs = [after[s, arm] - after[s, "uniform"] for s, a in after if a == arm and (s, "uniform") in after]
    return statistics.median(pairs) if pairs else None


def _steps_text(runs: list[dict[str, Any]], arm: str, steps: int) -> str:
    """Median steps to the target over seeds (a seed that never reached it counts as beyond the run), with
    how many seeds reached it."""
    values = [r["steps_to_target"] for r in runs if r["arm"] == arm]
    reached = [v for v in values if v is not None]
    med = statistics.median([v if v is not None else float("inf") for v in values])
    shown = f"{med:.0f}" if med != float("inf") else f">{steps}"
    return f"{shown} ({len(reached)}/{len(values)})"


def markdown_table(summary: dict[str, Any], arms: list[str]) -> str:
    runs, op = summary["runs"], summary["operating_point"]
    lines = [
        f"{op['steps']} steps x {op['prompts_per_step']} prompts x {op['group_size']} samples, seeds "
        f"{','.join(map(str, op['seeds']))}, RL lr {op['rl_lr']:g}; medians over seeds (min-max); held-out "
        f"greedy pass@1 on {sum(op['heldout_per_level'].values())} problems ("
        + ", ".join(f"{s} {n}" for s, n in op["heldout_per_level"].items())
        + f"), evaluated every {op['eval_every']} steps.",
        "",
        "| arm | samples | pass@1 before | after (min-max) | vs uniform, paired (points) | "
        + " | ".join(f"{s} before -> after" for s in SOURCES)
        + f" | steps to {op['target']:.0%} (seeds) | zero-std groups | wall s | "
        "where the paper finds its gain |",
        "|---" * (9 + len(SOURCES)) + "|",
    ]
    for arm in arms:

        def med(key: str, arm: str = arm) -> float:
            return _med(runs, arm, lambda r: r[key])[0]

        acc, lo, hi = _med(runs, arm, lambda r: r["heldout_after"])
        gain = _paired_gain(runs, arm)
        per_level = " | ".join(
            f"{_med(runs, arm, lambda r, s=s: r['levels_before'][s])[0]:.0%} -> "
            f"{_med(runs, arm, lambda r, s=s: r['levels_after'][s])[0]:.0%}"
            for s in SOURCES
        )
        lines.append(
            f"| {arm} | {med('samples'):,.0f} | {med('heldout_before'):.1%} | {acc:.1%} ({lo:.0%}-{hi:.0%}) |"
            f" {'' if gain is None else f'{100 * gain:+.1f}'} | {per_level} | "
            f"{_steps_text(runs, arm, op['steps'])} | {med('zero_std_share'):.0%} | {med('wall_s'):.0f} | "
            f"{SETTINGS[arm]} |"
        )
    lines.append("")
    if "guided_hints" in arms:
        lines.append(
            "guided_hints: its samples include the hinted re-samples; its zero-variance share is taken after "
            "hinted groups replaced unsolved ones (as it trains)."
        )
    for w in summary["warm_starts"]:
        lines.append(
            f"warm start seed {w['seed']}: {w['steps']} SFT steps ({w['seconds']:.0f}s); held-out greedy "
            + " ".join(f"{s} {w['heldout_greedy'][s]:.0%}" for s in SOURCES)
            + ", sampled (T=1) "
            + " ".join(f"{s} {w['heldout_sampled'][s]:.0%}" for s in SOURCES)
        )
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------------------
# The plot
# ----------------------------------------------------------------------------------------------------------
def _series(runs: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """The median over seeds, step by step, of a state key (steps where every seed logged it)."""
    by_step: dict[int, list[float]] = {}
    for r in runs:
        for row in r["state"]:
            if key in row and row[key] is not None:
                by_step.setdefault(row["step"], []).append(row[key])
    steps = sorted(s for s, v in by_step.items() if len(v) == len(runs))
    return steps, [statistics.median(by_step[s]) for s in steps]


def _state_panel(ax: Any, arm: str, runs: list[dict[str, Any]], prompts: int, group: int) -> None:
    """What the arm's curriculum decides over the steps, on a 0-1 scale (difficulties mapped 1-4 -> 0-1)."""
    plotted = []
    if arm in ("dump", "sec"):
        for i, s in enumerate(SOURCES):
            label = s if arm == "dump" else f"{LEVELS[i]:g}"
            plotted.append((f"curriculum/p/{label}", f"p({s})", f"C{i}", "-"))
    elif arm == "adarft":
        plotted.append(("curriculum/target_difficulty", "target difficulty", "C3", "-"))
        plotted.append(("curriculum/drawn_difficulty", "drawn difficulty", "C0", "--"))
    elif arm == "vcrl":
        plotted.append(("curriculum/high_p_share", "share replayed from the bank", "C2", "-"))
        plotted.append(("curriculum/drawn_difficulty", "drawn difficulty", "C0", "--"))
    elif arm == "reverse":
        plotted.append(("curriculum/prefix_fraction", "share of the solution given", "C4", "-"))
    elif arm == "guided_hints":
        plotted.append(("curriculum/hint_groups", "hinted groups / prompts", "C5", "-"))
        plotted.append(("curriculum/hint_samples", "hinted samples / rollouts", "C1", "--"))
        plotted.append(("curriculum/hint_solved", "hinted groups solved", "C2", "-."))
    plotted.append(("frac_reward_zero_std", "zero-variance groups", "grey", ":"))
    for key, label, color, style in plotted:
        steps, values = _series(runs, key)
        if "difficulty" in key:
            values = [(v - 1) / 3 for v in values]
            label += " (1-4 -> 0-1)"
        if key == "curriculum/hint_groups":
            values = [v / prompts for v in values]
        if key == "curriculum/hint_samples":
            values = [v / (prompts * group) for v in values]
        if steps:
            ax.plot(steps, values, color=color, linestyle=style, label=label)
    if arm == "uniform":
        ax.axhline(0.25, color="C0", label="p(each level) = 0.25")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(arm)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def plot(summary: dict[str, Any], arms: list[str], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, op = summary["runs"], summary["operating_point"]
    fig, axes = plt.subplots(3, 4, figsize=(20, 13))
    state_axes = list(axes[:2].flat)
    for ax, arm in zip(state_axes, arms, strict=False):
        _state_panel(ax, arm, [r for r in runs if r["arm"] == arm], op["prompts_per_step"], op["group_size"])
    for ax in state_axes[len(arms) : -1]:
        ax.axis("off")
    curves = [(state_axes[-1], "pass@1", "held-out pass@1 (all levels)")] + [
        (ax, s, f"held-out pass@1, {s}") for ax, s in zip(axes[2], SOURCES, strict=True)
    ]
    for ax, key, title in curves:
        for i, arm in enumerate(arms):
            mine = [r for r in runs if r["arm"] == arm]
            by_step: dict[int, list[float]] = {}
            for r in mine:
                for e in r["evals"]:
                    by_step.setdefault(e["step"], []).append(e[key])
            steps = sorted(s for s, v in by_step.items() if len(v) == len(mine))
            ax.plot(
                steps,
                [100 * statistics.median(by_step[s]) for s in steps],
                marker=".",
                color=f"C{i}",
                linewidth=2.5 if arm == "uniform" else 1.2,
                label=arm,
            )
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    if state_axes[-1] in [c[0] for c in curves]:
        state_axes[-1].axhline(100 * summary["operating_point"]["target"], color="grey", linestyle="--")
        state_axes[-1].legend(fontsize=7)
    fig.suptitle(
        "Curricula on leveled arithmetic: each arm's state (medians over seeds) and held-out accuracy"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main() -> None:
    args = build_parser().parse_args()
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    if args.worker == "sft":
        return warm_start(args)
    if args.worker == "rl":
        return train_arm(args)
    summary, arms, out = run_bench(args)
    table = markdown_table(summary, arms)
    (out / "table.md").write_text(table)
    print(table)
    print(f"[bench] plot: {plot(summary, arms, out / 'curriculum.png')}")


if __name__ == "__main__":
    main()
