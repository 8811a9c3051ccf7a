"""Evaluation runs: completions (sampled here or given) -> scores -> metrics -> files in a run folder.

Two entry points:

* :func:`evaluate_completions` scores completions made elsewhere (the offline path) and computes metrics.
* :func:`evaluate_model` samples ``n`` completions per problem with a rollout backend (transformers on
  CPU, vLLM on GPU), resumably, then does the same (:func:`evaluate_backend` with a backend already made).
  With an environment (``rewardlab.envs``) each sample is a multi-turn episode whose answer is scored.

This module puts the steps in order; each step is its own module: :mod:`.samples` (scoring),
:mod:`.aggregate` (metrics over problems), :mod:`.files` (the run folder), :mod:`.generate` (prompts,
backends, models, ``generations.jsonl``: imported only by model runs, so scoring finished completions loads
no generation code). maj@k groups answers as the benchmark's verifier says
(:func:`rewardlab.eval.benchmarks.answer_grouping`).

A run folder holds ``generations.jsonl`` (model runs only; appended problem by problem, so an interrupted
run resumes without re-generating), ``samples.jsonl`` (one scored row per sample), ``problems.jsonl`` (one
row per problem, in order: ``problem_id``, ``prompt``, ``reference``, ``subset`` and ``metadata`` when the
problem has them; the prompt is the text the model was sent (template, few-shot examples, chat template)
in model runs, the problem's own prompt for completions made elsewhere), ``summary.json``, ``report.md`` and
``pass_at_k.png``. With an environment, ``generations.jsonl`` also keeps each episode's
transcript and counters, and the summary an ``environment`` section (``rewardlab.envs.episode_metrics``).
The scoring source's own summaries (its ``summary_tallies()`` hook; the rubric's criteria met per category for
rows carrying ``details["criteria"]``: :mod:`.tallies`) go into the summary's ``tallies`` and the report.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from rewardlab.eval.aggregate import Grouping, compute_metrics, coverage, samples_per_problem
from rewardlab.eval.benchmarks import Benchmark, Problem, answer_grouping
from rewardlab.eval.config import EvalConfig, GenerationConfig
from rewardlab.eval.files import EvalReport, problem_rows, write_run
from rewardlab.eval.samples import Sample, score_samples
from rewardlab.eval.tallies import tally_rows
from rewardlab.types import error_kind

logger = logging.getLogger(__name__)

__all__ = [
    "EvalConfig",
    "EvalReport",
    "GenerationConfig",
    "evaluate_backend",
    "evaluate_completions",
    "evaluate_model",
]


def evaluate_completions(
    bench: Benchmark,
    problems: Sequence[Problem],
    completion_rows: Iterable[dict[str, Any]],
    *,
    config: EvalConfig | None = None,
    reward_model: Any = None,
    run_dir: str | Path | None = None,
) -> EvalReport:
    """Metrics from existing completions.

    Each row names its problem (``problem_id``, or ``id``/``task_id``/``unique_id``/``key``) and carries a
    ``completion`` (one sample) or ``completions`` (a list); an ``rm_score`` per sample is used for
    best-of-n when no reward model is given, a ``finish_reason`` (``finish_reasons``) marks truncated ones. Rows of unknown problems are an error; problems without
    completions are listed in the summary (``missing_problems``) and left out of the metrics.
    """
    config = config or EvalConfig()
    by_id = {p.id: p for p in problems}
    completions: dict[str, list[str]] = defaultdict(list)
    rm_scores: dict[str, list[float | None]] = defaultdict(list)
    finish_reasons: dict[str, list[str | None]] = defaultdict(list)
    unknown: list[str] = []
    for row in completion_rows:
        pid = _row_problem_id(row)
        if pid not in by_id:
            unknown.append(pid)
            continue
        texts = row["completions"] if "completions" in row else [row.get("completion", "")]
        scores = row.get("rm_scores") or [row.get("rm_score")] * len(texts)
        reasons = row.get("finish_reasons") or [row.get("finish_reason")] * len(texts)
        for text, score, reason in zip(texts, scores, reasons, strict=False):
            completions[pid].append(text if isinstance(text, str) else json.dumps(text))
            rm_scores[pid].append(None if score is None else float(score))
            finish_reasons[pid].append(reason)
    if unknown:
        raise KeyError(
            f"{len(unknown)} completion rows name problems not in the benchmark (first: {unknown[0]!r})"
        )
    ordered = {p.id: completions[p.id] for p in problems if p.id in completions}
    samples = score_samples(
        bench,
        problems,
        ordered,
        config,
        reward_model=reward_model,
        rm_scores=rm_scores,
        finish_reasons=finish_reasons,
    )
    has_rm = reward_model is not None or any(s.rm_score is not None for s in samples)
    missing = [p.id for p in problems if p.id not in completions]
    return _finish(bench, problems, samples, config, has_rm, run_dir, extra={"missing_problems": missing})


def _row_problem_id(row: dict[str, Any]) -> str:
    for key in ("problem_id", "id", "task_id", "unique_id", "key", "question_id"):
        if key in row and row[key] is not None:
            value = str(row[key])
            # ids written by rewardlab itself are "PROBLEM#SAMPLE"
            return value.rsplit("#", 1)[0] if key == "id" and "#" in value else value
    raise KeyError("a completion row has no problem id (problem_id, id, task_id, unique_id, key)")


def evaluate_model(
    bench: Benchmark,
    problems: Sequence[Problem],
    model: str,
    *,
    gen: GenerationConfig | None = None,
    config: EvalConfig | None = None,
    backend: str = "hf",
    run_dir: str | Path,
    reward_model: Any = None,
    resume: bool = True,
    fewshot_pool: Sequence[tuple[Problem, str]] = (),
    backend_kwargs: dict[str, Any] | None = None,
    env: Any = None,
    env_config: Any = None,
) -> EvalReport:
    """Samples completions from ``model`` (hub name or local path) and evaluates them; with ``env`` (an
    :class:`rewardlab.envs.Environment`, run with ``env_config``, an :class:`rewardlab.envs.EnvConfig`)
    each sample is an episode. The caller closes ``env``."""
    # lazy: rollout backends, environments and model loading; the completions path never needs them
    from rewardlab.eval.generate import make_backend

    engine, tokenizer = make_backend(model, backend, backend_kwargs)
    return evaluate_backend(
        bench,
        problems,
        engine,
        tokenizer,
        gen=gen,
        config=config,
        run_dir=run_dir,
        reward_model=reward_model,
        resume=resume,
        fewshot_pool=fewshot_pool,
        env=env,
        env_config=env_config,
        extra={"model": model, "backend": backend},
    )


def evaluate_backend(
    bench: Benchmark,
    problems: Sequence[Problem],
    engine: Any,
    tokenizer: Any,
    *,
    gen: GenerationConfig | None = None,
    config: EvalConfig | None = None,
    run_dir: str | Path,
    reward_model: Any = None,
    resume: bool = True,
    fewshot_pool: Sequence[tuple[Problem, str]] = (),
    env: Any = None,
    env_config: Any = None,
    extra: dict[str, Any] | None = None,
) -> EvalReport:
    """:func:`evaluate_model` with a rollout backend already made (``engine.generate(prompts, params)``)
    and its tokenizer; ``extra`` goes into the summary."""
    # lazy: rollout backends and environments; the completions path never needs them
    from rewardlab.eval.generate import build_prompts, environment_summary, episode_setup, generate

    gen = gen or GenerationConfig()
    config = config or EvalConfig()
    run_dir = Path(run_dir)
    prompts = build_prompts(bench, problems, tokenizer, gen, fewshot_pool)
    setup = episode_setup(env, env_config, tokenizer, problems, gen)
    generated = generate(
        engine,
        prompts,
        gen,
        run_dir / "generations.jsonl",
        resume=resume,
        episodes=setup,
        progress=config.progress,
    )
    samples = score_samples(
        bench,
        problems,
        generated.completions,
        config,
        reward_model=reward_model,
        finish_reasons=generated.finish_reasons,
        generation_errors=generated.errors,
    )
    summary_extra = {**(extra or {}), "generation": asdict(gen)}
    if setup is not None:
        summary_extra["environment"] = environment_summary(setup, generated)
    has_rm = reward_model is not None
    return _finish(bench, problems, samples, config, has_rm, run_dir, extra=summary_extra, prompts=prompts)


def _finish(
    bench: Benchmark,
    problems: Sequence[Problem],
    samples: list[Sample],
    config: EvalConfig,
    has_rm: bool,
    run_dir: str | Path | None,
    extra: dict[str, Any] | None = None,
    prompts: dict[str, str] | None = None,
) -> EvalReport:
    """The report of scored ``samples``: metrics overall and per subset, the summary, the run folder."""
    by_problem: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        by_problem[sample.problem_id].append(sample)
    sizes = [len(v) for v in by_problem.values()]
    ks, dropped, warning = coverage(config.ks, sizes)
    if warning:
        logger.warning(warning)
    votes = answer_grouping(bench)
    errors = Counter(error_kind(s.error) for s in samples if s.error)
    tallies, tally_lines = tally_rows(
        bench.verifier, ({"details": s.details, "error": s.error, "reward": s.reward} for s in samples)
    )
    summary = {
        "benchmark": bench.name,
        "verifier": bench.verifier,
        "num_problems": len(by_problem),
        "num_samples": len(samples),
        "samples_per_problem": samples_per_problem(sizes),
        "sample_counts": {str(n): count for n, count in sorted(Counter(sizes).items())},
        "ks": ks,
        "dropped_ks": dropped,
        "metrics": compute_metrics(by_problem, ks, config, votes=votes, with_best_of=has_rm),
        "subsets": _subsets(problems, by_problem, ks, config, votes, has_rm),
        "errors": dict(errors),
        "problems_with_errors": sorted({s.problem_id for s in samples if s.error}),
        "truncated_fraction": (
            float(np.mean([s.finish_reason == "length" for s in samples]))
            if any(s.finish_reason for s in samples)
            else None
        ),
        "config": asdict(config),
        **({"tallies": tallies, "tally_lines": tally_lines} if tallies else {}),
        **(extra or {}),
    }
    report = EvalReport(
        summary=summary,
        samples=samples,
        run_dir=str(run_dir) if run_dir else None,
        problems=problem_rows(problems, prompts),
    )
    if run_dir is not None:
        write_run(report, Path(run_dir))
    return report


def _subsets(
    problems: Sequence[Problem],
    by_problem: dict[str, list[Sample]],
    ks: list[int],
    config: EvalConfig,
    votes: Grouping | None,
    has_rm: bool,
) -> dict[str, dict[str, Any]]:
    """The metrics of each ``KEY=VALUE`` subset of the problems' metadata (level, subject, ...)."""
    problem_meta = {p.id: p.metadata for p in problems}
    subsets: dict[str, dict[str, Any]] = {}
    for key in sorted({k for p in problems for k in p.metadata}):
        values = sorted({str(problem_meta[p][key]) for p in by_problem if key in problem_meta[p]})
        for value in values:
            members = {p: s for p, s in by_problem.items() if str(problem_meta[p].get(key)) == value}
            subsets[f"{key}={value}"] = {
                "num_problems": len(members),
                "metrics": compute_metrics(members, ks, config, votes=votes, with_best_of=has_rm),
            }
    return subsets
