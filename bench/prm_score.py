"""PRM step scoring: rewardkit's batched, length-sorted scoring vs Math-Shepherd's reference recipe.

The reference is the inference snippet published with Math-Shepherd: one solution at a time, the text with
a step tag after every step, ``softmax(logits[..., [+, -]])[..., 0]`` read where the input holds the tag.
rewardkit's ``lm`` head computes the same numbers (checked here, and in tests/test_prm.py) with batches of
inputs sorted by length. Both run on the same model in the same process; the script prints both rates, the
ratio and the largest score difference.

    python bench/prm_score.py [--n 400] [--model qwen2-small] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="solutions to score")
    parser.add_argument("--model", default="qwen2-small", help="shipped tiny config (random weights)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    args = parser.parse_args()

    import torch

    from rewardkit.rewardmodels.prm import PRMConfig, ProcessRewardModel
    from rewardkit.rewardmodels.prm.synthetic import make_arithmetic_examples
    from rewardkit.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardkit.types import Record

    if args.threads:
        torch.set_num_threads(args.threads)
    tok = load_tiny_tokenizer()
    model = build_tiny_model(args.model).eval()
    examples = make_arithmetic_examples(args.n, seed=0, min_ops=1, max_ops=12)
    records = [Record(prompt=ex.prompt, completion="\n".join(ex.steps)) for ex in examples]
    good = tok("+", add_special_tokens=False)["input_ids"][-1]
    bad = tok("-", add_special_tokens=False)["input_ids"][-1]
    tag = tok("#", add_special_tokens=False)["input_ids"][-1]

    # Reference: Math-Shepherd's recipe, one solution per forward pass.
    start = time.perf_counter()
    reference = []
    with torch.no_grad():
        for ex in examples:
            text = ex.prompt + "\n" + "\n".join(f"{s} #" for s in ex.steps)
            ids = torch.tensor([tok(text)["input_ids"]])
            logits = model(ids).logits[:, :, [good, bad]]
            reference.append(logits.softmax(dim=-1)[:, :, 0][ids == tag].tolist())
    ref_s = time.perf_counter() - start

    prm = ProcessRewardModel(
        model,
        tok,
        PRMConfig(head="lm", step_marker=" #", step_joiner="\n", batch_size=args.batch_size),
        device="cpu",
    )
    start = time.perf_counter()
    ours = prm.score_steps(records)
    ours_s = time.perf_counter() - start

    diff = max(abs(a - b) for r, o in zip(reference, ours, strict=True) for a, b in zip(r, o, strict=True))
    steps = sum(len(ex.steps) for ex in examples)
    print(f"solutions {len(examples)}, steps {steps}, model {args.model}, threads {torch.get_num_threads()}")
    print(f"reference (Math-Shepherd recipe, 1 per pass): {len(examples) / ref_s:8.1f} solutions/s")
    print(
        f"rewardkit (length-sorted batches of {args.batch_size}): {len(examples) / ours_s:8.1f} solutions/s"
    )
    print(f"ratio {ref_s / ours_s:.2f}x   max |score difference| {diff:.2e}")


if __name__ == "__main__":
    main()
