"""The RL step's rollout stage: sampling parameters, generation (completions, or whole episodes with an
environment), scoring through the reward pipeline, DAPO's dynamic sampling, and the greedy evaluation.

A :class:`Sampler` is given what it reads (config, tokenizer, the policy, backend, environment, reward
pipeline, prompt source, forward passes); the step it samples for is an argument, since the asynchronous
rollout thread samples ahead of the trainer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

import torch

from rewardlab import core_algos as ca
from rewardlab.envs import run_episodes
from rewardlab.generation import Generation, OnFinished, SamplingParams, generate_reporting
from rewardlab.generation.base import FinishedReporter
from rewardlab.rl.batch import Rollout, build_tensors
from rewardlab.rl.config import RLConfig
from rewardlab.rl.curriculum import GroupOutcome, cut_solution, hinted_prompt
from rewardlab.rl.forward import ForwardPasses
from rewardlab.rl.prompts import RESPONSE_PREFIX, PromptSource, prompt_text, with_budget
from rewardlab.rl.rewards import RewardBatch, RewardPipeline, RewardSources
from rewardlab.rl.tree import grow_trees
from rewardlab.training import parallel
from rewardlab.types import Record

__all__ = ["HINT_FRACTION", "Sampler"]

HINT_FRACTION = "hint_fraction"
"""Metadata key of the share of the solution a guided hint gave (``rollouts.jsonl`` shows it)."""


class Sampler:
    """Generates and scores the rollouts of a step; ``backend`` is the run's rollout backend (a call may
    pass another, as the rollout thread does with its copy of the policy)."""

    def __init__(
        self,
        cfg: RLConfig,
        *,
        tokenizer: Any,
        policy: Any,
        backend: Any,
        env: Any | None,
        reward_pipeline: RewardPipeline,
        prompts: PromptSource,
        passes: ForwardPasses,
        rank: int,
    ) -> None:
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.policy = policy
        self.backend = backend
        self.env = env
        self.reward_pipeline = reward_pipeline
        self.prompts = prompts
        self.passes = passes
        self.rank = rank
        self.score_lock = threading.Lock()  # the rollout thread and evaluation share the scoring pools
        self.scoring_context: tuple[dict[str, Generation], Any] = ({}, None)
        """The generations being scored by id, and the backend that sampled them (self-certainty reads it)."""

    def prompt_text(self, record: Record) -> str:
        return prompt_text(self.cfg, self.tokenizer, record)

    def sampling_params(self, round_: int, step: int) -> SamplingParams:
        """Step ``step``'s sampling of refill round ``round_``, seeded by both and the rank."""
        rc = self.cfg.rollout
        seed = (self.cfg.train.seed * 1_000_003 + step * 1_009 + round_ * 17 + self.rank) % (2**31)
        return SamplingParams(
            n=rc.n,
            temperature=rc.temperature,
            top_p=rc.top_p,
            top_k=rc.top_k,
            max_new_tokens=rc.max_new_tokens,
            stop=list(rc.stop),
            seed=seed,
            # The rollout's own log-probs are only read by IS correction or when old log-probs are not
            # recomputed; otherwise the trainer's forward pass provides them and the sampler skips the work.
            logprobs=self.cfg.algorithm.rollout_is != "none" or not self.cfg.algorithm.recompute_old_logprobs,
        )

    def generate(
        self,
        records: list[Record],
        params: SamplingParams,
        backend: Any | None = None,
        *,
        tree: bool = False,
        on_finished: OnFinished | None = None,
    ) -> list[list[Generation]]:
        """The backend's samples of each record's prompt: completions, with ``tree`` the prompt's tree
        (``rollout.tree``, :mod:`rewardlab.rl.tree`), or with an environment whole episodes
        (``rewardlab.envs``). A backend that generates with the policy itself gets it whole under FSDP
        (gathered once, no collective per forward pass: the ranks decode different lengths).
        ``on_finished`` hears of each sample (episode) as it ends; a tree's, once the trees are grown."""
        prompts = [self.prompt_text(r) for r in records]
        backend = backend or self.backend
        own = getattr(backend, "model", None) is self.policy
        with parallel.gathered(self.policy) if own else contextlib.nullcontext():
            if self.env is None and tree:
                return FinishedReporter(on_finished).rest(self._trees(backend, prompts, params))
            if self.env is None:
                return generate_reporting(backend, prompts, params, on_finished)
            return run_episodes(
                backend,
                self.env,
                records,
                prompts,
                params,
                self.tokenizer,
                self.cfg.env,
                chat=self.cfg.model.chat_template,
                on_finished=on_finished,
            )  # type: ignore[return-value]

    def _trees(self, backend: Any, prompts: list[str], params: SamplingParams) -> list[list[Generation]]:
        """Each prompt's tree (``rollout.tree``): a branch ends only when the whole tree is grown."""
        return grow_trees(
            backend,
            prompts,
            params,
            self.cfg.rollout.tree,
            decode=lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True),
            entropies=lambda roots: self._entropies(roots, backend),
        )

    def _entropies(self, gens: list[Generation], backend: Any) -> torch.Tensor:
        """The per-token entropies of ``gens`` under the model that sampled them (the backend's own model,
        the rollout thread's copy under asynchronous rollouts; otherwise the policy, which a vLLM engine
        mirrors)."""
        model = getattr(backend, "model", None) or self.policy
        return self.passes.no_grad_entropies(model, build_tensors(gens, self.tokenizer.pad_token_id))

    def rollout(
        self,
        prompts: list[Record],
        round_: int,
        timings: dict[str, float],
        *,
        step: int,
        backend: Any | None = None,
    ) -> Rollout:
        """Generates ``rollout.n`` samples of each prompt (with ``backend``, the run's by default) and scores
        them; ``step`` seeds the sampling and the L1 budgets."""
        prompts = [with_budget(self.cfg, p, step) for p in prompts]
        rollout = self._sample_and_score(prompts, self.sampling_params(round_, step), backend, timings)
        curriculum = self.prompts.curriculum
        if curriculum is not None and curriculum.hint_fractions:
            rollout, prompts = self._with_hints(rollout, prompts, round_, step, backend, timings)
        t0 = time.perf_counter()
        self._observe(prompts, rollout)
        timings["score"] += time.perf_counter() - t0
        return rollout

    def _sample_and_score(
        self, prompts: list[Record], params: SamplingParams, backend: Any | None, timings: dict[str, float]
    ) -> Rollout:
        """Generation, then the reward pipeline (rewards streamed while generation runs when configured)."""
        t0 = time.perf_counter()
        backend = backend or self.backend
        tree = self.cfg.rollout.tree.roots > 0
        # Rewards streamed: each sample goes to the row-wise reward sources as it ends, so that their time
        # hides behind the rest of the decoding (rl/rewards.py, RewardStream).
        stream = (
            self.reward_pipeline.stream(lambda i, j, g: sample_record(prompts[i], i, j, g))
            if self.cfg.rollout.stream_rewards
            else None
        )
        groups = self.generate(prompts, params, backend, tree=tree, on_finished=stream)
        timings["generate"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        gens = [g for group in groups for g in group]
        records = [
            sample_record(rec, gi, j, g)
            for gi, (rec, group) in enumerate(zip(prompts, groups, strict=True))
            for j, g in enumerate(group)
        ]
        submitted = stream.submitted(groups) if stream is not None else None
        with self.score_lock:
            self.scoring_context = ({r.id: g for r, g in zip(records, gens, strict=True)}, backend)
            reward = self.reward_pipeline.score(records, gens, submitted)
        timings["score"] += time.perf_counter() - t0
        return Rollout(gens, reward)

    def _with_hints(
        self,
        rollout: Rollout,
        prompts: list[Record],
        round_: int,
        step: int,
        backend: Any | None,
        timings: dict[str, float],
    ) -> tuple[Rollout, list[Record]]:
        """GHPO's cascade (``curriculum: guided_hints``): each group with no correct sample is sampled again
        with the next hint share of its solution, replacing the group, until one is correct or the shares run
        out. Returns the rollout and its prompts, hinted groups last (the order groups train in is free)."""
        curriculum, n = self.prompts.curriculum, self.cfg.rollout.n
        done_parts, done_prompts, discarded = [], [], list(rollout.discarded)
        for level, fraction in enumerate(curriculum.hint_fractions):
            correct = rollout.reward.scored.correct
            unsolved = [g for g in range(len(prompts)) if not any(correct[g * n : (g + 1) * n])]
            if not unsolved:
                break
            solved = sorted(set(range(len(prompts))) - set(unsolved))
            done_parts.append(rollout.select_groups(torch.tensor(solved, dtype=torch.long), n))
            done_prompts += [prompts[g] for g in solved]
            discarded += [rollout.gens[g * n + j] for g in unsolved for j in range(n)]
            prompts = [self._hinted(prompts[g], fraction) for g in unsolved]
            params = self.sampling_params(round_ + 1000 * (level + 1), step)  # a fresh seed per hint level
            rollout = self._sample_and_score(prompts, params, backend, timings)
            curriculum.count_hint_samples(len(rollout.gens))
        final = Rollout.concat([*done_parts, rollout])
        final.discarded = discarded
        return final, done_prompts + prompts

    def _hinted(self, record: Record, fraction: float) -> Record:
        """``record`` with the first ``fraction`` of its solution as a hint, in the prompt (GHPO) or as the
        start of the response."""
        cc = self.cfg.algorithm.curriculum
        hint = cut_solution(str(record.metadata[cc.solution_field]), fraction)
        metadata = {**record.metadata, HINT_FRACTION: fraction}
        if cc.hint_style == "prefix":
            return dataclasses.replace(record, metadata={**metadata, RESPONSE_PREFIX: hint})
        return dataclasses.replace(record, prompt=hinted_prompt(record.prompt, hint), metadata=metadata)

    def _observe(self, prompts: list[Record], rollout: Rollout) -> None:
        """The prompt filter hears of this rank's groups; the curriculum of every rank's."""
        rewards, correct = self._group_outcomes(rollout.reward, len(prompts))
        if self.prompts.filter is not None:
            self.prompts.filter.observe([str(p.id) for p in prompts], rewards, correct)
        if self.prompts.curriculum is not None:
            outcomes = [
                GroupOutcome(
                    prompt_id=str(p.id),
                    rewards=r,
                    correct=c,
                    difficulty=p.metadata.get("difficulty"),
                    source=p.metadata.get("source"),
                    hint_fraction=p.metadata.get(HINT_FRACTION, 0.0),
                )
                for p, r, c in zip(prompts, rewards, correct, strict=True)
            ]
            self.prompts.curriculum.observe(parallel.gather_objects(outcomes))

    def _group_outcomes(self, reward: RewardBatch, groups: int) -> tuple[list[list[float]], list[list[bool]]]:
        """Each group's shaped rewards and verdicts, for the prompt filter's estimates."""
        n = self.cfg.rollout.n
        values, correct = reward.rewards.tolist(), reward.scored.correct
        return (
            [values[g * n : (g + 1) * n] for g in range(groups)],
            [correct[g * n : (g + 1) * n] for g in range(groups)],
        )

    def dynamic_sampling(
        self, rollout: Rollout, step: int, timings: dict[str, float], metrics: dict[str, Any]
    ) -> tuple[Rollout | None, list[Rollout]]:
        """DAPO's dynamic sampling: keep the groups whose rewards differ, refill from new prompts (at most
        ``max_refill_rounds`` more rollouts); returns the training rollout (``None``: nothing kept) and every
        rollout generated. Under data parallelism the ranks refill in lockstep (until every rank has enough)
        and train on the same number of groups, the fewest any rank kept: unequal batches would run unequal
        numbers of collectives (FSDP's gathers, DDP's reductions per minibatch) and hang."""
        ac, n, wanted = self.cfg.algorithm, self.cfg.rollout.n, self.cfg.train.prompts_per_step
        device = self.passes.device
        all_parts, kept_parts, kept = [rollout], [], 0
        for round_ in range(ac.max_refill_rounds + 1):
            part = (
                rollout
                if round_ == 0
                else self.rollout(self.prompts.draw(wanted), round_, timings, step=step)
            )
            if round_ > 0:
                all_parts.append(part)
            groups = ca.dynamic_sampling_keep(part.rewards, n, part.valid).nonzero().flatten()
            if len(groups):
                kept_parts.append(part.select_groups(groups, n))
                kept += len(groups)
            if parallel.all_ranks_min(kept, device) >= wanted:
                break
        generated = sum(len(p.gens) for p in all_parts) // n
        common = parallel.all_ranks_min(min(kept, wanted), device)
        metrics["dynamic_sampling/rounds"] = len(all_parts)
        metrics["dynamic_sampling/kept_groups"] = common
        metrics["dynamic_sampling/kept_frac"] = kept / max(generated, 1)
        if not common:
            return None, all_parts
        train_rollout = Rollout.concat(kept_parts)
        if kept > common:
            train_rollout = train_rollout.select_groups(torch.arange(common), n)
        return train_rollout, all_parts

    def self_certainty(self, records: Sequence[Record]) -> list[float]:
        """The ``self_certainty`` source's scores: a forward pass, without gradient, of the model that sampled
        ``records`` (the rollout thread's copy under asynchronous rollouts), over their completions."""
        by_id, backend = self.scoring_context
        gens = [by_id[r.id] for r in records]
        model = getattr(backend, "model", None) or self.policy
        return self.passes.self_certainty(model, build_tensors(gens, self.tokenizer.pad_token_id))

    def evaluate(self, records: Sequence[Record], step: int) -> dict[str, Any]:
        """Greedy pass@1 on held-out prompts with the first reward source's verdict; a completion cut at
        ``max_new_tokens`` never counts as solved (``eval/truncated`` is their share)."""
        records = list(records)
        if not records:
            return {}
        rc = self.cfg.rollout
        records = [with_budget(self.cfg, r, step, largest=True) for r in records]
        groups = self.generate(
            records,
            SamplingParams(n=1, temperature=0.0, max_new_tokens=rc.max_new_tokens, stop=list(rc.stop)),
        )
        scored_records = [
            Record(id=r.id, prompt=r.prompt, completion=g[0].text, reference=r.reference, verifier=r.verifier)
            for r, g in zip(records, groups, strict=True)
        ]
        first = RewardSources([self.reward_pipeline.sources.sources[0]])
        with self.score_lock:
            scored = first.score(scored_records)
        finished = [not g[0].truncated for g in groups]
        solved = [c and f for c, f in zip(scored.correct, finished, strict=True)]
        return {
            "eval/pass@1": sum(solved) / len(records),
            "eval/truncated": 1 - sum(finished) / len(records),
            "eval/num": len(records),
            **pass_at_1_by_source(records, solved),
        }


def pass_at_1_by_source(records: Sequence[Record], solved: Sequence[bool]) -> dict[str, float]:
    """``eval/pass@1/<source>`` for each source of the held-out prompts (none when they name no source)."""
    by_source: dict[str, list[bool]] = {}
    for record, ok in zip(records, solved, strict=True):
        if record.metadata.get("source") is not None:
            by_source.setdefault(str(record.metadata["source"]), []).append(ok)
    return {f"eval/pass@1/{name}": sum(oks) / len(oks) for name, oks in sorted(by_source.items())}


def sample_record(rec: Record, group: int, j: int, gen: Generation) -> Record:
    """The record the reward sources score for sample ``j`` of prompt ``rec`` (group ``group`` of the step)."""
    return Record(
        id=f"{rec.id}#{j}",
        prompt=rec.prompt,
        # a rollout that started from a prefix (reverse curriculum, guided hint) is scored whole
        completion=rec.metadata.get(RESPONSE_PREFIX, "") + gen.text,
        reference=rec.reference,
        verifier=rec.verifier,
        metadata={**rec.metadata, "group": group},
    )
