"""`rewardlab rm judge`: score records with an LLM judge (pointwise, yes/no or pairwise), optionally only
as the fallback of a rule verifier.

    rewardlab rm judge INPUT -o OUTPUT --model PATH [--mode score|binary|pairwise] [--k 5 --temperature 0.7]
    rewardlab rm judge INPUT -o OUTPUT --model PATH --fallback-for math    # judge only what math cannot decide
    rewardlab rm judge INPUT -o OUTPUT --backend openai --base-url http://host:8000/v1 [--model NAME]
    rewardlab rm judge INPUT -o OUTPUT --backend openai --base-url URL --model gpt-4o-mini --budget-usd 5

INPUT is JSONL with ``prompt``, ``completion``, optional ``reference`` and, for pairwise, ``completion_b``.
Output rows are written as ``rewardlab score`` writes them (``scoring.io``): every input field plus ``reward``,
``details`` and ``error``, one row per input row in input order, a malformed line as a row with an error;
``--resume`` continues a stopped run. A summary goes to stderr (with ``--backend openai``, also the requests,
cache hits, retries, failures, tokens and, with a price, ``cost_usd``, which the run record keeps too; with
``--budget-usd`` / ``--budget-tokens`` the rows left once the budget is spent are error rows, not sent).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rewardlab.cli.args import add_dataclass_arguments, build_config, given_values
from rewardlab.errors import UserError
from rewardlab.extras import require
from rewardlab.hub import check_model
from rewardlab.rewardmodels.judge.judge import JudgeConfig, LLMJudge
from rewardlab.rewardmodels.judge.remote import ChatAPIConfig


def add_judge_parser(sub: Any) -> None:
    """Adds the ``judge`` subcommand to the ``rm`` subparsers."""

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
    parser.add_argument(
        "--model",
        default=None,
        help="judge model folder or hub name (hf, vllm); openai: the served model's name (default: the first "
        "the server lists)",
    )
    parser.add_argument(
        "--backend",
        choices=["hf", "vllm", "openai"],
        default="hf",
        help="generation backend (openai: any OpenAI-compatible chat-completions server, see --base-url)",
    )
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

    owners = add_dataclass_arguments(parser, {"judge": JudgeConfig})
    api_group = parser.add_argument_group("openai backend", "Settings of --backend openai.")
    api_owners = add_dataclass_arguments(api_group, {"openai": ChatAPIConfig})
    parser.set_defaults(func=run_judge, _judge_owners=owners, _api_owners=api_owners)


def run_judge(args: argparse.Namespace) -> int:
    """Runs ``rewardlab rm judge``: the scoring engine's file path (``scoring.io.score_file``) with the judge as
    the source of every row, in this process."""
    import dataclasses
    from pathlib import Path

    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.data.loaders import _looks_local
    from rewardlab.rewardmodels.judge.fallback import FallbackVerifier
    from rewardlab.scoring.io import check_paths, score_file

    values = given_values(args, args._judge_owners)
    api_values = given_values(args, args._api_owners)
    if api_values and args.backend != "openai":
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in sorted(api_values))
        raise UserError(f"{flags}: only with --backend openai")
    if args.model is None and args.backend != "openai":
        raise UserError(f"--model is needed with --backend {args.backend}")
    api_config = build_config(ChatAPIConfig, api_values, "rm judge") if args.backend == "openai" else None
    if args.fallback_for and "mode" not in values:
        values.update(mode="binary", template=values.get("template") or "math_equivalence")
    config = build_config(JudgeConfig, values, "rm judge")
    if not Path(args.input).exists() and _looks_local(args.input):
        raise UserError(f"input not found: {args.input}")
    try:
        check_paths(args.input, args.output)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if args.backend != "openai":
        require("torch", "transformers", extra="rm", what=f"rewardlab rm judge --backend {args.backend}")
        check_model(args.model, what="judge model")
    backend_kwargs = {"config": api_config} if api_config is not None else None
    try:
        judge = LLMJudge(args.model, config=config, backend=args.backend, backend_kwargs=backend_kwargs)
    except (OSError, ValueError) as exc:
        raise UserError(str(exc).splitlines()[0]) from exc
    source: Any = judge
    if args.fallback_for:
        source = FallbackVerifier(primary=args.fallback_for, judge=judge)
    run_info = {
        "judge_model": args.model,
        "judge": dataclasses.asdict(config),
        "fallback_for": args.fallback_for,
        "backend": args.backend,
    }
    if api_config is not None:  # what changes the judgments; speed settings may change on resume
        run_info["api"] = {"base_url": api_config.base_url, "logprobs": api_config.logprobs}
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
            progress_desc="judge",
            run_info=run_info,
            row_verifiers=False,  # the judge scores every row
        )
    except (TypeError, ValueError) as exc:  # ScoreError (resume refused, output unwritable), bad split...
        raise UserError(str(exc).splitlines()[0]) from exc
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
    if summary.usage:
        report["usage"] = summary.usage
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
