"""GRPO with the vllm rollout backend on a GPU: a few steps, self-checking. Needs CUDA and vLLM.

    python bench/rl_gpu.py [--model tiny:qwen2-small | PATH] [--steps 5] [--prompts 32] [--n 8] [--lora 16]

``--lora R`` trains LoRA adapters: the engine then receives merged weights, and checks 1 and 2 compare it
with the peft policy.

Checks (exit code 1 when one fails):

1. **Weights reach the engine**: after the optimiser steps, vLLM's greedy completions equal the trainer
   policy's own greedy ``generate`` (fp32 model, so both decode the same argmax).
2. **Log-probabilities agree**: the rollout's sampling log-probs against the trainer's recomputed ones
   (``rollout_is/ratio_mean`` within 2% of 1; the IS correction is on, so the ratio is logged).
3. **The loop runs**: every step's metrics are finite and the weights changed.

Prints seconds per step with the generate / score / update split and tokens/s. The tiny default model is
there so the script runs anywhere vLLM does; pass a real checkpoint for meaningful throughput figures.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="tiny:qwen2-small")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--max-new", type=int, default=32)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--lora", type=int, default=0, help="LoRA rank (0: off); vLLM then gets merged weights")
    args = p.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("rl_gpu: no CUDA device here; run this on a GPU machine", file=sys.stderr)
        return 2
    from rewardkit.rl.rollout import SamplingParams, get_backend
    from rewardkit.rl.rollout.vllm import vllm_available

    ok, why = vllm_available()
    if not ok:
        print(f"rl_gpu: {why}", file=sys.stderr)
        return 2

    from rewardkit.rl.config import load_config
    from rewardkit.rl.trainer import RLTrainer, load_policy

    model, tokenizer = load_policy(args.model, dtype="float32")
    model_path = args.model
    if args.model.startswith("tiny:"):
        # vLLM loads from a folder: save the freshly built tiny model (fp32, head_dim 64).
        model_path = tempfile.mkdtemp(prefix="rl-gpu-model-")
        model.save_pretrained(model_path)
        tokenizer.save_pretrained(model_path)
    cfg = load_config(
        preset="grpo",
        overrides=[
            "algorithm.kl_coef=0.0",
            "algorithm.rollout_is=token",
            f"train.steps={args.steps}",
            f"train.prompts_per_step={args.prompts}",
            f"rollout.n={args.n}",
            f"rollout.max_new_tokens={args.max_new}",
            "rollout.backend=vllm",
            f"rollout.vllm_gpu_memory_utilization={args.gpu_memory_utilization}",
            "rollout.vllm_kwargs={dtype: float32, enforce_eager: true}",
            "train.lr=1e-5",
            f"model.lora.r={args.lora}",
            "train.micro_batch_size=64",
            "reward.sources=[{name: math}]",
            "reward.workers=2",
            "run.tensorboard=false",
            f"run.output_dir={tempfile.mkdtemp(prefix='rl-gpu-run-')}",
        ],
    )
    failures: list[str] = []
    backend = get_backend(
        "vllm",
        model_path,
        tokenizer,
        gpu_memory_utilization=args.gpu_memory_utilization,
        dtype="float32",
        enforce_eager=True,
    )
    with RLTrainer(
        cfg, model=model, tokenizer=tokenizer, backend=backend, eval_records=[], console=sys.stdout
    ) as tr:
        before = [p.detach().clone() for p in tr.policy.parameters()]
        rows = [tr.train_step() for _ in range(args.steps)]
        moved = any(not torch.equal(a, b) for a, b in zip(before, tr.policy.parameters(), strict=True))
        if not moved:
            failures.append("weights did not change")
        for i, m in enumerate(rows, 1):
            bad = [k for k, v in m.items() if isinstance(v, float) and not math.isfinite(v)]
            if bad:
                failures.append(f"step {i}: non-finite metrics {bad}")
            ratio = m.get("rollout_is/ratio_mean")
            if ratio is not None and abs(ratio - 1.0) > 0.02:
                failures.append(f"step {i}: rollout/trainer log-prob ratio mean {ratio:.4f} (want 1 +- 0.02)")
            print(
                f"step {i}: {m['timing/step_s']:.2f}s (generate {m['timing/generate_s']:.2f}, score "
                f"{m['timing/score_s']:.2f}, update {m['timing/train_s']:.2f}), {m['tokens_per_s']:.0f} tok/s, "
                f"reward {m['reward']:.3f}, IS ratio {ratio}"
            )
        # Weights pushed: vLLM's greedy decode equals the trainer policy's.
        prompts = [r.prompt_text for r in tr.records[:8]]
        greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=args.max_new)
        v_out = backend.generate(prompts, greedy)
        h_out = get_backend("hf", tr.policy, tokenizer).generate(prompts, greedy)
        same = sum(a[0].token_ids == b[0].token_ids for a, b in zip(v_out, h_out, strict=True))
        if same < len(prompts) - 1:  # one tie broken differently by kernels is tolerated
            failures.append(f"vLLM greedy equals the trained policy's on {same}/{len(prompts)} prompts only")
        print(f"greedy agreement vLLM vs trained policy: {same}/{len(prompts)}")
    backend.close()
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("OK: weights pushed to vLLM, log-probs agree, the loop trains")
    return 0


if __name__ == "__main__":
    sys.exit(main())
