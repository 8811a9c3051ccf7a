"""`rewardkit rm judge`: score records with an LLM judge (pointwise, yes/no or pairwise), optionally only
as the fallback of a rule verifier.

    rewardkit rm judge INPUT -o OUTPUT --model PATH [--mode score|binary|pairwise] [--k 5 --temperature 0.7]
    rewardkit rm judge INPUT -o OUTPUT --model PATH --fallback-for math    # judge only what math cannot decide

INPUT is JSONL with ``prompt``, ``completion``, optional ``reference`` and, for pairwise, ``completion_b``.
Each output row is ``{"id", "reward", "error", "details"}``; a summary goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_judge_parser(sub: Any) -> None:
    """Adds the ``judge`` subcommand to the ``rm`` subparsers."""
    from rewardkit.rewardmodels.judge.judge import JudgeConfig

    parser = sub.add_parser(
        "judge",
        help="Score completions with an LLM judge (score 1-10, yes/no, or pairwise A/B).",
        description=(
            "Prompt a causal LM with a judge template, parse its verdict (\\boxed{}, 'Verdict: A', "
            "'Score: 7/10'; the last one wins), vote over k samples. Unparseable judgments are error rows."
        ),
    )
    parser.add_argument(
        "input", metavar="INPUT", help="JSONL: prompt, completion, [reference], [completion_b]"
    )
    parser.add_argument("-o", "--output", required=True, help="output JSONL (id, reward, error, details)")
    parser.add_argument("--model", required=True, help="judge model folder or hub name")
    parser.add_argument("--backend", choices=["hf", "vllm"], default="hf", help="generation backend")
    parser.add_argument(
        "--fallback-for",
        default=None,
        metavar="VERIFIER",
        help="score with this rule verifier first and judge only the rows it cannot decide",
    )
    parser.add_argument("--limit", type=int, default=None, help="judge the first N rows only")
    parser.add_argument("--batch-size", type=int, default=64, help="rows per generate call")
    from rewardkit.rewardmodels.cli import add_dataclass_arguments

    owners = add_dataclass_arguments(parser, {"judge": JudgeConfig})
    parser.set_defaults(func=run_judge, _judge_owners=owners)


def run_judge(args: argparse.Namespace) -> int:
    """Runs ``rewardkit rm judge``."""
    from rewardkit.cli import CLIError
    from rewardkit.rewardmodels.cli import _build_config, _given
    from rewardkit.rewardmodels.judge.judge import JudgeConfig, LLMJudge
    from rewardkit.types import jsonable

    values = _given(args, args._judge_owners)
    if args.fallback_for and "mode" not in values:
        values.update(mode="binary", template=values.get("template") or "math_equivalence")
    config = _build_config(JudgeConfig, values, "rm judge")
    from rewardkit.data.loaders import load_records

    records = load_records(args.input)
    if args.limit is not None:
        records = records[: args.limit]
    try:
        judge = LLMJudge(args.model, config=config, backend=args.backend)
    except (OSError, ValueError) as exc:
        raise CLIError(str(exc).splitlines()[0]) from exc
    source: Any = judge
    if args.fallback_for:
        from rewardkit.rewardmodels.judge.fallback import FallbackVerifier

        source = FallbackVerifier(primary=args.fallback_for, judge=judge)
    n = errors = 0
    total = 0.0
    decided: dict[str, int] = {}
    with open(args.output, "w", encoding="utf-8") as fh:
        for start in range(0, len(records), max(1, args.batch_size)):
            chunk = records[start : start + args.batch_size]
            for record, result in zip(chunk, source.score_batch(chunk), strict=True):
                row = {"id": record.id, **result.to_dict()}
                fh.write(json.dumps(jsonable(row), ensure_ascii=False) + "\n")
                n += 1
                total += result.reward
                errors += result.error is not None
                who = result.details.get("decided_by")
                if who:
                    decided[who] = decided.get(who, 0) + 1
    judge.close()
    summary = {"rows": n, "mean_reward": total / n if n else 0.0, "errors": errors}
    if decided:
        summary["decided_by"] = decided
    print(json.dumps(summary), file=sys.stderr)
    return 0


__all__ = ["add_judge_parser", "run_judge"]
