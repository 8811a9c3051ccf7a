"""Sampling an evaluation's completions: the prompts sent (template, few-shot examples, chat template), the
model and its rollout backend, and ``generations.jsonl`` (appended problem by problem, so an interrupted run
resumes without generating again). With an environment (``rewardlab.envs``) each sample is a multi-turn
episode whose answer is the completion, and the file keeps each episode's transcript and counters.

The heavy side of ``rewardlab eval`` (rollout backends, environments, model loading): :mod:`.runner`
imports it only for model runs, so scoring finished completions never loads it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rewardlab.envs import EnvConfig, episode_metrics, run_episodes
from rewardlab.eval.benchmarks import Benchmark, Problem, render_prompt
from rewardlab.eval.config import GenerationConfig
from rewardlab.eval.samples import problem_record
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.hub import load_tokenizer
from rewardlab.progress import progress_bar
from rewardlab.types import Record

logger = logging.getLogger(__name__)


def load_model(model: str, backend: str) -> tuple[Any, Any]:
    """The model (for vLLM its name: vLLM loads the weights itself) and tokenizer of ``model``."""
    tokenizer = load_tokenizer(model)
    if backend == "vllm":
        return model, tokenizer
    # lazy: transformers is heavy, and a vLLM run never needs its model classes
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model), tokenizer


def make_backend(model: str, backend: str, backend_kwargs: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The rollout backend ``backend`` over ``model`` (hub name or local path), and the tokenizer."""
    model_obj, tokenizer = load_model(model, backend)
    return get_backend(backend, model_obj, tokenizer, **(backend_kwargs or {})), tokenizer


def build_prompts(
    bench: Benchmark,
    problems: Sequence[Problem],
    tokenizer: Any,
    gen: GenerationConfig,
    fewshot_pool: Sequence[tuple[Problem, str]] = (),
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


def episode_setup(
    env: Any, env_config: Any, tokenizer: Any, problems: Sequence[Problem], gen: GenerationConfig
) -> EpisodeSetup | None:
    """The episodes of a run with environment ``env`` (``None``: single completions); ``env_config``
    defaults to an :class:`rewardlab.envs.EnvConfig` named after the environment."""
    if env is None:
        return None
    return EpisodeSetup(
        env=env,
        config=env_config or EnvConfig(name=getattr(env, "name", "custom")),
        tokenizer=tokenizer,
        records={p.id: problem_record(p) for p in problems},
        chat=gen.use_chat_template and bool(getattr(tokenizer, "chat_template", None)),
    )


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


def _failed_rows(pids: Sequence[str], n: int, exc: Exception, episodes: bool) -> list[dict[str, Any]]:
    """The rows of a batch whose generation raised: empty completions and the error, per problem."""
    return [
        {
            "problem_id": pid,
            "completions": [""] * n,
            "finish_reasons": [None] * n,
            "error": f"generation failed: {type(exc).__name__}: {exc}",
            **({"episodes": None} if episodes else {}),
        }
        for pid in pids
    ]


def _done_rows(generations_path: Path, resume: bool, episodes: bool) -> dict[str, dict[str, Any]]:
    """The rows already in ``generations_path`` made the same way (with or without episodes), by problem;
    without ``resume`` the file is removed."""
    done: dict[str, dict[str, Any]] = {}
    if not generations_path.exists():
        return done
    if not resume:
        generations_path.unlink()
        return done
    for line in generations_path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the interruption: generated again
        if ("episodes" in row) == episodes:
            done[row["problem_id"]] = row
    return done


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

    done = _done_rows(generations_path, resume, episodes is not None)
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
                rows = _failed_rows(batch, gen.n, exc, episodes is not None)
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
