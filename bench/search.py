"""The search tool's costs on the synthetic knowledge base: index build time per 100k passages, load time,
queries per second through ``SearchTool.run``, and how often the retrieved passages hold the answer.

The corpus is ``rewardlab.data.kb.generate(--countries)`` (5 passages per country), written to a temporary
JSONL file; the index is the tool's default (BM25 Lucene, k1 0.9, b 0.4, stemmed). Queries are the base's
questions as the model would ask them verbatim, one batch per run (as one turn of ``--batch`` episodes).
Recall: the share of questions whose answer appears in the ``--k`` passages returned, one-hop and two-hop
apart (a two-hop question's first search finds the bridge entity, not the answer, by design).

``--corpus squad`` runs the same on the shipped SQuAD 2.0 sample instead (173 Wikipedia paragraphs, 705
real questions, ``data/search/README.md``); recall is DPR's has-answer over the gold aliases.

    .venv/bin/python bench/search.py [--countries 20000] [--batch 512] [--k 3] [--repeats 5]
    .venv/bin/python bench/search.py --corpus squad --batch 705
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    from rewardlab.envs.search import SearchTool, build_index
    from rewardlab.verifiers.qa import has_answer

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", choices=["kb", "squad"], default="kb")
    p.add_argument("--countries", type=int, default=20000, help="5 passages each (20,000: 100k passages)")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    passages, questions = corpus_and_questions(args)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(row) + "\n" for row in passages), encoding="utf-8")
        started = time.perf_counter()
        index = build_index(corpus)
        build = time.perf_counter() - started
        started = time.perf_counter()
        tool = SearchTool(index=str(index), k=args.k)
        load = time.perf_counter() - started
        questions = questions[: args.batch]
        calls = [(None, {"query": q["prompt"]}) for q in questions]
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            results = tool.run(calls, timeout=10)
            times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    what = (
        f"{args.countries:,} countries of the synthetic base"
        if args.corpus == "kb"
        else "the SQuAD 2.0 sample"
    )
    print(
        f"operating point: {len(passages):,} passages ({what}), BM25 lucene k1 0.9 b 0.4, k={args.k}, "
        f"batches of {len(calls)} queries, median of {args.repeats}, 1 thread"
    )
    per_100k = (
        f" ({build * 100_000 / len(passages):.2f} s per 100k passages)" if len(passages) >= 10_000 else ""
    )
    print(f"index build: {build:.2f} s{per_100k}; load {load:.3f} s")
    print(f"queries: {len(calls) / seconds:,.0f}/s ({seconds * 1000 / len(calls):.2f} ms each)")
    for hops in sorted({q.get("hops", 1) for q in questions}):
        pairs = [(q, r) for q, r in zip(questions, results, strict=True) if q.get("hops", 1) == hops]
        hit = sum(any(has_answer(r.output, a) for a in q["reference"]["target"]) for q, r in pairs)
        label = f"{hops}-hop questions" if args.corpus == "kb" else "questions"
        print(
            f"answer in the top {args.k}, {label} asked verbatim: {hit / max(1, len(pairs)):.1%} of {len(pairs)}"
        )


def corpus_and_questions(args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """The corpus's passages and its questions: the synthetic base, or the shipped SQuAD 2.0 sample."""
    if args.corpus == "kb":
        from rewardlab.data import kb

        base = kb.generate(args.countries, seed=0)
        return base.passages, base.questions
    folder = Path(__file__).resolve().parent.parent / "data" / "search"
    read = [json.loads(line) for line in (folder / "squad2_dev_passages.jsonl").read_text().splitlines()]
    asked = [json.loads(line) for line in (folder / "squad2_dev_questions.jsonl").read_text().splitlines()]
    return read, asked


if __name__ == "__main__":
    main()
