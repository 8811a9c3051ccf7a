"""The search-agent demo behind ``scripts/demo-search``: a tiny model learns by RL to search a knowledge
base before it answers questions about entities it has never seen.

Each seed runs, in its own process (all at once by default):

1. a synthetic knowledge base of fictional countries, capitals, rivers, seas and leaders from the seed
   (``rewardlab.data.kb``), written as a corpus and indexed with BM25 (``rewardlab.envs.search``); the
   warm start, RL and evaluation each ask about their own countries, so an answer learnt by heart in one
   stage is worth nothing in the next: only a search finds it;
2. the tiny reader base (``data/tiny/models/qwen2-tiny-reader``, ``rewardlab.demos.reader``): a tiny Qwen2
   pretrained offline to read answers out of passages it is given, which has never seen a search;
3. a short supervised warm start in Search-R1's format, only ``--tool-share`` of
   which search: ``<search>Vorland</search>``, the top passage as ``<information>...</information>`` (context,
   never a target), a second search for a two-hop question, then ``<answer>Quessa</answer>``; the rest
   answer at once, as the model would from memory;
4. GRPO in the ``tools`` environment with the ``search`` tool, exact match (the ``qa`` verifier) as reward;
5. held-out accuracy before and after: ``--eval-samples`` sampled episodes per question at temperature 1
   (the mean is the unbiased pass@1), with search and without (single turn: a search is left unanswered),
   one-hop and two-hop apart, the share of episodes that search, searches per episode, and the share whose
   passages held the answer (retrieval recall).

Then a table of the seeds and their medians (``OUT/summary.json``).
``python -m rewardlab.demos.search --out runs/demo-search``; ``--help`` lists the knobs.
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

from rewardlab.data import kb
from rewardlab.data.tiny import MODEL_CONFIG_DIR
from rewardlab.demos import rl as rl_demo
from rewardlab.demos.rl import as_records, sft_config
from rewardlab.envs import EnvConfig, build_env, episode_metrics, run_episodes
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.hub import load_tokenizer
from rewardlab.verifiers import get_verifier

READER = MODEL_CONFIG_DIR / "qwen2-tiny-reader"
OBSERVATION = "<information>{output}</information>"
TOP_K, MAX_WORDS = 1, 16
"""One passage, cut to 16 words: enough for every fact of the knowledge base's passages."""
TURN_TOKENS = 32
EPISODE_TOKENS = 512
"""Tokens of an episode after its prompt, the passages' included (a two-hop episode takes about 280)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rewardlab.demos.search", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/demo-search", help="Run folder (one seed-N folder per seed).")
    p.add_argument("--seeds", default="0,1,2", help="Comma-separated seeds; the median is reported.")
    p.add_argument("--jobs", type=int, default=3, help="Seeds run at once, each in its own process.")
    p.add_argument("--countries", type=int, default=300, help="Countries in each seed's knowledge base.")
    p.add_argument("--sft-countries", type=int, default=100, help="Countries the warm start asks about.")
    p.add_argument("--heldout", type=int, default=40, help="Countries whose questions are held out.")
    p.add_argument(
        "--tool-share", type=float, default=0.5, help="Share of warm-start demonstrations that search."
    )
    p.add_argument("--sft-steps", type=int, default=150, help="Warm-start steps.")
    p.add_argument("--sft-lr", type=float, default=1e-3)
    p.add_argument("--sft-batch", type=int, default=32)
    p.add_argument("--rl-steps", type=int, default=30, help="GRPO steps.")
    p.add_argument("--rl-lr", type=float, default=3e-4)
    p.add_argument("--prompts-per-step", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--eval-samples", type=int, default=4, help="Sampled episodes per held-out question.")
    p.add_argument("--threads", type=int, default=1, help="torch threads per seed.")
    p.add_argument("--model", default=str(READER), help="The base model: a folder or a hub name.")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="Extra RL config overrides.")
    p.set_defaults(eval_every=0)  # held-out accuracy is measured before and after, by evaluate()
    return p


# ----------------------------------------------------------------------------------------------------------
# the task
# ----------------------------------------------------------------------------------------------------------
def knowledge_base(
    args: argparse.Namespace, seed: int, out: Path
) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    """The seed's corpus file (indexed on first use) and its questions by stage: ``sft`` (the first
    ``--sft-countries`` countries'), ``rl`` (the next ones') and ``heldout`` (the last ``--heldout``). Each
    stage asks about its own countries, so an answer memorised in the warm start earns nothing in RL or
    evaluation: only a search does."""
    base = kb.generate(args.countries, seed=seed)
    corpus = out / "kb.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in base.passages), encoding="utf-8")
    rl_from, held_from = args.sft_countries, args.countries - args.heldout
    if not 0 < rl_from < held_from < args.countries:
        raise SystemExit("--sft-countries and --heldout must leave countries for RL")
    stages: dict[str, list[dict[str, Any]]] = {"sft": [], "rl": [], "heldout": []}
    for q in base.questions:
        country = int(q["id"][1:].split("-")[0])
        stage = "sft" if country < rl_from else "rl" if country < held_from else "heldout"
        stages[stage].append(q)
    return corpus, stages


def env_config(corpus: Path) -> EnvConfig:
    return EnvConfig(
        name="tools",
        tools=["search"],
        tool_options={"search": {"corpus": str(corpus), "k": TOP_K, "max_words": MAX_WORDS}},
        formats=["tag"],
        max_turns=3,
        max_tokens=EPISODE_TOKENS,
        observation_template=OBSERVATION,
        observation_format="text",
    )


def demonstration(question: dict[str, Any], search: Any | None) -> tuple[str, list[tuple[str, bool]]]:
    """A warm-start pair: the question and the completion's segments. With a ``search`` tool, one search
    per hop for the entity the question (then the last passage) names, its real output as context (not a
    target); without, the answer at once."""
    segments: list[tuple[str, bool]] = []
    for query in question["queries"] if search is not None else ():
        (result,) = search.run([(None, {"query": query})], 1.0)
        segments += [(f"<search>{query}</search>", True), (OBSERVATION.format(output=result.output), False)]
    segments.append((f"<answer>{question['reference']['target'][0]}</answer>", True))
    return question["prompt"], segments


# ----------------------------------------------------------------------------------------------------------
# one seed
# ----------------------------------------------------------------------------------------------------------
def evaluate(
    model: Any, tokenizer: Any, held: list[dict[str, Any]], corpus: Path, samples: int, seed: int
) -> dict[str, float]:
    """Sampled (temperature 1) exact match with and without search (all, one-hop, two-hop), the share of
    episodes that search, searches per episode and retrieval recall."""
    verifier = get_verifier("qa")
    backend = get_backend("hf", model, tokenizer, batch_size=512)
    params = SamplingParams(n=samples, temperature=1.0, max_new_tokens=TURN_TOKENS, seed=seed, logprobs=False)
    records = as_records(held)
    prompts = [r.prompt for r in records]

    def scores(texts: list[list[str]]) -> list[list[float]]:
        return [
            [verifier.score(replace(r, completion=t)).reward or 0.0 for t in group]
            for r, group in zip(records, texts, strict=True)
        ]

    def accuracy(scored: list[list[float]], hops: int | None = None) -> float:
        picked = [
            s for q, group in zip(held, scored, strict=True) if hops in (None, q["hops"]) for s in group
        ]
        return sum(picked) / len(picked)

    cfg = env_config(corpus)
    with build_env(cfg) as env:
        episodes = run_episodes(backend, env, records, prompts, params, tokenizer, cfg)
        stops = list(env.stop)
    alone = backend.generate(prompts, replace(params, stop=stops))
    with_search = scores([[e.text for e in group] for group in episodes])
    env_m = episode_metrics([e.summary() for group in episodes for e in group])
    return {
        "accuracy_with_search": accuracy(with_search),
        "accuracy_with_search_1hop": accuracy(with_search, 1),
        "accuracy_with_search_2hop": accuracy(with_search, 2),
        "accuracy_without_search": accuracy(scores([[g.text for g in group] for group in alone])),
        "search_call_rate": env_m["env/tool_call_rate"],
        "searches_per_episode": env_m["env/tool_calls"],
        "answer_in_passages": env_m.get("env/answer_in_observations", 0.0),
    }


def warm_start(
    args: argparse.Namespace, seed: int, tokenizer: Any, corpus: Path, train: list[dict[str, Any]]
) -> Any:
    """The reader base after ``--sft-steps`` on demonstrations, ``--tool-share`` of which search."""
    # lazy: torch and transformers, loaded in the seed's own process only
    from transformers import AutoModelForCausalLM

    from rewardlab.envs.search import SearchTool
    from rewardlab.rl.sft import sft

    search = SearchTool(corpus=str(corpus), k=TOP_K, max_words=MAX_WORDS)
    rng = random.Random(seed)
    pairs = [demonstration(q, search if rng.random() < args.tool_share else None) for q in train]
    model = AutoModelForCausalLM.from_pretrained(args.model)
    print(
        f"[demo-search] warm start from {args.model}: {args.sft_steps} steps, "
        f"{args.tool_share:.0%} of demonstrations search"
    )
    sft(model, tokenizer, pairs, sft_config(args, seed))
    return model


def tokenizer_for(args: argparse.Namespace) -> Any:
    """The base model's tokenizer (the reader base ships the tiny character-level one beside its weights)."""
    return load_tokenizer(args.model)


def run_seed(args: argparse.Namespace, seed: int, out: Path) -> dict[str, Any]:
    """Warm start, GRPO with the search tool and held-out evaluation of one seed; returns its summary."""
    t_start = time.perf_counter()
    import torch  # lazy: torch, in the seed's own process only

    torch.set_num_threads(args.threads)
    # lazy: torch and transformers (rewardlab.rl), loaded in the seed's own process only
    from rewardlab.rl.config import load_config

    out.mkdir(parents=True, exist_ok=True)
    corpus, questions = knowledge_base(args, seed, out)
    held = questions["heldout"]
    tokenizer = tokenizer_for(args)
    t0 = time.perf_counter()
    model = warm_start(args, seed, tokenizer, corpus, questions["sft"])
    sft_seconds = time.perf_counter() - t0
    before = evaluate(model, tokenizer, held, corpus, args.eval_samples, seed)
    print(f"[demo-search] after the warm start ({sft_seconds:.0f}s): {json.dumps(before)}")

    cfg = load_config(preset="grpo", overrides=grpo_overrides(args, seed, out))
    cfg.env = env_config(corpus)
    summary = rl_demo.tool_demo_grpo(
        args,
        seed,
        out,
        (cfg, model, tokenizer, as_records(questions["rl"])),
        lambda: evaluate(model, tokenizer, held, corpus, args.eval_samples, seed),
        before,
        "accuracy_with_search",
        {"started": t_start, "sft_seconds": sft_seconds},
    )
    print(f"[demo-search] {seed_line(summary)}")
    return summary


def grpo_overrides(args: argparse.Namespace, seed: int, out: Path) -> list[str]:
    """The addition demo's GRPO settings (``rewardlab.demos.rl``) with exact match as the reward."""
    extra = [
        f"rollout.max_new_tokens={TURN_TOKENS}",
        "reward.sources=[{name: qa}]",
        "train.warmup_steps=3",
        "train.logging_steps=5",
    ]
    return rl_demo.grpo_overrides(args, seed, out, extra)


# ----------------------------------------------------------------------------------------------------------
# several seeds
# ----------------------------------------------------------------------------------------------------------
def seed_line(s: dict[str, Any]) -> str:
    b, a = s["before"], s["after"]
    return (
        f"seed {s['seed']}: held-out exact match with search {b['accuracy_with_search']:.1%} -> "
        f"{a['accuracy_with_search']:.1%} ({s['gain_points']:+.1f} points; one-hop "
        f"{a['accuracy_with_search_1hop']:.1%}, two-hop {a['accuracy_with_search_2hop']:.1%}), without "
        f"{b['accuracy_without_search']:.1%} -> {a['accuracy_without_search']:.1%}, searching "
        f"{b['search_call_rate']:.0%} -> {a['search_call_rate']:.0%} of episodes "
        f"({a['searches_per_episode']:.2f} searches each), {s['total_seconds']:.0f}s in all"
    )


COLUMNS = (
    ("accuracy_with_search", "with search", "{:.1%}"),
    ("accuracy_with_search_1hop", "1-hop", "{:.1%}"),
    ("accuracy_with_search_2hop", "2-hop", "{:.1%}"),
    ("accuracy_without_search", "without", "{:.1%}"),
    ("search_call_rate", "searching", "{:.0%}"),
    ("searches_per_episode", "searches", "{:.2f}"),
    ("answer_in_passages", "recall", "{:.0%}"),
)


def report(summaries: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The per-seed table (each column: before -> after) and the medians."""
    stages = ("before", "after")
    median = {
        f"{stage}/{key}": statistics.median(s[stage][key] for s in summaries)
        for stage in stages
        for key, _, _ in COLUMNS
    }
    result = {
        "seeds": summaries,
        "median": median,
        "median_gain_points": statistics.median(s["gain_points"] for s in summaries),
        "min_gain_points": min(s["gain_points"] for s in summaries),
        "median_rl_episodes_per_s": statistics.median(s["rl_episodes_per_s"] for s in summaries),
    }

    def cells(values: dict[str, float]) -> str:
        return " | ".join(
            f"{fmt.format(values['before/' + k])} -> {fmt.format(values['after/' + k])}"
            for k, _, fmt in COLUMNS
        )

    print("\n[demo-search] seed | " + " | ".join(title for _, title, _ in COLUMNS) + " | gain")
    for s in summaries:
        flat = {f"{stage}/{k}": s[stage][k] for stage in stages for k, _, _ in COLUMNS}
        print(f"[demo-search] {s['seed']} | {cells(flat)} | {s['gain_points']:+.1f}")
    print(
        f"[demo-search] median | {cells(median)} | {result['median_gain_points']:+.1f} "
        f"(smallest {result['min_gain_points']:+.1f})"
    )
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return rl_demo.tool_demo_main(argv, sys.modules[__name__], "demo-search")


if __name__ == "__main__":
    main()
