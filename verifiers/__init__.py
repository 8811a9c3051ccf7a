"""Rule-based verifiers (math, code, SQL, instruction constraints, format, multiple choice, short-answer QA,
JSON Schema, and the shaping rewards repetition and cosine length) behind one registry, and ``get_source``:
a verifier or a reward server (``http:URL``) by name (every kind of source name is in ``verifiers/sources.py``).

from rewardlab.verifiers import get_verifier
math = get_verifier("math", mode="strict")
result = math.score(Record(completion="... \\boxed{42}", reference="42"))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rewardlab.verifiers.base import RewardSource, Verifier
from rewardlab.verifiers.sources import VERIFIERS, build_source

VERIFIERS.register("math", "rewardlab.verifiers.math:MathVerifier")
VERIFIERS.register("code", "rewardlab.verifiers.code:CodeVerifier")
VERIFIERS.register("sql", "rewardlab.verifiers.sql:SQLVerifier")
VERIFIERS.register("ifeval", "rewardlab.verifiers.ifeval:IFEvalVerifier")
VERIFIERS.register("format", "rewardlab.verifiers.format:FormatVerifier")
VERIFIERS.register("choice", "rewardlab.verifiers.choice:ChoiceVerifier")
VERIFIERS.register("qa", "rewardlab.verifiers.qa:QAVerifier")
VERIFIERS.register("json", "rewardlab.verifiers.json:JSONVerifier")
VERIFIERS.register("repetition_penalty", "rewardlab.verifiers.shaping:RepetitionPenaltySource")
VERIFIERS.register("cosine_length", "rewardlab.verifiers.shaping:CosineLengthSource")


def register_verifier(name: str, *, override: bool = False) -> Callable[[type[Verifier]], type[Verifier]]:
    """Class decorator that makes a :class:`Verifier` subclass available to ``get_verifier(name)``; a taken
    name is refused unless ``override=True``."""
    return VERIFIERS.register(name, override=override)


def get_verifier(name: str, **config: Any) -> Verifier:
    """Builds the verifier registered as ``name`` with ``config`` (raises UnknownNameError if unknown)."""
    return VERIFIERS.get(name)(**config)


def get_source(name: str, **config: Any) -> Any:
    """The reward source a name gives outside an RL run: ``http:URL`` a reward server
    (:mod:`rewardlab.verifiers.remote`), any other name a registered verifier. Every place that turns a user's
    source name into a source calls this; the kinds of name are :mod:`rewardlab.verifiers.sources`'s table.

    Raises:
        UnknownNameError: an unknown verifier name. ValueError, TypeError: bad settings.
    """
    return build_source(name, config)


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
