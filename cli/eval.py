"""`rewardlab eval`: pass@k, maj@k and best-of-n of a model, or of completions made elsewhere."""

from __future__ import annotations

import argparse

from rewardlab.errors import UserError
from rewardlab.extras import require
from rewardlab.hub import check_model
from rewardlab.registry import UnknownNameError


def _ks(text: str) -> list[int]:
    try:
        ks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--k takes comma-separated integers, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError("--k values must be >= 1")
    return ks


def _names(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return names


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="Evaluate a model or completions on benchmarks (pass@k, maj@k, best-of-n).",
        description=(
            "Evaluate a model (sampling n completions per problem) or a file of completions on a benchmark. "
            "Writes samples.jsonl, summary.json, report.md and pass_at_k.png to the run folder. "
            "Benchmarks: gsm8k, math500, aime, humaneval, mbpp, livecodebench, spider, ifeval (hub data, or "
            "--data PATH for a local copy), sample:NAME for the sample shipped with rewardlab, or any "
            "JSONL/parquet file with --verifier."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="Model to sample from: a hub name or a local path.")
    source.add_argument("--completions", help="JSONL of completions (problem_id + completion[s]).")
    parser.add_argument("--benchmark", required=True, help="Benchmark name, sample:NAME, or a data file.")
    parser.add_argument(
        "--data", help="Local copy of a named benchmark (JSONL, parquet, save_to_disk folder)."
    )
    parser.add_argument("--split", help="Split to evaluate (default: the benchmark's).")
    parser.add_argument("--limit", type=int, help="Evaluate only the first N problems.")
    parser.add_argument(
        "--verifier",
        help="Verifier or reward-source name (rubric, judge, http:URL) for a custom data file (default: math).",
    )
    parser.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="NAME=COLUMN",
        help="Field mapping for custom data, e.g. --field prompt=question --field reference=answer.",
    )
    parser.add_argument(
        "--verifier-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Verifier setting (JSON values allowed), e.g. --verifier-arg db_root=spider/database.",
    )
    parser.add_argument(
        "--correct-threshold",
        type=float,
        default=1.0,
        metavar="T",
        help="A sample is correct (pass@k, maj@k, best-of-n) when its reward is at least T (default 1.0; "
        "graded rewards such as a rubric's score: a lower T counts partly right samples).",
    )
    parser.add_argument("-o", "--output", required=True, help="Run folder.")
    parser.add_argument("--n", type=int, default=1, help="Samples per problem when sampling (default 1).")
    parser.add_argument(
        "--k", type=_ks, help="k values, e.g. 1,4,16 (default: powers of two up to n, and n)."
    )
    parser.add_argument(
        "--backend", choices=["hf", "vllm"], default="hf", help="Rollout backend (default hf)."
    )
    parser.add_argument("--temperature", type=float, default=None, help="Default 0 for n=1, else 0.8.")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8, help="Problems per generation batch.")
    parser.add_argument("--fewshot", type=int, default=0, help="Worked examples prepended to each prompt.")
    parser.add_argument("--no-chat-template", action="store_true", help="Do not apply the chat template.")
    parser.add_argument("--reward-model", help="Reward model (ORM or PRM folder) for best-of-n.")
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="SPEC",
        help="Reward shaping before mean reward (repeatable), e.g. --shape length_penalty:weight=0.1; "
        "pass@k and maj@k use the verifier's own verdicts.",
    )
    parser.add_argument(
        "--score-truncated",
        action="store_true",
        help="Score completions that hit --max-new-tokens like the others (default: they count as wrong).",
    )
    parser.add_argument("--workers", type=int, default=2, help="Scoring worker processes (default 2).")
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="Per-completion scoring timeout, CPU seconds."
    )
    parser.add_argument("--bootstrap", type=int, default=1000, help="Bootstrap resamples (0: no intervals).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-resume", action="store_true", help="Generate everything again.")
    parser.add_argument(
        "--no-progress", action="store_true", help="No progress bars (default: only on a terminal)."
    )
    env = parser.add_argument_group(
        "environment",
        "Each sample is a multi-turn episode with tools; its last turn is scored (docs/envs.md).",
    )
    env.add_argument("--env", metavar="NAME", help="Environment: tools, or module:Class of your own.")
    env.add_argument(
        "--tools", type=_names, metavar="LIST", help="Tools of --env tools: python,sql,calculator,module:fn."
    )
    env.add_argument(
        "--tool-format", type=_names, metavar="LIST", help="Tool-call formats read: tool_call,fenced,tag."
    )
    env.add_argument("--max-turns", type=int, metavar="N", help="Most model turns per episode.")
    env.add_argument(
        "--max-episode-tokens",
        type=int,
        metavar="N",
        help="Token budget of an episode (model and tool tokens; --max-new-tokens limits each turn).",
    )
    env.add_argument("--tool-timeout", type=float, metavar="S", help="Seconds one tool call may run.")
    env.add_argument(
        "--python-state", action="store_true", help="The python tool keeps its names across an episode."
    )
    env.add_argument(
        "--tool-option",
        action="append",
        default=[],
        metavar="TOOL.KEY=VALUE",
        help="A tool's constructor option (repeatable; the value is read as YAML): search.corpus=kb.jsonl.",
    )
    env.add_argument(
        "--observation-template",
        metavar="TEXT",
        help="How a tool's output is shown ({output} in it), e.g. Search-R1's '<information>{output}</information>'.",
    )
    parser.set_defaults(func=run)


_ENV_FLAGS = (
    # (argparse dest, EnvConfig field, flag)
    ("tools", "tools", "--tools"),
    ("tool_format", "formats", "--tool-format"),
    ("max_turns", "max_turns", "--max-turns"),
    ("max_episode_tokens", "max_tokens", "--max-episode-tokens"),
    ("tool_timeout", "tool_timeout", "--tool-timeout"),
    ("python_state", "python_state", "--python-state"),
    ("observation_template", "observation_template", "--observation-template"),
)


def env_config(args: argparse.Namespace, bench=None):
    """The :class:`rewardlab.envs.EnvConfig` of the environment flags (``None`` without ``--env``), checked.
    An ``sql`` tool on an SQL benchmark queries the benchmark's databases (its verifier settings)."""
    given = [flag for dest, _, flag in _ENV_FLAGS if getattr(args, dest) not in (None, False)]
    given += ["--tool-option"] if args.tool_option else []
    if not args.env:
        if given:
            raise UserError(f"{given[0]} needs --env")
        return None
    if args.completions:
        raise UserError("--env samples episodes from a model: use it with --model, not --completions")
    # lazy: environments pull in the rollout code; a run without --env (scoring completions) never needs it
    from rewardlab.envs import EnvConfig

    cfg = EnvConfig(name=args.env)
    for dest, field, _ in _ENV_FLAGS:
        if getattr(args, dest) is not None:
            setattr(cfg, field, getattr(args, dest))
    if bench is not None and bench.verifier == "sql" and "sql" in cfg.tools and cfg.name == "tools":
        cfg.tool_options = {"sql": dict(bench.verifier_config)}
    for tool, key, value in map(_tool_option, args.tool_option):
        cfg.tool_options.setdefault(tool, {})[key] = value
    try:
        cfg.check()
    except ValueError as exc:
        message = str(exc)
        for _, field, flag in _ENV_FLAGS:  # in the flags' words: env.max_turns -> --max-turns
            message = message.replace(f"env.{field}", flag)
        raise UserError(message) from None
    return cfg


def _tool_option(text: str) -> tuple[str, str, object]:
    """``TOOL.KEY=VALUE`` as (tool, key, value), the value read as YAML (``k=3`` is a number)."""
    import yaml

    name, sep, value = text.partition("=")
    tool, dot, key = name.strip().partition(".")
    if not (sep and dot and tool and key):
        raise UserError(f"--tool-option takes TOOL.KEY=VALUE, got {text!r}")
    try:
        return tool, key.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        return tool, key.strip(), value


def build_environment(cfg):
    """The environment of ``cfg``; an unknown name, tool or class is a one-line CLI error."""
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.envs import build_env

    try:
        return build_env(cfg)
    except UnknownNameError as exc:
        raise UserError(str(exc)) from None
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise UserError(f"--env {cfg.name}: {type(exc).__name__}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    import json
    from pathlib import Path

    from rewardlab.data.loaders import read_rows
    from rewardlab.eval.benchmarks import load_benchmark
    from rewardlab.eval.report import render_markdown
    from rewardlab.eval.runner import EvalConfig, GenerationConfig, evaluate_completions, evaluate_model

    field_map = {}
    for item in args.field:
        if "=" not in item:
            raise UserError(f"--field takes NAME=COLUMN, got {item!r}")
        name, column = item.split("=", 1)
        field_map[name.strip()] = column.strip()
    try:
        bench, problems = load_benchmark(
            args.benchmark,
            data=args.data,
            split=args.split,
            verifier=args.verifier,
            field_map=field_map or None,
            limit=args.limit,
        )
    except (KeyError, ValueError) as exc:
        raise UserError(str(exc).strip("'\"")) from None
    verifier_args = {}
    for item in args.verifier_arg:
        if "=" not in item:
            raise UserError(f"--verifier-arg takes KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            verifier_args[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            verifier_args[key.strip()] = value
    if verifier_args:
        from dataclasses import replace

        bench = replace(bench, verifier_config={**bench.verifier_config, **verifier_args})
    if not problems:
        raise UserError(f"benchmark {args.benchmark!r} has no problems")
    env_cfg = env_config(args, bench)
    config = EvalConfig(
        ks=args.k,
        workers=args.workers,
        timeout=args.timeout,
        bootstrap=args.bootstrap,
        seed=args.seed,
        score_truncated=args.score_truncated,
        correct_threshold=args.correct_threshold,
        progress=False if args.no_progress else None,
    )
    reward_model = _load_reward_model(args.reward_model) if args.reward_model else None
    if args.completions:
        path = Path(args.completions)
        if not path.exists():
            raise FileNotFoundError(f"completions file not found: {path}")
        try:
            rows = read_rows(path)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        try:
            report = evaluate_completions(
                bench, problems, rows, config=config, reward_model=reward_model, run_dir=args.output
            )
        except KeyError as exc:
            raise UserError(str(exc).strip("'\"")) from None
    else:
        temperature = args.temperature if args.temperature is not None else (0.0 if args.n == 1 else 0.8)
        gen = GenerationConfig(
            n=args.n,
            temperature=temperature,
            top_p=args.top_p,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
            fewshot=args.fewshot,
            use_chat_template=not args.no_chat_template,
            seed=args.seed,
        )

        env = build_environment(env_cfg) if env_cfg is not None else None
        try:
            require("torch", "transformers", extra="rl", what="rewardlab eval --model")
            check_model(args.model)  # after the flags' checks: a bad tool is named first
            report = evaluate_model(
                bench,
                problems,
                args.model,
                gen=gen,
                config=config,
                backend=args.backend,
                run_dir=args.output,
                reward_model=reward_model,
                resume=not args.no_resume,
                env=env,
                env_config=env_cfg,
            )
        finally:
            if env is not None:
                env.close()

    print(render_markdown(report.summary))
    print(f"wrote {args.output}/samples.jsonl, summary.json, report.md, pass_at_k.png")
    return 0


def _load_reward_model(path: str):
    """A trained reward model (ORM, or PRM folder) as a reward source (score_batch), for best-of-n."""
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.rewardmodels.sources import reward_model_source

    return reward_model_source(path)
