"""`rewardlab rl`: train a policy with RL from verifier / reward-model rewards, and plot a run.

rewardlab rl train --config run.yaml [--preset grpo] [--set algorithm.kl_coef=0.01] [--resume]
rewardlab rl plot runs/my-run [-o curves.png]
rewardlab rl presets                      # list presets
rewardlab rl config --preset dapo         # print a full config (every field, with its value)
rewardlab rl serve-vllm MODEL [--port 8000 ...]  # a vLLM server for rollout.backend: vllm-server
"""

from __future__ import annotations

import argparse

from rewardlab.errors import UserError
from rewardlab.extras import require, require_installed
from rewardlab.rl.presets import PRESETS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rl",
        help="Train a policy with RL from verifier and reward-model rewards.",
        description="Train a policy with RL (GRPO, Dr.GRPO, DAPO, RLOO, REINFORCE++, PPO) from verifier and "
        "reward-model rewards; plot a run's curves.",
    )
    sub = parser.add_subparsers(dest="rl_command", metavar="ACTION")
    train = sub.add_parser("train", help="Run an RL training config.")
    train.add_argument("--config", "-c", help="YAML config (see `rewardlab rl config`).")
    train.add_argument(
        "--preset", help="Algorithm preset: grpo, dr_grpo, dapo, rloo, reinforce_pp, ppo, grpo_prm."
    )
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Override a config field, e.g. --set algorithm.kl_coef=0.01 (repeatable).",
    )
    train.add_argument("--output-dir", "-o", help="Run folder (same as --set run.output_dir=...).")
    train.add_argument(
        "--resume", action="store_true", help="Continue from the run folder's latest checkpoint."
    )
    train.add_argument("--steps", type=int, help="Same as --set train.max_steps=N.")
    train.set_defaults(func=run_train)

    plot = sub.add_parser("plot", help="Draw a run's metrics (reward, accuracy, length, KL...) to PNG.")
    plot.add_argument("run_dir", help="Run folder (holds metrics.jsonl).")
    plot.add_argument("--output", "-o", help="PNG path (default RUN_DIR/curves.png).")
    plot.add_argument("--metrics", nargs="*", help="Metric names to draw (default: the standard panel).")
    plot.set_defaults(func=run_plot)

    presets = sub.add_parser("presets", help="List the algorithm presets and what they set.")
    presets.set_defaults(func=run_presets)

    show = sub.add_parser("config", help="Print a full config as YAML (defaults < preset < file < --set).")
    show.add_argument("--config", "-c")
    show.add_argument("--preset")
    show.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    show.set_defaults(func=run_config)

    serve = sub.add_parser(
        "serve-vllm",
        help="Start `vllm serve` as rollout.backend: vllm-server needs it (weight reload, sampling log-probs).",
        description="Runs `vllm serve MODEL` with --logprobs-mode processed_logprobs and VLLM_SERVER_DEV_MODE=1. "
        "Arguments after the model go to vllm serve (--port 8000, --tensor-parallel-size 4, "
        "--weight-transfer-config...).",
    )
    serve.add_argument("model", help="The policy's starting checkpoint: a local folder or a hub name.")
    serve.add_argument("vllm_args", nargs=argparse.REMAINDER, help="Passed to vllm serve.")
    serve.set_defaults(func=run_serve_vllm)
    parser.set_defaults(func=lambda args: (parser.print_help(), 0)[1])


def _load(args: argparse.Namespace):
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.rl.config import ConfigError, load_config

    overrides = list(args.overrides or [])
    if getattr(args, "output_dir", None):
        overrides.append(f"run.output_dir={args.output_dir}")
    if getattr(args, "steps", None) is not None:
        overrides.append(f"train.max_steps={args.steps}")
    try:
        return load_config(args.config, preset=args.preset, overrides=overrides)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def run_train(args: argparse.Namespace) -> int:
    require("torch", "transformers", extra="rl", what="rewardlab rl train")
    cfg = _load(args)
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.rl.trainer import RLTrainer

    try:
        with RLTrainer(cfg) as trainer:
            trainer.train(resume=args.resume)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():  # launched by torchrun: one line, from rank 0
        rank = dist.get_rank()
        dist.destroy_process_group()
        if rank != 0:
            return 0
    print(f"run saved in {cfg.run.output_dir} (metrics.jsonl, checkpoints/)")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from pathlib import Path

    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.rl.plot import plot_run

    if not (Path(args.run_dir) / "metrics.jsonl").exists():
        raise UserError(f"no metrics.jsonl in {args.run_dir}")
    out = plot_run(args.run_dir, args.output, metrics=args.metrics or None)
    print(out)
    return 0


def run_presets(args: argparse.Namespace) -> int:
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.rl.config import preset_yaml

    for name in PRESETS:
        print(f"--- {name}")
        print(preset_yaml(name).strip())
    return 0


def run_config(args: argparse.Namespace) -> int:
    # The check of a config reads the registries of the RL math (policy losses, estimators), which import torch.
    require("torch", extra="rl", what="rewardlab rl config")
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.rl.config import dump_config

    print(dump_config(_load(args)).rstrip())
    return 0


def run_serve_vllm(args: argparse.Namespace) -> int:
    import os

    # vllm is not imported here: this process becomes `vllm serve`
    require_installed("vllm", "torch", extra="vllm", what="rewardlab rl serve-vllm")
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.generation.vllm_server import serve_command

    argv, env = serve_command(args.model, args.vllm_args)
    print(" ".join(argv), flush=True)
    os.execvpe(argv[0], argv, env)
    return 0  # not reached: the process is now the server
