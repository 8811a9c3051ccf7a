"""Rule-based verifiers (math, code, SQL, instruction constraints, format) behind one registry, and
``get_source``: a verifier or a reward server (``http:URL``) by name.

from rewardkit.verifiers import get_verifier
math = get_verifier("math", mode="strict")
result = math.score(Record(completion="... \\boxed{42}", reference="42"))
"""

from __future__ import annotations

from typing import Any

from rewardkit.registry import Registry
from rewardkit.verifiers.base import RewardSource, Verifier

VERIFIERS: Registry[type[Verifier]] = Registry("verifier")
VERIFIERS.register("math", "rewardkit.verifiers.math:MathVerifier")
VERIFIERS.register("code", "rewardkit.verifiers.code:CodeVerifier")
VERIFIERS.register("sql", "rewardkit.verifiers.sql:SQLVerifier")
VERIFIERS.register("ifeval", "rewardkit.verifiers.ifeval:IFEvalVerifier")
VERIFIERS.register("format", "rewardkit.verifiers.format:FormatVerifier")


def register_verifier(name: str):
    """Class decorator that makes a :class:`Verifier` subclass available to ``get_verifier(name)``."""
    return VERIFIERS.register(name)


def get_verifier(name: str, **config: Any) -> Verifier:
    """Builds the verifier registered as ``name`` with ``config`` (raises UnknownNameError if unknown)."""
    return VERIFIERS.get(name)(**config)


def get_source(name: str, **config: Any) -> Any:
    """The reward source a name gives: ``http:URL`` a reward server (:mod:`rewardkit.verifiers.remote`), any
    other name a registered verifier. Every place that turns a user's source name into a source calls this.

    Raises:
        UnknownNameError: an unknown verifier name. ValueError, TypeError: bad settings.
    """
    from rewardkit.verifiers.remote import HTTPRewardSource, is_remote

    if is_remote(name):
        return HTTPRewardSource(name, **config)
    return get_verifier(name, **config)


def list_verifiers() -> list[str]:
    return VERIFIERS.names()


__all__ = [
    "VERIFIERS",
    "RewardSource",
    "Verifier",
    "get_source",
    "get_verifier",
    "list_verifiers",
    "register_verifier",
]
