"""`rewardkit score`: score completions offline with a verifier (or per-row verifiers)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _parse_value(value: str) -> Any:
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
        "--timeout", type=float, default=10.0, help="seconds per row before it fails with 'timeout'"
    )
    parser.add_argument("--resume", action="store_true", help="keep the rows already in OUTPUT and continue")
    parser.add_argument(
        "--config",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="setting of the default verifier, e.g. --config mode=strict (VALUE parsed as JSON when it can be)",
    )
    parser.add_argument(
        "--field",
        action="append",
        type=_key_value,
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
        "--no-progress", action="store_true", help="no progress bar (default: only on a terminal)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--reward-model",
        default=None,
        metavar="PATH",
        help="score with a reward model (ORM, or PRM folder) instead of a verifier; runs in this process",
    )
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="SPEC",
        help="reward-shaping transform applied after scoring, repeatable (e.g. --shape group_norm --shape clip:-1,1)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import math
    from pathlib import Path

    from rewardkit.cli import CLIError
    from rewardkit.data.loaders import _looks_local
    from rewardkit.scoring.io import score_file

    if args.workers < 0:
        raise CLIError("--workers must be >= 0")
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise CLIError(f"--timeout must be a finite number of seconds > 0, got {args.timeout}")
    if args.ray_address and args.engine != "ray":
        raise CLIError("--ray-address needs --engine ray")
    if not Path(args.input).exists() and _looks_local(args.input):
        raise CLIError(f"input not found: {args.input}")
    if args.engine == "ray":
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise CLIError("--engine ray needs Ray: pip install 'rewardkit[ray]'") from exc
    if args.config and not args.verifier:
        raise CLIError("--config needs --verifier (it configures the default verifier)")
    config = {key: _parse_value(value) for key, value in args.config}
    source: Any = args.verifier
    if args.reward_model:
        if args.verifier:
            raise CLIError("--reward-model and --verifier are exclusive")
        from rewardkit.rewardmodels.cli import reward_model_source

        source = reward_model_source(args.reward_model)
    pipeline = None
    if args.shape:
        from rewardkit.rewardmodels.shaping import build_pipeline

        try:
            pipeline = build_pipeline(args.shape)
        except (TypeError, ValueError) as exc:
            raise CLIError(f"--shape: {exc}") from exc
    try:
        summary = score_file(
            args.input,
            args.output,
            source,
            workers=args.workers,
            timeout=args.timeout,
            resume=args.resume,
            field_map=dict(args.field) or None,
            split=args.split,
            config=config or None,
            engine=args.engine,
            chunk_size=max(1, args.chunk_size),
            progress=False if args.no_progress else None,
            run_info={k: v for k, v in {"reward_model": args.reward_model, "shape": args.shape}.items() if v},
            ray_address=args.ray_address,
        )
    except (TypeError, ValueError) as exc:  # bad verifier settings, bad split...
        raise CLIError(str(exc).splitlines()[0]) from exc
    if pipeline is not None:
        from rewardkit.rewardmodels.shaping import shape_jsonl
        from rewardkit.scoring.io import mark_shaped

        try:
            shaped = shape_jsonl(args.output, pipeline, field_map=dict(args.field) or None)
            mark_shaped(args.output, args.shape)
            summary.reward_sum = float(sum(shaped))  # the summary reports the shaped rewards
        except (KeyError, ValueError) as exc:
            raise CLIError(f"--shape: {exc}") from exc
    if args.json:
        print(json.dumps(summary.to_dict()))
    else:
        print(f"wrote {args.output}")
        print(summary.format())
    return 0
