"""IFEval accuracies of a scored file: ``python -m rewardlab.verifiers.ifeval scored.jsonl [--json]``.

Reads the output of ``rewardlab score ... --verifier ifeval`` and prints prompt- and instruction-level
accuracy, strict and loose (``--json``: the full :func:`ifeval_summary`, per instruction and category).
"""

from __future__ import annotations

import argparse
import json
import sys

from rewardlab.verifiers.ifeval.summary import IFEvalTally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rewardlab.verifiers.ifeval", description=__doc__.splitlines()[0]
    )
    parser.add_argument("scored", help="JSONL written by `rewardlab score --verifier ifeval`")
    parser.add_argument("--json", action="store_true", help="print the full summary as JSON")
    args = parser.parse_args(argv)
    tally = IFEvalTally()
    try:
        with open(args.scored, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    tally.add(json.loads(line))
                except (ValueError, TypeError) as exc:
                    print(f"{args.scored}:{number}: not a scored row ({exc})", file=sys.stderr)
                    return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(tally.to_dict(), indent=2))
    else:
        print(tally.format() or "no IFEval rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
