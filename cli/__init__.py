"""The ``rewardlab`` command: one entry point, subcommands in their own modules.

Each subcommand module exposes ``add_parser(subparsers)`` and imports heavy libraries (torch,
transformers) only inside the function it runs, so ``rewardlab --help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading

from rewardlab import __version__
from rewardlab.errors import UserError
from rewardlab.progress import quiet_libraries_off_terminal
from rewardlab.registry import UnknownNameError

SUBCOMMANDS = {
    "score": "rewardlab.cli.score",
    "rm": "rewardlab.cli.rm",
    "rl": "rewardlab.cli.rl",
    "eval": "rewardlab.cli.eval",
    "view": "rewardlab.cli.view",
    "serve": "rewardlab.cli.serve",
    "index": "rewardlab.cli.index",
}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: a run stops as on Ctrl-C (clean-up runs, what was written stays)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rewardlab",
        description="Verifiable rewards, reward models and RL for language models.",
    )
    parser.add_argument("--version", action="version", version=f"rewardlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMANDS.values():
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    quiet_libraries_off_terminal()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    try:
        return int(args.func(args) or 0)
    except (UserError, UnknownNameError, FileNotFoundError, NotADirectoryError) as exc:
        print(f"rewardlab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C: 130; SIGTERM: 143 (128 + the signal, as a shell reports it)
        terminated = isinstance(exc, Terminated)
        print(f"rewardlab {args.command}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 143 if terminated else 130
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
