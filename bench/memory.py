"""Benchmark: peak memory and time of the log-prob path, full logits against the LM head in chunks.

One forward and backward of ``sum(log p(labels))`` (and with ``--entropy`` of the entropy too) from the last
hidden states ``(B, T, H)`` through an LM head of Qwen2.5's vocabulary (151,936), as the update computes it:

* ``full``: today's path, ``logits = head(hidden)``, ``log_softmax``, ``gather``
  (``core_algos.logprobs_from_logits``);
* ``chunked``: ``core_algos.token_logprobs_from_hidden`` with ``--chunk`` tokens per chunk (the head's
  backward written out, the chunk's logits recomputed).

Each measurement runs in a fresh process; the figure is the peak resident memory over the process's own
before the pass (the model and the inputs excluded), the time the median of ``--repeats``. A point where the
full path would need more memory than the machine has (about 4x the float32 logits) is skipped and says so.
Ratios are against the full path measured in the same run.

    .venv/bin/python bench/memory.py                                  # 4 x 1,024 and 4 x 4,096 tokens
    .venv/bin/python bench/memory.py --points 4x1024 --hidden 64 --chunk 256 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

VOCAB = 151_936


def one_pass(path: str, batch: int, length: int, hidden_size: int, chunk: int, entropy: bool) -> dict:
    """Runs in the child: one forward and backward, its peak memory (GiB) and seconds."""
    import torch

    from rewardkit.rl import core_algos as ca

    torch.manual_seed(0)
    head = torch.nn.Linear(hidden_size, VOCAB, bias=False)
    hidden = torch.randn(batch, length, hidden_size, requires_grad=True)
    labels = torch.randint(0, VOCAB, (batch, length))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if path == "full":
        logits = head(hidden)
        loss = ca.logprobs_from_logits(logits, labels).sum()
        if entropy:
            loss = loss + ca.entropy_from_logits(logits).sum()
    else:
        logp, ent = ca.token_logprobs_from_hidden(hidden, head, labels, chunk_tokens=chunk, entropy=entropy)
        loss = logp.sum() + (ent.sum() if ent is not None else 0)
    loss.backward()
    seconds = time.perf_counter() - start
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2**20
    return {"seconds": seconds, "peak_gib": peak}


def measure(path: str, point: tuple[int, int], args: argparse.Namespace) -> dict:
    runs = []
    for _ in range(args.repeats):
        spec = json.dumps([path, *point, args.hidden, args.chunk, args.entropy])
        out = subprocess.run(
            [sys.executable, __file__, "--child", spec], check=True, capture_output=True, text=True
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "peak_gib": max(r["peak_gib"] for r in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="4x1024,4x4096", help="BxT points, comma-separated")
    parser.add_argument("--hidden", type=int, default=64, help="hidden size")
    parser.add_argument("--chunk", type=int, default=256, help="tokens per chunk")
    parser.add_argument("--entropy", action="store_true", help="also the entropy, with its gradient")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_pass(*json.loads(args.child))))
        return
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(
        f"operating point: vocabulary {VOCAB:,}, hidden {args.hidden}, chunk {args.chunk} tokens, entropy "
        f"{args.entropy}, float32, {os.cpu_count()} CPUs, {memory_gib:.0f} GiB, median of {args.repeats}"
    )
    print("tokens        logits GiB  path      peak GiB  x logits  seconds  x full")
    for text in args.points.split(","):
        batch, length = (int(v) for v in text.lower().split("x"))
        logits_gib = batch * length * VOCAB * 4 / 2**30
        full = None
        if 4.5 * logits_gib < memory_gib:
            full = measure("full", (batch, length), args)
            print(
                f"{batch}x{length:<10} {logits_gib:>9.2f}  full     {full['peak_gib']:>9.2f} "
                f"{full['peak_gib'] / logits_gib:>9.2f} {full['seconds']:>8.1f}    1.00"
            )
        else:
            print(
                f"{batch}x{length:<10} {logits_gib:>9.2f}  full      skipped: needs ~{4 * logits_gib:.0f} GiB"
            )
        chunked = measure("chunked", (batch, length), args)
        ratio = f"{chunked['seconds'] / full['seconds']:>7.2f}" if full else "      -"
        print(
            f"{'':<12} {'':>9}  chunked  {chunked['peak_gib']:>9.2f} {chunked['peak_gib'] / logits_gib:>9.2f} "
            f"{chunked['seconds']:>8.1f} {ratio}"
        )


if __name__ == "__main__":
    main()
