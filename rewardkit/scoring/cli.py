"""`rewardkit score`: Score completions offline with a verifier."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "score",
        help="Score completions offline with a verifier.",
        description="Score completions offline with a verifier.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rewardkit.cli import CLIError

    raise CLIError("not available yet")
