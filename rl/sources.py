"""Every kind of reward-source name an RL run may give, assembled from the floors that define them.

The kinds' registry and resolver are the verifiers floor's (:mod:`rewardlab.verifiers.sources`, which
registers a verifier's name, ``http:URL`` and ``py:module:fn``); a floor above registers its own kinds when
its module is imported. This module imports those modules, so that whoever resolves or checks an RL run's
sources through it (the reward pipeline, the config check, the TRL and verl integrations) knows every kind,
and the unknown-name message lists them all. Importing it imports no torch.
"""

from __future__ import annotations

# Imported for their registrations (rm:PATH; ttrl, self_certainty), not for a name.
import rewardlab.rewardmodels.sources  # noqa: F401
import rewardlab.rl.label_free  # noqa: F401
from rewardlab.verifiers.sources import (
    VERIFIER,
    SourceKind,
    build_source,
    check_source,
    known_sources,
    source_kind,
    source_kinds,
)

__all__ = [
    "VERIFIER",
    "SourceKind",
    "build_source",
    "check_source",
    "known_sources",
    "source_kind",
    "source_kinds",
]
