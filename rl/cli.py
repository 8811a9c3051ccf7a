"""`rewardkit rl`: Train a policy with RL from verifier and reward-model rewards."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rl",
        help="Train a policy with RL from verifier and reward-model rewards.",
        description="Train a policy with RL from verifier and reward-model rewards.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rewardkit.cli import CLIError

    raise CLIError("not available yet")
