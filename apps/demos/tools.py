"""The tool-use demo behind ``scripts/demo-tools``: a tiny model learns by RL to call a calculator for
three-digit multiplications it cannot do in its head.

Each seed runs, in its own process (two at a time by default):

1. a tiny Qwen2 (``rewardlab.data.tiny``, random weights from the seed) and the char-level tokenizer;
2. generated problems ``"123*456="`` with three-digit operands, and a held-out set they never include;
3. a short supervised warm start on demonstrations, only ``--tool-share`` of which use the calculator
   (``<calc>123*456</calc>``, then the calculator's output ``=56088;``, which is context and never a
   target, then ``\\boxed{56088}``); the rest answer directly, as the model would in its head. So
   the warm-started model knows the call format but rarely uses it;
4. GRPO in the ``tools`` environment (``rewardlab.envs``): episodes of up to 3 turns, the calculator's
   output appended with loss mask 0, the math verifier scoring the final turn;
5. held-out accuracy before and after: ``--eval-samples`` sampled episodes per problem at temperature 1
   (the mean is the unbiased pass@1), with tools and without (single turn: a call is left unanswered, so
   the model must answer in its head), and the share of episodes that call the tool.

Then a table of the seeds and their medians (``OUT/summary.json``).
``python -m rewardlab.demos.tools --out runs/demo-tools``; ``--help`` lists the knobs.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rewardlab.data.tiny import build_tiny_model
from rewardlab.demos import rl as rl_demo
from rewardlab.demos.rl import as_records, sft_config, start_seed
from rewardlab.envs import EnvConfig, build_env, run_episodes
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.types import Record
from rewardlab.verifiers import get_verifier

DIST = {"min_value": 100, "max_value": 999, "ops": "*"}
OBSERVATION = "={output};"
TOOL = "calc"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rewardlab.demos.tools", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/demo-tools", help="Run folder (one seed-N folder per seed).")
    p.add_argument("--seeds", default="0,1,2", help="Comma-separated seeds; the median is reported.")
    p.add_argument(
        "--jobs",
        type=int,
        default=3,
        help="Seeds run at once, each in its own process (all three: the last one alone would leave a core idle).",
    )
    p.add_argument(
        "--tool-share", type=float, default=0.5, help="Share of warm-start demonstrations that call the tool."
    )
    p.add_argument("--sft-steps", type=int, default=300, help="Warm-start steps.")
    p.add_argument("--sft-lr", type=float, default=2e-3)
    p.add_argument("--sft-batch", type=int, default=64)
    p.add_argument("--rl-steps", type=int, default=30, help="GRPO steps.")
    p.add_argument("--rl-lr", type=float, default=2e-4)
    p.add_argument("--prompts-per-step", type=int, default=32)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--heldout", type=int, default=200, help="Held-out problems.")
    p.add_argument("--eval-samples", type=int, default=4, help="Sampled episodes per held-out problem.")
    p.add_argument("--threads", type=int, default=1, help="torch threads per seed.")
    p.add_argument("--model", default="qwen2-tiny", help="Shipped tiny config.")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="Extra RL config overrides.")
    p.set_defaults(eval_every=0)  # held-out accuracy is measured before and after, by evaluate()
    return p


def demonstration(row: dict[str, Any], use_tool: bool) -> tuple[str, list[tuple[str, bool]]]:
    """A warm-start pair: the prompt and the completion's segments (the tool output is not a target)."""
    answer = f"\\boxed{{{row['reference']}}}"
    if not use_tool:
        return row["prompt"], [(answer, True)]
    expression = row["prompt"].rstrip("=")
    return row["prompt"], [
        (f"<{TOOL}>{expression}</{TOOL}>", True),
        (OBSERVATION.format(output=row["reference"]), False),
        (answer, True),
    ]


def env_config() -> Any:
    return EnvConfig(
        name="tools",
        tools=["calculator"],
        tool_options={"calculator": {"name": TOOL}},
        formats=["tag"],
        max_turns=3,
        max_tokens=64,
        observation_template=OBSERVATION,
        observation_format="text",
    )


def evaluate(model: Any, tokenizer: Any, records: list[Any], samples: int, seed: int) -> dict[str, float]:
    """Sampled (temperature 1) accuracy with and without the tool, and the share of episodes calling it."""

    verifier = get_verifier("math", mode="strict")
    backend = get_backend("hf", model, tokenizer, batch_size=512)
    params = SamplingParams(n=samples, temperature=1.0, max_new_tokens=24, seed=seed, logprobs=False)
    prompts = [r.prompt for r in records]

    def accuracy(texts: list[list[str]]) -> float:
        scored = [
            verifier.score(Record(id=r.id, prompt=r.prompt, completion=t, reference=r.reference)).reward
            or 0.0
            for r, group in zip(records, texts, strict=True)
            for t in group
        ]
        return sum(scored) / len(scored)

    cfg = env_config()
    with build_env(cfg) as env:
        episodes = run_episodes(backend, env, records, prompts, params, tokenizer, cfg)
        stops = list(env.stop)
    alone = backend.generate(prompts, replace(params, stop=stops))
    flat = [e for group in episodes for e in group]
    return {
        "accuracy_with_tools": accuracy([[e.text for e in group] for group in episodes]),
        "accuracy_without_tools": accuracy([[g.text for g in group] for group in alone]),
        "tool_call_rate": sum(e.state.tool_calls > 0 for e in flat) / len(flat),
    }


def warm_start(args: argparse.Namespace, seed: int, tokenizer: Any, rows: list[dict[str, Any]]) -> Any:
    """A tiny model after ``--sft-steps`` on demonstrations, ``--tool-share`` of which call the tool."""
    # lazy: pulls in torch
    from rewardlab.rl.sft import sft

    rng = random.Random(seed)
    pairs = [demonstration(r, rng.random() < args.tool_share) for r in rows]
    model = build_tiny_model(args.model, seed=seed)
    print(
        f"[demo-tools] warm start: {args.sft_steps} steps, {args.tool_share:.0%} of demonstrations call the tool"
    )
    config = sft_config(args, seed)
    sft(model, tokenizer, pairs, config)
    return model


def run_seed(args: argparse.Namespace, seed: int, out: Path) -> dict[str, Any]:
    """Warm start, GRPO with the calculator and held-out evaluation of one seed; returns its summary."""
    t_start = time.perf_counter()
    tokenizer, train_rows = start_seed(args, seed, out, DIST)
    # lazy: torch and transformers (rewardlab.rl), loaded in the seed's own process only
    from rewardlab.data import arithmetic
    from rewardlab.rl.config import load_config

    held = as_records(arithmetic.heldout(**DIST)[: args.heldout])
    t0 = time.perf_counter()
    model = warm_start(args, seed, tokenizer, train_rows)
    sft_seconds = time.perf_counter() - t0
    before = evaluate(model, tokenizer, held, args.eval_samples, seed)
    print(f"[demo-tools] after the warm start ({sft_seconds:.0f}s): {json.dumps(before)}")

    cfg = load_config(preset="grpo", overrides=grpo_overrides(args, seed, out))
    cfg.env = env_config()
    summary = rl_demo.tool_demo_grpo(
        args,
        seed,
        out,
        (cfg, model, tokenizer, as_records(train_rows)),
        lambda: evaluate(model, tokenizer, held, args.eval_samples, seed),
        before,
        "accuracy_with_tools",
        {"started": t_start, "sft_seconds": sft_seconds},
    )
    print(f"[demo-tools] {seed_line(summary)}")
    return summary


def grpo_overrides(args: argparse.Namespace, seed: int, out: Path) -> list[str]:
    """The addition demo's GRPO settings (``rewardlab.demos.rl``) with this demo's turn length."""

    extra = ["rollout.max_new_tokens=24", "train.warmup_steps=3", "train.logging_steps=5"]
    return rl_demo.grpo_overrides(args, seed, out, extra)


def seed_line(s: dict[str, Any]) -> str:
    b, a = s["before"], s["after"]
    return (
        f"seed {s['seed']}: held-out accuracy with the calculator {b['accuracy_with_tools']:.1%} -> "
        f"{a['accuracy_with_tools']:.1%} ({s['gain_points']:+.1f} points), without "
        f"{b['accuracy_without_tools']:.1%} -> {a['accuracy_without_tools']:.1%}, tool calls "
        f"{b['tool_call_rate']:.0%} -> {a['tool_call_rate']:.0%}; RL {s['rl_episodes_per_s']:.0f} episodes/s, "
        f"{s['total_seconds']:.0f}s in all"
    )


def report(summaries: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The per-seed table and the medians."""

    def median(stage: str, key: str) -> float:
        return statistics.median(s[stage][key] for s in summaries)

    keys = ("accuracy_with_tools", "accuracy_without_tools", "tool_call_rate")
    result = {
        "seeds": summaries,
        "median": {f"{stage}/{k}": median(stage, k) for stage in ("before", "after") for k in keys},
        "median_gain_points": statistics.median(s["gain_points"] for s in summaries),
        "min_gain_points": min(s["gain_points"] for s in summaries),
        "median_rl_episodes_per_s": statistics.median(s["rl_episodes_per_s"] for s in summaries),
    }
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    print(
        f"\n[demo-tools] {'seed':>4} {'with tools':>17} {'without':>15} {'tool calls':>11} {'gain':>7} {'ep/s':>5}"
    )
    for s in summaries:
        b, a = s["before"], s["after"]
        print(
            f"[demo-tools] {s['seed']:>4} {b['accuracy_with_tools']:7.1%} -> {a['accuracy_with_tools']:6.1%} "
            f"{b['accuracy_without_tools']:5.1%} -> {a['accuracy_without_tools']:5.1%} "
            f"{b['tool_call_rate']:4.0%} -> {a['tool_call_rate']:4.0%} {s['gain_points']:+7.1f} "
            f"{s['rl_episodes_per_s']:5.0f}"
        )
    m = result["median"]
    print(
        f"[demo-tools] median over {len(summaries)} seeds: accuracy with the calculator "
        f"{m['before/accuracy_with_tools']:.1%} -> {m['after/accuracy_with_tools']:.1%} "
        f"({result['median_gain_points']:+.1f} points; smallest {result['min_gain_points']:+.1f}), without "
        f"{m['before/accuracy_without_tools']:.1%} -> {m['after/accuracy_without_tools']:.1%}, tool calls "
        f"{m['before/tool_call_rate']:.0%} -> {m['after/tool_call_rate']:.0%}"
    )
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return rl_demo.tool_demo_main(argv, sys.modules[__name__], "demo-tools")


if __name__ == "__main__":
    main()
