"""What each vLLM memory mode costs per step: pushing the policy's weights into the engine.

* ``colocated``: ``update_weights`` of the in-process engine (tensors handed over, no copy through a file).
* ``server-disk``: ``update_weights`` of the ``vllm-server`` backend with ``disk`` sync (safetensors written
  to a folder, every worker reloads them in place through ``/collective_rpc``) against a ``vllm serve``
  started by this script.
* on a GPU also ``sleep``: ``release_memory()`` (sleep level 2) and the wake-up inside the next
  ``update_weights``, with the device memory freed.
* ``--lora R``: a LoRA policy (rank R on every linear layer) pushed ``merged`` (every weight, adapters
  folded in) against ``adapter`` (vLLM's ``enable_lora``: only the adapter moves), each followed by one
  rollout (``--prompts`` x 8 samples, 64 new tokens), since the adapter path moves less but decodes with
  extra matmuls.

Runs where vLLM imports (``.venv-vllm`` on CPU: ``scripts/test-vllm`` builds it)::

    .venv-vllm/bin/python bench/vllm_sync.py [--hidden 768 --layers 12] [--repeats 3] [--lora 16]

The model is a Qwen2 of the given width and depth built from the tiny config (random weights, float32);
the operating point (parameters, bytes) is printed with the median seconds over ``--repeats`` pushes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def lora_modes(model, tok, path: str, args: argparse.Namespace) -> int:
    """Merged against adapter pushes of one LoRA policy, each followed by a rollout."""
    import torch

    from rewardlab.generation import SamplingParams, get_backend
    from rewardlab.training.lora import add_lora

    policy = add_lora(model, r=args.lora, dropout=0.0)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.01)
    adapter_mb = sum(t.numel() for n, t in policy.named_parameters() if "lora_" in n) * 4 / 2**20
    print(f"LoRA r={args.lora} on all linear layers: adapter {adapter_mb:.1f} MiB float32")
    prompts = [f"{i}+{i + 3}=" for i in range(args.prompts)]
    params = SamplingParams(n=8, max_new_tokens=64, seed=0, logprobs=True)
    kw = {"gpu_memory_utilization": 0.2, "enforce_eager": True, "dtype": "float32", "max_model_len": 512}
    results = {}
    for mode in ("merged", "adapter"):
        backend = get_backend("vllm", policy, tok, lora_mode=mode, **kw)
        backend.generate(prompts, params)  # warm-up
        push = _median_seconds(lambda b=backend: b.update_weights(policy), args.repeats)
        gen = _median_seconds(
            lambda b=backend: (b.update_weights(policy), b.generate(prompts, params)), args.repeats
        )
        results[mode] = (push, gen - push)
        backend.close()
    for mode, (push, gen) in results.items():
        print(f"  {mode:8} push {push:7.3f} s   rollout after it {gen:7.3f} s   total {push + gen:7.3f} s")
    (mp, mg), (ap, ag) = results["merged"], results["adapter"]
    print(
        f"  merged / adapter: push {mp / ap:.2f}x, rollout {mg / ag:.2f}x, total {(mp + mg) / (ap + ag):.2f}x"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--lora", type=int, default=0, help="Compare merged and adapter pushes of a rank-R LoRA policy."
    )
    p.add_argument("--prompts", type=int, default=16)
    args = p.parse_args(argv)

    import torch

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.generation import get_backend
    from rewardlab.generation.vllm_server import launch_server

    overrides = {
        "hidden_size": args.hidden,
        "intermediate_size": 3 * args.hidden,
        "num_hidden_layers": args.layers,
        "num_attention_heads": args.hidden // 64,
        "num_key_value_heads": max(1, args.hidden // 256),
    }
    model, tok = build_tiny_model(**overrides), load_tiny_tokenizer()
    params = sum(t.numel() for t in model.parameters())
    path = tempfile.mkdtemp(prefix="vllm-sync-model-")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(
        f"vLLM weight push: Qwen2 {args.layers} x {args.hidden}, {params / 1e6:.1f}M parameters, "
        f"{params * 4 / 2**20:.0f} MiB float32; {device}; median of {args.repeats}"
    )
    rows = []
    if args.lora:
        return lora_modes(model, tok, path, args)
    engine_kw = {
        "gpu_memory_utilization": 0.2,
        "enforce_eager": True,
        "dtype": "float32",
        "max_model_len": 512,
    }
    colocated = get_backend("vllm", path, tok, sleep_level=2 if device == "cuda" else 0, **engine_kw)
    rows.append(
        ("colocated update_weights", _median_seconds(lambda: colocated.update_weights(model), args.repeats))
    )
    if device == "cuda":
        free_awake = torch.cuda.mem_get_info()[0]
        t_sleep = _median_seconds(
            lambda: (colocated.release_memory(), colocated.update_weights(model)), args.repeats
        )
        colocated.release_memory()
        freed = torch.cuda.mem_get_info()[0] - free_awake
        colocated.update_weights(model)
        rows.append((f"sleep level 2 + wake + update_weights ({freed / 2**30:.2f} GiB freed)", t_sleep))
    colocated.close()

    log = os.path.join(tempfile.mkdtemp(prefix="vllm-sync-log-"), "server.log")
    extra = [
        "--gpu-memory-utilization",
        "0.2",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "512",
    ]
    server, url = launch_server(path, extra, log, timeout=600)
    try:
        backend = get_backend("vllm-server", None, tok, url=url, sync_dir=tempfile.mkdtemp(), timeout=600)
        rows.append(
            (
                "server, disk sync update_weights",
                _median_seconds(lambda: backend.update_weights(model), args.repeats),
            )
        )
        backend.close()
    finally:
        server.terminate()
        server.wait(60)
    base = rows[0][1]
    for name, seconds in rows:
        print(f"  {name:60} {seconds:8.3f} s  ({seconds / base:.1f}x colocated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
