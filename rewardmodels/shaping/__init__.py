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
open-r1's repetition and cosine length formulas are plain Python a floor below
(:mod:`rewardlab.verifiers.shaping.formulas`), shared with the reward sources of the same names. Reward
sources are combined by :class:`rewardlab.verifiers.combine.CombinedSource` (``WeightedSumSource`` here is
that type).

Modules: :mod:`.specs` (registry, spec parsing, pipelines) and :mod:`.rows` (row-level transforms) need no
torch; :mod:`.functional` and :mod:`.pipeline` (the tensor transforms, :class:`ShapingBatch`) import it;
:mod:`.results` (scored rows) imports it only for a pipeline that is not row-level. The names below are
loaded on first use, so ``from rewardlab.rewardmodels.shaping import build_pipeline`` costs no torch.
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy exports: building and running a pipeline of row-level transforms must not import torch.
_EXPORTS = {
    "GroupStats": "functional",
    "binarize": "functional",
    "clamp": "functional",
    "cosine_length_reward": "functional",
    "dapo_overlong_penalty": "functional",
    "discounted_returns": "functional",
    "gao_clip": "functional",
    "gao_clip_delta": "functional",
    "gao_delta": "functional",
    "group_normalize": "functional",
    "group_stats": "functional",
    "kimi_length_penalty": "functional",
    "min_form": "functional",
    "min_form_returns": "functional",
    "overlong_mask": "functional",
    "pad_steps": "functional",
    "progress_delta": "functional",
    "scale_shift": "functional",
    "step_returns": "functional",
    "success_plus_steps": "functional",
    "truncation_handling": "functional",
    "unpad_steps": "functional",
    "update_moments": "functional",
    "weighted_sum": "functional",
    "whiten": "functional",
    "RENAMED": "specs",
    "SHAPINGS": "specs",
    "STEP_SHAPINGS": "specs",
    "Shaping": "specs",
    "ShapingPipeline": "specs",
    "build_pipeline": "specs",
    "build_shaping": "specs",
    "parse_spec": "specs",
    "step_shaping": "specs",
    "transform_class": "specs",
    "RowShaping": "rows",
    "ShapingRow": "rows",
    "ShapingBatch": "pipeline",
    "conflicts_with_estimator": "pipeline",
    "shape_step_rewards": "pipeline",
    "WeightedSumSource": "results",
    "results_to_batch": "results",
    "shape_jsonl": "results",
    "shape_results": "results",
}

__all__ = sorted([*_EXPORTS, "functional"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    if name == "functional":
        return importlib.import_module(f"{__name__}.functional")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
