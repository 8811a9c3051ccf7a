"""Data-parallel training on CPU: two processes with the gloo backend hold the same weights after a step.

Each rank samples its own prompts (a stride of the same order), so the ranks' losses differ; DDP averages
the gradients (the loss is scaled by the world size and normalised by the global token count), and both
ranks must end the step with identical parameters that differ from the initial ones.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.multiprocessing as mp

from rewardlab.types import Record


def digits_reward(prompts, completions, references):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def _join_gloo(rank: int, world: int, port: int) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # a hang (the ranks running different numbers of collectives) becomes an error, not a stuck test
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))


def _trainer(out_dir: str, overrides: list[str], records: int, reward):
    """A one-step GRPO trainer of 2 prompts x 4 samples of 6 tokens on the tiny model, on CPU."""
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer

    base = [
        "train.max_steps=1", "train.prompts_per_step=2", "rollout.n=4", "rollout.max_new_tokens=6",
        "reward.truncation=none",  # a random model's 6-token completions are all cut off
        "reward.sources=[]", "train.report_to=none", f"run.output_dir={out_dir}", "run.device=cpu",
    ]  # fmt: skip
    cfg = load_config(preset="grpo", overrides=base + overrides)
    rows = [Record(id=i, prompt=f"{i}*{i}=", reference=str(i * i)) for i in range(records)]
    return RLTrainer(cfg, train_records=rows, eval_records=[], reward_fns=[reward], console=None)


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    _join_gloo(rank, world, port)
    try:
        with _trainer(
            out_dir, ["train.learning_rate=1e-3", "train.per_device_train_batch_size=3"], 8, digits_reward
        ) as tr:
            initial = torch.cat([p.detach().flatten().clone() for p in tr.policy.parameters()])
            metrics = tr.train_step()
            final = torch.cat([p.detach().flatten() for p in tr.policy.parameters()])
        gathered = [torch.zeros_like(final) for _ in range(world)]
        dist.all_gather(gathered, final)
        prompts = [tr.records[i].prompt for i in tr.prompts.order[:2]]
        torch.save(
            {
                "same": all(torch.equal(gathered[0], g) for g in gathered),
                "moved": not torch.equal(initial, final),
                "grad_norm": metrics.get("grad_norm"),
                "prompts": prompts,
            },
            os.path.join(out_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_hold_the_same_weights(tmp_path, free_port):
    world = 2
    mp.spawn(_worker, args=(world, free_port, str(tmp_path)), nprocs=world, join=True)
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    for res in results:
        assert res["same"], "ranks diverged after one step"
        assert res["moved"], "the step did not change the weights"
        assert res["grad_norm"] and res["grad_norm"] > 0
    assert results[0]["prompts"] != results[1]["prompts"], "ranks should sample different prompts"


def first_group_varies(prompts, completions, references):
    """Rank 0: every group all-equal. Rank 1: only the first group of each rollout differs (n=4)."""
    import torch.distributed as dist

    if dist.get_rank() == 0:
        return [0.0] * len(completions)
    return [
        digits_reward(prompts, [c], references)[0] + k if k < 4 else 0.0 for k, c in enumerate(completions)
    ]


def _dynamic_sampling_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    _join_gloo(rank, world, port)
    try:
        overrides = [
            "algorithm.dynamic_sampling=true",
            "algorithm.max_refill_rounds=0",
            "train.minibatches=6",  # 6 optimiser steps on 8 samples, 4 on 4: unequal batches would hang
        ]
        with _trainer(out_dir, overrides, 16, first_group_varies) as tr:
            metrics = tr.train_step()
        torch.save(
            {"rounds": metrics["dynamic_sampling/rounds"], "num_loss_tokens": metrics.get("num_loss_tokens")},
            os.path.join(out_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


def test_dynamic_sampling_with_unequal_keeps_does_not_hang(tmp_path, free_port):
    """Rank 0 keeps no group, rank 1 one of the two it wants: both train on the same number of samples (here
    the whole rollout, since the fewest kept is 0), so they run the same optimiser steps and the step ends."""
    world = 2
    mp.spawn(_dynamic_sampling_worker, args=(world, free_port, str(tmp_path)), nprocs=world, join=True)
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    assert [r["rounds"] for r in results] == [1, 1]
    assert results[0]["num_loss_tokens"] == results[1]["num_loss_tokens"]


pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="this machine cannot have it: torch.distributed"
)
