"""`rewardlab rm`: train, evaluate and score with reward models (outcome and process), and label steps.

Subcommands::

    rewardlab rm train --type orm --model PATH --train-file prefs.jsonl --output-dir runs/rm [--config c.yaml]
    rewardlab rm train --type prm --model PATH --train-file steps.jsonl --output-dir runs/prm
    rewardlab rm train --type implicit_prm --model PATH --train-file outcomes.jsonl --output-dir runs/iprm
    rewardlab rm eval  --model runs/rm --data test.jsonl [-o scores.jsonl] [--json]
    rewardlab rm score INPUT -o OUTPUT --model runs/rm [--shape group_norm] [--normalize sigmoid] [--resume]
    rewardlab rm label-steps INPUT -o OUTPUT --policy PATH --verifier math --k 8

The ``train`` and ``label-steps`` flags are generated from the config dataclasses
(:class:`~rewardlab.rewardmodels.orm.config.ORMTrainConfig`, the PRM's ``PRMTrainConfig``, the implicit PRM's
``ImplicitPRMTrainConfig`` and ``LabelConfig``): every field ``foo_bar`` is a flag ``--foo-bar`` with the field's documentation as help.
A YAML/JSON ``--config`` file gives the same fields; flags override it. Torch and transformers are only
imported inside the functions that run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rewardlab.cli.args import (
    add_dataclass_arguments,
    build_config,
    given_values,
    load_config_file,
    none_or,
    parse_bool,
)
from rewardlab.cli.judge import add_judge_parser
from rewardlab.errors import UserError
from rewardlab.extras import require
from rewardlab.hub import check_model
from rewardlab.rewardmodels.implicit_prm.config import ImplicitPRMTrainConfig
from rewardlab.rewardmodels.orm.config import ORMTrainConfig
from rewardlab.rewardmodels.prm.config import PRMTrainConfig
from rewardlab.rewardmodels.prm.label import LabelConfig, label_steps_with_policy
from rewardlab.rewardmodels.sources import model_kind
from rewardlab.types import jsonable

# --------------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------------


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """``rewardlab rm`` and its subcommands (``judge``'s parser is in :mod:`rewardlab.cli.judge`)."""
    parser = subparsers.add_parser(
        "rm",
        help="Train, evaluate and score with reward models.",
        description="Train, evaluate and score with outcome and process reward models; label steps.",
    )
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
    sub = parser.add_subparsers(dest="rm_command", metavar="SUBCOMMAND")
    _add_train_parser(sub)
    _add_eval_parser(sub)
    _add_score_parser(sub)
    _add_label_steps_parser(sub)
    add_judge_parser(sub)


def _add_train_parser(sub: Any) -> None:
    """``rm train``: flags from the ORM and PRM training configs."""
    train = sub.add_parser(
        "train",
        help=(
            "Train an outcome (--type orm), process (--type prm) or implicit process (--type implicit_prm) "
            "reward model."
        ),
        description=(
            "Train a reward model. ORM data: JSONL rows (prompt, chosen, rejected[, margin]) for "
            "Bradley-Terry, or (prompt, completion, label) for BCE. PRM data: step-labelled rows "
            "(Math-Shepherd, PRM800K or stepwise layout; see docs/prm.md). Implicit PRM (PRIME) data: "
            "(prompt, completion, label 0/1 or reward) rows; the model is a causal LM whose log-ratio to a "
            "frozen reference is the reward (see docs/rl.md, PRIME). Flags marked [orm] / [prm] / "
            "[implicit_prm] apply to that type only."
        ),
    )
    train.add_argument(
        "--type",
        choices=["orm", "prm", "implicit_prm"],
        default=None,
        help="which model to train (default orm)",
    )
    train.add_argument("--config", default=None, help="YAML/JSON file of config fields (flags override it)")
    train.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: only on a terminal)"
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        dest="overrides",
        help="override a config field, applied last (repeatable), e.g. --set learning_rate=5e-5",
    )
    owners = add_dataclass_arguments(
        train, {"orm": ORMTrainConfig, "prm": PRMTrainConfig, "implicit_prm": ImplicitPRMTrainConfig}
    )
    train.set_defaults(func=run_train, _owners=owners)


def _add_eval_parser(sub: Any) -> None:
    """``rm eval``: a reward model on held-out data."""
    ev = sub.add_parser(
        "eval",
        help="Evaluate a reward model: pairwise accuracy, ROC-AUC, ECE (ORM); step F1, ProcessBench (PRM).",
        description=(
            "Evaluate a reward model on labelled data, overall and per subset. ORM: pairwise rows "
            "(prompt, chosen, rejected[, subset]; RewardBench layout) or pointwise rows (prompt, "
            "completion, label). PRM: step-labelled rows."
        ),
    )
    ev.add_argument("--model", required=True, help="reward model folder or hub name")
    ev.add_argument("--data", required=True, help="JSONL/JSON/Parquet/CSV file or datasets name")
    ev.add_argument(
        "--type", choices=["auto", "orm", "prm"], default="auto", help="model kind (auto: from the folder)"
    )
    ev.add_argument("--split", default=None, help="dataset split")
    ev.add_argument("--limit", type=int, default=None, help="evaluate the first N rows only")
    ev.add_argument("--max-length", type=int, default=None, help="ORM: cut longer inputs from the left")
    ev.add_argument("--token-budget", type=int, default=16384, help="ORM: tokens per dynamic batch")
    ev.add_argument("--bins", type=int, default=10, help="ORM: ECE bins")
    ev.add_argument(
        "--use-chat-template",
        type=none_or(parse_bool),
        default=None,
        metavar="BOOL",
        help="ORM: format with the tokenizer's chat template (default: as trained / when present)",
    )
    ev.add_argument(
        "--group-by",
        default="subset",
        metavar="FIELD",
        help="report metrics per value of this row field (ORM: a column or metadata key; PRM: a metadata key)",
    )
    ev.add_argument("--device", default=None, help="cpu, cuda... (default: cuda when available)")
    ev.add_argument("--dtype", default="float32", help="ORM: float32, bfloat16, float16, auto")
    ev.add_argument("-o", "--output", default=None, help="write per-row scores to this JSONL file")
    ev.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: only on a terminal)"
    )
    ev.add_argument("--json", action="store_true", help="print the metrics as JSON")
    ev.set_defaults(func=run_eval)


def _add_score_parser(sub: Any) -> None:
    """``rm score``: a file scored by a reward model through the scoring engine."""
    sc = sub.add_parser(
        "score",
        help="Score completions with a reward model (as rewardlab score does with a verifier).",
        description=(
            "Score rows (prompt, completion[, id, metadata]) with a reward model: this is `rewardlab score "
            "--reward-model MODEL` with the model's settings as flags. OUTPUT gets every input field plus "
            "reward, details and error, one row per input row in input order (a malformed line becomes a row "
            "with an error); --resume continues a stopped run. A preference file (chosen/rejected) is "
            "refused: score one side with --field completion=chosen, or use `rm eval`. --shape applies "
            "reward-shaping transforms afterwards (see docs/shaping.md)."
        ),
    )
    sc.add_argument(
        "input", metavar="INPUT", help="JSONL file, saved dataset folder, parquet file or hub name"
    )
    sc.add_argument("-o", "--output", required=True, help="output JSONL file")
    sc.add_argument("--model", required=True, help="reward model folder or hub name")
    sc.add_argument(
        "--type", choices=["auto", "orm", "prm"], default="auto", help="model kind (auto: from the folder)"
    )
    sc.add_argument(
        "--normalize",
        choices=["none", "sigmoid"],
        default="none",
        help="ORM: reward = score or sigmoid(score)",
    )
    sc.add_argument("--token-budget", type=int, default=16384, help="ORM: tokens per dynamic batch")
    sc.add_argument("--max-length", type=int, default=2048, help="ORM: cut longer inputs from the left")
    sc.add_argument(
        "--chunk-rows",
        type=int,
        default=512,
        help="rows per score_batch call (batched by length within; the progress bar moves once per chunk)",
    )
    sc.add_argument("--resume", action="store_true", help="keep the rows already in OUTPUT and continue")
    sc.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="SPEC",
        help="shaping transform, repeatable, e.g. --shape group_norm --shape clamp:-3,3",
    )
    sc.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help="read a record field from a differently named column, e.g. --field completion=response",
    )
    sc.add_argument("--split", default=None, help="dataset split")
    sc.add_argument("--device", default=None, help="cpu, cuda... (default: cuda when available)")
    sc.add_argument("--dtype", default="float32", help="ORM: float32, bfloat16, float16, auto")
    sc.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: only on a terminal)"
    )
    sc.add_argument("--json", action="store_true", help="print the summary as JSON")
    sc.set_defaults(func=run_score)


def _add_label_steps_parser(sub: Any) -> None:
    """``rm label-steps``: Monte Carlo step labels from a policy's rollouts."""
    lab = sub.add_parser(
        "label-steps",
        help="Label solution steps by Monte Carlo completion with a policy and a verifier (Math-Shepherd).",
        description=(
            "For each step prefix of each solution, sample k completions with the policy, verify them "
            "against the reference, and label the step with the fraction that are right (soft) or whether "
            "any is (hard). INPUT: step rows (prompt, steps, reference) in any PRM layout."
        ),
    )
    lab.add_argument("input", metavar="INPUT", help="JSONL of solutions as steps, with references")
    lab.add_argument("-o", "--output", required=True, help="output JSONL (stepwise layout with labels)")
    lab.add_argument("--policy", required=True, help="policy model folder or hub name")
    lab.add_argument("--verifier", default="math", help="verifier name that judges completions")
    lab.add_argument("--backend", choices=["hf", "vllm"], default="hf", help="generation backend")
    lab.add_argument(
        "--format", default="auto", help="input layout (auto, stepwise, math_shepherd, prm800k, processbench)"
    )
    lab.add_argument("--limit", type=int, default=None, help="label the first N solutions only")
    lab.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: only on a terminal)"
    )
    label_owners = add_dataclass_arguments(lab, {"label": LabelConfig})
    lab.set_defaults(func=run_label_steps, _owners=label_owners)


# --------------------------------------------------------------------------------------------------
# commands
# --------------------------------------------------------------------------------------------------


def run_train(args: argparse.Namespace) -> int:
    file_values = load_config_file(args.config)
    kind = args.type or file_values.pop("type", None) or "orm"
    file_values.pop("type", None)
    values = {**file_values, **given_values(args, args._owners)}
    require("torch", "transformers", extra="rm", what="rewardlab rm train")
    if kind == "orm":
        # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
        from rewardlab.rewardmodels.orm.train import train_orm

        config = build_config(ORMTrainConfig, values, "rm train --type orm", args.overrides)
        if not config.model or not config.train_file:
            raise UserError("rm train needs --model and --train-file")
        check_model(config.model)
        try:
            summary = train_orm(config, progress=False if args.no_progress else None)
        except (ValueError, KeyError) as exc:
            raise UserError(str(exc).splitlines()[0]) from exc
        summary.pop("model", None)
        print(json.dumps({"event": "summary", **summary}, default=str))
        return 0
    if kind == "implicit_prm":
        return _train_implicit_prm(values, args)
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.rewardmodels.prm.train import train_prm

    config = build_config(PRMTrainConfig, values, "rm train --type prm", args.overrides)
    if not config.model or not config.train_file:
        raise UserError("rm train needs --model and --train-file")
    check_model(config.model)
    try:
        result = train_prm(config, progress=False if args.no_progress else None)
    except (ValueError, KeyError) as exc:
        raise UserError(str(exc).splitlines()[0]) from exc
    final = result.evals[-1] if result.evals else None
    print(
        json.dumps(
            {"event": "summary", "output_dir": result.output_dir, "seconds": result.seconds, "eval": final},
            default=str,
        )
    )
    return 0


def _train_implicit_prm(values: dict[str, Any], args: argparse.Namespace) -> int:
    """``rm train --type implicit_prm``: PRIME's implicit PRM from outcome labels."""
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.rewardmodels.implicit_prm.train import train_implicit_prm

    config = build_config(ImplicitPRMTrainConfig, values, "rm train --type implicit_prm", args.overrides)
    if not config.model or not config.train_file:
        raise UserError("rm train needs --model and --train-file")
    check_model(config.model)
    if config.reference:
        check_model(config.reference, what="reference model")
    try:
        summary = train_implicit_prm(config, progress=False if args.no_progress else None)
    except (ValueError, KeyError) as exc:
        raise UserError(str(exc).splitlines()[0]) from exc
    summary.pop("prm", None)
    print(json.dumps({"event": "summary", **summary}, default=str))
    return 0


def _write_jsonl(path: str, rows: list[dict[str, Any]]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(jsonable(row), ensure_ascii=False) + "\n")


def _format_metrics(metrics: dict[str, Any], group_by: str | None = None) -> str:
    """Text of ``rm eval``'s metrics: the overall line, RewardBench sections, then one line per group
    (an ORM's ``subsets``, grouped by ``group_by``; a PRM's ``by_<field>``)."""

    def fmt(value: Any) -> str:
        return f"{value:.4f}" if isinstance(value, float) else str(value)

    def line(values: dict[str, Any]) -> str:
        return "  ".join(f"{k}={fmt(v)}" for k, v in values.items() if not isinstance(v, dict))

    lines = [line(metrics)]
    if metrics.get("sections"):
        lines.append(
            "  RewardBench sections: " + "  ".join(f"{k}={fmt(v)}" for k, v in metrics["sections"].items())
        )
    for key, groups in metrics.items():
        if key == "sections" or not isinstance(groups, dict) or not groups:
            continue
        if not all(isinstance(sub, dict) for sub in groups.values()):
            continue
        label = key[3:] if key.startswith("by_") else group_by if key == "subsets" and group_by else key
        lines.append(f"  by {label}:")
        lines.extend(f"    {name}: {line(sub)}" for name, sub in groups.items())
    return "\n".join(lines)


def run_eval(args: argparse.Namespace) -> int:
    require("torch", "transformers", "sklearn", extra="rm", what="rewardlab rm eval")
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.rewardmodels.orm.evaluate import evaluate_reward_model
    from rewardlab.rewardmodels.prm import ProcessRewardModel, evaluate_step_scores, load_step_examples

    check_model(args.model, what="reward model")
    kind = model_kind(args.model, args.type)
    try:
        if kind == "orm":
            metrics, rows = evaluate_reward_model(
                args.model,
                args.data,
                split=args.split,
                limit=args.limit,
                max_length=args.max_length,
                use_chat_template=args.use_chat_template,
                n_bins=args.bins,
                max_tokens=args.token_budget,
                device=args.device,
                dtype=args.dtype,
                group_by=args.group_by,
                progress=False if args.no_progress else None,
            )
        else:
            examples = load_step_examples(args.data)
            if args.limit is not None:
                examples = examples[: args.limit]
            prm = ProcessRewardModel.from_pretrained(args.model, device=args.device)
            scores = prm.score_examples(examples)  # once, for the metrics and the -o rows
            metrics = evaluate_step_scores(
                scores, examples, threshold=prm.config.threshold, group_by=args.group_by
            )
            metrics["kind"] = "prm"
            rows = [
                {"id": ex.id, "step_scores": s, "labels": ex.labels}
                for ex, s in zip(examples, scores, strict=True)
            ]
    except (ValueError, KeyError) as exc:
        raise UserError(str(exc).splitlines()[0]) from exc
    if args.output:
        _write_jsonl(args.output, rows)
    if args.json:
        print(json.dumps(metrics, default=float))
    else:
        print(_format_metrics(metrics, args.group_by))
    return 0


def _field_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UserError(f"expected FIELD=COLUMN, got {text!r}")
    return key.strip(), value.strip()


def run_score(args: argparse.Namespace) -> int:
    """``rewardlab rm score``: ``rewardlab score --reward-model MODEL`` (the scoring engine's file path: the
    input is never the output, a run record, ``--resume``, an error row for a malformed line, a preference
    file refused), with the model's settings given as flags."""
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.cli.score import run, score_args

    kind = model_kind(args.model, args.type)
    options: dict[str, Any] = {"kind": kind, "device": args.device}
    if kind == "orm":
        options.update(
            normalize=args.normalize,
            max_tokens=args.token_budget,
            max_length=args.max_length,
            dtype=args.dtype,
        )
    score = score_args(
        args.input,
        args.output,
        reward_model=args.model,
        field=[_field_pair(f) for f in args.field],
        shape=args.shape,
        split=args.split,
        resume=args.resume,
        batch_size=max(1, args.chunk_rows),
        no_progress=args.no_progress,
        json=args.json,
    )
    return run(score, model_options=options)


def run_label_steps(args: argparse.Namespace) -> int:
    """``rewardlab rm label-steps``: Monte Carlo step labels (Math-Shepherd) from a policy's rollouts."""
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.rewardmodels.prm import load_step_examples, write_step_examples

    config = build_config(LabelConfig, given_values(args, args._owners), "rm label-steps")
    require("torch", "transformers", extra="rm", what="rewardlab rm label-steps")
    check_model(args.policy, what="policy")
    try:
        examples = load_step_examples(args.input, fmt=args.format)
    except (ValueError, KeyError) as exc:
        raise UserError(str(exc).splitlines()[0]) from exc
    if args.limit is not None:
        examples = examples[: args.limit]
    labelled = label_steps_with_policy(
        examples,
        args.policy,
        args.verifier,
        config,
        backend=args.backend,
        progress=False if args.no_progress else None,
    )
    write_step_examples(labelled, args.output)
    print(f"wrote {args.output} ({len(labelled)} solutions, k={config.k})", file=sys.stderr)
    return 0
