"""Every kind of reward-source name an RL run may give, assembled from the floors that define them.

The kinds' registry and resolver are the verifiers floor's (:mod:`rewardlab.verifiers.sources`, which
registers a verifier's name, ``http:URL`` and ``py:module:fn``); a floor above registers its own kinds when
its module is imported. This module imports those modules, so that whoever resolves or checks an RL run's
sources through it (the reward pipeline, the config check, the TRL and verl integrations) knows every kind,
and the unknown-name message lists them all. Importing it imports no torch.
"""

from __future__ import annotations

# Imported for its registration (rm:PATH), not for a name.
import rewardlab.rewardmodels.sources  # noqa: F401
from rewardlab.verifiers.sources import (
    VERIFIER,
    SourceKind,
    build_source,
    check_source,
    known_sources,
    register_source_kind,
    source_kind,
    source_kinds,
)

# This floor's own kinds, the label-free rewards of rl/label_free.py, registered with lazy builders: that
# module imports math-verify and sympy, which the integrations that import this one need not load.
TTRL = register_source_kind(
    SourceKind(
        spelling="ttrl",
        names=("ttrl",),
        build="rewardlab.rl.label_free:MajorityVoteSource",
        argument="none",
        run_only=True,
        group="label-free",
    )
)
"""``ttrl`` in an RL run's ``reward.sources``: :class:`~rewardlab.rl.label_free.MajorityVoteSource`."""

SELF_CERTAINTY = register_source_kind(
    SourceKind(
        spelling="self_certainty",
        names=("self_certainty",),
        build="rewardlab.rl.label_free:SelfCertaintySource",
        argument="none",
        run_only=True,
        run_objects={"score_fn": "the policy: it runs inside an RL run"},
        takes_config=False,
        group="label-free",
    )
)
"""``self_certainty`` in an RL run's ``reward.sources``: :class:`~rewardlab.rl.label_free.SelfCertaintySource`,
scored by the policy."""

__all__ = [
    "VERIFIER",
    "SourceKind",
    "build_source",
    "check_source",
    "known_sources",
    "source_kind",
    "source_kinds",
]
