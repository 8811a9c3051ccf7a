"""Scoring an evaluation's completions: each one a :class:`Sample` with its verifier reward, correctness,
extracted answer (maj@k's vote) and reward-model score (best-of-n)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Imported for its registrations, not for a name: the kinds of source name defined on the reward-model floor
# (``rubric``, ``judge``), which a benchmark's ``--verifier`` may name. Importing it imports no torch.
import rewardlab.rewardmodels.sources  # noqa: F401
from rewardlab.eval.benchmarks import Benchmark, Problem
from rewardlab.eval.config import EvalConfig
from rewardlab.scoring import score_records
from rewardlab.types import Record, Result, as_reward, details_answer

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
    results = _verdicts(bench, records, config)
    raw_rewards = [result.reward for result in results]
    if config.shape and results:
        # lazy: a tensor transform pulls in torch (row-level ones, such as repetition_penalty, do not)
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


def _verdicts(bench: Benchmark, records: list[Record], config: EvalConfig) -> list[Result]:
    """The benchmark verifier's results for ``records`` (none to score: no pool started)."""
    if not records:
        return []
    return score_records(
        records,
        bench.verifier,
        workers=config.workers,
        timeout=config.timeout,
        config=dict(bench.verifier_config) or None,
        progress=config.progress,
    )
