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

``--rl-step`` measures a whole GRPO step instead (generate, score, reference and update passes; KL on, so
the reference model runs): the shipped tiny Qwen2 with Qwen2.5's vocabulary (random weights, the tiny
tokenizer), ``--prompts`` prompts x ``--n`` samples of exactly ``--new-tokens`` new tokens each (EOS
suppressed), the whole rollout one micro-batch. The figure is the process's peak resident memory over a
16-new-token step of the same path, against the micro-batch's float32 logits ``(B, T, V)``:

    .venv/bin/python bench/memory.py --rl-step [--new-tokens 512] [--chunk 512]
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

    from rewardlab import core_algos as ca

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


def one_rl_step(chunk: int, prompts: int, n: int, new_tokens: int) -> dict:
    """Runs in the child: one GRPO step with KL of a random tiny Qwen2 with a 152k vocabulary."""
    import tempfile

    import torch

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.types import Record

    torch.manual_seed(0)
    tokenizer = load_tiny_tokenizer()
    model = build_tiny_model(vocab_size=VOCAB)
    model.generation_config.suppress_tokens = [tokenizer.eos_token_id]  # every sample is new_tokens long
    records = [Record(id=i, prompt=f"{i} + {i + 1} = ", reference=str(2 * i + 1)) for i in range(prompts)]
    overrides = [
        "algorithm.kl_coef=0.04",
        f"train.logprob_chunk_tokens={chunk}",
        f"train.prompts_per_step={prompts}",
        f"rollout.n={n}",
        f"rollout.max_new_tokens={new_tokens}",
        f"train.per_device_train_batch_size={prompts * n}",
        f"rollout.batch_size={prompts * n}",
        "train.max_steps=1",
        "reward.sources=[{name: math}]",
        "reward.workers=1",
        "train.report_to=none",
        f"run.output_dir={tempfile.mkdtemp(prefix='rk-memory-')}",
    ]
    cfg = load_config(preset="grpo", overrides=overrides)
    with RLTrainer(cfg, model=model, tokenizer=tokenizer, train_records=records, eval_records=[]) as trainer:
        start = time.perf_counter()
        metrics = trainer.train_step()
        seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    length = metrics["completions/mean_length"]
    return {"seconds": seconds, "peak_gib": peak, "length": length, "kl": metrics.get("kl")}


def child(spec: list) -> dict:
    return one_rl_step(*spec[1:]) if spec[0] == "rl-step" else one_pass(*spec)


def measure(path: str, point: tuple[int, int], args: argparse.Namespace) -> dict:
    return run_children([path, *point, args.hidden, args.chunk, args.entropy], args.repeats)


def run_children(spec: list, repeats: int) -> dict:
    """``repeats`` fresh processes of ``spec``: the median time and the highest peak."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        **runs[0],
        "seconds": statistics.median(r["seconds"] for r in runs),
        "peak_gib": max(r["peak_gib"] for r in runs),
    }


def rl_step_table(args: argparse.Namespace) -> None:
    rows = args.prompts * args.n
    print(
        f"operating point: one GRPO step with KL, tiny Qwen2 (hidden 128, 2 layers) with vocabulary {VOCAB:,}, "
        f"{args.prompts} prompts x {args.n} samples x {args.new_tokens} new tokens, one micro-batch, "
        f"chunk {args.chunk} tokens, float32, {os.cpu_count()} CPUs, median of {args.repeats}"
    )
    print("path      new tokens  peak GiB  over 16-token step  x micro-batch logits  seconds")
    for name, chunk in (("full", 0), ("chunked", args.chunk)):
        base = run_children(["rl-step", chunk, args.prompts, args.n, 16], 1)
        step = run_children(["rl-step", chunk, args.prompts, args.n, args.new_tokens], args.repeats)
        logits_gib = rows * step["length"] * VOCAB * 4 / 2**30  # the logits of the response tokens
        delta = step["peak_gib"] - base["peak_gib"]
        print(
            f"{name:<9} {16:>10}  {base['peak_gib']:>8.2f}  {'':>18}  {'':>20}  {base['seconds']:>7.1f}\n"
            f"{'':<9} {args.new_tokens:>10}  {step['peak_gib']:>8.2f}  {delta:>18.2f}  "
            f"{delta / logits_gib:>20.2f}  {step['seconds']:>7.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="4x1024,4x4096", help="BxT points, comma-separated")
    parser.add_argument("--hidden", type=int, default=64, help="hidden size")
    parser.add_argument("--chunk", type=int, default=512, help="tokens per chunk (the config default)")
    parser.add_argument("--entropy", action="store_true", help="also the entropy, with its gradient")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--rl-step", action="store_true", help="a whole GRPO step with KL instead")
    parser.add_argument("--prompts", type=int, default=4, help="--rl-step: prompts")
    parser.add_argument("--n", type=int, default=2, help="--rl-step: samples per prompt")
    parser.add_argument("--new-tokens", type=int, default=512, help="--rl-step: new tokens per sample")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.rl_step:
        rl_step_table(args)
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
