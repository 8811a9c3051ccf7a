"""`rewardkit rm judge`: score records with an LLM judge (pointwise, yes/no or pairwise), optionally only
as the fallback of a rule verifier.

    rewardkit rm judge INPUT -o OUTPUT --model PATH [--mode score|binary|pairwise] [--k 5 --temperature 0.7]
    rewardkit rm judge INPUT -o OUTPUT --model PATH --fallback-for math    # judge only what math cannot decide

INPUT is JSONL with ``prompt``, ``completion``, optional ``reference`` and, for pairwise, ``completion_b``.
Output rows are written as ``rewardkit score`` writes them (``scoring.io``): every input field plus ``reward``,
``details`` and ``error``, one row per input row in input order, a malformed line as a row with an error;
``--resume`` continues a stopped run. A summary goes to stderr.
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
    parser.add_argument(
        "-o", "--output", required=True, help="output JSONL (every input field plus reward, details, error)"
    )
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
    parser.add_argument("--resume", action="store_true", help="keep the rows already in OUTPUT and continue")
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: only on a terminal)"
    )
    from rewardkit.rewardmodels.cli import add_dataclass_arguments

    owners = add_dataclass_arguments(parser, {"judge": JudgeConfig})
    parser.set_defaults(func=run_judge, _judge_owners=owners)


def run_judge(args: argparse.Namespace) -> int:
    """Runs ``rewardkit rm judge``: the scoring engine's file path (``scoring.io.score_file``) with the judge as
    the source of every row, in this process."""
    import dataclasses
    from pathlib import Path

    from rewardkit.cli import CLIError
    from rewardkit.data.loaders import _looks_local
    from rewardkit.rewardmodels.cli import _build_config, _given
    from rewardkit.rewardmodels.judge.judge import JudgeConfig, LLMJudge
    from rewardkit.scoring.io import check_paths, score_file

    values = _given(args, args._judge_owners)
    if args.fallback_for and "mode" not in values:
        values.update(mode="binary", template=values.get("template") or "math_equivalence")
    config = _build_config(JudgeConfig, values, "rm judge")
    if not Path(args.input).exists() and _looks_local(args.input):
        raise CLIError(f"input not found: {args.input}")
    try:
        check_paths(args.input, args.output)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    try:
        judge = LLMJudge(args.model, config=config, backend=args.backend)
    except (OSError, ValueError) as exc:
        raise CLIError(str(exc).splitlines()[0]) from exc
    source: Any = judge
    if args.fallback_for:
        from rewardkit.rewardmodels.judge.fallback import FallbackVerifier

        source = FallbackVerifier(primary=args.fallback_for, judge=judge)
    run_info = {
        "judge_model": args.model,
        "judge": dataclasses.asdict(config),
        "fallback_for": args.fallback_for,
        "backend": args.backend,
    }
    try:
        summary = score_file(
            args.input,
            args.output,
            source,
            workers=0,
            resume=args.resume,
            batch_size=max(1, args.batch_size),
            limit=args.limit,
            progress=False if args.no_progress else None,
            run_info=run_info,
            row_verifiers=False,  # the judge scores every row
        )
    except (TypeError, ValueError) as exc:  # ScoreError (resume refused, output unwritable), bad split...
        raise CLIError(str(exc).splitlines()[0]) from exc
    finally:
        judge.close()
    report: dict[str, Any] = {
        "rows": summary.rows,
        "mean_reward": summary.mean_reward,
        "errors": sum(summary.errors.values()),
    }
    decided = _decided_by(args.output)
    if decided:
        report["decided_by"] = decided
    print(json.dumps(report), file=sys.stderr)
    return 0


def _decided_by(output: str) -> dict[str, int]:
    """Rows of the output by ``details["decided_by"]`` (the primary verifier or the judge, with a fallback)."""
    decided: dict[str, int] = {}
    with open(output, encoding="utf-8") as fh:
        for line in fh:
            details = json.loads(line).get("details")
            who = details.get("decided_by") if isinstance(details, dict) else None
            if who:
                decided[who] = decided.get(who, 0) + 1
    return decided


__all__ = ["add_judge_parser", "run_judge"]
