"""Outcome reward models: a one-output ``AutoModelForSequenceClassification`` trained on preferences.

Python::

    from rewardlab.rewardmodels.orm import ORMTrainConfig, train_orm, RewardModel, RewardModelSource

    summary = train_orm(ORMTrainConfig(model="Qwen/Qwen2.5-0.5B", train_file="prefs.jsonl", output_dir="rm"))
    rm = RewardModel("rm")                       # length-sorted dynamic batches within a token budget
    rm.score(["2+2="], ["4"])
    source = RewardModelSource("rm")             # the verifier interface: score_batch(records) -> [Result]

See ``docs/reward_models.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy exports: ``rewardlab rm --help`` imports the config without paying for torch / transformers.
_EXPORTS = {
    "ORMTrainConfig": "config",
    "build_text": "data",
    "detect_kind": "data",
    "load_rows": "data",
    "tokenize_rows": "data",
    "evaluate_reward_model": "evaluate",
    "expected_calibration_error": "evaluate",
    "pairwise_metrics": "evaluate",
    "pointwise_metrics": "evaluate",
    "bradley_terry_loss": "losses",
    "pointwise_bce_loss": "losses",
    "add_lora": "model",
    "load_reward_model": "model",
    "load_tokenizer": "model",
    "RewardModel": "scoring",
    "RewardModelSource": "scoring",
    "fixed_batches": "scoring",
    "length_sorted_batches": "scoring",
    "synthetic_preferences": "synthetic",
    "latest_checkpoint": "train",
    "train_orm": "train",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
