"""Padding-free training (``train.padding_free``): tokens through the model and update time, padded vs packed.

A batch of ``--seqs`` sequences with random prompt and response lengths (uniform in ``--prompt`` and
``--response``, both inclusive; random tokens) on a randomly initialised shipped config (``--model``:
``qwen2-tiny``, ``qwen2-small``, ``llama-tiny``), laid out by the trainer's own ``build_tensors`` (prompts
left-padded to the batch's longest prompt, responses right-padded to its longest response). One "step" is
what an optimiser step computes: forward + backward of the response tokens' log-probs over every
micro-batch of ``--micro-batch-size`` sequences (gradient accumulation), through the trainer's own forward
path (``RLTrainer._logprobs``) with ``train.padding_free`` off and on. After ``--warmup`` steps each,
``--steps`` steps are timed; the script prints the operating point, tokens through the model (padded:
``B * (P + T)``; packed: the sum of the real lengths), logits computed, the median seconds per step of
each and the ratios, and checks that both give the same loss.

    .venv/bin/python bench/packing.py [--model qwen2-tiny] [--seqs 64] [--prompt 8 64] [--response 4 128]
        [--micro-batch-size 16] [--steps 10] [--threads 1] [--attn sdpa]

CPU by default (``--device cuda`` on a GPU; ``--attn flash_attention_2`` there uses the varlen kernel, when
flash-attn is installed). On CPU, sdpa / eager attention with a packed row computes the full
``N x N`` score matrix of the micro-batch under a block-diagonal mask, so the attention share of the work
grows with the micro-batch; the saving is in everything else (projections, MLP, logits).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")


def make_gens(args: argparse.Namespace, vocab: int) -> list:
    """``--seqs`` generations with uniform random prompt / response lengths and random tokens."""
    import torch

    from rewardlab.generation import Generation

    g = torch.Generator().manual_seed(args.seed)

    def tokens(lo: int, hi: int) -> list[int]:
        n = int(torch.randint(lo, hi + 1, (1,), generator=g))
        return torch.randint(3, vocab, (n,), generator=g).tolist()

    return [
        Generation("", tokens(*args.response), tokens(*args.prompt), None, "stop") for _ in range(args.seqs)
    ]


def make_trainer(args: argparse.Namespace, out_dir: str):
    """A trainer on a fresh random ``--model`` (its forward path is what is timed; nothing is generated)."""
    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.types import Record

    cfg = load_config(
        preset="grpo",
        overrides=[
            f"train.per_device_train_batch_size={args.micro_batch_size}",
            f"run.device={args.device}",
            "algorithm.kl_coef=0",
            "reward.sources=[]",
            "train.report_to=none",
            f"run.output_dir={out_dir}",
        ],
    )
    model = build_tiny_model(args.model, seed=args.seed, attn_implementation=args.attn)
    return RLTrainer(
        cfg,
        model=model,
        tokenizer=load_tiny_tokenizer(),
        train_records=[Record(id=0, prompt="1+1=")],
        eval_records=[],
        reward_fns=[lambda p, c, r: [0.0] * len(c)],
        console=None,
    )


def one_step(trainer, batch: dict, padding_free: bool, tokens: int = 0) -> float:
    """Forward + backward of every micro-batch (mean response log-prob), split as the trainer splits them
    (``tokens``: ``train.micro_batch_tokens``); returns the summed loss."""
    import torch

    trainer.cfg.train.padding_free = padding_free
    trainer.cfg.train.micro_batch_tokens = tokens
    B = batch["input_ids"].shape[0]
    mask = batch["response_mask"].to(trainer.device)
    total = 0.0
    for idx in trainer._micro_batches(batch, torch.arange(B)):
        logp, _ = trainer._logprobs(trainer.policy, batch, idx)
        loss = -(logp * mask[idx]).sum() / mask.sum()
        loss.backward()
        total += loss.item()
    trainer.policy.zero_grad(set_to_none=True)
    if trainer.device.type == "cuda":
        torch.cuda.synchronize()
    return total


def timed(
    trainer, batch: dict, padding_free: bool, args: argparse.Namespace, tokens: int = 0
) -> tuple[float, float]:
    """(median seconds per step, loss) after ``--warmup`` untimed steps."""
    for _ in range(args.warmup):
        loss = one_step(trainer, batch, padding_free, tokens)
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = one_step(trainer, batch, padding_free, tokens)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), loss


def token_counts(batch: dict) -> dict[str, int]:
    B, L = batch["input_ids"].shape
    T = batch["responses"].shape[1]
    return {
        "padded_tokens": B * L,
        "packed_tokens": int(batch["attention_mask"].sum()),
        "padded_logits": B * T,
        "packed_logits": int(batch["response_mask"].sum()),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="qwen2-tiny")
    p.add_argument("--seqs", type=int, default=64)
    p.add_argument("--prompt", type=int, nargs=2, default=[8, 64], metavar=("MIN", "MAX"))
    p.add_argument("--response", type=int, nargs=2, default=[4, 128], metavar=("MIN", "MAX"))
    p.add_argument("--micro-batch-size", type=int, default=16)
    p.add_argument(
        "--micro-batch-tokens",
        type=int,
        nargs="*",
        default=[256, 512],
        help="Token budgets for a third kind of run: packed micro-batches of about this many tokens each.",
    )
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--attn", default="sdpa")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import torch

    from rewardlab.rl.trainer import build_tensors

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as out, make_trainer(args, out) as trainer:
        torch.set_num_threads(args.threads)  # the trainer sets its configured count (0: leaves it)
        batch = build_tensors(make_gens(args, trainer.policy.config.vocab_size), trainer.pad_id)
        counts = token_counts(batch)
        n_params = sum(x.numel() for x in trainer.policy.parameters())
        print(
            f"operating point: {args.model} ({n_params / 1e6:.2f}M params, random weights), {args.attn}, "
            f"{args.device}, {args.threads} thread(s); {args.seqs} sequences, prompt {args.prompt[0]}-"
            f"{args.prompt[1]} tokens, response {args.response[0]}-{args.response[1]} tokens (uniform), "
            f"micro-batch {args.micro_batch_size}; median of {args.steps} steps after {args.warmup} warm-up"
        )
        print(
            f"padded batch: {tuple(batch['input_ids'].shape)}; tokens through the model: padded "
            f"{counts['padded_tokens']}, packed {counts['packed_tokens']} "
            f"({counts['padded_tokens'] / counts['packed_tokens']:.2f}x fewer); logits: padded "
            f"{counts['padded_logits']}, packed {counts['packed_logits']}"
        )
        t_pad, loss_pad = timed(trainer, batch, False, args)
        t_pack, loss_pack = timed(trainer, batch, True, args)
        budgets = []
        for tokens in args.micro_batch_tokens:
            t, loss = timed(trainer, batch, True, args, tokens)
            count = len(trainer._micro_batches(batch, torch.arange(batch["input_ids"].shape[0])))
            budgets.append((tokens, count, t, loss))
    print(
        f"step (forward + backward): padded {t_pad:.3f} s, packed {t_pack:.3f} s, speed-up {t_pad / t_pack:.2f}x"
    )
    for tokens, count, t, loss in budgets:
        print(
            f"packed, micro-batches of ~{tokens} tokens ({count} of them): {t:.3f} s, speed-up over padded "
            f"{t_pad / t:.2f}x (loss |diff| {abs(loss - loss_pad):.1e})"
        )
    print(f"loss: padded {loss_pad:.6f}, packed {loss_pack:.6f} (|diff| {abs(loss_pad - loss_pack):.1e})")


if __name__ == "__main__":
    main()
