"""Evaluation runs: completions (sampled here or given) -> scores -> metrics -> files in a run folder.

Two entry points:

* :func:`evaluate_completions` scores completions made elsewhere (the offline path) and computes metrics.
* :func:`evaluate_model` samples ``n`` completions per problem with a rollout backend (transformers on
  CPU, vLLM on GPU), resumably, then does the same (:func:`evaluate_backend` with a backend already made).
  With an environment (``rewardlab.envs``) each sample is a multi-turn episode whose answer is scored.

A run folder holds ``generations.jsonl`` (model runs only; appended problem by problem, so an interrupted
run resumes without re-generating), ``samples.jsonl`` (one scored row per sample), ``problems.jsonl`` (one
row per problem, in order: ``problem_id``, ``prompt``, ``reference``, ``subset`` and ``metadata`` when the
problem has them; the prompt is the text the model was sent (template, few-shot examples, chat template)
in model runs, the problem's own prompt for completions made elsewhere), ``summary.json``, ``report.md`` and
``pass_at_k.png``. With an environment, ``generations.jsonl`` also keeps each episode's
transcript and counters, and the summary an ``environment`` section (``rewardlab.envs.episode_metrics``).
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rewardlab.envs import EnvConfig, episode_metrics, run_episodes
from rewardlab.eval import metrics as M
from rewardlab.eval.benchmarks import Benchmark, Problem, render_prompt
from rewardlab.eval.report import plot_pass_at_k, render_markdown
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.hub import load_tokenizer
from rewardlab.progress import progress_bar
from rewardlab.scoring import score_records
from rewardlab.types import Record, Result, as_reward, details_answer, error_kind, jsonable
from rewardlab.verifiers import get_verifier

logger = logging.getLogger(__name__)


@dataclass
class EvalConfig:
    """Settings of an evaluation.

    Attributes:
        ks: The k of pass@k / maj@k / best-of-k; ``None`` means 1, 2, 4, ... up to n, and n.
        workers: Scoring worker processes.
        timeout: Per-completion scoring timeout in seconds.
        correct_threshold: A sample counts as correct when its reward is at least this (1.0: all tests pass,
            all instructions followed).
        bootstrap: Bootstrap resamples for the 95% intervals (0 disables them).
        seed: Seed of the bootstrap (maj@k is exact: no sampling).
        shape: Reward-shaping steps (``rewardlab.rewardmodels.shaping`` specs such as ``"clip:0,1"`` or
            ``"length_penalty:weight=0.1"``) applied to the rewards before ``mean_reward``; correctness
            (pass@k, maj@k, best-of-k) always uses the verifier's own reward.
        score_truncated: Score completions that hit the generation limit (``finish_reason == "length"``)
            like any other. Off by default: such a sample is wrong (reward 0, error ``truncated``, no vote
            in maj@k), because text cut off after a box still parses and would be counted as a solve.
        progress: Progress bars of generation and scoring (``None``: only when stderr is a terminal).
    """

    ks: list[int] | None = None
    workers: int = 2
    timeout: float = 10.0
    correct_threshold: float = 1.0
    bootstrap: int = 1000
    seed: int = 0
    shape: list[str] | None = None
    score_truncated: bool = False
    progress: bool | None = None


TRUNCATED_ERROR = "truncated: the completion hit the generation limit (finish_reason=length)"
MISSING_REWARD_ERROR = "no reward: the verifier returned none for this sample"


@dataclass
class Sample:
    """One scored completion."""

    problem_id: str
    sample_index: int
    completion: str
    reward: float = 0.0
    correct: bool = False
    error: str | None = None
    answer: str | None = None
    rm_score: float | None = None
    finish_reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def default_ks(n: int) -> list[int]:
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    ks.append(n)
    return ks


# ----------------------------------------------------------------------------------------------- scoring


def score_samples(
    bench: Benchmark,
    problems: Sequence[Problem],
    completions: dict[str, list[str]],
    config: EvalConfig,
    *,
    reward_model: Any = None,
    rm_scores: dict[str, list[float | None]] | None = None,
    finish_reasons: dict[str, list[str | None]] | None = None,
    generation_errors: dict[str, str] | None = None,
) -> list[Sample]:
    """Scores every completion with the benchmark's verifier (and a reward model for best-of-n)."""

    by_id = {p.id: p for p in problems}
    records: list[Record] = []
    keys: list[tuple[str, int]] = []
    for pid, texts in completions.items():
        problem = by_id[pid]
        for index, text in enumerate(texts):
            records.append(problem_record(problem, text, f"{pid}#{index}"))
            keys.append((pid, index))
    results: list[Result] = (
        score_records(
            records,
            bench.verifier,
            workers=config.workers,
            timeout=config.timeout,
            config=dict(bench.verifier_config) or None,
            progress=config.progress,
        )
        if records
        else []
    )
    raw_rewards = [result.reward for result in results]
    if config.shape and results:
        # lazy: pulls in torch
        from rewardlab.rewardmodels.shaping import shape_results

        results = shape_results(records, results, config.shape)
    model_scores: list[Result | None] = [None] * len(records)
    if reward_model is not None and records:
        model_scores = list(reward_model.score_batch(records))
    samples = []
    generation_errors = generation_errors or {}
    for (pid, index), record, result, rm_result, raw in zip(
        keys, records, results, model_scores, raw_rewards, strict=True
    ):
        finish_reason = (finish_reasons or {}).get(pid, [None] * (index + 1))[index]
        error = generation_errors.get(pid) or result.error
        reward = as_reward(result.reward)
        if reward is None:  # a missing reward is no verdict: never a solve
            error, reward, raw = error or MISSING_REWARD_ERROR, 0.0, 0.0
        cut_off = finish_reason == "length" and not config.score_truncated
        if cut_off:
            error, reward, raw = error or TRUNCATED_ERROR, 0.0, 0.0
        rm_value = rm_result.reward if rm_result is not None and rm_result.error is None else None
        if rm_value is None and rm_scores and pid in rm_scores:
            rm_value = rm_scores[pid][index]
        samples.append(
            Sample(
                problem_id=pid,
                sample_index=index,
                completion=record.completion,
                reward=reward,
                correct=error is None and raw >= config.correct_threshold,
                error=error,
                answer=extracted_answer(result) if bench.answer_votes and not cut_off else None,
                rm_score=rm_value,
                finish_reason=finish_reason,
                details=result.details,
            )
        )
    return samples


def problem_record(problem: Problem, completion: str = "", id: str | None = None) -> Record:
    """A problem as a :class:`Record` (what verifiers score and environments start episodes from)."""
    return Record(
        id=problem.id if id is None else id,
        prompt=problem.prompt,
        completion=completion,
        reference=problem.reference,
        verifier=problem.verifier,
        metadata=dict(problem.metadata),
    )


def extracted_answer(result: Result) -> str | None:
    """The answer the verifier extracted from the completion (for majority voting), if it reports one."""
    return details_answer(result.details or {})


# ---------------------------------------------------------------------------------------------- metrics


def group_answers(answers: Sequence[str | None], equivalent: Any = None) -> list[int | None]:
    """Equivalence classes of extracted answers, ids in order of first appearance (deterministic).

    Answers are first keyed cheaply: plain numbers by value (rounded to 6 decimals, as the math verifier
    compares decimals), anything else by its normalised string. A new non-numeric key is then compared
    with the existing classes: pairs whose numeric values (when both evaluate to numbers) clearly differ
    are told apart at once, the rest by ``equivalent(a, b)`` (the math verifier's equivalence by
    default, cached per pair), so 100 samples cost a handful of symbolic checks.
    """
    # lazy: pulls in math_verify and sympy
    from rewardlab.verifiers.math import normalize_answer, parse_number

    equivalent = equivalent or math_equivalent
    representatives: list[tuple[str, complex | None]] = []
    class_of: dict[Any, int] = {}
    class_of_raw: dict[str, int] = {}
    out: list[int | None] = []
    for answer in answers:
        if answer is None:
            out.append(None)
            continue
        if answer in class_of_raw:
            out.append(class_of_raw[answer])
            continue
        normalized = normalize_answer(answer)
        number = parse_number(normalized)
        key: Any = ("number", round(number.value, 6)) if number is not None else ("text", normalized)
        if key not in class_of:
            match = None
            if number is None:
                value = _numeric_value(normalized)
                for cls, (rep, rep_value) in enumerate(representatives):
                    if _clearly_different(value, rep_value):
                        continue
                    if _cached_equivalent(equivalent, rep, normalized):
                        match = cls
                        break
            if match is None:
                match = len(representatives)
                value = complex(float(number.value)) if number is not None else _numeric_value(normalized)
                representatives.append((normalized, value))
            class_of[key] = match
        class_of_raw[answer] = class_of[key]
        out.append(class_of[key])
    return out


_PAIR_CACHE: dict[tuple[Any, str, str], bool] = {}
_VALUE_CACHE: dict[str, complex | None] = {}


def _cached_equivalent(equivalent: Any, a: str, b: str) -> bool:
    key = (equivalent, a, b)
    if key not in _PAIR_CACHE:
        if len(_PAIR_CACHE) > 100_000:
            _PAIR_CACHE.clear()
        _PAIR_CACHE[key] = bool(equivalent(a, b))
    return _PAIR_CACHE[key]


def _numeric_value(text: str) -> complex | None:
    """The value of a closed-form answer (``\\sqrt{2}``, ``2\\pi``) when it is a number, else None."""
    if text in _VALUE_CACHE:
        return _VALUE_CACHE[text]
    value = None
    try:
        import math_verify

        parsed = math_verify.parse(f"${text}$", parsing_timeout=None)
        if parsed and getattr(parsed[0], "is_number", False):
            value = complex(parsed[0].evalf())
    except Exception:
        value = None
    if len(_VALUE_CACHE) > 100_000:
        _VALUE_CACHE.clear()
    _VALUE_CACHE[text] = value
    return value


def _clearly_different(a: complex | None, b: complex | None) -> bool:
    if a is None or b is None:
        return False
    return abs(a - b) > 1e-4 * max(1.0, abs(a), abs(b))


def group_texts(answers: Sequence[str | None]) -> list[int | None]:
    """Classes of answers that are the same text, case and spacing aside (``answer_votes="exact"``: a
    multiple-choice letter, a short answer), ids in order of first appearance."""
    ids: dict[str, int] = {}
    return [None if a is None else ids.setdefault(" ".join(a.lower().split()), len(ids)) for a in answers]


def math_equivalent(a: str, b: str) -> bool:
    """Whether two extracted answers are the same mathematical object (the math verifier's equivalence)."""
    if a == b:
        return True
    result = _math_verifier().score(Record(completion=f"\\boxed{{{b}}}", reference=a))
    return result.error is None and result.reward >= 1.0


_MATH = None

_VOTES: dict[Any, Any] = {"math": group_answers, "exact": group_texts}
"""How each ``answer_votes`` kind groups answers (``with_maj=True``: math's)."""


def _math_verifier():
    global _MATH
    if _MATH is None:
        _MATH = get_verifier("math")
    return _MATH


def compute_metrics(
    samples_by_problem: dict[str, list[Sample]],
    ks: Sequence[int],
    config: EvalConfig,
    *,
    with_maj: bool | str | None,  # an ``answer_votes`` kind (True: math), falsy: no maj@k
    with_best_of: bool,
) -> dict[str, dict[str, float]]:
    """pass@k, maj@k, best-of-k and mean reward over problems, each with a bootstrap 95% interval and
    ``problems``, the number of problems it is averaged over (a k-metric covers the problems with at least
    k samples)."""
    pids = list(samples_by_problem)
    if not pids:
        return {}
    n = np.array([len(samples_by_problem[p]) for p in pids])
    c = np.array([sum(s.correct for s in samples_by_problem[p]) for p in pids])
    columns: list[str] = []
    blocks: list[np.ndarray] = []
    blocks.append(M.pass_at_k_matrix(n, c, ks))
    columns += [f"pass@{k}" for k in ks]
    if with_maj:
        classes, good = [], []
        for pid in pids:
            group = samples_by_problem[pid]
            cls = _VOTES.get(with_maj, group_answers)([s.answer for s in group])
            classes.append(cls)
            good.append({k for k, s in zip(cls, group, strict=True) if k is not None and s.correct})
        blocks.append(M.maj_at_k_matrix(classes, good, ks))
        columns += [f"maj@{k}" for k in ks]
    if with_best_of:
        scores = [np.array([_nan(s.rm_score) for s in samples_by_problem[p]]) for p in pids]
        correct = [np.array([s.correct for s in samples_by_problem[p]]) for p in pids]
        scores = [np.where(np.isnan(s), -np.inf, s) for s in scores]
        blocks.append(M.best_of_k_matrix(scores, correct, ks))
        columns += [f"best_of_{k}" for k in ks]
    mean_reward = np.array([np.mean([s.reward for s in samples_by_problem[p]]) for p in pids])[:, None]
    blocks.append(mean_reward)
    columns.append("mean_reward")
    f1 = _detail_means(samples_by_problem, pids, "f1")
    if f1 is not None:
        blocks.append(f1)
        columns.append("mean_f1")
    matrix = np.concatenate(blocks, axis=1)
    covered = (~np.isnan(matrix)).sum(axis=0)
    if config.bootstrap > 0:
        intervals = M.bootstrap_means(matrix, resamples=config.bootstrap, seed=config.seed)
        means = [iv.to_dict() for iv in intervals]
    else:
        means = [
            {"mean": float(np.nanmean(column)) if covered[j] else float("nan")}
            for j, column in enumerate(matrix.T)
        ]
    return {
        name: {**m, "problems": int(covered[j])}
        for j, (name, m) in enumerate(zip(columns, means, strict=True))
    }


def _detail_means(
    samples_by_problem: dict[str, list[Sample]], pids: list[str], key: str
) -> np.ndarray | None:
    """Per-problem means of a numeric ``details[key]`` (the ``qa`` verifier's token F1, SQuAD's second
    metric beside exact match), as a column; a sample without it (an error) counts 0. ``None`` when no
    sample has it."""
    values = [[(s.details or {}).get(key) for s in samples_by_problem[p]] for p in pids]
    if not any(isinstance(v, (int, float)) and not isinstance(v, bool) for row in values for v in row):
        return None
    return np.array(
        [np.mean([float(v) if isinstance(v, (int, float)) else 0.0 for v in row]) for row in values]
    )[:, None]


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


# ------------------------------------------------------------------------------------------- the runs


@dataclass
class EvalReport:
    """What an evaluation produced (also written to the run folder)."""

    summary: dict[str, Any]
    samples: list[Sample]
    run_dir: str | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)
    """``problems.jsonl``'s rows (:func:`problem_rows`)."""


def problem_rows(problems: Sequence[Problem], prompts: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per problem for ``problems.jsonl`` (so a viewer can show what ``samples.jsonl``'s
    ``problem_id`` was asked): ``prompts`` holds the text sent to the model, else the problem's own prompt."""
    rows = []
    for p in problems:
        row: dict[str, Any] = {
            "problem_id": p.id,
            "prompt": (prompts or {}).get(p.id, p.prompt),
            "reference": p.reference,
        }
        if "subset" in p.metadata:
            row["subset"] = p.metadata["subset"]
        if p.metadata:
            row["metadata"] = p.metadata
        rows.append(row)
    return rows


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
    by_problem: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        by_problem[sample.problem_id].append(sample)
    sizes = [len(v) for v in by_problem.values()]
    ks, dropped, warning = coverage(config.ks, sizes)
    if warning:
        logger.warning(warning)
    overall = compute_metrics(by_problem, ks, config, with_maj=bench.answer_votes, with_best_of=has_rm)
    problem_meta = {p.id: p.metadata for p in problems}
    subsets: dict[str, dict[str, Any]] = {}
    for key in sorted({k for p in problems for k in p.metadata}):
        values = sorted({str(problem_meta[p][key]) for p in by_problem if key in problem_meta[p]})
        for value in values:
            members = {p: s for p, s in by_problem.items() if str(problem_meta[p].get(key)) == value}
            subsets[f"{key}={value}"] = {
                "num_problems": len(members),
                "metrics": compute_metrics(
                    members, ks, config, with_maj=bench.answer_votes, with_best_of=has_rm
                ),
            }
    errors = Counter(error_kind(s.error) for s in samples if s.error)
    summary = {
        "benchmark": bench.name,
        "verifier": bench.verifier,
        "num_problems": len(by_problem),
        "num_samples": len(samples),
        "samples_per_problem": samples_per_problem(sizes),
        "sample_counts": {str(n): count for n, count in sorted(Counter(sizes).items())},
        "ks": ks,
        "dropped_ks": dropped,
        "metrics": overall,
        "subsets": subsets,
        "errors": dict(errors),
        "problems_with_errors": sorted({s.problem_id for s in samples if s.error}),
        "truncated_fraction": (
            float(np.mean([s.finish_reason == "length" for s in samples]))
            if any(s.finish_reason for s in samples)
            else None
        ),
        "config": asdict(config),
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


def samples_per_problem(sizes: Sequence[int]) -> int | str:
    """The samples per problem: the number when all problems have the same, else "MIN-MAX"."""
    if not sizes:
        return 0
    low, high = min(sizes), max(sizes)
    return low if low == high else f"{low}-{high}"


def coverage(
    requested: Sequence[int] | None, sizes: Sequence[int]
) -> tuple[list[int], list[int], str | None]:
    """The k to report for problems with ``sizes`` samples (``requested``, or 1, 2, 4, ... up to the
    largest n, and n), the requested k dropped because they exceed every problem's n, and a one-line
    warning (None when there is nothing to say): problems with different n, k that only some problems
    reach (a k-metric is averaged over the problems with at least k samples), k dropped."""
    n_min, n_max = min(sizes, default=0), max(sizes, default=0)
    limit = max(n_max, 1)
    wanted = sorted({k for k in (requested or default_ks(limit)) if k >= 1})
    ks = [k for k in wanted if k <= limit]
    dropped = [k for k in wanted if k > limit]
    if not sizes:
        return ks, dropped, None
    notes = []
    if n_min != n_max:
        notes.append(f"problems have different numbers of samples ({n_min}-{n_max} per problem)")
    partial = [f"k={k} covers {sum(n >= k for n in sizes)} of {len(sizes)}" for k in ks if k > n_min]
    if partial:
        notes.append("a k-metric averages over the problems with at least k samples: " + ", ".join(partial))
    if dropped:
        listed = ", ".join(map(str, dropped))
        notes.append(f"k={listed} exceeds every problem's samples (at most {n_max}) and is dropped")
    return ks, dropped, ("eval: " + "; ".join(notes)) if notes else None


def write_run(report: EvalReport, run_dir: Path) -> None:
    """Writes the run folder's files (``samples.jsonl``, ``problems.jsonl``, summary, report, plot)."""

    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "samples.jsonl").open("w") as handle:
        for sample in report.samples:
            handle.write(json.dumps(jsonable(asdict(sample))) + "\n")
    with (run_dir / "problems.jsonl").open("w") as handle:
        handle.writelines(json.dumps(jsonable(row)) + "\n" for row in report.problems)
    (run_dir / "summary.json").write_text(json.dumps(jsonable(report.summary), indent=2) + "\n")
    (run_dir / "report.md").write_text(render_markdown(report.summary))
    plot_pass_at_k(report.summary, run_dir / "pass_at_k.png")


# ---------------------------------------------------------------------------------------- model runs


@dataclass
class GenerationConfig:
    """Sampling for model evaluation.

    Attributes:
        n: Samples per problem.
        temperature: Sampling temperature (0 = greedy; then n should be 1).
        top_p: Nucleus sampling.
        max_new_tokens: Longest completion; longer ones are cut (finish reason "length").
        batch_size: Problems sent to the backend at once.
        fewshot: Worked examples prepended to each prompt (taken from the benchmark's own rows with a
            worked answer, never the problem itself).
        use_chat_template: Apply the tokenizer's chat template when it has one.
        seed: Sampling seed.
    """

    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    batch_size: int = 8
    fewshot: int = 0
    use_chat_template: bool = True
    seed: int = 0


def build_prompts(
    bench: Benchmark, problems: Sequence[Problem], tokenizer: Any, gen: GenerationConfig, fewshot_pool=()
) -> dict[str, str]:
    """The text sent to the model for each problem: template, few-shot examples, chat template."""
    shots = list(fewshot_pool)[: gen.fewshot] if gen.fewshot else []
    prompts = {}
    for problem in problems:
        body = render_prompt(bench, problem)
        examples = [(render_prompt(bench, q), a) for q, a in shots if q.id != problem.id]
        if gen.use_chat_template and getattr(tokenizer, "chat_template", None):
            messages = []
            for question, answer in examples:
                messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            messages.append({"role": "user", "content": body})
            prompts[problem.id] = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        else:
            prefix = "".join(f"{question}\n{answer}\n\n" for question, answer in examples)
            prompts[problem.id] = prefix + body
    return prompts


@dataclass
class EpisodeSetup:
    """Sampling episodes instead of single completions: each sample of a problem is an episode of ``env``
    (a :class:`rewardlab.envs.Environment`) started from the problem's record, run by
    :func:`rewardlab.envs.run_episodes` with ``config`` (an :class:`rewardlab.envs.EnvConfig`); the episode's
    answer is the completion scored. ``chat``: the prompts use the chat template."""

    env: Any
    config: Any
    tokenizer: Any
    records: dict[str, Record]
    chat: bool = False


class Generated(NamedTuple):
    """Per problem: completions, finish reasons, the generation error (problems that failed), and with an
    environment what each episode did (:func:`episode_info`; ``None`` for a failed batch)."""

    completions: dict[str, list[str]]
    finish_reasons: dict[str, list[str | None]]
    errors: dict[str, str]
    episodes: dict[str, list[dict[str, Any]] | None]


def episode_info(episode: Any) -> dict[str, Any]:
    """What ``generations.jsonl`` keeps of an episode: its transcript and its counters
    (:meth:`rewardlab.envs.Episode.summary`, enough to compute :func:`rewardlab.envs.episode_metrics` again
    on resume)."""
    summary = episode.summary()
    return {"transcript": episode.transcript, **summary, "tool_seconds": round(summary["tool_seconds"], 6)}


def environment_summary(setup: EpisodeSetup, generated: Generated) -> dict[str, Any]:
    """The summary's ``environment`` section: the env settings and the ``env/*`` metrics of
    :func:`rewardlab.envs.episode_metrics` over every episode of the run (prefix dropped)."""

    episodes = [info for infos in generated.episodes.values() for info in infos or []]
    metrics = {name.removeprefix("env/"): value for name, value in episode_metrics(episodes).items()}
    return {
        "name": setup.config.name,
        "config": asdict(setup.config),
        "num_episodes": len(episodes),
        "metrics": metrics,
    }


def _sample(
    backend: Any, pids: Sequence[str], prompts: dict[str, str], params: Any, episodes: EpisodeSetup | None
) -> list[dict[str, Any]]:
    """One batch's ``generations.jsonl`` rows: each problem's samples, single completions or (with
    ``episodes``) episodes, whose answers are the completions and whose :func:`episode_info` is kept."""
    texts = [prompts[pid] for pid in pids]
    if episodes is None:
        groups = backend.generate(texts, params)
    else:
        groups = run_episodes(
            backend,
            episodes.env,
            [episodes.records[pid] for pid in pids],
            texts,
            params,
            episodes.tokenizer,
            episodes.config,
            chat=episodes.chat,
        )
    rows = []
    for pid, samples in zip(pids, groups, strict=True):
        row: dict[str, Any] = {
            "problem_id": pid,
            "completions": [g.text for g in samples],
            "finish_reasons": [g.finish_reason for g in samples],
            "error": None,
        }
        if episodes is not None:
            row["episodes"] = [episode_info(g) for g in samples]
        rows.append(row)
    return rows


def generate(
    backend: Any,
    prompts: dict[str, str],
    gen: GenerationConfig,
    generations_path: Path,
    *,
    resume: bool = True,
    episodes: EpisodeSetup | None = None,
    progress: bool | None = None,
) -> Generated:
    """Samples ``gen.n`` completions per prompt (with ``episodes``: ``gen.n`` episodes, ``max_new_tokens``
    per turn), appending each problem's to ``generations_path`` as it finishes; problems already in the
    file are not generated again (unless they were made with an environment and this run has none, or the
    reverse). A batch that fails is written as errors for its problems and the run goes on.
    ``progress``: a bar of problems done (``None``: only on a terminal)."""

    done: dict[str, dict[str, Any]] = {}
    if resume and generations_path.exists():
        for line in generations_path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by the interruption: generated again
            if ("episodes" in row) == (episodes is not None):
                done[row["problem_id"]] = row
    elif generations_path.exists():
        generations_path.unlink()
    todo = [pid for pid in prompts if pid not in done]
    params = SamplingParams(
        n=gen.n,
        temperature=gen.temperature,
        top_p=gen.top_p,
        max_new_tokens=gen.max_new_tokens,
        seed=gen.seed,
        logprobs=False,
    )
    generations_path.parent.mkdir(parents=True, exist_ok=True)
    bar = progress_bar(len(todo), "generate", unit="problem", enabled=progress)
    with generations_path.open("a") as handle, bar:
        for start in range(0, len(todo), gen.batch_size):
            batch = todo[start : start + gen.batch_size]
            try:
                rows = _sample(backend, batch, prompts, params, episodes)
            except Exception as exc:  # a failed batch is recorded, not fatal
                logger.warning("generation failed for %d problems: %s", len(batch), exc)
                rows = [
                    {
                        "problem_id": pid,
                        "completions": [""] * gen.n,
                        "finish_reasons": [None] * gen.n,
                        "error": f"generation failed: {type(exc).__name__}: {exc}",
                        **({"episodes": None} if episodes is not None else {}),
                    }
                    for pid in batch
                ]
            for row in rows:
                handle.write(json.dumps(row) + "\n")
                done[row["problem_id"]] = row
            handle.flush()
            bar.update(len(batch))
    completions = {pid: done[pid]["completions"] for pid in prompts}
    finish = {pid: done[pid].get("finish_reasons") or [None] * len(completions[pid]) for pid in prompts}
    errors = {pid: done[pid]["error"] for pid in prompts if done[pid].get("error")}
    infos = {pid: done[pid].get("episodes") for pid in prompts} if episodes is not None else {}
    return Generated(completions, finish, errors, infos)


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

    model_obj, tokenizer = _load_model(model, backend)
    engine = get_backend(backend, model_obj, tokenizer, **(backend_kwargs or {}))
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
    gen = gen or GenerationConfig()
    config = config or EvalConfig()
    run_dir = Path(run_dir)
    prompts = build_prompts(bench, problems, tokenizer, gen, fewshot_pool)
    setup = None
    if env is not None:
        setup = EpisodeSetup(
            env=env,
            config=env_config or EnvConfig(name=getattr(env, "name", "custom")),
            tokenizer=tokenizer,
            records={p.id: problem_record(p) for p in problems},
            chat=gen.use_chat_template and bool(getattr(tokenizer, "chat_template", None)),
        )
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


def _load_model(model: str, backend: str):
    tokenizer = load_tokenizer(model)
    if backend == "vllm":
        return model, tokenizer  # vLLM loads the weights itself
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model), tokenizer
