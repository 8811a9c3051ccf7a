"""The tensor shaping transforms and the batch they transform (torch).

A pipeline step reads and writes a :class:`ShapingBatch`, which holds the per-sample rewards and whatever
context the transforms need (group ids, lengths, correctness, truncation, per-step rewards). Every step
wraps one pure function of :mod:`rewardlab.rewardmodels.shaping.functional`, or, for a row-level transform
(:mod:`.rows`), one per-row function.

The registry, spec parsing and pipelines are :mod:`.specs` (no torch: building a pipeline of row-level
transforms imports nothing of this module), re-exported here; see it for the spec syntax.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from rewardlab.core_algos.estimators import ADVANTAGE_ESTIMATORS, estimator_traits

from . import functional as F
from .rows import CosineLength, RepetitionPenalty, RowShaping, ShapingRow
from .specs import (
    RENAMED,
    SHAPINGS,
    STEP_SHAPINGS,
    Shaping,
    ShapingPipeline,
    _read_spec,
    build_pipeline,
    build_shaping,
    parse_spec,
    register,
    step_shaping,
    transform_class,
)


@dataclass
class ShapingBatch:
    """What a pipeline transforms.

    Attributes:
        rewards: Per-sample rewards ``[B]`` (float).
        group: Group id of each sample ``[B]`` (long); samples of the same prompt share an id.
            ``None``: the batch is one group.
        lengths: Completion length of each sample ``[B]`` (tokens, or characters when no tokenizer).
        correct: Whether each sample's answer is right ``[B]`` (bool). ``None``: derived as
            ``rewards >= correct_threshold`` by the transforms that need it.
        truncated: Whether each sample hit the generation limit ``[B]`` (bool).
        step_rewards: Per-step rewards ``[B, T]``, left-aligned (see :mod:`.functional`), or ``None``.
        step_mask: ``[B, T]`` bool, ``True`` at real steps.
        components: Named per-sample reward parts (``{"correctness": [B], "format": [B]}``).
        loss_mask: ``[B]`` float, 1 = train on this sample, 0 = mask it (set by ``overlong_filter``).
        log: Per-transform notes (name -> anything), copied into result details.
        outcome: The per-sample reward the batch was built with, never changed by transforms (step
            transforms replace ``rewards`` by the shaped return; ``success_plus_steps`` reads this).
        budgets: Length budget ``n_gold`` each sample's prompt asked for ``[B]`` (float, tokens; L1's
            "Think for n tokens."), NaN where the prompt set none. ``None``: no budgets (``length_budget``
            refuses such a batch).
        texts: Each sample's completion text (``repetition_penalty`` reads it), or ``None``.
    """

    rewards: torch.Tensor
    group: torch.Tensor | None = None
    lengths: torch.Tensor | None = None
    correct: torch.Tensor | None = None
    truncated: torch.Tensor | None = None
    step_rewards: torch.Tensor | None = None
    step_mask: torch.Tensor | None = None
    components: dict[str, torch.Tensor] = field(default_factory=dict)
    loss_mask: torch.Tensor | None = None
    log: dict[str, Any] = field(default_factory=dict)
    outcome: torch.Tensor | None = None
    budgets: torch.Tensor | None = None
    texts: list[str] | None = None

    def __post_init__(self) -> None:
        self.rewards = torch.as_tensor(self.rewards, dtype=torch.float32)
        if self.outcome is None:
            self.outcome = self.rewards

    def replace(self, **changes: Any) -> ShapingBatch:
        """A shallow copy with some fields changed (transforms never modify their input)."""
        return dataclasses.replace(self, components=dict(self.components), log=dict(self.log), **changes)

    def need(self, attr: str, transform: str) -> torch.Tensor:
        value = getattr(self, attr)
        if value is None:
            raise ValueError(f"shaping transform {transform!r} needs {attr!r}, which this batch lacks")
        return value

    def correct_or(self, threshold: float) -> torch.Tensor:
        if self.correct is not None:
            return torch.as_tensor(self.correct).bool()
        return self.rewards >= threshold

    def group_or_all(self) -> torch.Tensor:
        if self.group is not None:
            return torch.as_tensor(self.group)
        return torch.zeros(self.rewards.numel(), dtype=torch.long)

    def rows(self, reads: Sequence[str], transform: str) -> list[ShapingRow]:
        """The batch as rows for a row-level transform (:class:`.rows.RowShaping`) that ``reads`` these fields
        besides the rewards (each refused if missing, as :meth:`need` does)."""
        for attr in reads:
            self.need(attr, transform)
        n = self.rewards.numel()
        texts = list(self.texts) if self.texts is not None else [None] * n
        lengths = torch.as_tensor(self.lengths).tolist() if self.lengths is not None else [None] * n
        correct = torch.as_tensor(self.correct).bool().tolist() if self.correct is not None else [None] * n
        return [
            ShapingRow(reward=reward, text=text, length=length, correct=hit)
            for reward, text, length, hit in zip(self.rewards.tolist(), texts, lengths, correct, strict=True)
        ]

    def with_rewards(self, values: Sequence[float]) -> ShapingBatch:
        """A copy whose rewards are ``values`` (one per sample, rounded to the batch's float32)."""
        return self.replace(rewards=torch.tensor(values, dtype=torch.float64, device=self.rewards.device))


# ---- elementwise ----------------------------------------------------------------------------------


def _apply_target(batch: ShapingBatch, target: str, fn) -> ShapingBatch:
    if target == "reward":
        return batch.replace(rewards=fn(batch.rewards))
    if target == "steps":
        mask = batch.need("step_mask", "elementwise on steps").bool()
        steps = batch.need("step_rewards", "elementwise on steps")
        shaped = torch.where(mask, fn(steps), torch.zeros_like(steps))
        return batch.replace(step_rewards=shaped, rewards=shaped.sum(dim=1))
    if target in batch.components:
        comps = dict(batch.components)
        comps[target] = fn(comps[target])
        out = batch.replace()
        out.components = comps
        return out
    raise ValueError(f"unknown target {target!r}: 'reward', 'steps' or a component name")


@register("clamp")
@dataclass
class Clamp(Shaping):
    """``r' = min(max(r, lo), hi)``. ``target``: ``reward`` (default), ``steps``, or a component name."""

    lo: float | None = None
    hi: float | None = None
    target: str = "reward"

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        return _apply_target(batch, self.target, lambda r: F.clamp(r, self.lo, self.hi))


@register("scale")
@dataclass
class ScaleShift(Shaping):
    """``r' = scale * r + shift``."""

    scale: float = 1.0
    shift: float = 0.0
    target: str = "reward"

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        return _apply_target(batch, self.target, lambda r: F.scale_shift(r, self.scale, self.shift))


@register("binarize")
@dataclass
class Binarize(Shaping):
    """``r' = high if r >= threshold else low``."""

    threshold: float = 0.5
    low: float = 0.0
    high: float = 1.0
    target: str = "reward"

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        return _apply_target(batch, self.target, lambda r: F.binarize(r, self.threshold, self.low, self.high))


@register("weighted_sum")
class WeightedSum(Shaping):
    """``r = sum_k w_k * component_k``; arguments are ``name=weight`` pairs (``correctness=0.9,format=0.1``).

    The special component name ``reward`` is the current reward.
    """

    def __init__(self, **weights: float) -> None:
        if not weights:
            raise ValueError("weighted_sum needs name=weight arguments, e.g. weighted_sum:correctness=0.9")
        self.weights = {k: float(v) for k, v in weights.items()}

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        comps = {"reward": batch.rewards, **batch.components}
        out = batch.replace(rewards=F.weighted_sum(comps, self.weights))
        out.log["weighted_sum"] = dict(self.weights)
        return out

    def spec(self) -> str:
        return "weighted_sum:" + ",".join(f"{k}={v}" for k, v in self.weights.items())

    def __repr__(self) -> str:
        return f"WeightedSum({self.weights})"


# ---- per group / across batches ---------------------------------------------------------------------


@register("group_norm")
@dataclass
class GroupNorm(Shaping):
    """``r' = (r - mean_g) / (std_g + eps)`` (GRPO) or ``r - mean_g`` with ``scale_by_std=false`` (Dr. GRPO)."""

    level: ClassVar[str] = "group"
    normalizes_groups: ClassVar[bool] = True
    scale_by_std: bool = True
    eps: float = 1e-4

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        r = F.group_normalize(
            batch.rewards, batch.group_or_all(), scale_by_std=self.scale_by_std, eps=self.eps
        )
        return batch.replace(rewards=r)


@register("whiten")
@dataclass
class RunningWhiten(Shaping):
    """Running whitening across batches: ``r' = (r - mu) / sqrt(var + eps)``, where ``mu`` and ``var`` are
    the running mean and variance over every reward seen so far, this batch included (parallel Welford).

    Stateful: one instance per run. ``shift_mean=false`` only divides by the running std.
    """

    level: ClassVar[str] = "group"
    eps: float = 1e-8
    shift_mean: bool = True
    count: float = 0.0
    mean: float = 0.0
    m2: float = 0.0

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        self.count, self.mean, self.m2 = F.update_moments(self.count, self.mean, self.m2, batch.rewards)
        var = self.m2 / self.count if self.count else 1.0
        mean = self.mean if self.shift_mean else 0.0
        out = batch.replace(rewards=F.whiten(batch.rewards, mean, var, eps=self.eps))
        out.log["whiten"] = {"mean": self.mean, "var": var, "count": self.count}
        return out


# ---- length ------------------------------------------------------------------------------------------


@register("length_penalty")
@dataclass
class KimiLengthPenalty(Shaping):
    """Kimi k1.5: ``r' = r + weight * len_reward`` with ``lambda = 0.5 - (len - min_len)/(max_len - min_len)``
    per group; correct samples get ``lambda``, wrong ones ``min(0, lambda)``. Correct = ``batch.correct`` or
    ``r >= correct_threshold``."""

    level: ClassVar[str] = "group"
    weight: float = 1.0
    correct_threshold: float = 0.5

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        lengths = batch.need("lengths", self.name)
        pen = F.kimi_length_penalty(lengths, batch.correct_or(self.correct_threshold), batch.group_or_all())
        return batch.replace(rewards=batch.rewards + self.weight * pen)


@register("overlong_penalty")
@dataclass
class OverlongPenalty(Shaping):
    """DAPO soft overlong punishment added to the reward: 0 up to ``max_len - cache_len``, then linear down
    to -1 at ``max_len``, -1 beyond. Defaults are DAPO's (20480, 4096)."""

    max_len: int = 20480
    cache_len: int = 4096
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.cache_len <= self.max_len:
            raise ValueError(
                f"overlong_penalty needs 0 < cache_len <= max_len, got {self.cache_len}, {self.max_len}"
            )

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        lengths = batch.need("lengths", self.name)
        pen = F.dapo_overlong_penalty(lengths, self.max_len, self.cache_len, self.weight)
        out = batch.replace(rewards=batch.rewards + pen)
        out.log["overlong_penalty"] = pen
        return out


def _and_mask(batch: ShapingBatch, keep: torch.Tensor) -> torch.Tensor:
    """``keep`` (float) combined with the batch's loss mask, if it has one."""
    return keep if batch.loss_mask is None else keep * batch.loss_mask


@register("overlong_filter")
@dataclass
class OverlongFilter(Shaping):
    """DAPO overlong filtering: ``loss_mask = 0`` for truncated samples (rewards unchanged); the same as
    ``truncation:mask``."""

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        mask = F.overlong_mask(batch.need("truncated", self.name))
        return batch.replace(loss_mask=_and_mask(batch, mask))


@register("truncation")
@dataclass
class Truncation(Shaping):
    """Truncated samples (the RL config's ``reward.truncation``): ``mask`` removes them from the loss (DAPO
    overlong filtering), ``penalize`` replaces their reward by ``penalty``, ``none`` keeps them."""

    mode: str = "mask"
    penalty: float = -1.0

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        truncated = batch.need("truncated", self.name)
        rewards, keep, stats = F.truncation_handling(batch.rewards, truncated, self.mode, self.penalty)
        out = batch.replace(rewards=rewards)
        if self.mode == "mask":
            out.loss_mask = _and_mask(batch, keep.to(torch.float32))
        out.log["truncation"] = stats
        return out


@register("length_budget")
@dataclass
class LengthBudget(Shaping):
    """L1's length-controlled reward (Aggarwal & Welleck, 2025, arXiv 2503.04697), replacing the reward:
    ``exact``: ``1[correct] - alpha * |n_gold - n_y|``; ``max``: ``1[correct] * clip(alpha * (n_gold - n_y)
    + delta, 0, 1)``, with ``n_gold = batch.budgets``, ``n_y = batch.lengths``. ``alpha=None`` takes the
    mode's default (:data:`.functional.L1_ALPHA`). Samples with a NaN budget keep their reward. Correct =
    ``batch.correct`` or ``r >= correct_threshold``."""

    mode: str = "exact"
    alpha: float | None = None
    delta: float = F.L1_DELTA
    correct_threshold: float = 0.5

    def __post_init__(self) -> None:
        if self.mode not in F.LENGTH_BUDGET_MODES:
            raise ValueError(
                f"length_budget: unknown mode {self.mode!r} (known: {', '.join(F.LENGTH_BUDGET_MODES)})"
            )
        if self.alpha is None:
            # Resolved here so that spec() names the slope actually used.
            self.alpha = F.L1_ALPHA[self.mode]

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        if batch.budgets is None:
            raise ValueError(
                "shaping transform 'length_budget' needs 'budgets' (the token budget n_gold each prompt "
                "asked for, ShapingBatch.budgets), which this batch lacks"
            )
        budgets = torch.as_tensor(batch.budgets, dtype=torch.float32)
        shaped = F.length_budget_reward(
            batch.correct_or(self.correct_threshold),
            batch.need("lengths", self.name),
            budgets,
            mode=self.mode,
            alpha=self.alpha,
            delta=self.delta,
        )
        # A prompt without a budget was not asked to control its length: leave its reward alone.
        missing = torch.isnan(budgets)
        out = batch.replace(rewards=torch.where(missing, batch.rewards, shaped))
        out.log["length_budget"] = {"mode": self.mode, "num_without_budget": float(missing.sum().item())}
        return out


# ---- per step ----------------------------------------------------------------------------------------


class _StepShaping(Shaping):
    level: ClassVar[str] = "step"

    def _fn(self, rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        steps = batch.need("step_rewards", self.name)
        mask = batch.need("step_mask", self.name).bool()
        shaped = self._fn(steps, mask)
        # The per-sample reward of a step-shaped batch is the return from the first step.
        return batch.replace(step_rewards=shaped, rewards=shaped.sum(dim=1))


@register("step_clip")
@dataclass
class GaoClip(_StepShaping):
    """Gao et al. (2024) Clip: ``r'_t = min(r_t - eta, 0)`` per step."""

    eta: float = 0.0

    def _fn(self, rewards, mask):
        return F.gao_clip(rewards, mask, self.eta)


@register("delta")
@dataclass
class GaoDelta(_StepShaping):
    """Gao et al. (2024) Delta: ``r'_t = r_t - r_{t+1}``, ``r'_T = r_T`` (sum = ``r_1``)."""

    def _fn(self, rewards, mask):
        return F.gao_delta(rewards, mask)


@register("clip+delta")
@dataclass
class GaoClipDelta(_StepShaping):
    """Gao et al. (2024) Clip then Delta: ``c_t = min(r_t - eta, 0)``, ``r'_t = c_t - c_{t+1}``, ``r'_T = c_T``."""

    eta: float = 0.0

    def _fn(self, rewards, mask):
        return F.gao_clip_delta(rewards, mask, self.eta)


@register("progress_delta")
@dataclass
class ProgressDelta(_StepShaping):
    """Progress rewards: ``r'_t = r_t - r_{t-1}``, ``r_0 = 0`` (sum = ``r_T``)."""

    def _fn(self, rewards, mask):
        return F.progress_delta(rewards, mask)


@register("min_form")
@dataclass
class MinForm(_StepShaping):
    """PURE min-form credit assignment: step rewards whose sum-of-future return is ``min_{k>=t} r_k``."""

    def _fn(self, rewards, mask):
        return F.min_form(rewards, mask)


@register("success_plus_steps")
@dataclass
class SuccessPlusSteps(_StepShaping):
    """Adds the outcome reward to the last step: ``r'_t = step_weight * s_t + [t = T] * success_weight * success``.

    ``success`` names where the outcome comes from: ``outcome`` (default: the reward the batch was built
    with, e.g. the verifier's), ``reward`` (the current reward) or a component name."""

    success_weight: float = 1.0
    step_weight: float = 1.0
    success: str = "outcome"

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        steps = batch.need("step_rewards", self.name)
        mask = batch.need("step_mask", self.name).bool()
        if self.success == "outcome":
            success = batch.outcome
        elif self.success == "reward":
            success = batch.rewards
        else:
            success = batch.components[self.success]
        shaped = F.success_plus_steps(
            success, steps, mask, success_weight=self.success_weight, step_weight=self.step_weight
        )
        return batch.replace(step_rewards=shaped, rewards=shaped.sum(dim=1))


def conflicts_with_estimator(
    specs: str | dict | Shaping | Iterable[str | dict | Shaping] | None, adv_estimator: str
) -> str | None:
    """Why a sample shaping pipeline and an advantage estimator should not be combined, or ``None``.

    Protects against normalising twice: the estimators that centre by group (the trait
    :attr:`rewardlab.core_algos.estimators.EstimatorTraits.centres_by_group`, registered with each estimator) already
    subtract a group baseline (and GRPO divides by the group std), so a ``group_norm`` shaping before them
    normalises the rewards a second time: under GRPO the second pass is nearly a no-op (a
    wasted step whose eps and lone-sample rule differ from the estimator's), under RLOO, Dr. GRPO and
    REINFORCE++-baseline it silently brings back the per-group std scaling (the question-difficulty bias)
    those estimators leave out. Returns a one-line reason for config validation. Unknown or former names
    (``clip``) raise, as building would.
    """
    if specs is None or not _centres_by_group(adv_estimator):
        return None
    if isinstance(specs, (str, dict, Shaping)):
        specs = [specs]
    for spec in specs:
        cls = type(spec) if isinstance(spec, Shaping) else transform_class(_read_spec(spec)[0])
        if cls.normalizes_groups:
            return (
                f"{cls.name!r} normalises rewards per group and the {adv_estimator!r} advantage estimator "
                "normalises them again: drop the shaping step or use an estimator without a group baseline "
                "(reinforce_pp, gae)"
            )
    return None


def _centres_by_group(adv_estimator: str) -> bool:
    """The estimator's trait; an unknown name conflicts with nothing (the config check refuses it)."""
    return adv_estimator in ADVANTAGE_ESTIMATORS and estimator_traits(adv_estimator).centres_by_group


def shape_step_rewards(
    mode: str,
    step_rewards: Sequence[Sequence[float]] | torch.Tensor,
    mask: torch.Tensor | None = None,
    eta: float = 0.0,
) -> torch.Tensor:
    """Convenience for RL: shaped per-step rewards ``[B, T]`` under a :data:`STEP_SHAPINGS` mode.

    ``step_rewards`` is a padded tensor with ``mask``, or a ragged list of lists.
    """
    if mask is None:
        step_rewards, mask = F.pad_steps(step_rewards)  # type: ignore[arg-type]
    batch = ShapingBatch(
        rewards=torch.zeros(step_rewards.shape[0]), step_rewards=step_rewards, step_mask=mask.bool()
    )
    out = step_shaping(mode, eta)(batch)
    return out.step_rewards


__all__ = [
    "RENAMED",
    "SHAPINGS",
    "STEP_SHAPINGS",
    "Binarize",
    "Clamp",
    "CosineLength",
    "GaoClip",
    "GaoClipDelta",
    "GaoDelta",
    "GroupNorm",
    "KimiLengthPenalty",
    "LengthBudget",
    "MinForm",
    "OverlongFilter",
    "OverlongPenalty",
    "ProgressDelta",
    "RepetitionPenalty",
    "RowShaping",
    "RunningWhiten",
    "ScaleShift",
    "Shaping",
    "ShapingBatch",
    "ShapingPipeline",
    "SuccessPlusSteps",
    "Truncation",
    "WeightedSum",
    "build_pipeline",
    "build_shaping",
    "conflicts_with_estimator",
    "parse_spec",
    "register",
    "shape_step_rewards",
    "step_shaping",
    "transform_class",
]
