"""Offline scoring engine: many records through a reward source, in parallel, with timeouts and resume.

    from rewardlab.scoring import score_records, Scorer, score_file

    results = score_records(records, "math", workers=2, timeout=5)     # list[Result], input order
    with Scorer("math", workers=2) as scorer:                           # a warm pool, e.g. for an RL run
        rewards = [r.reward for r in scorer.score(batch)]
    summary = score_file("in.jsonl", "out.jsonl", "math", resume=True)  # what `rewardlab score` does
    stream = ScoringStream(Scorer("math", workers=2))                  # many threads, one warm pool
    results = stream.submit(records).result()                           # answered as its rows finish
    pool = WarmPool("math", workers=2, stream=True)                     # built on first use, never raises
    rewards = [r.reward for r in pool.score_batch(batch)]

See ``docs/scoring.md``.
"""

from __future__ import annotations

from rewardlab.scoring.engine import Scorer, score_dataset, score_records
from rewardlab.scoring.io import score_file
from rewardlab.scoring.pool import WarmPool
from rewardlab.scoring.sources import resolve_source
from rewardlab.scoring.stream import Closed, QueueFull, ScoringStream
from rewardlab.scoring.summary import Summary, summarize

__all__ = [
    "Closed",
    "QueueFull",
    "Scorer",
    "ScoringStream",
    "Summary",
    "WarmPool",
    "resolve_source",
    "score_dataset",
    "score_file",
    "score_records",
    "summarize",
]
