"""`rewardkit rm`: Train, evaluate and score with reward models."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rm",
        help="Train, evaluate and score with reward models.",
        description="Train, evaluate and score with reward models.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rewardkit.cli import CLIError

    raise CLIError("not available yet")
