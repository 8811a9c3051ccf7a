"""The ``rewardkit`` command: one entry point, subcommands in their own modules.

Each subcommand module exposes ``add_parser(subparsers)`` and imports heavy libraries (torch,
transformers) only inside the function it runs, so ``rewardkit --help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rewardkit import __version__
from rewardkit.registry import UnknownNameError

SUBCOMMANDS = {
    "score": "rewardkit.scoring.cli",
    "rm": "rewardkit.rewardmodels.cli",
    "rl": "rewardkit.rl.cli",
    "eval": "rewardkit.eval.cli",
}


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rewardkit",
        description="Verifiable rewards, reward models and RL for language models.",
    )
    parser.add_argument("--version", action="version", version=f"rewardkit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMANDS.values():
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(args.func(args) or 0)
    except (CLIError, UnknownNameError, FileNotFoundError, NotADirectoryError) as exc:
        print(f"rewardkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rewardkit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
