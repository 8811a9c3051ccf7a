"""The rubric-reward demo behind ``scripts/demo-rubric``: a tiny model learns by RL to meet a rubric (Rubrics
as Rewards, RaR) that an LLM judge checks criterion by criterion, over real HTTP.

Each seed runs, in its own process (all at once by default):

1. a tiny Qwen2 (``rewardlab.data.tiny``, random weights from the seed) and the char-level tokenizer;
2. the number-facts task (``rewardlab.data.rubric``): ``"Describe 473:"``, each prompt with its own rubric of
   five weighted criteria (essential: the parity; important: the numbers after and before; optional: the
   number rounded to the nearest ten; pitfall: the wrong parity), and a fixed held-out set of numbers
   training never draws;
3. a short supervised warm start on answers that meet a random part of the rubric (the parity, then the
   next number with chance 0.3 and each further fact with chance 0.85, and the wrong parity for most numbers
   ending in 5): greedily, the model then gives the parity only;
4. GRPO (the ``grpo`` preset, the addition demo's settings) with the ``rubric`` reward source, RaR-Explicit:
   one judge request per criterion, the reward the weighted share met (``rewardlab.rewardmodels.judge``).
   The judge is ``rewardlab.demos.scripted_judge``: an OpenAI-compatible chat-completions server that
   decides each criterion by a rule read from its text, served in the parent process for every seed;
5. held-out evaluation before and after: greedy answers judged by a rubric source of the same settings: the
   rubric score, and per category the share of its criteria met (for the pitfall: the share of answers
   making it); and what the judge cost in RL: requests sent, cache hits, tokens.

Then a table of the seeds and their medians (``OUT/summary.json``).
``python -m rewardlab.demos.rubric --out runs/demo-rubric``; ``--help`` lists the knobs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rewardlab.data import rubric as task
from rewardlab.data.tiny import build_tiny_model
from rewardlab.demos import rl as rl_demo
from rewardlab.demos.rl import parse_seeds, run_seeds, sft_config
from rewardlab.demos.scripted_judge import MODEL, JudgeServer
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.rewardmodels.judge.criteria import CATEGORIES, CriteriaTally
from rewardlab.rl.sources import build_source
from rewardlab.types import Record

USAGE_KEYS = ("requests", "cached", "prompt_tokens", "completion_tokens", "failures")
EXAMPLES = 3
"""Held-out answers shown before and after."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rewardlab.demos.rubric", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/demo-rubric", help="Run folder (one seed-N folder per seed).")
    p.add_argument("--seeds", default="0,1,2", help="Comma-separated seeds; the median is reported.")
    p.add_argument("--jobs", type=int, default=3, help="Seeds run at once, each in its own process.")
    p.add_argument(
        "--train-rows", type=int, default=20000, help="Warm-start demonstrations (and RL prompts)."
    )
    p.add_argument("--sft-steps", type=int, default=400, help="Warm-start steps.")
    p.add_argument("--sft-lr", type=float, default=2e-3)
    p.add_argument("--sft-batch", type=int, default=64)
    p.add_argument("--rl-steps", type=int, default=40, help="GRPO steps.")
    p.add_argument("--rl-lr", type=float, default=3e-4)
    p.add_argument("--prompts-per-step", type=int, default=32)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument(
        "--max-new-tokens", type=int, default=48, help="Longest answer (a full one has 35-37 characters)."
    )
    p.add_argument(
        "--aggregation",
        choices=("explicit", "implicit"),
        default="explicit",
        help="RaR-Explicit (a verdict per criterion) or RaR-Implicit (one 1-10 score per answer).",
    )
    p.add_argument("--concurrency", type=int, default=16, help="Judge requests in flight per seed.")
    p.add_argument(
        "--judge-url",
        help="A running judge's API root (http://HOST:PORT/v1); default: the scripted judge, started here.",
    )
    p.add_argument("--judge-model", default=MODEL, help="The judge model's name on that server.")
    p.add_argument("--threads", type=int, default=1, help="torch threads per seed.")
    p.add_argument("--model", default="qwen2-tiny", help="Shipped tiny config.")
    p.add_argument("--sft-from", help="Start from a saved warm-start model instead of training one.")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="Extra RL config overrides.")
    p.set_defaults(eval_every=0)  # held-out scores are measured before and after, by evaluate()
    return p


# ----------------------------------------------------------------------------------------------------------
# the judge
# ----------------------------------------------------------------------------------------------------------
def judge_settings(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """The ``rubric`` source's settings, for RL and for evaluation alike."""
    return {
        "backend": "openai",
        "base_url": url,
        "model": args.judge_model,
        "aggregation": args.aggregation,
        "concurrency": args.concurrency,
        "max_new_tokens": 64,  # the scripted judge's answers are one sentence and the verdict
        "cache": "memory",
    }


@contextlib.contextmanager
def judge_url(args: argparse.Namespace) -> Iterator[tuple[str, JudgeServer | None]]:
    """``--judge-url``, or the scripted judge served in a thread of this process while the block runs."""
    if args.judge_url:
        yield args.judge_url, None
        return
    with JudgeServer() as server:
        yield server.url, server


def usage_of(source: Any) -> dict[str, int]:
    """A rubric source's judge usage (requests, cache hits, tokens, failures); zeros when it has none."""
    usage = source.usage() if hasattr(source, "usage") else None
    return {key: int((usage or {}).get(key, 0)) for key in USAGE_KEYS}


def rl_usage(trainer: Any) -> dict[str, int]:
    """What the run's ``rubric`` source used (the trainer's ``usage/rubric/*`` totals); zeros when none."""
    usage = trainer.reward_pipeline.usage_metrics()
    return {key: int(usage.get(f"usage/rubric/{key}", 0)) for key in USAGE_KEYS}


# ----------------------------------------------------------------------------------------------------------
# one seed
# ----------------------------------------------------------------------------------------------------------
def as_records(rows: Sequence[dict[str, Any]]) -> list[Record]:
    """Task rows as RL records: the rubric in ``metadata["rubric"]``, where the ``rubric`` source reads it."""
    return [Record(id=r["id"], prompt=r["prompt"], metadata={"rubric": r["rubric"]}) for r in rows]


def category_shares(results: Sequence[Any]) -> dict[str, float | None]:
    """Per category, the mean share of judged criteria met (for ``pitfall``: of pitfalls made), by
    :class:`~rewardlab.rewardmodels.judge.criteria.CriteriaTally`'s rule, the one ``score``, ``eval`` and the
    viewer report; every answer's criteria count, an error row's judged ones too; ``None`` where no verdict
    was given (implicit aggregation)."""
    tally = CriteriaTally()
    for result in results:
        tally.add({"details": result.details})
    categories = tally.to_dict().get("categories", {})
    return {c: categories.get(c, {}).get("mean_share_met") for c in CATEGORIES}


def evaluate(
    model: Any, tokenizer: Any, held: list[Record], args: argparse.Namespace, url: str
) -> dict[str, Any]:
    """Greedy answers to the held-out prompts, judged by a fresh rubric source of the run's settings: the
    mean rubric score, the category shares, error rows, the judge's usage and a few answers."""
    backend = get_backend("hf", model, tokenizer, batch_size=256)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens, logprobs=False)
    texts = [out[0].text for out in backend.generate([r.prompt for r in held], params)]
    source = build_source("rubric", judge_settings(args, url))
    try:
        results = source.score_batch([replace(r, completion=t) for r, t in zip(held, texts, strict=True)])
        usage = usage_of(source)
    finally:
        source.close()
    scores = [r.reward or 0.0 for r in results]
    return {
        "rubric_score": sum(scores) / len(scores),
        **category_shares(results),
        "errors": sum(r.error is not None for r in results),
        "first_error": next((r.error for r in results if r.error is not None), None),
        "judge": usage,
        "examples": [f"{r.prompt} {t}" for r, t in zip(held, texts, strict=True)][:EXAMPLES],
    }


def warm_start(args: argparse.Namespace, seed: int, tokenizer: Any, rows: list[dict[str, Any]]) -> Any:
    """A tiny model after ``--sft-steps`` on the rows' warm-start answers (a random part of each rubric)."""
    # lazy: pulls in torch
    from rewardlab.rl.sft import sft

    if args.sft_from:
        from transformers import AutoModelForCausalLM  # lazy: transformers, in the seed's process only

        print(f"[demo-rubric] warm start loaded from {args.sft_from}")
        return AutoModelForCausalLM.from_pretrained(args.sft_from)
    model = build_tiny_model(args.model, seed=seed)
    print(
        f"[demo-rubric] warm start: {args.sft_steps} steps on answers that meet a random part of the rubric"
    )
    sft(model, tokenizer, [(r["prompt"], r["completion"]) for r in rows], sft_config(args, seed))
    return model


def grpo_overrides(args: argparse.Namespace, seed: int, out: Path, url: str) -> list[str]:
    """The addition demo's GRPO settings (``rewardlab.demos.rl``) with the rubric source as the reward."""
    source = {"name": "rubric", "kwargs": judge_settings(args, url)}
    extra = [
        f"rollout.max_new_tokens={args.max_new_tokens}",
        f"reward.sources={json.dumps([source])}",  # JSON is YAML: the URL's colons stay in one string
        "train.warmup_steps=3",
        "train.logging_steps=5",
    ]
    return rl_demo.grpo_overrides(args, seed, out, extra)


def grpo(
    args: argparse.Namespace,
    seed: int,
    out: Path,
    model: Any,
    tokenizer: Any,
    records: list[Record],
    url: str,
) -> dict[str, Any]:
    """GRPO from the rubric source; returns its seconds, episodes per second and the judge's usage."""
    # lazy: torch and transformers (rewardlab.rl), loaded in the seed's own process only
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer

    cfg = load_config(preset="grpo", overrides=grpo_overrides(args, seed, out, url))
    print(
        f"[demo-rubric] GRPO: {args.rl_steps} steps x {args.prompts_per_step} prompts x {args.group_size} "
        f"samples, lr {args.rl_lr}, judge {url} ({args.aggregation})"
    )
    t0 = time.perf_counter()
    with RLTrainer(cfg, model=model, tokenizer=tokenizer, train_records=records, eval_records=[]) as trainer:
        trainer.train()
        episodes = trainer.step * args.prompts_per_step * args.group_size
        totals = rl_usage(trainer)
    seconds = time.perf_counter() - t0
    return {"rl_seconds": seconds, "rl_episodes_per_s": episodes / seconds, "judge": totals}


def run_seed(args: argparse.Namespace, seed: int, out: Path) -> dict[str, Any]:
    """Warm start, GRPO from the rubric judge and held-out evaluation of one seed; returns its summary."""
    t_start = time.perf_counter()
    import torch  # lazy: torch, in the seed's own process only

    torch.set_num_threads(args.threads)
    # lazy: torch and transformers (the tiny tokenizer, rewardlab.rl), in the seed's own process only
    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.rl.plot import plot_run

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tiny_tokenizer()
    rows = task.generate(args.train_rows, seed=seed)
    held = as_records(task.heldout())
    with judge_url(args) as (url, _):
        t0 = time.perf_counter()
        model = warm_start(args, seed, tokenizer, rows)
        sft_seconds = time.perf_counter() - t0
        if not args.sft_from:
            model.save_pretrained(out / "sft")
            tokenizer.save_pretrained(out / "sft")
        before = evaluate(model, tokenizer, held, args, url)
        print(f"[demo-rubric] after the warm start ({sft_seconds:.0f}s): {json.dumps(before)}")
        rl = grpo(args, seed, out, model, tokenizer, as_records(rows), url)
        after = evaluate(model, tokenizer, held, args, url)
    summary = {
        "seed": seed,
        "before": before,
        "after": after,
        "gain_points": 100 * (after["rubric_score"] - before["rubric_score"]),
        "sft_seconds": sft_seconds,
        **rl,
        "total_seconds": time.perf_counter() - t_start,
        "curves": str(plot_run(out / "grpo", out / "curves.png")),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"[demo-rubric] {seed_line(summary)}")
    return summary


# ----------------------------------------------------------------------------------------------------------
# several seeds
# ----------------------------------------------------------------------------------------------------------
def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def seed_line(s: dict[str, Any]) -> str:
    b, a, judge = s["before"], s["after"], s["judge"]
    categories = ", ".join(f"{c} {_share(b[c])} -> {_share(a[c])}" for c in CATEGORIES)
    return (
        f"seed {s['seed']}: held-out rubric score {b['rubric_score']:.1%} -> {a['rubric_score']:.1%} "
        f"({s['gain_points']:+.1f} points; {categories}); judge in RL: {judge['requests']} requests, "
        f"{judge['cached']} cache hits, {judge['prompt_tokens'] + judge['completion_tokens']} tokens; "
        f"{s['total_seconds']:.0f}s in all"
    )


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def report(summaries: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The per-seed table (score and categories, before -> after; the judge's work in RL) and the medians."""
    stages = ("before", "after")
    keys = ("rubric_score", *CATEGORIES)
    median = {f"{st}/{k}": _median([s[st][k] for s in summaries]) for st in stages for k in keys}
    judge = {k: statistics.median(s["judge"][k] for s in summaries) for k in USAGE_KEYS}
    result = {
        "seeds": summaries,
        "median": median,
        "median_gain_points": statistics.median(s["gain_points"] for s in summaries),
        "min_gain_points": min(s["gain_points"] for s in summaries),
        "median_judge_rl": judge,
        "median_rl_episodes_per_s": statistics.median(s["rl_episodes_per_s"] for s in summaries),
    }

    def cells(values: dict[str, Any]) -> str:
        return " | ".join(
            f"{values['before/' + k]:.1%} -> {values['after/' + k]:.1%}"
            if k == "rubric_score"
            else f"{_share(values['before/' + k])} -> {_share(values['after/' + k])}"
            for k in keys
        )

    def usage(u: dict[str, float]) -> str:
        return f"{u['requests']:.0f} | {u['cached']:.0f} | {u['prompt_tokens'] + u['completion_tokens']:.0f}"

    print(
        "\n[demo-rubric] seed | rubric score | essential | important | optional | pitfall made | gain | "
        "judge requests | cache hits | tokens"
    )
    for s in summaries:
        flat = {f"{st}/{k}": s[st][k] for st in stages for k in keys}
        print(f"[demo-rubric] {s['seed']} | {cells(flat)} | {s['gain_points']:+.1f} | {usage(s['judge'])}")
    print(
        f"[demo-rubric] median | {cells(median)} | {result['median_gain_points']:+.1f} "
        f"(smallest {result['min_gain_points']:+.1f}) | {usage(judge)}"
    )
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    seeds = parse_seeds(args.seeds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if len(seeds) == 1:
        return run_seed(args, seeds[0], out)
    t0 = time.perf_counter()
    print(f"[demo-rubric] {len(seeds)} seeds ({args.seeds}), {args.jobs} at a time")
    with judge_url(args) as (url, server):
        print(f"[demo-rubric] judge: {url} ({'scripted, in this process' if server else 'given'})")
        # every seed's process judges through this one server
        summaries = run_seeds(
            [*argv, "--judge-url", url], seeds, out, max(1, args.jobs), module=__spec__.name, line=seed_line
        )
        served = server.stats()["total"] if server else None
    result = report(summaries, out)
    result["judge_server"] = served
    result["seconds"] = time.perf_counter() - t0
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    print(f"[demo-rubric] {len(seeds)} seeds in {result['seconds']:.0f}s")
    return result


if __name__ == "__main__":
    main()
