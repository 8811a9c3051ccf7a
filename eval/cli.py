"""`rewardkit eval`: Evaluate a model or completions on benchmarks (pass@k, maj@k, best-of-n)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="Evaluate a model or completions on benchmarks (pass@k, maj@k, best-of-n).",
        description="Evaluate a model or completions on benchmarks (pass@k, maj@k, best-of-n).",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rewardkit.cli import CLIError

    raise CLIError("not available yet")
