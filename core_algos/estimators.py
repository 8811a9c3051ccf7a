"""The advantage estimator registry and each estimator's traits.

The built-in estimators (:mod:`rewardlab.core_algos`) register here with their traits, next to their code;
reward shaping's double-normalisation check (a floor above) and the RL config check read the traits by name
(:func:`estimator_traits`). The registry's home, this package, is imported on the first lookup.

A new estimator is one decorated function, from any package::

    @advantage_estimator("my_adv", centres_by_group=True, zero_on_equal_rewards=True)
    def my_adv(token_level_rewards, response_mask, *, group_size, valid=None, **_): ...

or a lazy entry whose traits are readable without importing it::

    ADVANTAGE_ESTIMATORS.register("my_adv", "mypkg.adv:my_adv", traits=EstimatorTraits(centres_by_group=True))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rewardlab.registry import Registry

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class EstimatorTraits:
    """What an advantage estimator needs and guarantees; the loop and the config check read these, never
    the estimator's name."""

    needs_critic: bool = False
    """It reads ``values`` (a value model's per-token estimates): the trainer builds and trains a critic."""
    centres_by_group: bool = False
    """Each sample's advantage is taken relative to its own group's rewards (a group mean, leave-one-out
    mean, pass@k or second-best baseline): a ``group_norm`` reward shaping before it normalises twice."""
    zero_on_equal_rewards: bool = False
    """A group whose valid rewards are all equal gets advantage exactly 0, whatever the other groups: when
    every group is so, the policy gradient of the reward is 0 and the update may be skipped."""
    needs_source_rewards: bool = False
    """It reads ``source_rewards`` / ``source_weights`` (each reward source's reward, before combining)."""
    needs_process_rewards: bool = False
    """It reads ``process_rewards`` (token-level rewards apart from the outcome: PRIME's implicit PRM's)."""


ADVANTAGE_ESTIMATORS: Registry[Callable[..., Any]] = Registry(
    "advantage estimator", home="rewardlab.core_algos"
)
"""Advantage estimators by name (the config's ``algorithm.adv_estimator``), each with its
:class:`EstimatorTraits`. Uniform signature ``fn(token_level_rewards, response_mask, **kw) -> (advantages,
returns)``."""


def advantage_estimator(
    name: str,
    *,
    needs_critic: bool = False,
    centres_by_group: bool = False,
    zero_on_equal_rewards: bool = False,
    needs_source_rewards: bool = False,
    needs_process_rewards: bool = False,
    override: bool = False,
) -> Callable[[F], F]:
    """Decorator: registers an advantage estimator under ``name`` with its traits (see
    :class:`EstimatorTraits`); ``override=True`` replaces an estimator of that name."""
    traits = EstimatorTraits(
        needs_critic=needs_critic,
        centres_by_group=centres_by_group,
        zero_on_equal_rewards=zero_on_equal_rewards,
        needs_source_rewards=needs_source_rewards,
        needs_process_rewards=needs_process_rewards,
    )

    def decorator(fn: F) -> F:
        ADVANTAGE_ESTIMATORS.register(name, fn, traits=traits, override=override)
        return fn

    return decorator


def estimator_traits(name: str) -> EstimatorTraits:
    """The traits of the estimator ``name`` (default traits when it was registered without any); a lazily
    registered estimator is not imported. Raises :class:`rewardlab.registry.UnknownNameError` if unknown."""
    return ADVANTAGE_ESTIMATORS.traits(name) or EstimatorTraits()


__all__ = ["ADVANTAGE_ESTIMATORS", "EstimatorTraits", "advantage_estimator", "estimator_traits"]
