"""The registries of policy losses, loss aggregations and KL estimators, and the traits the loop reads.

The advantage estimator registry and its traits are :mod:`.estimators` (reward shaping, a floor above, reads the
traits); they are re-exported here with the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rewardlab.core_algos.estimators import (
    ADVANTAGE_ESTIMATORS,
    EstimatorTraits,
    advantage_estimator,
    estimator_traits,
)
from rewardlab.registry import Registry

Tensor = torch.Tensor


@dataclass(frozen=True)
class PolicyLossTraits:
    """What a policy loss accepts beyond the common arguments."""

    batch_dependent: bool = False
    """A token's loss depends on the other tokens of its micro-batch (Clip-Cov's and KL-Cov's covariance
    selection): the loop then keeps zero-advantage samples in the forward pass, as verl's loss sees them."""
    config_fields: tuple[str, ...] = ()
    """Fields of the run's ``algorithm`` config the loop passes as keyword arguments of the same name (the
    loss's own constants: PPO's dual-clip ``clip_ratio_c``, Clip-Cov's ``clip_cov_ratio``, ...)."""

    @property
    def dual_clip(self) -> bool:
        """It takes ``clip_ratio_c``, the dual-clip constant (Ye et al., 2020)."""
        return "clip_ratio_c" in self.config_fields


@dataclass(frozen=True)
class AggregationTraits:
    """How a loss aggregation counts the samples of its normaliser."""

    length_normalised: bool = False
    """It divides each sample's token sum by the sample's length (each token of sample ``i`` weighs
    ``1 / |y_i|``), as ``seq-mean-token-mean`` does (tree rollouts' shared-prefix weights read it)."""
    counts_masked_samples: bool = False
    """Its sequence count is every sample of the step, masked ones included (a constant normaliser), not
    the samples with a token in the loss (:func:`rewardlab.core_algos.batch_counts`)."""


POLICY_LOSSES: Registry[Callable[..., Any]] = Registry("policy loss")
"""Policy losses by name, each with its :class:`PolicyLossTraits`."""
LOSS_AGG_MODES: Registry[Callable[..., Tensor]] = Registry("loss aggregation mode")
"""Loss aggregations by name, each with its :class:`AggregationTraits`."""
KL_ESTIMATORS: Registry[Callable[[Tensor, Tensor], Tensor]] = Registry("KL estimator")
"""Per-token KL estimators by name (aliases share a function)."""


def policy_loss_traits(name: str) -> PolicyLossTraits:
    """The traits of the policy loss ``name`` (default traits when registered without any)."""
    return POLICY_LOSSES.traits(name) or PolicyLossTraits()


def aggregation_traits(name: str) -> AggregationTraits:
    """The traits of the loss aggregation ``name`` (default traits when registered without any)."""
    return LOSS_AGG_MODES.traits(name) or AggregationTraits()


__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AggregationTraits",
    "EstimatorTraits",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "PolicyLossTraits",
    "advantage_estimator",
    "aggregation_traits",
    "estimator_traits",
    "policy_loss_traits",
]
