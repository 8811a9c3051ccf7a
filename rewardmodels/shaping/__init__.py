"""Reward-shaping transforms: pure torch functions, a registry of named transforms, and pipelines.

Python::

    import torch
    from rewardkit.rewardmodels.shaping import ShapingBatch, build_pipeline, functional as F

    pipe = build_pipeline(["group_norm", "clip:-3,3"])
    out = pipe(ShapingBatch(rewards=torch.tensor([1.0, 0.0, 1.0, 1.0]), group=torch.tensor([0, 0, 1, 1])))
    steps, mask = F.pad_steps([[0.9, 0.8], [0.7]])
    F.gao_clip_delta(steps, mask, eta=0.0)

CLI strings (``--shape clip:-1,1``) and YAML lists use the same names; see ``docs/shaping.md``. Layouts:
per sample ``[B]``; per group ``[B]`` + group ids ``[B]``; per step padded ``[B, T]`` + bool mask ``[B, T]``
(left-aligned, contiguous steps).
"""

from . import functional
from .functional import (
    binarize,
    clip,
    cosine_length_reward,
    dapo_overlong_penalty,
    gao_clip,
    gao_clip_delta,
    gao_delta,
    group_normalize,
    kimi_length_penalty,
    min_form,
    min_form_returns,
    overlong_mask,
    pad_steps,
    progress_delta,
    scale_shift,
    step_returns,
    success_plus_steps,
    unpad_steps,
    update_moments,
    weighted_sum,
    whiten,
)
from .pipeline import (
    SHAPINGS,
    STEP_SHAPINGS,
    Shaping,
    ShapingBatch,
    ShapingPipeline,
    build_pipeline,
    build_shaping,
    parse_spec,
    shape_step_rewards,
    step_shaping,
)
from .results import WeightedSumSource, results_to_batch, shape_jsonl, shape_results

__all__ = [
    "SHAPINGS",
    "STEP_SHAPINGS",
    "Shaping",
    "ShapingBatch",
    "ShapingPipeline",
    "WeightedSumSource",
    "binarize",
    "build_pipeline",
    "build_shaping",
    "clip",
    "cosine_length_reward",
    "dapo_overlong_penalty",
    "functional",
    "gao_clip",
    "gao_clip_delta",
    "gao_delta",
    "group_normalize",
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
    "unpad_steps",
    "update_moments",
    "weighted_sum",
    "whiten",
]
