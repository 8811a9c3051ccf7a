"""Outcome reward models: a one-output ``AutoModelForSequenceClassification`` trained on preferences.

Python::

    from rewardkit.rewardmodels.orm import ORMTrainConfig, train_orm, RewardModel, RewardModelSource

    summary = train_orm(ORMTrainConfig(model="Qwen/Qwen2.5-0.5B", train_file="prefs.jsonl", output_dir="rm"))
    rm = RewardModel("rm")                       # length-sorted dynamic batches within a token budget
    rm.score(["2+2="], ["4"])
    source = RewardModelSource("rm")             # the verifier interface: score_batch(records) -> [Result]

See ``docs/reward_models.md``.
"""

from .config import ORMTrainConfig
from .data import build_text, detect_kind, load_rows, tokenize_rows
from .evaluate import (
    evaluate_reward_model,
    expected_calibration_error,
    pairwise_metrics,
    pointwise_metrics,
)
from .losses import bradley_terry_loss, pointwise_bce_loss
from .model import add_lora, load_reward_model, load_tokenizer
from .scoring import RewardModel, RewardModelSource, fixed_batches, length_sorted_batches
from .synthetic import synthetic_preferences
from .train import latest_checkpoint, train_orm

__all__ = [
    "ORMTrainConfig",
    "RewardModel",
    "RewardModelSource",
    "add_lora",
    "bradley_terry_loss",
    "build_text",
    "detect_kind",
    "evaluate_reward_model",
    "expected_calibration_error",
    "fixed_batches",
    "latest_checkpoint",
    "length_sorted_batches",
    "load_reward_model",
    "load_rows",
    "load_tokenizer",
    "pairwise_metrics",
    "pointwise_bce_loss",
    "pointwise_metrics",
    "synthetic_preferences",
    "tokenize_rows",
    "train_orm",
]
