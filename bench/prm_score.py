"""PRM step scoring: rewardlab's batched, length-sorted scoring vs Math-Shepherd's reference recipe.

The reference is the inference snippet published with Math-Shepherd: one solution at a time, the text with
a step tag after every step, ``softmax(logits[..., [+, -]])[..., 0]`` read where the input holds the tag.
rewardlab's ``lm`` head computes the same numbers (checked here, and in tests/test_prm.py) with batches of
inputs sorted by length. Both run on the same model in the same process, after an untimed warm-up pass,
``--repeats`` times each in alternating order (rates are the medians; the ratio is the median of the paired
ratios, with the ratio of CPU times beside it, which load from other processes disturbs less); the script
prints the operating point (solutions, tokens per solution, batch, padding, threads, load), both rates, the
ratio and the largest score difference.

The ratio is the saving of batching many short sequences into one forward pass, so it grows with the batch
size and with shorter solutions (a tiny model's pass over ~60 tokens is mostly per-call overhead) and
shrinks with more threads per pass and with load from other processes (see docs/prm.md for measured points).

    python bench/prm_score.py [--n 400] [--model qwen2-small] [--batch-size 32] [--threads 1] [--max-ops 12] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="solutions to score")
    parser.add_argument("--model", default="qwen2-small", help="shipped tiny config (random weights)")
    parser.add_argument("--batch-size", type=int, default=32, help="rewardlab's sequences per forward pass")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument(
        "--max-ops", type=int, default=12, help="most operations per solution (steps = ops + 1)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each side, alternating")
    args = parser.parse_args()

    import torch

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.rewardmodels.prm import PRMConfig, ProcessRewardModel
    from rewardlab.rewardmodels.prm.synthetic import make_arithmetic_examples
    from rewardlab.types import Record

    if args.threads:
        torch.set_num_threads(args.threads)
    tok = load_tiny_tokenizer()
    model = build_tiny_model(args.model).eval()
    examples = make_arithmetic_examples(args.n, seed=0, min_ops=1, max_ops=args.max_ops)
    records = [Record(prompt=ex.prompt, completion="\n".join(ex.steps)) for ex in examples]
    good = tok("+", add_special_tokens=False)["input_ids"][-1]
    bad = tok("-", add_special_tokens=False)["input_ids"][-1]
    tag = tok("#", add_special_tokens=False)["input_ids"][-1]
    prm = ProcessRewardModel(
        model,
        tok,
        PRMConfig(head="lm", step_marker=" #", step_joiner="\n", batch_size=args.batch_size),
        device="cpu",
    )

    def reference(batch):
        """Math-Shepherd's recipe, one solution per forward pass."""
        out = []
        with torch.no_grad():
            for ex in batch:
                text = ex.prompt + "\n" + "\n".join(f"{s} #" for s in ex.steps)
                ids = torch.tensor([tok(text)["input_ids"]])
                logits = model(ids).logits[:, :, [good, bad]]
                out.append(logits.softmax(dim=-1)[:, :, 0][ids == tag].tolist())
        return out

    # Untimed warm-up of both paths (first calls allocate and pick kernels).
    reference(examples[:4])
    prm.score_steps(records[: args.batch_size])

    def timed(fn, arg):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn(arg)
        return out, time.perf_counter() - wall, time.process_time() - cpu

    # Repeats in alternating order, so load from other processes falls on both sides alike; the ratio is
    # the median of each repeat's paired ratio.
    ref_times, our_times, ref_cpu, our_cpu = [], [], [], []
    for r in range(max(1, args.repeats)):
        for side in ("ref", "ours") if r % 2 == 0 else ("ours", "ref"):
            if side == "ref":
                ref_scores, wall, cpu = timed(reference, examples)
                ref_times.append(wall)
                ref_cpu.append(cpu)
            else:
                ours, wall, cpu = timed(prm.score_steps, records)
                our_times.append(wall)
                our_cpu.append(cpu)
    ratios = [a / b for a, b in zip(ref_times, our_times, strict=True)]
    ref_s, ours_s = statistics.median(ref_times), statistics.median(our_times)
    cpu_ratio = statistics.median(a / b for a, b in zip(ref_cpu, our_cpu, strict=True))

    diff = max(abs(a - b) for r, o in zip(ref_scores, ours, strict=True) for a, b in zip(r, o, strict=True))
    # The operating point: tokens per solution and the padding rewardlab's length-sorted batches add.
    lengths = sorted(len(prm.encode(ex.prompt, ex.steps).input_ids) for ex in examples)
    padded = sum(
        max(lengths[i : i + args.batch_size]) * len(lengths[i : i + args.batch_size])
        for i in range(0, len(lengths), args.batch_size)
    )
    steps = sum(len(ex.steps) for ex in examples)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"operating point: n {len(examples)} solutions ({steps} steps, 2-{args.max_ops + 1} per solution), "
        f"tokens/solution mean {statistics.mean(lengths):.0f} max {max(lengths)}, batch {args.batch_size} "
        f"(padding +{100 * (padded / sum(lengths) - 1):.1f}%), threads {torch.get_num_threads()}, "
        f"model {args.model}, load average {load:.2f} on {os.cpu_count()} cores"
    )
    print(f"reference (Math-Shepherd recipe, 1 per pass): {len(examples) / ref_s:8.1f} solutions/s")
    print(
        f"rewardlab (length-sorted batches of {args.batch_size}): {len(examples) / ours_s:8.1f} solutions/s"
    )
    print(
        f"ratio {statistics.median(ratios):.2f}x (median of {len(ratios)} alternating repeats: "
        f"{', '.join(f'{x:.2f}' for x in ratios)}; CPU time {cpu_ratio:.2f}x)   "
        f"max |score difference| {diff:.2e}"
    )


if __name__ == "__main__":
    main()
