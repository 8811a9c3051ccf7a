"""The end-to-end demo behind ``scripts/demo``: supervised warm start, then GRPO with the math verifier, on
several seeds, with the median as the headline figure.

Each seed runs, in its own process (two at a time by default, one per core):

1. a tiny Qwen2 (``rewardlab.data.tiny``, random weights from the seed) and the char-level tokenizer;
2. generated two-digit addition problems (``rewardlab.data.arithmetic``; carry-free, so a model this small
   can learn the column rule in minutes) and a held-out set the training problems never include;
3. a short supervised warm start on ``"37+42=" -> "\\boxed{79}"``, stopped once greedy accuracy on a
   validation set (never the held-out one) reaches ``--sft-target``: the model is sometimes right, so
   GRPO has signal. This tiny model learns the task in a sudden jump whose timing differs by seed by
   ~150 steps, so the stop is an accuracy, checked every ``--sft-check-every`` steps, never a step count;
4. GRPO (``grpo`` preset; KL off, lr 2.5e-4 for this 0.4M-parameter model, 100 steps) from the math verifier's reward.
   Truncated completions are penalised (the presets' default), so a policy that stops emitting EOS is never
   rewarded for a cut-off answer;
5. greedy pass@1 and the truncated share on the held-out set, before and after.

Then a table of the seeds and their medians, the figure the README quotes, written to
``OUT/summary.json``; ``OUT/checkpoint`` names the final policy of the median seed, which ``scripts/demo``
evaluates with ``rewardlab eval``.

``python -m rewardlab.demos.rl --out runs/demo`` (what ``scripts/demo`` runs); ``--help`` lists the knobs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rewardlab.data import arithmetic
from rewardlab.data.tiny import build_tiny_model
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.types import Record

DIST = {"max_value": 99, "min_value": 10, "ops": "+", "carry": False}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rewardlab.demos.rl", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/demo", help="Run folder (one seed-N folder per seed).")
    p.add_argument("--seeds", default="0,1,2,3,4", help="Comma-separated seeds; the median is reported.")
    p.add_argument("--jobs", type=int, default=2, help="Seeds run at once, each in its own process.")
    p.add_argument("--sft-steps", type=int, default=600, help="Most warm-start steps (constant lr).")
    p.add_argument(
        "--sft-target",
        type=float,
        default=0.25,
        help="Stop the warm start once greedy accuracy on a validation set (not the held-out one) reaches "
        "this; 0 runs all --sft-steps.",
    )
    p.add_argument(
        "--sft-digit-target",
        type=float,
        default=0.5,
        help="... and each digit position of the answer is right at least this often: a digit the model "
        "never gets right gives a 0/1 reward no signal, and GRPO collapses it to one guess.",
    )
    p.add_argument("--sft-check-every", type=int, default=10, help="Steps between validation checks.")
    p.add_argument("--sft-lr", type=float, default=1e-3)
    p.add_argument("--sft-batch", type=int, default=64)
    p.add_argument("--rl-steps", type=int, default=100, help="GRPO steps.")
    p.add_argument("--rl-lr", type=float, default=2.5e-4)
    p.add_argument("--prompts-per-step", type=int, default=64)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads per seed (1: the tiny model gains nothing from 2; the other core runs a seed).",
    )
    p.add_argument("--model", default="qwen2-tiny", help="Shipped tiny config.")
    p.add_argument("--sft-from", help="Start from a saved warm-start model instead of training one.")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="Extra RL config overrides.")
    return p


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--seeds: expected comma-separated integers, got {text!r}") from None
    if not seeds:
        raise SystemExit("--seeds: no seed given")
    return seeds


# ----------------------------------------------------------------------------------------------------------
# One seed
# ----------------------------------------------------------------------------------------------------------
def greedy_accuracy(model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> tuple[float, float]:
    """Greedy accuracy on ``rows``: the share of exact ``\\boxed{answer}`` completions, and the accuracy of
    the answer's worst digit position (tens or units)."""

    probe = get_backend("hf", model, tokenizer, batch_size=256)
    out = probe.generate([r["prompt"] for r in rows], SamplingParams(temperature=0.0, max_new_tokens=12))
    texts = [o[0].text.strip() for o in out]
    exact = sum(t == r["completion"] for t, r in zip(texts, rows, strict=True)) / len(rows)
    # every answer of the demo's distribution has two digits, so positions line up across rows
    positions = [i for i, ch in enumerate(rows[0]["completion"]) if ch.isdigit()]
    hits = {i: 0 for i in positions}
    for text, row in zip(texts, rows, strict=True):
        if len(text) == len(row["completion"]):
            for i in positions:
                hits[i] += text[i] == row["completion"][i]
    return exact, min(hits.values()) / len(rows)


def sft_config(args: argparse.Namespace, seed: int) -> Any:
    """The demos' warm-start settings (this one's and ``rewardlab.demos.tools``'): ``--sft-steps`` steps of
    ``--sft-batch`` at the constant learning rate ``--sft-lr``."""
    from rewardlab.rl.sft import SFTConfig  # lazy: torch (rewardlab.rl), not needed to parse --help

    return SFTConfig(
        max_steps=args.sft_steps,
        learning_rate=args.sft_lr,
        per_device_train_batch_size=args.sft_batch,
        seed=seed,
        logging_steps=100,
        lr_scheduler_type="constant",
    )


def warm_start(
    args: argparse.Namespace,
    seed: int,
    tokenizer: Any,
    train_rows: list[dict[str, Any]],
    *,
    prompt: Callable[[str], str] | None = None,
) -> Any:
    """The supervised warm start, stopped at ``--sft-target`` validation accuracy; ``prompt`` rewrites every
    training and validation prompt (``bench/algorithms.py`` adds L1's length budget to them)."""
    # lazy: pulls in torch
    from rewardlab.rl.sft import sft

    model = build_tiny_model(args.model, seed=seed)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"[demo] warm start: up to {args.sft_steps} SFT steps on {args.model} ({n_params / 1e6:.2f}M parameters)"
    )
    valid = arithmetic.generate(200, seed=10_000 + seed, **DIST)
    if prompt is not None:
        valid = [{**r, "prompt": prompt(r["prompt"])} for r in valid]
        train_rows = [{**r, "prompt": prompt(r["prompt"])} for r in train_rows]

    def check(step: int) -> bool:
        if not args.sft_target or step % args.sft_check_every:
            return False
        acc, worst_digit = greedy_accuracy(model, tokenizer, valid)
        done = acc >= args.sft_target and worst_digit >= args.sft_digit_target
        if step % 50 == 0 or done:
            print(
                f"[demo] warm start step {step}: validation greedy accuracy {acc:.0%} "
                f"(worst digit position {worst_digit:.0%})"
            )
        return done

    t0 = time.perf_counter()
    config = sft_config(args, seed)
    sft(model, tokenizer, [(r["prompt"], r["completion"]) for r in train_rows], config, callback=check)
    print(f"[demo] warm start done in {time.perf_counter() - t0:.0f}s")
    return model


def grpo_overrides(args: argparse.Namespace, seed: int, out: Path, extra: Sequence[str] = ()) -> list[str]:
    """The demo's RL settings on top of the ``grpo`` preset, then ``extra`` (another demo's), user ``--set``
    last."""
    return [
        f"run.output_dir={out / 'grpo'}",
        f"train.max_steps={args.rl_steps}",
        f"train.learning_rate={args.rl_lr}",
        f"train.prompts_per_step={args.prompts_per_step}",
        f"rollout.n={args.group_size}",
        "rollout.max_new_tokens=12",
        "rollout.temperature=1.0",
        "algorithm.kl_coef=0.0",
        "train.warmup_steps=5",
        "reward.workers=1",
        "reward.sources=[{name: math, kwargs: {mode: strict}}]",
        f"train.eval_steps={args.eval_every}",
        f"train.seed={seed}",
        "train.per_device_train_batch_size=256",
        "rollout.batch_size=512",
        "train.logging_steps=10",
        "train.report_to=none",
        *extra,
        *args.overrides,
    ]


def tool_demo_grpo(
    args: argparse.Namespace,
    seed: int,
    out: Path,
    trainer_inputs: tuple[Any, Any, Any, list[Record]],
    evaluate: Callable[[], dict[str, float]],
    before: dict[str, float],
    accuracy: str,
    timing: dict[str, float],
) -> dict[str, Any]:
    """The tool demos' RL stage (``rewardlab.demos.tools``' and ``rewardlab.demos.search``'): GRPO with
    ``trainer_inputs`` ``(cfg, model, tokenizer, records)``, ``evaluate()`` again, and the seed's summary,
    written to ``out/summary.json``: ``before`` and after, the gain in points of ``accuracy``, the timings
    (``timing``: ``started``, the seed's ``perf_counter`` start, and ``sft_seconds``) and the checkpoint."""
    # lazy: torch and transformers (rewardlab.rl), loaded in the seed's own process only
    from rewardlab.rl.plot import plot_run
    from rewardlab.rl.trainer import RLTrainer

    cfg, model, tokenizer, records = trainer_inputs
    t0 = time.perf_counter()
    with RLTrainer(cfg, model=model, tokenizer=tokenizer, train_records=records, eval_records=[]) as trainer:
        trainer.train()
        episodes = trainer.step * args.prompts_per_step * args.group_size
        checkpoint = trainer.checkpoints().resolve(True) / "policy"
    rl_seconds = time.perf_counter() - t0
    after = evaluate()
    summary = {
        "seed": seed,
        "before": before,
        "after": after,
        "gain_points": 100 * (after[accuracy] - before[accuracy]),
        "sft_seconds": timing["sft_seconds"],
        "rl_seconds": rl_seconds,
        "rl_episodes_per_s": episodes / rl_seconds,
        "total_seconds": time.perf_counter() - timing["started"],
        "checkpoint": str(checkpoint),
        "curves": str(plot_run(out / "grpo", out / "curves.png")),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def tool_demo_main(argv: list[str] | None, module: Any, tag: str) -> dict[str, Any]:
    """The tool demos' command line (``rewardlab.demos.tools``' and ``rewardlab.demos.search``'), given the
    demo ``module`` (its ``build_parser``, ``run_seed``, ``seed_line`` and ``report``): one seed runs in this
    process; several run in their own processes, then the report, with the wall time in
    ``OUT/summary.json``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = module.build_parser().parse_args(argv)
    seeds = parse_seeds(args.seeds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if len(seeds) == 1:
        return module.run_seed(args, seeds[0], out)
    t0 = time.perf_counter()
    print(f"[{tag}] {len(seeds)} seeds ({args.seeds}), {args.jobs} at a time")
    # __spec__.name: the module's import name, also when it runs as __main__ (python -m)
    name = module.__spec__.name
    summaries = run_seeds(argv, seeds, out, max(1, args.jobs), module=name, line=module.seed_line)
    result = module.report(summaries, out)
    result["seconds"] = time.perf_counter() - t0
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    print(f"[{tag}] {len(seeds)} seeds in {result['seconds']:.0f}s")
    return result


def as_records(rows: Sequence[dict[str, Any]]) -> list[Record]:
    """Generated problems as the records RL trains and evaluates on."""
    return [Record(id=r["id"], prompt=r["prompt"], reference=r["reference"]) for r in rows]


def start_seed(
    args: argparse.Namespace, seed: int, out: Path, dist: dict[str, Any]
) -> tuple[Any, list[dict[str, Any]]]:
    """What every demo's seed starts from (this one's and ``rewardlab.demos.tools``'): ``--threads`` torch
    threads, the run folder, the char-level tokenizer and 20000 training problems of ``dist`` from ``seed``.
    Returns ``(tokenizer, train_rows)``."""
    import torch

    torch.set_num_threads(args.threads)
    # lazy: torch and transformers (the tiny tokenizer), loaded in the seed's own process only
    from rewardlab.data import arithmetic
    from rewardlab.data.tiny import load_tiny_tokenizer

    out.mkdir(parents=True, exist_ok=True)
    return load_tiny_tokenizer(), arithmetic.generate(20000, seed=seed, **dist)


def run_seed(args: argparse.Namespace, seed: int, out: Path) -> dict[str, Any]:
    """Warm start, GRPO and held-out evaluation of one seed; returns (and writes) its summary."""
    t_start = time.perf_counter()
    tokenizer, train_rows = start_seed(args, seed, out, DIST)
    # lazy: torch and transformers (rewardlab.rl), loaded in the seed's own process only
    from rewardlab.data import arithmetic
    from rewardlab.rl.config import load_config
    from rewardlab.rl.plot import plot_run
    from rewardlab.rl.trainer import RLTrainer

    held_rows = arithmetic.heldout(**DIST)
    if args.sft_from:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(args.sft_from)
        print(f"[demo] warm start loaded from {args.sft_from}")
    else:
        model = warm_start(args, seed, tokenizer, train_rows)
        model.save_pretrained(out / "sft")
        tokenizer.save_pretrained(out / "sft")

    cfg = load_config(preset="grpo", overrides=grpo_overrides(args, seed, out))
    records, held = as_records(train_rows), as_records(held_rows)
    print(
        f"[demo] GRPO: {args.rl_steps} steps x {args.prompts_per_step} prompts x {args.group_size} samples, "
        f"lr {args.rl_lr}"
    )
    with RLTrainer(
        cfg, model=model, tokenizer=tokenizer, train_records=records, eval_records=held
    ) as trainer:
        t0 = time.perf_counter()
        last = trainer.train()
        before = trainer.initial_eval
        after = last if "eval/pass@1" in last else trainer.evaluate()
        rl_seconds = time.perf_counter() - t0
        checkpoint = trainer.checkpoints().resolve(True) / "policy"
    summary = {
        "seed": seed,
        "heldout_pass@1_before": before["eval/pass@1"],
        "heldout_pass@1_after": after["eval/pass@1"],
        "gain_points": 100 * (after["eval/pass@1"] - before["eval/pass@1"]),
        "heldout_truncated_before": before["eval/truncated"],
        "heldout_truncated_after": after["eval/truncated"],
        "rl_seconds": rl_seconds,
        "total_seconds": time.perf_counter() - t_start,
        "checkpoint": str(checkpoint),
        "curves": str(plot_run(out / "grpo", out / "reward_curve.png")),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"[demo] {seed_line(summary)}; curves: {summary['curves']}")
    return summary


def seed_line(s: dict[str, Any]) -> str:
    return (
        f"seed {s['seed']}: held-out greedy pass@1 {s['heldout_pass@1_before']:.1%} -> "
        f"{s['heldout_pass@1_after']:.1%} ({s['gain_points']:+.1f} points), truncated "
        f"{s['heldout_truncated_after']:.1%}, {s['total_seconds']:.0f}s"
    )


# ----------------------------------------------------------------------------------------------------------
# Several seeds
# ----------------------------------------------------------------------------------------------------------
def run_seeds(
    argv: list[str],
    seeds: list[int],
    out: Path,
    jobs: int,
    *,
    module: str = "rewardlab.demos.rl",
    line: Any = None,
) -> list[dict[str, Any]]:
    """Runs each seed as ``python -m MODULE --seeds S --out OUT/seed-S`` (its log in ``seed-S/log.txt``), at
    most ``jobs`` at once; returns their summaries (``seed-S/summary.json``) in seed order, printing
    ``line(summary)`` as each finishes."""
    line = line or seed_line
    pending = list(seeds)
    running: dict[int, subprocess.Popen] = {}
    done: dict[int, dict[str, Any]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            seed = pending.pop(0)
            folder = out / f"seed-{seed}"
            folder.mkdir(parents=True, exist_ok=True)
            cmd = [
                sys.executable,
                "-u",
                "-m",
                module,
                *argv,
                "--seeds",
                str(seed),
                "--out",
                str(folder),
            ]
            with (folder / "log.txt").open("w") as log:
                running[seed] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            print(f"[demo] seed {seed} started (log: {folder / 'log.txt'})", flush=True)
        time.sleep(0.5)
        for seed, proc in list(running.items()):
            if proc.poll() is None:
                continue
            del running[seed]
            folder = out / f"seed-{seed}"
            if proc.returncode:
                raise SystemExit(
                    f"[demo] seed {seed} failed (exit {proc.returncode}); see {folder / 'log.txt'}"
                )
            done[seed] = json.loads((folder / "summary.json").read_text())
            print(f"[demo] {line(done[seed])}", flush=True)
    return [done[s] for s in seeds]


def report(summaries: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The per-seed table and the medians; the median seed's checkpoint goes to ``OUT/checkpoint``."""
    by_gain = sorted(summaries, key=lambda s: s["gain_points"])
    median_seed = by_gain[(len(by_gain) - 1) // 2]
    keys = ("heldout_pass@1_before", "heldout_pass@1_after", "gain_points", "heldout_truncated_after")
    result = {
        "seeds": summaries,
        "median": {k: statistics.median(s[k] for s in summaries) for k in keys},
        "min_gain_points": by_gain[0]["gain_points"],
        "max_truncated_after": max(s["heldout_truncated_after"] for s in summaries),
        "median_seed": median_seed["seed"],
        "checkpoint": median_seed["checkpoint"],
    }
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    (out / "checkpoint").write_text(median_seed["checkpoint"] + "\n")
    print(f"\n[demo] {'seed':>4} {'before':>7} {'after':>7} {'gain':>7} {'truncated':>9}")
    for s in summaries:
        print(
            f"[demo] {s['seed']:>4} {s['heldout_pass@1_before']:7.1%} {s['heldout_pass@1_after']:7.1%} "
            f"{s['gain_points']:+7.1f} {s['heldout_truncated_after']:9.1%}"
        )
    m = result["median"]
    print(
        f"[demo] median over {len(summaries)} seeds: held-out greedy pass@1 {m['heldout_pass@1_before']:.1%} -> "
        f"{m['heldout_pass@1_after']:.1%} ({m['gain_points']:+.1f} points; smallest gain "
        f"{result['min_gain_points']:+.1f}), truncated after GRPO {m['heldout_truncated_after']:.1%} "
        f"(most {result['max_truncated_after']:.1%})"
    )
    return result


def write_heldout(out: Path) -> None:
    """The held-out set as a benchmark file, for ``rewardlab eval`` after training (``scripts/demo``)."""

    rows = arithmetic.heldout(**DIST)
    with (out / "heldout.jsonl").open("w") as handle:
        for row in rows:
            handle.write(
                json.dumps({"id": row["id"], "prompt": row["prompt"], "reference": row["reference"]}) + "\n"
            )
    print(
        f"[demo] 20000 training problems per seed, {len(rows)} held-out (two-digit addition without carrying, "
        f"e.g. {rows[0]['prompt']}{rows[0]['completion']})"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    seeds = parse_seeds(args.seeds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_heldout(out)
    if len(seeds) == 1:
        summary = run_seed(args, seeds[0], out)
        (out / "checkpoint").write_text(summary["checkpoint"] + "\n")
        return summary
    t0 = time.perf_counter()
    print(f"[demo] {len(seeds)} seeds ({args.seeds}), {args.jobs} at a time")
    result = report(run_seeds(argv, seeds, out, max(1, args.jobs)), out)
    print(f"[demo] {len(seeds)} seeds in {time.perf_counter() - t0:.0f}s")
    return result


if __name__ == "__main__":
    main()
