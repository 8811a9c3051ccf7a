"""The RL loop's reward pipeline: score -> combine -> sample shaping -> step shaping -> token rewards.

One :class:`RewardPipeline` per run, built from the config, called twice per batch:

1. :meth:`RewardPipeline.score` (at rollout time): the reward sources score the completions and are
   combined by their weights (:class:`RewardSources`, one :class:`rewardlab.verifiers.combine.CombinedSource`;
   a ``None`` reward makes the sample invalid, an error is reward 0 and counted), then the sample shaping
   pipeline runs on one :class:`rewardlab.rewardmodels.shaping.ShapingBatch`: ``reward.shaping``, then
   ``reward.truncation`` (mask / penalize / none), then DAPO's soft overlong penalty
   (``reward.overlong_buffer``); invalid samples' rewards are 0. The result is a :class:`RewardBatch`.
2. :meth:`RewardPipeline.token_rewards` (at update time, when the padded response mask exists): the
   outcome reward on the last response token, plus, with a process scorer (``reward.process``), its step
   scores shaped (``reward.step_shaping``, ``reward.step_eta``) and placed on their step-end tokens
   (``success_weight``, ``step_weight``). An implicit PRM (``implicit_prm``, PRIME) is no step scorer: its
   token rewards come from its own forward passes over the update's batch (:attr:`RewardPipeline.implicit_prm`,
   called by the update stage), which the ``prime`` estimator keeps apart from the outcome here.

With ``rollout.stream_rewards`` (the default) the sources that score row by row, those behind a warm scoring
pool (verifiers, ``http:``, ``rm:``: the engine chunks their rows as it likes, so no row's reward can depend on
another's), take each sample the moment the backend reports it finished (:class:`RewardStream`, handed to
``generate(..., on_finished=...)``), through the pool's :class:`~rewardlab.scoring.ScoringStream`, while the
rest of the batch decodes; :meth:`RewardPipeline.score` then waits only for the rows still being scored. The
sources that read whole groups or the sampling model (``ttrl``, ``self_certainty``, ``py:`` functions and
reward functions given in code, which may read their batch-mates) score the whole batch after generation
ends, as does every stage after scoring (shaping, group statistics, process rewards). Rewards are the same
either way: only when each row is scored changes.

Every transform is a function of :mod:`rewardlab.rewardmodels.shaping` (or :mod:`rewardlab.rl.step_rewards`
for the token placement); this module only orders them. KL in the reward is not a reward transform: the
trainer adds it afterwards.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rewardlab import core_algos as ca
from rewardlab.registry import lazy
from rewardlab.rewardmodels.implicit_prm.config import DEFAULT_BETA
from rewardlab.rewardmodels.implicit_prm.model import ImplicitPRM
from rewardlab.rewardmodels.implicit_prm.online import CHECKPOINT_NAME as IMPLICIT_PRM
from rewardlab.rewardmodels.implicit_prm.online import OnlineImplicitPRM
from rewardlab.rewardmodels.prm import ProcessRewardModel
from rewardlab.rewardmodels.shaping import (
    ShapingBatch,
    ShapingPipeline,
    build_pipeline,
    build_shaping,
)
from rewardlab.rewardmodels.shaping.functional import success_plus_steps
from rewardlab.rl.config import RLConfig
from rewardlab.rl.config_checks import is_implicit_prm
from rewardlab.rl.sources import build_source, source_kind
from rewardlab.rl.step_rewards import CorrectLookingStepScorer, shaped_step_token_rewards
from rewardlab.scoring.pool import WarmPool
from rewardlab.scoring.summary import time_stats
from rewardlab.training import lora
from rewardlab.training.device import use_bf16
from rewardlab.types import Record, Result, error_kind, result_reward
from rewardlab.verifiers.combine import CombinedSource, PartScores, combine_rewards
from rewardlab.verifiers.python import CallableSource

__all__ = [
    "RewardBatch",
    "RewardPipeline",
    "RewardSources",
    "RewardStream",
    "ScoredBatch",
    "build_sample_shaping",
    "load_implicit_prm",
    "load_process_scorer",
]


# ----------------------------------------------------------------------------------------------------------
# Sources
# ----------------------------------------------------------------------------------------------------------
@dataclass
class ScoredBatch:
    """Rewards of a batch of completions."""

    rewards: list[float | None]
    """Weighted sum over sources (``None``: some source returned no reward; the sample is excluded)."""
    per_source: dict[str, list[float | None]]
    """Each source's rewards (for ``rewards/NAME/mean``)."""
    correct: list[bool]
    """Per sample: the first source judged it right (``details["correct"]`` / ``match``, else reward > 0)."""
    errors: Counter = field(default_factory=Counter)
    """Error kinds counted over all sources (timeouts, crashes, unparseable answers)."""
    num_errors: int = 0
    """Samples with at least one scoring error."""
    details: list[dict[str, Any]] = field(default_factory=list)
    """Per sample: the first source's ``details`` (``rollouts.jsonl``; ``{}`` when it gave none)."""
    sample_errors: list[str | None] = field(default_factory=list)
    """Per sample: the first scoring error (``"source: error"`` with several sources), ``None``: none."""
    times: list[float | None] = field(default_factory=list)
    """Per sample: the reward time, seconds summed over the sources that timed it (``None``: none did)."""

    def __post_init__(self) -> None:
        # A batch built without the per-sample fields still selects and concatenates.
        self.details = self.details or [{} for _ in self.rewards]
        self.sample_errors = self.sample_errors or [None] * len(self.rewards)
        self.times = self.times or [None] * len(self.rewards)

    def select(self, idx: Sequence[int]) -> ScoredBatch:
        """The samples ``idx``; the error counts stay the whole batch's (they are logged before selection)."""
        return ScoredBatch(
            [self.rewards[i] for i in idx],
            {k: [v[i] for i in idx] for k, v in self.per_source.items()},
            [self.correct[i] for i in idx],
            self.errors,
            self.num_errors,
            [self.details[i] for i in idx],
            [self.sample_errors[i] for i in idx],
            [self.times[i] for i in idx],
        )

    @staticmethod
    def concat(parts: Sequence[ScoredBatch]) -> ScoredBatch:
        """The samples of ``parts`` in order, their error counts added."""
        names = parts[0].per_source
        return ScoredBatch(
            sum((p.rewards for p in parts), []),
            {k: sum((p.per_source.get(k, []) for p in parts), []) for k in names},
            sum((p.correct for p in parts), []),
            sum((p.errors for p in parts), Counter()),
            sum(p.num_errors for p in parts),
            sum((p.details for p in parts), []),
            sum((p.sample_errors for p in parts), []),
            sum((p.times for p in parts), []),
        )


def _as_source(fn: Any) -> Any:
    """A reward source (``score_batch``) as is, a reward function wrapped in :class:`CallableSource`."""
    if callable(getattr(fn, "score_batch", None)):
        return fn
    if callable(fn):
        return CallableSource(fn)
    raise TypeError(f"a reward function or an object with score_batch(records) is needed, got {fn!r}")


def _first_correct(result: Result, reward: float | None) -> bool:
    """The first source's verdict: ``details["correct"]`` / ``match`` when a bool, else reward > 0."""
    details = result.details or {}
    verdict = details.get("correct", details.get("match"))
    return bool(verdict) if isinstance(verdict, bool) else (reward or 0.0) > 0


Submitted = dict[int, Future]
"""One sample's rows in flight: the future of each streamed source's answer, by the source's position."""


class RewardSources:
    """The run's reward sources, summed with their weights (one :class:`CombinedSource`), read the RL way:
    per-source values, error counts, and the first source's verdict as ``correct``.

    ``streamed``: the positions of the sources that take rows one at a time as samples end (warm pools
    with a scoring stream, :meth:`submit`); the others score whole batches."""

    def __init__(self, sources: Sequence[tuple[Any, float]], streamed: Sequence[int] = ()) -> None:
        self.sources = list(sources)
        self.combined = CombinedSource([s for s, _ in self.sources], [w for _, w in self.sources])
        self.streamed = sorted(set(streamed))
        rest = [k for k in range(len(self.sources)) if k not in self.streamed]
        self._batched = (
            CombinedSource(
                [self.sources[k][0] for k in rest],
                [self.sources[k][1] for k in rest],
                names=[self.combined.names[k] for k in rest],
            )
            if rest
            else None
        )

    @classmethod
    def from_config(
        cls,
        cfg: RLConfig,
        extra: Sequence[Any] = (),
        *,
        self_certainty: Callable[..., Any] | None = None,
    ) -> RewardSources:
        """The sources of ``reward.sources`` plus ``extra`` (weight 1 each); ``self_certainty`` scores the
        ``self_certainty`` source (the trainer's forward pass of the sampling model). With
        ``rollout.stream_rewards`` the warm pools stream (their positions are :attr:`streamed`)."""
        run = {"score_fn": self_certainty}
        stream = cfg.rollout.stream_rewards
        built: list[tuple[Any, float]] = []
        streamed: list[int] = []
        for src in cfg.reward.sources:
            if source_kind(src.name).scored_by_engine:
                source = WarmPool(
                    src.name,
                    src.kwargs,
                    workers=cfg.reward.workers,
                    timeout=cfg.reward.timeout,
                    run={},
                    stream=stream,
                )
                source.build()  # now: a source that cannot be built fails the run before its first batch
                if stream:
                    streamed.append(len(built))
            else:
                source = build_source(src.name, src.kwargs, run=run)
            built.append((source, src.weight))
        built.extend((_as_source(fn), 1.0) for fn in extra)
        if not built:
            raise ValueError("no reward source configured (reward.sources is empty)")
        return cls(built, streamed)

    def score(self, records: Sequence[Record]) -> ScoredBatch:
        """Scores and combines; the sum is ``None`` where a source has no reward (see :class:`CombinedSource`)."""
        return self._read(self.combined.score_parts(records), len(records))

    def submit(self, record: Record) -> Submitted:
        """Hands one sample to every streamed source; a source that refuses it (a full or closed stream)
        scores it with the batch instead."""
        out: Submitted = {}
        for k in self.streamed:
            try:
                out[k] = self.sources[k][0].submit([record])
            except Exception:  # QueueFull, Closed: scored by score_batch with the rest
                continue
        return out

    def score_submitted(
        self, records: Sequence[Record], submitted: Sequence[Submitted | None]
    ) -> ScoredBatch:
        """:meth:`score` for a batch whose rows were handed to the streamed sources as they ended
        (``submitted[i]``, ``None``: never handed over): waits for their answers and scores the rest, every
        batched source on the whole batch; the same rewards as :meth:`score`."""
        records = list(records)
        results: dict[str, list[Result]] = {}
        if self._batched is not None:
            results.update(self._batched.score_parts(records).results)
        for k in self.streamed:
            results[self.combined.names[k]] = self._gather(k, records, submitted)
        names = self.combined.names
        values = {name: [result_reward(res) for res in results[name]] for name in names}
        combined = combine_rewards(
            [values[name] for name in names], self.combined.weights, self.combined.mode
        )
        parts = PartScores(combined, {name: results[name] for name in names}, values)
        return self._read(parts, len(records))

    def _gather(self, k: int, records: list[Record], submitted: Sequence[Submitted | None]) -> list[Result]:
        """Source ``k``'s result of each record: the streamed answer, or (rows it never took) a batch now."""
        source, name = self.sources[k][0], self.combined.names[k]
        out: list[Result | None] = [None] * len(records)
        for i, rows in enumerate(submitted):
            future = (rows or {}).get(k)
            if future is not None:
                out[i] = _one_result(future, name)
        missing = [i for i, res in enumerate(out) if res is None]
        if missing:
            try:
                late = list(source.score_batch([records[i] for i in missing]))
            except Exception as exc:  # a broken source scores 0 with the reason, as CombinedSource does
                late = [Result.failure(f"source error: {name}: {exc}") for _ in missing]
            for i, res in zip(missing, late, strict=True):
                out[i] = res
        return out  # type: ignore[return-value]

    def _read(self, parts: PartScores, rows: int) -> ScoredBatch:
        """The RL reading of one batch's part scores: errors, the first source's verdict and details."""
        errors: Counter = Counter()
        first_error: list[str | None] = [None] * rows
        several = len(parts.results) > 1
        for name, results in parts.results.items():
            for i, res in enumerate(results):
                if res.error is not None:
                    errors[error_kind(res.error) or "error"] += 1
                    if first_error[i] is None:
                        first_error[i] = f"{name}: {res.error}" if several else res.error
        first = self.combined.names[0]
        correct = [
            _first_correct(res, value)
            for res, value in zip(parts.results[first], parts.values[first], strict=True)
        ]
        details = [dict(res.details or {}) for res in parts.results[first]]
        num_errors = sum(e is not None for e in first_error)
        times = sample_times(list(parts.results.values()))
        return ScoredBatch(
            parts.rewards, parts.values, correct, errors, num_errors, details, first_error, times
        )

    def usage_metrics(self) -> dict[str, float]:
        """What the sources that count their usage (an LLM judge: requests, cache hits, retries, failures,
        tokens, ``cost_usd`` with a price) have used in the run so far: ``usage/<source>/<key>``."""
        out: dict[str, float] = {}
        for (source, _), name in zip(self.sources, self.combined.names, strict=True):
            usage = getattr(source, "usage", None)
            totals = usage() if callable(usage) else None
            for key, value in (totals or {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[f"usage/{name}/{key}"] = value
        return out

    def close(self) -> None:
        self.combined.close()


def sample_times(per_source: Sequence[Sequence[Result]]) -> list[float | None]:
    """Each sample's reward time: the sum of its sources' ``time_s`` (``None`` where no source timed it)."""
    times = []
    for results in zip(*per_source, strict=True):
        known = [r.time_s for r in results if r.time_s is not None]
        times.append(sum(known) if known else None)
    return times


def reward_time_metrics(times: Sequence[float | None]) -> dict[str, float]:
    """``reward/time_p50``, ``reward/time_p99``, ``reward/time_max`` (seconds) over the samples' reward
    times; none when no source timed its samples."""
    return {f"reward/time_{name}": value for name, value in time_stats(times).items()}


def _one_result(future: Future, name: str) -> Result:
    """A streamed row's result (a pool's future never fails; a failure is still an error row)."""
    try:
        results = future.result()
        if len(results) != 1:
            raise ValueError(f"returned {len(results)} results for 1 record")
        return results[0]
    except Exception as exc:
        return Result.failure(f"source error: {name}: {exc}")


class RewardStream:
    """The reward side of streaming: an :data:`~rewardlab.generation.OnFinished` callback that turns each
    sample the backend reports finished into its record (``record(prompt, sample, generation)``) and hands it
    to the streamed sources at once; :meth:`submitted` lists what is in flight in the batch's order (prompt by
    prompt, sample by sample), whatever order the samples ended in.

    Attributes:
        order: ``(prompt, sample)`` in the order they were handed over.
        handed_at: ``time.perf_counter()`` of each hand-over, in that order.
    """

    def __init__(self, sources: RewardSources, record: Callable[[int, int, Any], Record]) -> None:
        self.sources = sources
        self.record = record
        self.order: list[tuple[int, int]] = []
        self.handed_at: list[float] = []
        self._rows: dict[tuple[int, int], Submitted] = {}
        self._lock = threading.Lock()  # the vllm-server backend reports from its request threads

    def __call__(self, prompt: int, sample: int, gen: Any) -> None:
        rows = self.sources.submit(self.record(prompt, sample, gen))
        with self._lock:
            self._rows[(prompt, sample)] = rows
            self.order.append((prompt, sample))
            self.handed_at.append(time.perf_counter())

    def submitted(self, groups: Sequence[Sequence[Any]]) -> list[Submitted | None]:
        """Each sample's rows in flight, flattened as ``groups`` (``None``: it was never handed over)."""
        with self._lock:
            return [self._rows.get((i, k)) for i, group in enumerate(groups) for k in range(len(group))]


def load_process_scorer(cfg: RLConfig, *, policy: Any | None = None) -> Any | None:
    """The per-step scorer named by ``reward.process`` (``None`` when process rewards are off); for
    ``implicit_prm`` the online implicit PRM on the policy's device (``policy``: what it starts from
    without a path)."""
    spec, kwargs = cfg.reward.process, cfg.reward.process_kwargs or {}
    if not spec:
        return None
    if spec.startswith("prm:"):
        return ProcessRewardModel.from_pretrained(spec[4:], **kwargs)
    if is_implicit_prm(spec):
        return load_implicit_prm(cfg, policy=policy)
    if spec == "correct_looking":
        return CorrectLookingStepScorer(**kwargs)
    if spec.startswith("py:"):
        return lazy(spec[3:])(**kwargs)
    raise ValueError(
        f"unknown process scorer {spec!r} (prm:PATH, implicit_prm[:PATH], correct_looking, py:module:Class)"
    )


def load_implicit_prm(cfg: RLConfig, *, policy: Any | None = None) -> OnlineImplicitPRM:
    """PRIME's online implicit PRM of ``reward.process``: ``implicit_prm:PATH`` loads a saved one (or starts
    one from any causal LM), ``implicit_prm`` copies the policy's initial weights (a LoRA policy's base) for
    both the trained model and the frozen reference; on the policy's device, the trained weights in float32
    as PRIME keeps them (its AdamW state too); ``reward.implicit_prm_*`` set its beta and updates. It reads
    the policy's token ids, so its vocabulary must be the policy's. One process only (no torchrun yet)."""
    rw = cfg.reward
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        raise ValueError("reward.process: implicit_prm trains on one process; torchrun is not supported yet")
    path = rw.process.partition(":")[2]
    if path:
        prm = ImplicitPRM.from_pretrained(path, beta=rw.implicit_prm_beta, **(rw.process_kwargs or {}))
    elif policy is None:
        raise ValueError(
            "reward.process: implicit_prm without a path starts from the policy: pass the policy"
        )
    else:
        start = lora.plain_copy(lora.base_model(policy))  # the policy's weights now: before any update
        prm = ImplicitPRM.from_model(start, beta=rw.implicit_prm_beta or DEFAULT_BETA)
    if policy is not None:
        _check_vocabulary(prm, policy)
        prm.to(next(policy.parameters()).device)
    if rw.implicit_prm_update:
        prm.model.float()
    return OnlineImplicitPRM(
        prm,
        update=rw.implicit_prm_update,
        learning_rate=rw.implicit_prm_lr,
        grad_clip=rw.implicit_prm_grad_clip,
        minibatches=rw.implicit_prm_minibatches,
        micro_batch_size=cfg.train.per_device_train_batch_size,
        loss_type=rw.implicit_prm_loss,
        bf16=use_bf16(cfg.train.bf16),
    )


def _check_vocabulary(prm: ImplicitPRM, policy: Any) -> None:
    """The implicit PRM scores the policy's token ids: both output layers must cover one vocabulary."""
    ours = prm.model.get_output_embeddings().weight.shape[0]
    theirs = lora.base_model(policy).get_output_embeddings().weight.shape[0]
    if ours != theirs:
        raise ValueError(
            f"reward.process: the implicit PRM's vocabulary ({ours} tokens) is not the policy's ({theirs}): "
            "it reads the policy's token ids"
        )


# ----------------------------------------------------------------------------------------------------------
# The batch the stages work on
# ----------------------------------------------------------------------------------------------------------
@dataclass
class RewardBatch:
    """One rollout's rewards after the sample stages, one entry per sample (groups contiguous).

    Everything is per sample, so that selecting groups (dynamic sampling) and concatenating rounds are
    indexing; :meth:`stats` summarises whatever batch it is called on.
    """

    records: list[Record]
    """The scored completions (prompt, completion, reference, ``metadata["group"]``)."""
    scored: ScoredBatch
    """What the sources said: combined reward (``None``: missing), per-source values, correctness, errors."""
    rewards: torch.Tensor
    """``[B]`` float32: the shaped outcome reward; 0 for invalid samples."""
    valid: torch.Tensor
    """``[B]`` bool: the reward exists (no source returned ``None``)."""
    keep: torch.Tensor
    """``[B]`` bool: the sample stays in the loss (truncation mask, a shaping transform's loss mask)."""
    truncated: torch.Tensor
    """``[B]`` bool: the completion hit the length limit."""
    lengths: torch.Tensor
    """``[B]`` float32: completion lengths in tokens."""
    overlong_penalty: torch.Tensor | None = None
    """``[B]`` float32: DAPO's soft overlong penalty added to the reward (``None``: off)."""

    def select(self, idx: Sequence[int]) -> RewardBatch:
        t = torch.tensor(list(idx), dtype=torch.long)
        return RewardBatch(
            [self.records[i] for i in idx],
            self.scored.select(idx),
            self.rewards[t],
            self.valid[t],
            self.keep[t],
            self.truncated[t],
            self.lengths[t],
            None if self.overlong_penalty is None else self.overlong_penalty[t],
        )

    @staticmethod
    def concat(parts: Sequence[RewardBatch]) -> RewardBatch:
        penalties = [p.overlong_penalty for p in parts]
        return RewardBatch(
            sum((p.records for p in parts), []),
            ScoredBatch.concat([p.scored for p in parts]),
            torch.cat([p.rewards for p in parts]),
            torch.cat([p.valid for p in parts]),
            torch.cat([p.keep for p in parts]),
            torch.cat([p.truncated for p in parts]),
            torch.cat([p.lengths for p in parts]),
            None if any(x is None for x in penalties) else torch.cat(penalties),
        )

    def stats(self) -> dict[str, float]:
        """Truncation and overlong statistics (TRL's ``completions/*`` names where TRL has one), reward times."""
        out: dict[str, float] = {
            "completions/clipped_ratio": float(self.truncated.float().mean()),
            "completions/num_truncated": int(self.truncated.sum()),
            "completions/masked_truncated": int((self.truncated & ~self.keep).sum()),
        }
        if self.overlong_penalty is not None:
            out["overlong_penalty/mean"] = float(self.overlong_penalty.mean())
            out["overlong_penalty/frac"] = float((self.overlong_penalty < 0).float().mean())
        out.update(reward_time_metrics(self.scored.times))
        return out


# ----------------------------------------------------------------------------------------------------------
# The pipeline
# ----------------------------------------------------------------------------------------------------------
class RewardPipeline:
    """The RL loop's rewards, stage by stage (see the module docstring).

    Args:
        sources: The reward sources and weights.
        sample_shaping: Sample-level transforms in order: ``reward.shaping``, truncation, overlong penalty.
        process: A per-step scorer (``score_steps_detailed``) or ``None``.
        tokenizer: Maps step ends to tokens (needed with ``process``).
        step_shaping, step_eta: Gao et al.'s shaping of the step scores (:data:`STEP_SHAPINGS` modes).
        success_weight, step_weight: Weights of the outcome and of the shaped steps with process rewards.
    """

    def __init__(
        self,
        sources: RewardSources,
        sample_shaping: ShapingPipeline,
        *,
        process: Any | None = None,
        tokenizer: Any | None = None,
        step_shaping: str = "clip+delta",
        step_eta: float = 0.0,
        success_weight: float = 1.0,
        step_weight: float = 1.0,
    ) -> None:
        self.sources = sources
        self.sample_shaping = sample_shaping
        self.process = process
        self.tokenizer = tokenizer
        self.step_shaping = step_shaping
        self.step_eta = step_eta
        self.success_weight = success_weight
        self.step_weight = step_weight

    @classmethod
    def from_config(
        cls,
        cfg: RLConfig,
        extra_reward_fns: Sequence[Any] = (),
        process_scorer: Any | None = None,
        *,
        tokenizer: Any | None = None,
        self_certainty: Callable[..., Any] | None = None,
        policy: Any | None = None,
    ) -> RewardPipeline:
        """The pipeline of ``cfg.reward`` (plus ``extra_reward_fns``, weight 1 each); ``process_scorer``
        overrides ``reward.process``; ``self_certainty`` scores that label-free source; ``policy``: what an
        implicit PRM starts from and runs beside (:func:`load_process_scorer`)."""
        rw = cfg.reward
        if not (rw.sources or extra_reward_fns):
            raise ValueError("no reward source configured")
        if process_scorer is None:
            process_scorer = load_process_scorer(cfg, policy=policy)
        return cls(
            RewardSources.from_config(cfg, extra_reward_fns, self_certainty=self_certainty),
            build_sample_shaping(cfg),
            process=process_scorer,
            tokenizer=tokenizer,
            step_shaping=rw.step_shaping,
            step_eta=rw.step_eta,
            success_weight=rw.success_weight,
            step_weight=rw.step_weight,
        )

    def stream(self, record: Callable[[int, int, Any], Record]) -> RewardStream | None:
        """A :class:`RewardStream` for one rollout (``record`` builds a sample's record), or ``None`` when
        no source streams."""
        return RewardStream(self.sources, record) if self.sources.streamed else None

    def score(
        self,
        records: Sequence[Record],
        gens: Sequence[Any],
        submitted: Sequence[Submitted | None] | None = None,
    ) -> RewardBatch:
        """Score -> combine -> sample shaping, for completions ``records`` generated as ``gens``
        (``finish_reason``, ``token_ids``); groups are ``record.metadata["group"]``. ``submitted``: the rows a
        :class:`RewardStream` handed to the streamed sources while generation ran."""
        records = list(records)
        if submitted is None:
            scored = self.sources.score(records)
        else:
            scored = self.sources.score_submitted(records, submitted)
        rewards, valid, _ = ca.optional_rewards(scored.rewards)
        batch = ShapingBatch(
            rewards=rewards,
            group=torch.tensor([r.metadata["group"] for r in records], dtype=torch.long),
            lengths=torch.tensor([len(g.token_ids) for g in gens], dtype=torch.float32),
            correct=torch.tensor(scored.correct, dtype=torch.bool),
            truncated=torch.tensor([g.finish_reason == "length" for g in gens], dtype=torch.bool),
            budgets=_budgets(records),
            texts=[r.completion_text for r in records],
        )
        out = self.sample_shaping(batch)
        keep = torch.ones(len(records), dtype=torch.bool)
        if out.loss_mask is not None:
            keep &= out.loss_mask.bool()
        shaped = torch.where(valid, out.rewards.to(torch.float32), torch.zeros_like(rewards))
        penalty = out.log.get("overlong_penalty")
        return RewardBatch(records, scored, shaped, valid, keep, batch.truncated, batch.lengths, penalty)

    def source_rewards(self, batch: RewardBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, K)`` each source's reward (a missing one: 0) and ``(K,)`` their weights, for estimators that
        normalise the sources apart (GDPO). When sample shaping changed the weighted sum (a truncation or
        overlong penalty, ``reward.shaping``), what it added is one more column of weight 1, so the penalty
        still counts."""
        weights = [w for _, w in self.sources.sources]
        columns = [
            torch.tensor([0.0 if v is None else float(v) for v in values], dtype=torch.float32)
            for values in batch.scored.per_source.values()
        ]
        matrix = torch.stack(columns, dim=1)
        summed = matrix @ torch.tensor(weights, dtype=torch.float32)
        shaping = torch.where(batch.valid, batch.rewards - summed, torch.zeros_like(summed))
        if shaping.abs().max() > 1e-6:
            matrix = torch.cat([matrix, shaping[:, None]], dim=1)
            weights.append(1.0)
        return matrix, torch.tensor(weights, dtype=torch.float32)

    def token_rewards(
        self,
        batch: RewardBatch,
        response_mask: torch.Tensor,
        loss_mask: torch.Tensor,
        token_ids: Sequence[Sequence[int]],
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Step shaping -> token rewards ``[B, T]``: the outcome on the last response token (of
        ``response_mask``); with a process scorer, ``success_weight * outcome`` there plus
        ``step_weight *`` the shaped step scores on their step-end tokens, over ``loss_mask`` (the response
        mask without the samples removed from the loss). Returns the rewards and the step statistics. An
        implicit PRM's rewards are not added here (the ``prime`` estimator reads them apart)."""
        if self.process is None or self.implicit_prm is not None:
            steps = torch.zeros(response_mask.shape, dtype=torch.float32)
            return success_plus_steps(batch.rewards, steps, response_mask), {}

        steps, stats = shaped_step_token_rewards(
            self.process,
            batch.records,
            token_ids,
            self.tokenizer,
            loss_mask,
            shaping=self.step_shaping,
            eta=self.step_eta,
        )
        rewards = success_plus_steps(
            batch.rewards, steps, loss_mask, success_weight=self.success_weight, step_weight=self.step_weight
        )
        return rewards, stats

    @property
    def implicit_prm(self) -> OnlineImplicitPRM | None:
        """The process scorer when it is PRIME's online implicit PRM (scored and trained by the update)."""
        return self.process if isinstance(self.process, OnlineImplicitPRM) else None

    def checkpoint_models(self) -> dict[str, Any]:
        """The reward side's trainable models as checkpoint folders (an implicit PRM's), by name."""
        return self.implicit_prm.checkpoint_models() if self.implicit_prm is not None else {}

    def state_dict(self) -> dict[str, Any]:
        """The reward side's ``trainer_state.pt`` entries (an implicit PRM's optimiser)."""
        prm = self.implicit_prm
        return {} if prm is None else {IMPLICIT_PRM: prm.state_dict()}

    def load_checkpoint(self, checkpoint: Any, state: dict[str, Any]) -> None:
        """Restores what :meth:`checkpoint_models` and :meth:`state_dict` saved, in place."""
        prm = self.implicit_prm
        if prm is not None and IMPLICIT_PRM in state:
            prm.load_weights(Path(checkpoint) / IMPLICIT_PRM)
            prm.load_state_dict(state[IMPLICIT_PRM])

    def usage_metrics(self) -> dict[str, float]:
        """The run's totals of what the reward sources used (:meth:`RewardSources.usage_metrics`)."""
        return self.sources.usage_metrics()

    def close(self) -> None:
        """Stops the sources' scoring pools."""
        self.sources.close()


def _budgets(records: Sequence[Record]) -> torch.Tensor | None:
    """The token budget each prompt asked for (``metadata["length_budget"]``, NaN: none), or ``None``."""
    budgets = [r.metadata.get("length_budget") for r in records]
    if all(b is None for b in budgets):
        return None
    return torch.tensor([float("nan") if b is None else float(b) for b in budgets], dtype=torch.float32)


def build_sample_shaping(cfg: RLConfig) -> ShapingPipeline:
    """(``reward.length_budget``) L1's budget reward, ``reward.shaping``, then ``reward.truncation``, then
    (``reward.overlong_buffer > 0``) DAPO's soft overlong penalty over ``rollout.max_new_tokens``: the sample
    stage in the order the loop applies it."""
    rw = cfg.reward
    pipe = build_pipeline(rw.shaping)
    if rw.length_budget != "none":
        spec = {
            "name": "length_budget",
            "mode": rw.length_budget,
            "alpha": rw.length_budget_alpha,
            "delta": rw.length_budget_delta,
        }
        pipe.transforms.insert(0, build_shaping(spec))
    truncation = {"name": "truncation", "mode": rw.truncation, "penalty": rw.truncation_penalty}
    pipe.transforms.append(build_shaping(truncation))
    if rw.overlong_buffer > 0:
        spec = {
            "name": "overlong_penalty",
            "max_len": cfg.rollout.max_new_tokens,
            "cache_len": rw.overlong_buffer,
            "weight": rw.overlong_penalty_factor,
        }
        pipe.transforms.append(build_shaping(spec))
    return pipe
