"""Process reward models: step splitting, a PRM with a token-classification or "+"/"-" LM head, training,
evaluation (step F1, ProcessBench) and Monte Carlo step labelling.

>>> from rewardlab.rewardmodels.prm import ProcessRewardModel            # doctest: +SKIP
>>> prm = ProcessRewardModel.from_pretrained("runs/prm")                 # doctest: +SKIP
>>> prm.score_steps(records)            # one score per step of each record   # doctest: +SKIP
>>> prm.score_batch(records)            # Results: aggregated reward, step scores in details  # doctest: +SKIP
"""

from __future__ import annotations

from rewardlab.rewardmodels.prm.aggregate import AGGREGATIONS, aggregate
from rewardlab.rewardmodels.prm.data import StepExample, first_error, load_step_examples, write_step_examples
from rewardlab.rewardmodels.prm.metrics import (
    evaluate_step_scores,
    predict_first_error,
    processbench_metrics,
    step_metrics,
)
from rewardlab.rewardmodels.prm.model import PRMConfig, ProcessRewardModel, StepScores
from rewardlab.rewardmodels.prm.steps import (
    MATH_SHEPHERD_TAG,
    Steps,
    char_to_token_index,
    record_steps,
    split_steps,
)

__all__ = [
    "AGGREGATIONS",
    "MATH_SHEPHERD_TAG",
    "PRMConfig",
    "ProcessRewardModel",
    "StepExample",
    "StepScores",
    "Steps",
    "aggregate",
    "char_to_token_index",
    "evaluate_step_scores",
    "first_error",
    "load_step_examples",
    "predict_first_error",
    "processbench_metrics",
    "record_steps",
    "split_steps",
    "step_metrics",
    "write_step_examples",
]
