"""`rewardlab score`: score completions offline with a verifier (or per-row verifiers)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rewardlab.cli.args import check_pool_limits
from rewardlab.errors import UserError
from rewardlab.extras import require_installed

SPEED_OPTIONS = ("device", "max_tokens")
"""Reward-model settings a resumed run may change (they change speed, not rewards)."""


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def parse_value(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "score",
        help="Score completions offline with a verifier.",
        description=(
            "Score completions offline. INPUT is a JSONL file (one object per line with prompt, completion, "
            "reference and optionally id, verifier, metadata), a datasets folder saved with save_to_disk, a "
            "parquet file, or a hub dataset name. OUTPUT gets one row per input row, in input order: every "
            "input field plus reward, details and error."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "input", metavar="INPUT", help="JSONL file, saved dataset folder, parquet file or hub name"
    )
    parser.add_argument("-o", "--output", required=True, help="output JSONL file")
    parser.add_argument(
        "--verifier", default=None, help="default verifier (rows may name their own in a 'verifier' field)"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="worker processes (0: in this process, no timeout)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="CPU seconds a row may use in its worker before it fails with 'timeout'",
    )
    parser.add_argument(
        "--wall-timeout",
        type=float,
        default=None,
        help="wall-clock seconds a row may take in any case, for one that waits without using CPU "
        "(default: 10 x --timeout)",
    )
    parser.add_argument(
        "--spare-workers",
        type=int,
        default=None,
        help="stragglers (rows past 0.05 s of CPU, e.g. hostile ones) that may hold workers beyond --workers "
        "while fresh workers take the other rows (default: 32 per worker; 0: the plain pool)",
    )
    parser.add_argument("--resume", action="store_true", help="keep the rows already in OUTPUT and continue")
    parser.add_argument(
        "--config",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="setting of the default verifier, e.g. --config mode=strict (VALUE parsed as JSON when it can be)",
    )
    parser.add_argument(
        "--field",
        action="append",
        type=key_value,
        default=[],
        metavar="FIELD=COLUMN",
        help="read a record field from a differently named column, e.g. --field reference=answer",
    )
    parser.add_argument("--split", default=None, help="dataset split (for datasets with several)")
    parser.add_argument("--engine", choices=["local", "ray"], default="local", help="where workers run")
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="HOST:PORT",
        help="with --engine ray: join this cluster (started with `ray start --head`) instead of a local one",
    )
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=16,
        help="rows in a worker's first chunk (later chunks are sized from the time rows take)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=256,
        help="rows per call of a source that runs in this process (a reward model batches them by length)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: only on a terminal)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--reward-model",
        default=None,
        metavar="PATH",
        help=(
            "score with a reward model (ORM, or PRM folder) instead of a verifier; runs in this process and "
            "scores every row (rows' verifier fields are kept, not used)"
        ),
    )
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="SPEC",
        help="reward-shaping transform applied after scoring, repeatable (e.g. --shape group_norm --shape clamp:-1,1)",
    )
    parser.set_defaults(func=run)


def score_args(input: str, output: str, **values: Any) -> argparse.Namespace:
    """The arguments of ``rewardlab score INPUT -o OUTPUT`` with every other flag at its default, then
    ``values`` (commands that are this one under another name, such as ``rm score``, build theirs here)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["score", input, "-o", output])
    unknown = sorted(set(values) - set(vars(args)))
    if unknown:
        raise TypeError(f"not arguments of rewardlab score: {', '.join(unknown)}")
    vars(args).update(values)
    return args


def preference_file_problem(row: dict[str, Any] | None, field_map: dict[str, str]) -> str | None:
    """Why a file whose first row is ``row`` can't be scored as completions: it holds preference pairs
    (``chosen`` and ``rejected``, no completion column), which would be scored as empty completions."""
    completion = field_map.get("completion", "completion")
    if row is None or completion in row or not {"chosen", "rejected"} <= set(row):
        return None
    return (
        f"the input is a preference file (rows have 'chosen' and 'rejected', no '{completion}'): score one "
        f"side with --field completion=chosen (or completion=rejected), or measure preference accuracy with "
        f"`rewardlab rm eval --data INPUT`"
    )


def run(args: argparse.Namespace, *, model_options: dict[str, Any] | None = None) -> int:
    """``rewardlab score``; ``rm score`` is this with ``args.reward_model`` set and ``model_options`` (keyword
    arguments of ``reward_model_source``: the model's kind, normalisation, lengths, dtype, device)."""
    from pathlib import Path

    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.data.loaders import _looks_local
    from rewardlab.rewardmodels.sources import reward_model_source
    from rewardlab.scoring.io import check_paths, first_row, mark_shaped, score_file

    if args.workers < 0:
        raise UserError("--workers must be >= 0")
    check_pool_limits(args.timeout, args.spare_workers, args.wall_timeout)
    if args.ray_address and args.engine != "ray":
        raise UserError("--ray-address needs --engine ray")
    if not Path(args.input).exists() and _looks_local(args.input):
        raise UserError(f"input not found: {args.input}")
    if args.engine == "ray":
        require_installed("ray", extra="ray", what="rewardlab score --engine ray")
    if args.config and not args.verifier:
        raise UserError("--config needs --verifier (it configures the default verifier)")
    if args.reward_model and args.verifier:
        raise UserError("--reward-model and --verifier are exclusive")
    config = {key: parse_value(value) for key, value in args.config}
    field_map = dict(args.field)
    pipeline = None
    if args.shape:
        # lazy: a tensor transform pulls in torch (row-level ones, such as repetition_penalty, do not)
        from rewardlab.rewardmodels.shaping import build_pipeline

        try:
            pipeline = build_pipeline(args.shape)
        except (TypeError, ValueError) as exc:
            raise UserError(f"--shape: {exc}") from exc
    # Everything a user can get wrong is refused before a reward model is loaded.
    try:
        check_paths(args.input, args.output)
        problem = preference_file_problem(first_row(args.input, args.split), field_map)
    except (TypeError, ValueError) as exc:  # ScoreError, a bad split...
        raise UserError(str(exc).splitlines()[0]) from exc
    if problem:
        raise UserError(problem)
    source: Any = args.verifier
    run_info: dict[str, Any] = {"shape": args.shape}
    if args.reward_model:
        options = dict(model_options or {})
        source = reward_model_source(args.reward_model, **options)
        run_info["reward_model"] = args.reward_model
        # A resume must use the same model settings; device and batching change speed, not rewards.
        run_info["reward_model_options"] = {k: v for k, v in options.items() if k not in SPEED_OPTIONS}
    try:
        summary = score_file(
            args.input,
            args.output,
            source,
            workers=args.workers,
            timeout=args.timeout,
            resume=args.resume,
            field_map=field_map or None,
            split=args.split,
            config=config or None,
            engine=args.engine,
            chunk_size=max(1, args.chunk_size),
            batch_size=max(1, args.batch_size),
            progress=False if args.no_progress else None,
            run_info={k: v for k, v in run_info.items() if v},
            ray_address=args.ray_address,
            row_verifiers=not args.reward_model,  # a reward model scores every row
            spare_workers=args.spare_workers,
            wall_timeout=args.wall_timeout,
        )
    except (TypeError, ValueError) as exc:  # bad verifier settings, bad split, ScoreError...
        raise UserError(str(exc).splitlines()[0]) from exc
    if pipeline is not None:
        # lazy: a tensor transform pulls in torch (row-level ones, such as repetition_penalty, do not)
        from rewardlab.rewardmodels.shaping import shape_jsonl

        try:
            shaped = shape_jsonl(args.output, pipeline, field_map=field_map or None)
            mark_shaped(args.output, args.shape)
        except (KeyError, ValueError) as exc:
            raise UserError(f"--shape: {exc}") from exc
        # The summary reports the shaped rewards.
        summary.reward_sum = float(sum(r for r in shaped if r is not None))
        summary.missing = sum(r is None for r in shaped)
    if args.json:
        print(json.dumps(summary.to_dict()))
    else:
        print(f"wrote {args.output}")
        print(summary.format())
    return 0
