"""Episodes per second of multi-turn rollouts on CPU, against single-turn sampling measured in the same run.

The policy is the tool-use demo's (``apps/demos/tools.py``): ``--model`` a trained one (e.g.
``runs/demo-tools/seed-0/grpo/checkpoints/latest/policy``), or by default a fresh warm start of the demo
(``--sft-steps``, seed 0; it calls the tool about half the time). On the same held-out prompts, with the same
sampling (temperature 1, ``--n`` per prompt, 24 tokens per turn), the ``--backend``:

* ``single-turn``: one completion per sample (the turn ends at the call; the reference);
* ``calculator``: episodes in the ``tools`` environment, the calculator answering in process (hf: every
  episode in one decoding loop, a turn starting as soon as its reply is in);
* ``calc-turns`` (hf only): the same with one ``generate`` call per turn, the prefix cache keeping each
  episode's earlier turns;
* ``calc-refill`` (hf only): one ``generate`` call per turn without the prefix cache, every later turn
  prefilling the episode's whole context;
* ``python``: the same episodes with each call run by the ``python`` tool in the code sandbox (the tool
  named ``calc``: ``123*456`` is a Python expression whose value the tool prints).

``--task search`` measures the search-agent demo (``apps/demos/search.py``) instead: its policy
(``--model``, or a fresh warm start of the demo from the tiny reader base), its held-out questions and seed
0's knowledge base (BM25 over 1,500 passages, top 1 cut to 16 words), with 32 tokens per turn and up to 3
turns; the rows are ``single-turn``, ``search`` (the decoding loop) and ``search-turns`` (hf: one
``generate`` per turn); then the time to build a BM25 index of 100,000 passages (a 20,000-country
knowledge base).

Each row: the median wall time of ``--repeats`` runs, samples (episodes) per second, the ratio to
single-turn, tokens per sample (the model's and the tool's), turns, the tool-call rate, and the share of the
time spent in tools. ``python bench/envs.py [--model PATH] [--backend hf|vllm] [--prompts 64 --n 8
--repeats 3]`` (``--backend vllm`` on CPU: ``.venv-vllm/bin/python``, see ``scripts/test-vllm``).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any


def parse_args() -> argparse.Namespace:
    from rewardlab.demos import tools as demo

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="calculator", choices=["calculator", "search"])
    p.add_argument("--model", help="A trained demo policy (default: a fresh warm start of the demo).")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--backend",
        default="hf",
        choices=["hf", "vllm"],
        help="Rollout backend (vllm: a colocated engine; on CPU in .venv-vllm, scripts/test-vllm).",
    )
    p.add_argument(
        "--sft-steps",
        type=int,
        help=f"Warm-start steps (default: the demo's; {demo.build_parser().parse_args([]).sft_steps} for the calculator).",
    )
    return p.parse_args()


@dataclass
class Task:
    """What a run measures: the policy, the held-out records, the environments to time (label, config,
    scheduling) and the tokens per turn."""

    model: Any
    tokenizer: Any
    records: list[Any]
    variants: list[tuple[str, Any, str]]
    turn_tokens: int
    policy: str


def calculator_task(args: argparse.Namespace) -> Task:
    from rewardlab.data import arithmetic
    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.demos import tools as demo
    from rewardlab.demos.rl import as_records

    tokenizer = load_tiny_tokenizer()
    defaults = demo.build_parser().parse_args([])
    steps = args.sft_steps or defaults.sft_steps
    if args.model:
        model = load_model(args.model)
    else:
        rows = arithmetic.generate(20000, seed=0, **demo.DIST)
        model = demo.warm_start(
            argparse.Namespace(**{**vars(defaults), "sft_steps": steps}), 0, tokenizer, rows
        )
    calc, python = demo.env_config(), demo.env_config()
    python.tools = ["python"]
    python.tool_options = {"python": {"name": demo.TOOL, "parallelism": args.threads}}
    variants = [("calculator", calc, "interleave"), ("python", python, "interleave")]
    if args.backend == "hf":  # the decoding loop against one generate per turn, with and without the cache
        variants[1:1] = [("calc-turns", calc, "turns"), ("calc-refill", calc, "refill")]
    records = as_records(arithmetic.heldout(**demo.DIST)[: args.prompts])
    policy = args.model or f"demo warm start ({steps} steps, seed 0)"
    return Task(model, tokenizer, records, variants, 24, policy)


def search_task(args: argparse.Namespace) -> Task:
    import tempfile
    from pathlib import Path

    from rewardlab.demos import search as demo

    defaults = demo.build_parser().parse_args([])
    steps = args.sft_steps or defaults.sft_steps
    corpus, questions = demo.knowledge_base(defaults, 0, Path(tempfile.mkdtemp(prefix="bench-search-")))
    tokenizer = demo.tokenizer_for(defaults)
    if args.model:
        model = load_model(args.model)
    else:
        model = demo.warm_start(
            argparse.Namespace(**{**vars(defaults), "sft_steps": steps}),
            0,
            tokenizer,
            corpus,
            questions["sft"],
        )
    cfg = demo.env_config(corpus)
    variants = [("search", cfg, "interleave")]
    if args.backend == "hf":
        variants.append(("search-turns", cfg, "turns"))
    policy = args.model or f"demo warm start ({steps} steps, seed 0)"
    return Task(
        model,
        tokenizer,
        demo.as_records(questions["heldout"])[: args.prompts],
        variants,
        demo.TURN_TOKENS,
        policy,
    )


def load_model(path: str) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path)


def index_build_seconds() -> tuple[int, float]:
    """Passages and seconds of one BM25 index build over a 20,000-country knowledge base."""
    import json
    import tempfile
    from pathlib import Path

    from rewardlab.data import kb
    from rewardlab.envs.search import build_index

    passages = kb.generate(20_000, seed=0).passages
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "kb.jsonl"
        corpus.write_text("".join(json.dumps(p) + "\n" for p in passages))
        t0 = time.perf_counter()
        build_index(corpus)
        return len(passages), time.perf_counter() - t0


def rollout_backend(args: argparse.Namespace, model: Any, tokenizer: Any) -> Any:
    """The hf backend on ``model``, or a vLLM engine loading it from disk (its prefix cache keeps each
    episode's earlier turns, which the hf backend prefills again every turn)."""
    from rewardlab.generation import get_backend

    if args.backend == "hf":
        return get_backend("hf", model, tokenizer, batch_size=1024)
    import os
    import tempfile

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    path = args.model
    if path is None:
        path = tempfile.mkdtemp(prefix="bench-envs-")
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    kwargs = {"dtype": "float32", "max_model_len": 256, "gpu_memory_utilization": 0.3, "enforce_eager": True}
    return get_backend("vllm", path, tokenizer, **kwargs)


@contextlib.contextmanager
def scheduling(backend: Any, mode: str) -> Iterator[None]:
    """The hf backend's multi-turn scheduling for one row: ``interleave`` (its default: one decoding loop),
    ``turns`` (one ``generate`` per turn, the prefix cache keeping earlier turns) or ``refill`` (one
    ``generate`` per turn, every later turn prefilling its whole context)."""
    if mode in ("turns", "refill"):
        backend.interleave_turns = False
    if mode == "refill":
        backend.prefix_cache = contextlib.nullcontext
    try:
        yield
    finally:
        backend.__dict__.pop("prefix_cache", None)
        if hasattr(backend, "interleave_turns"):
            backend.interleave_turns = True


def timed(run: Any, repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    import torch

    args = parse_args()
    torch.set_num_threads(args.threads)
    from rewardlab.envs import build_env, run_episodes
    from rewardlab.generation import SamplingParams

    task = search_task(args) if args.task == "search" else calculator_task(args)
    model, tokenizer, records = task.model, task.tokenizer, task.records
    prompts = [r.prompt for r in records]
    backend = rollout_backend(args, model, tokenizer)
    params = SamplingParams(n=args.n, temperature=1.0, max_new_tokens=task.turn_tokens, seed=0)

    rows = []
    with build_env(task.variants[0][1]) as env:
        stops = list(env.stop)
    seconds, groups = timed(lambda: backend.generate(prompts, replace(params, stop=stops)), args.repeats)
    flat = [g for group in groups for g in group]
    rows.append(("single-turn", seconds, flat))
    for label, cfg, mode in task.variants:
        with build_env(cfg) as env, scheduling(backend, mode):

            def episodes(env: Any = env, cfg: Any = cfg, n: int = len(records)) -> Any:
                return run_episodes(backend, env, records[:n], prompts[:n], params, tokenizer, cfg)

            episodes(n=2)  # starts the sandbox
            seconds, groups = timed(episodes, args.repeats)
        rows.append((label, seconds, [e for group in groups for e in group]))

    samples = len(records) * args.n
    cfg = task.variants[0][1]
    print(
        f"operating point: {len(records)} prompts x {args.n} samples = {samples} per run, temperature 1, "
        f"{task.turn_tokens} tokens per turn, up to {cfg.max_turns} turns and {cfg.max_tokens} tokens per "
        f"episode, {args.backend} backend, {args.threads} threads, median of {args.repeats}; policy: {task.policy}"
    )
    print_rows(rows, samples)
    if args.task == "search":
        passages, seconds = index_build_seconds()
        print(
            f"BM25 index build: {passages} passages in {seconds:.2f}s ({seconds * 100_000 / passages:.2f}s per 100k)"
        )


def print_rows(rows: list[tuple[str, float, list[Any]]], samples: int) -> None:
    print(
        f"{'rollout':<12} {'s/run':>7} {'samples/s':>10} {'ratio':>6} {'own tok':>8} {'tool tok':>9} {'turns':>6} "
        f"{'calls':>6} {'tool time':>9}"
    )
    reference = samples / rows[0][1]
    for label, seconds, gens in rows:
        own = statistics.fmean(
            sum(g.loss_mask) if g.loss_mask is not None else len(g.token_ids) for g in gens
        )
        tool = statistics.fmean(len(g.token_ids) for g in gens) - own
        states = [g.state for g in gens if getattr(g, "state", None) is not None]
        turns = statistics.fmean(len(s.model_turns) for s in states) if states else 1.0
        calls = sum(s.tool_calls > 0 for s in states) / len(states) if states else 0.0
        tool_time = sum(s.tool_seconds for s in states) / seconds if states else 0.0
        rate = samples / seconds
        print(
            f"{label:<12} {seconds:7.2f} {rate:10.1f} {rate / reference:5.2f}x {own:8.1f} {tool:9.1f} {turns:6.2f} "
            f"{calls:6.0%} {tool_time:9.0%}"
        )


if __name__ == "__main__":
    main()
