"""Reward-source names: the one table of the kinds of name a reward source may have, and the one resolver.

A name is a verifier's (any name no other kind claims: ``math``, ``code``, ...), ``http:URL`` (a reward
server), or, in an RL run's ``reward.sources`` only, ``rm:PATH`` (an outcome reward model),
``py:module:fn`` (a Python reward function) or a label-free source (``ttrl``, ``self_certainty``).
:data:`SOURCE_KINDS` lists them; :func:`build_source` turns a name into a source, :func:`check_source`
checks a name and its settings before anything loads (RL's config check), :func:`source_kind` says which
kind a name is (RL scores some kinds through the scoring engine's pool). A new kind of source is one
:class:`SourceKind` added here.

Kinds whose sources live in higher layers (reward models, RL) name their builders by lazy
``"module:attr"`` strings: this module never imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rewardlab.config import ConfigError
from rewardlab.registry import Registry, lazy
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.remote import PREFIXES as HTTP_PREFIXES

VERIFIERS: Registry[type[Verifier]] = Registry("verifier")
"""Verifier names (the built-ins are registered in ``verifiers/__init__.py``)."""


@dataclass(frozen=True)
class SourceKind:
    """One kind of reward-source name.

    Attributes:
        spelling: How messages list the kind (``"http:URL"``; a verifier's kind: ``"verifiers"``).
        build: The builder, or its lazy ``"module:attr"``: called as ``build(argument, **config)``, the
            argument being what ``argument`` says.
        prefixes: Names starting with one of these are of this kind.
        names: Names equal to one of these are of this kind (a verifier's kind has neither: it takes the
            names no other kind claims).
        argument: What the builder gets first: ``"name"`` (the whole name), ``"rest"`` (the name after its
            prefix) or ``"none"`` (the name says nothing more: only the settings).
        check: Checks a name and its settings before anything loads (or its lazy ``"module:attr"``):
            ``check(name, config, where)`` raises ``ConfigError`` naming ``where.name`` / ``where.kwargs``.
        run_only: Only an RL run's ``reward.sources`` may name it; elsewhere (``rewardlab score``, a row's
            ``verifier``, a combined source's part) the name stays an unknown verifier.
        run_objects: Objects of the RL run the builder takes as keywords, each with what it is (said when
            the run does not give it).
        takes_config: Whether the source has settings (``kwargs``) at all.
        scored_by_engine: RL scores it through a :class:`rewardlab.scoring.Scorer` (worker pool, per-item
            timeouts, ``reward.workers`` / ``reward.timeout``) rather than calling it directly.
        group: The heading the kind is listed under in the unknown-name message (``"label-free"``); empty:
            listed by its spelling after the groups.
    """

    spelling: str
    build: str | Callable[..., Any]
    prefixes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    argument: str = "name"
    check: str | Callable[[str, dict[str, Any], str], None] | None = None
    run_only: bool = False
    run_objects: Mapping[str, str] = field(default_factory=dict)
    takes_config: bool = True
    scored_by_engine: bool = False
    group: str = ""

    def claims(self, name: str) -> bool:
        """Whether ``name`` is of this kind (a verifier's kind claims no name by itself)."""
        return name in self.names or (bool(self.prefixes) and name.startswith(self.prefixes))


def check_python_path(spec: str, where: str) -> None:
    """A ``module:attribute`` a ``py:`` spec names must import, so a typo fails now, not after the model."""
    if ":" not in spec:
        raise ConfigError(f"{where}: {'py:' + spec!r} must be py:module:attribute")
    try:
        lazy(spec)
    except Exception as exc:
        raise ConfigError(f"{where}: cannot import {spec!r}: {type(exc).__name__}: {exc}") from None


def _check_verifier(name: str, config: dict[str, Any], where: str) -> None:
    if name not in VERIFIERS:
        raise ConfigError(f"{where}.name: unknown reward source {name!r} ({known_sources()})")


def _check_python(name: str, config: dict[str, Any], where: str) -> None:
    check_python_path(name[3:], f"{where}.name")


def _check_reward_model(name: str, config: dict[str, Any], where: str) -> None:
    if not name[3:]:
        raise ConfigError(f"{where}.name: rm: needs a reward model path (rm:PATH)")


VERIFIER = SourceKind(
    spelling="verifiers",
    build="rewardlab.verifiers:get_verifier",
    check=_check_verifier,
    scored_by_engine=True,
)
"""A registered verifier: the kind of every name no other kind claims."""

SOURCE_KINDS: list[SourceKind] = [
    SourceKind(
        spelling="rm:PATH",
        prefixes=("rm:",),
        build="rewardlab.rewardmodels.orm:RewardModelSource",
        argument="rest",
        check=_check_reward_model,
        run_only=True,
        scored_by_engine=True,
    ),
    SourceKind(
        spelling="py:module:fn",
        prefixes=("py:",),
        build="rewardlab.rl.rewards:python_source",
        argument="rest",
        check=_check_python,
        run_only=True,
    ),
    SourceKind(
        spelling="http:URL",
        prefixes=HTTP_PREFIXES,
        build="rewardlab.verifiers.remote:HTTPRewardSource",
        check="rewardlab.verifiers.remote:check_http_source",
        scored_by_engine=True,
    ),
    SourceKind(
        spelling="ttrl",
        names=("ttrl",),
        build="rewardlab.rl.label_free:MajorityVoteSource",
        argument="none",
        run_only=True,
        group="label-free",
    ),
    SourceKind(
        spelling="self_certainty",
        names=("self_certainty",),
        build="rewardlab.rl.label_free:SelfCertaintySource",
        argument="none",
        run_only=True,
        run_objects={"score_fn": "the policy: it runs inside an RL run"},
        takes_config=False,
        group="label-free",
    ),
]
"""Every kind of source name but the verifiers', first match wins (their prefixes and names do not overlap)."""


def _resolve(entry: Any) -> Any:
    return lazy(entry) if isinstance(entry, str) else entry


def source_kind(name: str, *, in_run: bool = True) -> SourceKind:
    """The kind of source ``name`` names; ``in_run=False`` (outside an RL run's ``reward.sources``): a
    run-only kind's name is a verifier's name (and so an unknown one)."""
    for kind in SOURCE_KINDS:
        if kind.claims(name) and (in_run or not kind.run_only):
            return kind
    return VERIFIER


def build_source(
    name: str, config: Mapping[str, Any] | None = None, run: Mapping[str, Any] | None = None
) -> Any:
    """The reward source ``name`` names, built with the settings ``config``.

    ``run``: the RL run's objects that run-only kinds take (``score_fn``: the policy's self-certainty);
    ``None`` outside a run, where run-only kinds are unknown names.

    Raises:
        UnknownNameError: an unknown verifier name. ValueError, TypeError: bad settings, or a run object the
        kind needs is missing.
    """
    kind = source_kind(name, in_run=run is not None)
    config = dict(config or {})
    for key, what in kind.run_objects.items():
        if (run or {}).get(key) is None:
            raise ValueError(f"the {name} reward source needs {what}")
        config[key] = run[key]  # type: ignore[index]
    build = _resolve(kind.build)
    if kind.argument == "none":
        return build(**config)
    prefix = next((p for p in kind.prefixes if name.startswith(p)), "")
    return build(name[len(prefix) :] if kind.argument == "rest" else name, **config)


def check_source(name: str, config: Mapping[str, Any] | None, where: str) -> None:
    """Checks an RL run's source name and its settings before anything loads; ``where`` is the config path
    of the source (``reward.sources[0]``).

    Raises:
        ConfigError: naming ``where.name`` or ``where.kwargs``.
    """
    kind = source_kind(name)
    config = dict(config or {})
    if config and not kind.takes_config:
        raise ConfigError(f"{where}.kwargs: {name} takes no arguments")
    if kind.check is not None:
        _resolve(kind.check)(name, config, where)


def known_sources() -> str:
    """The names an RL run's sources may have, as the unknown-name message lists them."""
    groups: dict[str, list[str]] = {}
    for kind in SOURCE_KINDS:
        if kind.group:
            groups.setdefault(kind.group, []).append(kind.spelling)
    others = [kind.spelling for kind in SOURCE_KINDS if not kind.group]
    parts = [f"{VERIFIER.spelling}: {', '.join(VERIFIERS.names())}"]
    parts += [f"{group}: {', '.join(spellings)}" for group, spellings in groups.items()]
    return "; ".join(parts) + (f"; or {', '.join(others)}" if others else "")


__all__ = [
    "SOURCE_KINDS",
    "VERIFIER",
    "VERIFIERS",
    "SourceKind",
    "build_source",
    "check_python_path",
    "check_source",
    "known_sources",
    "source_kind",
]
