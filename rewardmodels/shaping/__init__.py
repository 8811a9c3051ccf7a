"""Reward-shaping transforms: pure torch functions, a registry of named transforms, and pipelines.

Python::

    import torch
    from rewardlab.rewardmodels.shaping import ShapingBatch, build_pipeline, functional as F

    pipe = build_pipeline(["group_norm", "clamp:-3,3"])
    out = pipe(ShapingBatch(rewards=torch.tensor([1.0, 0.0, 1.0, 1.0]), group=torch.tensor([0, 0, 1, 1])))
    steps, mask = F.pad_steps([[0.9, 0.8], [0.7]])
    F.gao_clip_delta(steps, mask, eta=0.0)

CLI strings (``--shape clamp:-1,1``) and YAML lists use the same names; see ``docs/shaping.md``. Layouts:
per sample ``[B]``; per group ``[B]`` + group ids ``[B]``; per step padded ``[B, T]`` + bool mask ``[B, T]``
(left-aligned, contiguous steps).

Every reward transform of the project lives here, once: the RL loop's reward pipeline
(:mod:`rewardlab.rl.rewards`) and its advantages (:mod:`rewardlab.core_algos`) call these functions.
Reward sources are combined by :class:`rewardlab.verifiers.combine.CombinedSource` (``WeightedSumSource``
here is that type).
"""

from . import functional
from .functional import (
    GroupStats,
    binarize,
    clamp,
    cosine_length_reward,
    dapo_overlong_penalty,
    discounted_returns,
    gao_clip,
    gao_clip_delta,
    gao_delta,
    group_normalize,
    group_stats,
    kimi_length_penalty,
    min_form,
    min_form_returns,
    overlong_mask,
    pad_steps,
    progress_delta,
    scale_shift,
    step_returns,
    success_plus_steps,
    truncation_handling,
    unpad_steps,
    update_moments,
    weighted_sum,
    whiten,
)
from .pipeline import (
    RENAMED,
    SHAPINGS,
    STEP_SHAPINGS,
    Shaping,
    ShapingBatch,
    ShapingPipeline,
    build_pipeline,
    build_shaping,
    conflicts_with_estimator,
    parse_spec,
    shape_step_rewards,
    step_shaping,
    transform_class,
)
from .results import WeightedSumSource, results_to_batch, shape_jsonl, shape_results

__all__ = [
    "RENAMED",
    "SHAPINGS",
    "STEP_SHAPINGS",
    "GroupStats",
    "Shaping",
    "ShapingBatch",
    "ShapingPipeline",
    "WeightedSumSource",
    "binarize",
    "build_pipeline",
    "build_shaping",
    "clamp",
    "conflicts_with_estimator",
    "cosine_length_reward",
    "dapo_overlong_penalty",
    "discounted_returns",
    "functional",
    "gao_clip",
    "gao_clip_delta",
    "gao_delta",
    "group_normalize",
    "group_stats",
    "kimi_length_penalty",
    "min_form",
    "min_form_returns",
    "overlong_mask",
    "pad_steps",
    "parse_spec",
    "progress_delta",
    "results_to_batch",
    "scale_shift",
    "shape_jsonl",
    "shape_results",
    "shape_step_rewards",
    "step_returns",
    "step_shaping",
    "success_plus_steps",
    "transform_class",
    "truncation_handling",
    "unpad_steps",
    "update_moments",
    "weighted_sum",
    "whiten",
]
