"""The search tool's costs on the synthetic knowledge base: index build time per 100k passages, load time,
queries per second through ``SearchTool.run``, and how often the retrieved passages hold the answer.

The corpus is ``rewardkit.data.kb.generate(--countries)`` (5 passages per country), written to a temporary
JSONL file; the index is the tool's default (BM25 Lucene, k1 0.9, b 0.4, stemmed). Queries are the base's
questions as the model would ask them verbatim, one batch per run (as one turn of ``--batch`` episodes).
Recall: the share of questions whose answer appears in the ``--k`` passages returned, one-hop and two-hop
apart (a two-hop question's first search finds the bridge entity, not the answer, by design).

    .venv/bin/python bench/search.py [--countries 20000] [--batch 512] [--k 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    from rewardkit.data import kb
    from rewardkit.envs.search import SearchTool, build_index

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--countries", type=int, default=20000, help="5 passages each (20,000: 100k passages)")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    base = kb.generate(args.countries, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "kb.jsonl"
        corpus.write_text("".join(json.dumps(row) + "\n" for row in base.passages), encoding="utf-8")
        started = time.perf_counter()
        index = build_index(corpus)
        build = time.perf_counter() - started
        started = time.perf_counter()
        tool = SearchTool(index=str(index), k=args.k)
        load = time.perf_counter() - started
        questions = base.questions[: args.batch]
        calls = [(None, {"query": q["prompt"]}) for q in questions]
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            results = tool.run(calls, timeout=10)
            times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    passages = len(base.passages)
    print(
        f"operating point: {passages:,} passages ({args.countries:,} countries), BM25 lucene k1 0.9 b 0.4, "
        f"k={args.k}, batches of {len(calls)} queries, median of {args.repeats}, 1 thread"
    )
    print(
        f"index build: {build:.2f} s ({build * 100_000 / passages:.2f} s per 100k passages); load {load:.3f} s"
    )
    print(f"queries: {len(calls) / seconds:,.0f}/s ({seconds * 1000 / len(calls):.2f} ms each)")
    for hops in (1, 2):
        pairs = [(q, r) for q, r in zip(questions, results, strict=True) if q["hops"] == hops]
        hit = sum(q["reference"]["target"][0] in r.output for q, r in pairs) / max(1, len(pairs))
        print(f"answer in the top {args.k}, {hops}-hop questions asked verbatim: {hit:.1%} of {len(pairs)}")


if __name__ == "__main__":
    main()
