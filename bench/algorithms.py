#!/usr/bin/env python
"""Recent RL algorithms against plain GRPO on the demo task, same budget, several seeds (issue 17).

The task is the demo's (``rewardlab.demos.rl``): a tiny Qwen2 warm-started on two-digit additions without
carrying, then RL with the math verifier's reward, greedy pass@1 on the 100 held-out problems before and
after. Every arm starts from the same warm-start weights of its seed, trains ``--steps`` steps of
``--prompts`` prompts x ``--group`` samples (the same number of rollouts), and changes one thing:

==================  ==============================================================================
arm                 what changes (rewardlab config)
==================  ==============================================================================
grpo                nothing: the demo's GRPO (the reference)
passk               Pass@k Training's analytic advantages, k = 4 (Chen et al., 2025)
grpo_passk          verl's ``grpo_passk``: only the best sample, r_max - r_second (Tang et al., 2025)
grpo_2src / gdpo    two rewards, correctness + an exact-form regex (weight 0.5): summed then normalised
                    (GRPO) vs normalised per source then summed (GDPO, Liu et al., 2026)
band / greso        pre-rollout prompt filters over a pool the run revisits: pass-rate band 0.2-0.8
                    (Bae et al., 2025), zero-variance skipping (GRESO, Zheng et al., 2025)
w_reinforce / nsr   +1/-1 REINFORCE, positive samples weighted 0.1 / 0 (Zhu et al., 2025)
lite_ppo            group mean, batch std, token-mean loss (Liu et al., 2025, Tricks or Traps)
ttrl                label-free: majority vote of the group is the reward (Zuo et al., 2025)
self_certainty      label-free: the policy's self-certainty is the reward (Zhao et al., 2025)
length_budget       L1-Max budget in the prompt, budgets shrinking 16 -> 11 tokens (Aggarwal & Welleck)
async               rollouts one step off-policy in a thread, token-level rollout IS (cap 2)
==================  ==============================================================================

The label-free arms keep the math verifier as a reward source of weight 0, so the training accuracy and
the held-out pass@1 stay the verifier's, and their pseudo rewards are compared with it over training
(collapse: the pseudo reward rises while the accuracy does not).

The training prompts are a pool of ``--pool`` problems (default 1,000: 6.4 epochs at the default budget) for
every arm, so the prompt filters, which need a prompt's earlier groups, have something to read.

Writes ``OUT/results.json``, ``OUT/table.md`` (medians over seeds, min-max in brackets) and
``OUT/algorithms.png``. Each run is a subprocess with one torch thread; ``--jobs`` run at once (two on a
2-core machine; the ``async`` arm's wall time is only comparable with ``grpo``'s when both ran with
``--jobs 1``, since its rollout thread needs the second core).

``python bench/algorithms.py [--seeds 0,1,2] [--arms all] [--steps 100] [--jobs 2] [--out runs/bench-algorithms]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FORMAT_SOURCE = (
    r"{name: format, weight: 0.5, kwargs: {mode: regex, match: fullmatch, patterns: ['\\boxed\{\d+\}']}}"
)
MATH_SOURCE = "{name: math, kwargs: {mode: strict}}"
MATH_JUDGE = "{name: math, weight: 0.0, kwargs: {mode: strict}}"
BUDGET_RANGE = (8, 16)  # the length_budget arm's token budgets: completions here are ~11 tokens

ARMS: dict[str, list[str]] = {
    "grpo": [],
    "passk": ["algorithm.adv_estimator=passk", "algorithm.passk_k=4"],
    "grpo_passk": ["algorithm.adv_estimator=grpo_passk"],
    "grpo_2src": [f"reward.sources=[{MATH_SOURCE}, {FORMAT_SOURCE}]"],
    "gdpo": [f"reward.sources=[{MATH_SOURCE}, {FORMAT_SOURCE}]", "algorithm.adv_estimator=gdpo"],
    "band": ["algorithm.prompt_filter.mode=band"],
    "greso": ["algorithm.prompt_filter.mode=greso"],
    "w_reinforce": [
        "algorithm.adv_estimator=reinforce_signed",
        "algorithm.positive_adv_weight=0.1",
    ],
    "nsr": ["algorithm.adv_estimator=reinforce_signed", "algorithm.positive_adv_weight=0.0"],
    "lite_ppo": ["algorithm.adv_scale=batch", "algorithm.loss_agg_mode=token-mean"],
    "ttrl": [f"reward.sources=[{MATH_JUDGE}, {{name: ttrl, kwargs: {{mode: strict}}}}]"],
    "self_certainty": [f"reward.sources=[{MATH_JUDGE}, {{name: self_certainty}}]"],
    # L1's alpha is per token for budgets of thousands; here completions are ~11 tokens, so it is scaled up
    "length_budget": [
        "reward.length_budget=max",
        "reward.length_budget_alpha=0.1",
        f"reward.length_budget_min={BUDGET_RANGE[0]}",
        f"reward.length_budget_max={BUDGET_RANGE[1]}",
        "reward.length_budget_final_max=11",
    ],
    "async": ["rollout.async_staleness=1", "algorithm.rollout_is=token"],
}
# Run only when named (--arms): what the async arm's step time is made of; the exploration arms of
# bench/exploration.py (issue 35; the tree arms need --group 8: 2 roots x (1 + 1 point x 3 branches)).
TREE = ["rollout.tree.roots=2", "rollout.tree.points=1", "rollout.tree.branches=3"]
EXTRA_ARMS: dict[str, list[str]] = {
    "async_no_is": ["rollout.async_staleness=1"],
    "grpo_is": ["algorithm.rollout_is=token"],
    "clip_cov": ["algorithm.policy_loss=clip_cov"],
    "kl_cov": ["algorithm.policy_loss=kl_cov"],
    "top_entropy": ["algorithm.top_entropy_quantile=0.2"],
    "tree": TREE,
    "tree_grpo": [*TREE, "rollout.tree.intra_tree_coef=1.0"],
}
LABEL_FREE = {"ttrl": "ttrl", "self_certainty": "self_certainty"}
# The tiny model has never seen text after "37+42=": an arm whose prompts carry a budget starts from a warm
# start on such prompts (budgets drawn from the same range), or it would start at 0% and learn nothing.
WARM_STARTS = {"length_budget": "sft-budget"}

# Where each paper says its technique helps, for the table's last column.
SETTINGS = {
    "grpo": "reference",
    "passk": "hard problems where pass@1 training stops exploring (maze, AIME-level math; 7B models)",
    "grpo_passk": "best-of-n inference objectives (Tang et al.); large groups",
    "grpo_2src": "reference for gdpo (same two rewards, summed then normalised)",
    "gdpo": "several rewards of different difficulty (tool calling, math + length/format; 1.5-7B)",
    "band": "multi-epoch training over a fixed prompt set with many always/never-solved prompts",
    "greso": "multi-epoch training where many prompts give zero-variance groups (DAPO-17k, 1.5-7B)",
    "w_reinforce": "pass@k over large k on MATH/AIME with Qwen2.5/3 (keeps diversity)",
    "nsr": "pass@k over large k; NSR alone keeps pass@256",
    "lite_ppo": "small/base models where group std over-weights near-solved prompts (Qwen3-4B/8B base)",
    "ttrl": "unlabelled test sets where the model's majority answer is usually right (AIME with 7B)",
    "self_certainty": "no verifier at all; reasoning and code with 1.5-3B instruct models",
    "length_budget": "long chains of thought (budgets of 512-4000 tokens) a user wants to cut",
    "async": "GPU clusters where generation and training run on separate devices",
    "async_no_is": "as async, without the rollout IS correction of the lag",
    "grpo_is": "as grpo, with the rollout IS correction (the sampler's log-probs; no lag to correct)",
    "clip_cov": "long RL runs whose entropy collapses early (Qwen2.5-7B/32B, DAPO-17k math; 2e-4 of tokens)",
    "kl_cov": "as clip_cov; the paper's best arm (+2.0 / +6.4 points avg. for 7B / 32B, AIME gains largest)",
    "top_entropy": "large models (Qwen3-14B/32B: +4.8/+11 on AIME); at 8B it only ties full-token training",
    "tree": "long reasoning chains where branching saves prefix tokens (TreeRL: math/code, 8-14B models)",
    "tree_grpo": "multi-turn agents with sparse outcome rewards (Tree-GRPO: QA/web agents, 1.5-14B)",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/bench-algorithms")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--arms", default="all", help=f"comma-separated, or all: {', '.join(ARMS)}")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--pool", type=int, default=1000, help="training problems per seed (revisited)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--warm-starts",
        help="folder of an earlier run of this bench whose seed-N/sft warm starts to reuse (default: --out)",
    )
    p.add_argument(
        "--sample-k", type=int, default=0, help="after RL, also sampled pass@1 and pass@k on the held-out set"
    )
    p.add_argument("--report", action="store_true", help="only collect the runs' results into the table")
    p.add_argument("--worker", choices=["sft", "rl"], help=argparse.SUPPRESS)
    p.add_argument("--variant", default="sft", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    p.add_argument("--arm", help=argparse.SUPPRESS)
    return p


def demo_args(args: argparse.Namespace, *more: str) -> argparse.Namespace:
    """The demo's settings (warm start, GRPO hyper-parameters) with this bench's budget (``more``: other demo
    flags, a later one winning)."""
    from rewardlab.demos.rl import build_parser as demo_parser

    return demo_parser().parse_args(
        [
            f"--rl-steps={args.steps}",
            f"--prompts-per-step={args.prompts}",
            f"--group-size={args.group}",
            f"--eval-every={args.steps}",
            *more,
        ]
    )


# ----------------------------------------------------------------------------------------------------------
# Workers (one process each)
# ----------------------------------------------------------------------------------------------------------
def warm_start(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from rewardlab.data import arithmetic
    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.demos import rl as demo

    folder = Path(args.warm_starts or args.out) / f"seed-{args.seed}" / args.variant
    tokenizer = load_tiny_tokenizer()
    rows = arithmetic.generate(20000, seed=args.seed, **demo.DIST)
    prompt = None
    if args.variant == "sft-budget":
        import random

        from rewardlab.rewardmodels.shaping.functional import L1_PROMPT_TEMPLATES

        rng = random.Random(args.seed)
        template = L1_PROMPT_TEMPLATES["max"]

        def prompt(text: str) -> str:  # what the trainer sends under reward.length_budget=max
            return f"{text} {template.format(budget=rng.randint(*BUDGET_RANGE))}"

    model = demo.warm_start(demo_args(args), args.seed, tokenizer, rows, prompt=prompt)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def train_arm(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM

    from rewardlab.data import arithmetic
    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.demos import rl as demo
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.types import Record

    seed_dir = Path(args.out) / f"seed-{args.seed}"
    out = seed_dir / args.arm
    rows = arithmetic.generate(args.pool, seed=args.seed, **demo.DIST)
    held = arithmetic.heldout(**demo.DIST)
    records = [Record(id=r["id"], prompt=r["prompt"], reference=r["reference"]) for r in rows]
    held_records = [Record(id=r["id"], prompt=r["prompt"], reference=r["reference"]) for r in held]
    extra = [
        *{**ARMS, **EXTRA_ARMS}[args.arm],
        f"run.output_dir={out}",  # after the demo's own (OUT/grpo): one folder per arm
        "train.save_steps=0",
        "train.save_total_limit=1",
        f"run.log_completions={args.prompts * args.group if args.arm in LABEL_FREE else 0}",
    ]
    cfg = load_config(preset="grpo", overrides=demo.grpo_overrides(demo_args(args), args.seed, out, extra))
    warm = WARM_STARTS.get(args.arm, "sft")
    model = AutoModelForCausalLM.from_pretrained(
        Path(args.warm_starts or args.out) / f"seed-{args.seed}" / warm
    )
    t0 = time.perf_counter()
    with RLTrainer(
        cfg, model=model, tokenizer=load_tiny_tokenizer(), train_records=records, eval_records=held_records
    ) as trainer:
        last = trainer.train()
        before = trainer.initial_eval
        wall = time.perf_counter() - t0
        sampled = sampled_passk(trainer, held_records, args.sample_k, args.seed) if args.sample_k else {}
    result = {**summarise_run(out, args.arm, before, last, wall), **sampled}
    (out / "result.json").write_text(json.dumps(result, indent=2))


def sampled_passk(trainer: Any, records: list[Any], k: int, seed: int) -> dict[str, float]:
    """``k`` samples per held-out problem at the rollout temperature: pass@1 (their mean) and pass@k (the
    unbiased estimator; with n = k samples, whether any is right), by the first reward source's verdict, a
    truncated sample never right."""
    from rewardlab.eval.metrics import pass_at_k_single
    from rewardlab.generation import SamplingParams
    from rewardlab.rl.rewards import RewardSources
    from rewardlab.types import Record

    rc, sampler = trainer.cfg.rollout, trainer.sampler
    params = SamplingParams(
        n=k, temperature=rc.temperature, max_new_tokens=rc.max_new_tokens, stop=list(rc.stop), seed=seed + 99
    )
    groups = sampler.generate(records, params)
    samples = [
        Record(id=f"{r.id}#{j}", prompt=r.prompt, completion=g.text, reference=r.reference)
        for r, group in zip(records, groups, strict=True)
        for j, g in enumerate(group)
    ]
    correct = RewardSources([sampler.reward_pipeline.sources.sources[0]]).score(samples).correct
    finished = [not g.truncated for group in groups for g in group]
    right = [c and f for c, f in zip(correct, finished, strict=True)]
    counts = [sum(right[i * k : (i + 1) * k]) for i in range(len(records))]
    return {
        "sampled_pass@1": sum(counts) / (k * len(records)),
        f"sampled_pass@{k}": _mean(pass_at_k_single(k, c, k) for c in counts),
    }


def summarise_run(
    out: Path, arm: str, before: dict[str, Any], last: dict[str, Any], wall: float
) -> dict[str, Any]:
    from rewardlab.training.metrics import read_metrics

    rows = [r for r in read_metrics(out) if r.get("step", 0) > 0 and "reward" in r]
    step_times = [r["timing/step_s"] for r in rows]
    result = {
        "arm": arm,
        "heldout_before": before["eval/pass@1"],
        "heldout_after": last["eval/pass@1"],
        "truncated_after": last["eval/truncated"],
        "completion_tokens": last["num_completion_tokens"],
        "wall_s": wall,
        "step_s_median": statistics.median(step_times),
        "train_accuracy_first10": _mean(r["accuracy"] for r in rows[:10]),
        "train_accuracy_last10": _mean(r["accuracy"] for r in rows[-10:]),
        "zero_std_share": _mean(r["frac_reward_zero_std"] for r in rows),
        "mean_length": _mean(r["completions/mean_length"] for r in rows),
        # generated tokens per sample: a tree's shared prefixes count once
        "generated_tokens_per_sample": _mean(
            r.get("tree/generated_tokens_per_sample", r["completions/mean_length"]) for r in rows
        ),
        "entropy": [r.get("entropy") for r in rows],
        "entropy_p50": [r.get("entropy/p50") for r in rows],
        "near_deterministic": [r.get("entropy/near_deterministic") for r in rows],
    }
    if arm == "async":
        result["wait_s_median"] = statistics.median(r["timing/wait_rollout_s"] for r in rows)
    if arm in ("band", "greso"):
        result["skipped_frac"] = _mean(r.get("prompt_filter/skipped_frac", 0.0) for r in rows)
    if arm in LABEL_FREE:
        result["label_free"] = label_free_collapse(out, LABEL_FREE[arm], rows)
    return result


def label_free_collapse(out: Path, source: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The pseudo reward against the verifier over training: its mean, the verifier's accuracy, and among
    the samples the pseudo reward favours (ttrl: reward 1; self-certainty: above the step's median) the
    share the verifier calls wrong, over the first and the last 10 steps."""
    samples: dict[int, list[dict[str, Any]]] = {}
    with (out / "rollouts.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            samples.setdefault(row["step"], []).append(row)
    steps = sorted(samples)

    def phase(chosen: list[int]) -> dict[str, float]:
        favoured, wrong = 0, 0
        for step in chosen:
            values = [r["rewards"].get(source) for r in samples[step]]
            cut = statistics.median(v for v in values if v is not None) if source != "ttrl" else 0.5
            for r, v in zip(samples[step], values, strict=True):
                if v is not None and v > cut:
                    favoured += 1
                    wrong += not r["correct"]
        by_step = {r["step"]: r for r in rows}
        return {
            "pseudo_reward": _mean(by_step[s][f"rewards/{source}/mean"] for s in chosen if s in by_step),
            "accuracy": _mean(by_step[s]["accuracy"] for s in chosen if s in by_step),
            "favoured_but_wrong": wrong / max(favoured, 1),
        }

    return {"first10": phase(steps[:10]), "last10": phase(steps[-10:])}


def _mean(values: Any) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


# ----------------------------------------------------------------------------------------------------------
# The driver
# ----------------------------------------------------------------------------------------------------------
def run_jobs(
    jobs: list[tuple[str, list[str], Path]] | list[tuple[str, list[str], Path, str | None]],
    width: int,
    script: str = __file__,
) -> None:
    """Runs ``script`` with each job's argv, ``(name, argv, log)`` or ``(name, argv, log, needs)``, ``width``
    at a time, a job once the one it ``needs`` (if any) has finished, in list order otherwise; stops every
    other run at the first failure."""
    pending, running, done = [(*j, None)[:4] for j in jobs], {}, set()
    while pending or running:
        while len(running) < width:
            ready = [j for j in pending if j[3] is None or j[3] in done]
            if not ready:
                break
            pending.remove(ready[0])
            name, argv, log, _ = ready[0]
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w") as handle:
                running[name] = (
                    subprocess.Popen(
                        [sys.executable, "-u", script, *argv], stdout=handle, stderr=subprocess.STDOUT
                    ),
                    log,
                    time.perf_counter(),
                )
        time.sleep(0.5)
        for name, (proc, log, t0) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[name]
            if proc.returncode:
                for other, _, _ in running.values():
                    other.terminate()
                raise SystemExit(f"{name} failed (exit {proc.returncode}); see {log}")
            done.add(name)
            print(f"[bench] {name} done in {time.perf_counter() - t0:.0f}s", flush=True)


def run_all(
    args: argparse.Namespace, common: list[str], out: Path, seeds: list[int], arms: list[str]
) -> None:
    """The warm starts the arms need (those not on disk yet), then every (seed, arm) run."""
    warm = Path(args.warm_starts or out)
    variants = sorted({WARM_STARTS.get(a, "sft") for a in arms})
    sft_jobs = [
        (
            f"warm start {v} seed {s}",
            [*common, "--worker=sft", f"--variant={v}", f"--seed={s}"],
            out / f"seed-{s}" / f"{v}.log",
        )
        for s in seeds
        for v in variants
        if not (warm / f"seed-{s}" / v / "config.json").exists()
    ]
    run_jobs(sft_jobs, args.jobs)
    rl_jobs = [
        (
            f"seed {s} {a}",
            [*common, "--worker=rl", f"--seed={s}", f"--arm={a}"],
            out / f"seed-{s}" / f"{a}.log",
        )
        for s in seeds
        for a in arms
    ]
    run_jobs(rl_jobs, args.jobs)


def main() -> None:
    args = build_parser().parse_args()
    if args.worker == "sft":
        return warm_start(args)
    if args.worker == "rl":
        return train_arm(args)
    results, arms, out = run_bench(args)
    table = markdown_table(results, arms)
    (out / "table.md").write_text(table)
    print(table)
    print(f"[bench] plot: {plot(results, arms, out / 'algorithms.png')}")


def run_bench(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str], Path]:
    """Every (seed, arm) run of ``args`` (the warm starts first), unless ``--report``; their results, also
    written to ``OUT/results.json`` with the operating point."""
    out = Path(args.out)
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = list(ARMS) if args.arms == "all" else args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS and a not in EXTRA_ARMS]
    if unknown:
        raise SystemExit(f"--arms: unknown {unknown} (known: {', '.join([*ARMS, *EXTRA_ARMS])})")
    common = [
        f"--out={out}",
        f"--steps={args.steps}",
        f"--prompts={args.prompts}",
        f"--group={args.group}",
        f"--pool={args.pool}",
        *([f"--warm-starts={args.warm_starts}"] if args.warm_starts else []),
        *([f"--sample-k={args.sample_k}"] if args.sample_k else []),
    ]
    t0 = time.perf_counter()
    if not args.report:
        run_all(args, common, out, seeds, arms)
    results = [json.loads((out / f"seed-{s}" / a / "result.json").read_text()) for s in seeds for a in arms]
    for r, (s, _a) in zip(results, [(s, a) for s in seeds for a in arms], strict=True):
        r["seed"] = s
    summary = {
        "operating_point": {
            "seeds": seeds,
            "steps": args.steps,
            "prompts_per_step": args.prompts,
            "group_size": args.group,
            "pool": args.pool,
            "jobs": args.jobs,
            "max_new_tokens": 12,
            "heldout_problems": 100,
        },
        "runs": results,
        "seconds": time.perf_counter() - t0,
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    return results, arms, out


def _med(results: list[dict[str, Any]], arm: str, key: str) -> tuple[float, float, float]:
    values = [r[key] for r in results if r["arm"] == arm]
    return statistics.median(values), min(values), max(values)


def _gain_vs_grpo(results: list[dict[str, Any]], arm: str) -> float | None:
    """Median over seeds of the arm's held-out gain minus GRPO's gain on the same seed (paired: the same
    warm start, except where the arm needs its own, whose own "before" then counts)."""
    gains = {(r["seed"], r["arm"]): r["heldout_after"] - r["heldout_before"] for r in results}
    pairs = [gains[s, arm] - gains[s, "grpo"] for s, a in gains if a == arm and (s, "grpo") in gains]
    return statistics.median(pairs) if pairs else None


def markdown_table(results: list[dict[str, Any]], arms: list[str]) -> str:
    lines = [
        "| arm | held-out pass@1 before | after (min-max) | gain vs grpo, paired (points) | completion tokens | "
        "wall s | step s | zero-std groups | where the paper says it helps |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in arms:
        acc, lo, hi = _med(results, arm, "heldout_after")
        gain = _gain_vs_grpo(results, arm)
        delta = f"{100 * gain:+.1f}" if gain is not None else ""
        tokens = _med(results, arm, "completion_tokens")[0]
        wall = _med(results, arm, "wall_s")[0]
        step = _med(results, arm, "step_s_median")[0]
        zero = _med(results, arm, "zero_std_share")[0]
        before = _med(results, arm, "heldout_before")[0]
        lines.append(
            f"| {arm} | {before:.1%} | {acc:.1%} ({lo:.0%}-{hi:.0%}) | {delta} | {tokens:,.0f} | {wall:.0f} | "
            f"{step:.2f} | {zero:.0%} | {SETTINGS[arm]} |"
        )
    lines.append("")
    for arm in [a for a in arms if a in LABEL_FREE]:
        runs = [r["label_free"] for r in results if r["arm"] == arm]
        f = {k: statistics.median(x["first10"][k] for x in runs) for k in runs[0]["first10"]}
        last = {k: statistics.median(x["last10"][k] for x in runs) for k in runs[0]["last10"]}
        lines.append(
            f"{arm}: pseudo reward {f['pseudo_reward']:.3f} -> {last['pseudo_reward']:.3f}, verifier accuracy "
            f"{f['accuracy']:.1%} -> {last['accuracy']:.1%}, favoured samples the verifier calls wrong "
            f"{f['favoured_but_wrong']:.1%} -> {last['favoured_but_wrong']:.1%} (first -> last 10 steps, medians)."
        )
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], arms: list[str], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("heldout_after", "held-out greedy pass@1 after RL", 100.0),
        ("completion_tokens", "completion tokens generated (thousands)", 1e-3),
        ("wall_s", "wall time of the RL run (s)", 1.0),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(17, 0.42 * len(arms) + 1.6))
    for ax, (key, title, scale) in zip(axes, panels, strict=True):
        for i, arm in enumerate(arms):
            med, lo, hi = (v * scale for v in _med(results, arm, key))
            ax.barh(i, med, color="C1" if arm == "grpo" else "C0", alpha=0.8)
            ax.errorbar(med, i, xerr=[[med - lo], [hi - med]], color="k", capsize=3)
        ax.set_yticks(range(len(arms)), arms)
        ax.invert_yaxis()
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
        if key == "heldout_after":
            before = statistics.median(r["heldout_before"] for r in results) * scale
            ax.axvline(before, color="grey", linestyle="--", label="before RL")
            ax.legend(loc="lower right")
    fig.suptitle("RL algorithms on the demo task (median over seeds, bars: min-max)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
