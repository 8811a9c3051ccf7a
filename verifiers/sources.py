"""Reward-source names: the registry of the kinds of name a reward source may have, and the one resolver.

A name is a verifier's (any name no other kind claims: ``math``, ``code``, ...), ``http:URL`` (a reward
server), or, in an RL run's ``reward.sources`` only, ``py:module:fn`` (a Python reward function,
:mod:`rewardlab.verifiers.python`), ``rm:PATH`` (an outcome reward model) or a label-free source (``ttrl``,
``self_certainty``). :data:`SOURCE_KINDS` holds the kinds; :func:`build_source` turns a name into a source,
:func:`check_source` checks a name and its settings before anything loads (RL's config check),
:func:`source_kind` says which kind a name is (RL scores some kinds through the scoring engine's pool).

Each floor registers the kinds it defines (:func:`register_source_kind`): this module the verifiers floor's
own (``http:URL``, ``py:module:fn``), :mod:`rewardlab.rewardmodels.sources` ``rm:PATH``,
:mod:`rewardlab.rl.label_free` ``ttrl`` and ``self_certainty``. This floor never names them: what needs every
kind (an RL run, its config check, the TRL and verl integrations) imports :mod:`rewardlab.rl.sources`, which
imports the registering modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from rewardlab.config import ConfigError
from rewardlab.registry import NameTakenError, Registry, entry_path, lazy
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.python import check_python_source, python_source
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


def _check_verifier(name: str, config: dict[str, Any], where: str) -> None:
    if name not in VERIFIERS:
        raise ConfigError(f"{where}.name: unknown reward source {name!r} ({known_sources()})")


VERIFIER = SourceKind(
    spelling="verifiers",
    build="rewardlab.verifiers:get_verifier",
    check=_check_verifier,
    scored_by_engine=True,
)
"""A registered verifier: the kind of every name no other kind claims."""

SOURCE_KINDS: Registry[SourceKind] = Registry("reward-source kind")
"""Every kind of source name but the verifiers', by spelling, in registration order; filled by
:func:`register_source_kind` on the floor that defines each kind. A name matches one kind at most."""


def _definition(kind: SourceKind) -> list[Any]:
    """The kind's fields, a function as its path: a module imported again defines the same kind anew."""
    values = (getattr(kind, f.name) for f in fields(kind))
    return [entry_path(v) if callable(v) else v for v in values]


def _overlap(kind: SourceKind, other: SourceKind) -> bool:
    """Whether one name could be of both kinds (first match would then depend on registration order)."""
    prefixes = any(a.startswith(b) or b.startswith(a) for a in kind.prefixes for b in other.prefixes)
    return prefixes or any(other.claims(n) for n in kind.names) or any(kind.claims(n) for n in other.names)


def register_source_kind(kind: SourceKind, *, override: bool = False) -> SourceKind:
    """Adds ``kind`` under its spelling; registering the same definition again is a no-op.

    Raises:
        NameTakenError: the spelling is taken by another definition, or a registered kind claims some of the
            same names (``override=True`` replaces the kind of that spelling only).
    """
    if kind.spelling in SOURCE_KINDS and _definition(SOURCE_KINDS.get(kind.spelling)) == _definition(kind):
        return kind
    for other in source_kinds():
        if other.spelling != kind.spelling and _overlap(kind, other):
            raise NameTakenError(f"reward-source kind {kind.spelling!r} claims names of {other.spelling!r}")
    SOURCE_KINDS.register(kind.spelling, kind, override=override)
    return kind


def source_kinds() -> list[SourceKind]:
    """The registered kinds in registration order (the verifiers' kind, :data:`VERIFIER`, is not one)."""
    return [SOURCE_KINDS.get(spelling) for spelling in SOURCE_KINDS]


register_source_kind(
    SourceKind(
        spelling="http:URL",
        prefixes=HTTP_PREFIXES,
        build="rewardlab.verifiers.remote:HTTPRewardSource",
        check="rewardlab.verifiers.remote:check_http_source",
        scored_by_engine=True,
    )
)
register_source_kind(
    SourceKind(
        spelling="py:module:fn",
        prefixes=("py:",),
        build=python_source,
        argument="rest",
        check=check_python_source,
        run_only=True,
    )
)


def _resolve(entry: Any) -> Any:
    return lazy(entry) if isinstance(entry, str) else entry


def source_kind(name: str, *, in_run: bool = True) -> SourceKind:
    """The kind of source ``name`` names; ``in_run=False`` (outside an RL run's ``reward.sources``): a
    run-only kind's name is a verifier's name (and so an unknown one)."""
    for kind in source_kinds():
        if kind.claims(name) and (in_run or not kind.run_only):
            return kind
    return VERIFIER


def source_class(name: str) -> Any:
    """What a source name builds outside an RL run: the verifier's class, or its kind's builder (a class, or a
    function for kinds built by one), for class-level hooks such as ``summary_tallies``; ``None`` when the
    name is unknown or its builder does not import (scoring then says why, in its rows)."""
    try:
        kind = source_kind(name, in_run=False)
        if kind is VERIFIER:
            return VERIFIERS.get(name)
        return _resolve(kind.build)
    except Exception:  # an unknown name, or a builder that does not import: no hook
        return None


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
    """The names an RL run's sources may have, as the unknown-name message lists them (the kinds registered
    so far: :mod:`rewardlab.rl.sources` registers them all)."""
    kinds = source_kinds()
    groups: dict[str, list[str]] = {}
    for kind in kinds:
        if kind.group:
            groups.setdefault(kind.group, []).append(kind.spelling)
    others = [kind.spelling for kind in kinds if not kind.group]
    parts = [f"{VERIFIER.spelling}: {', '.join(VERIFIERS.names())}"]
    parts += [f"{group}: {', '.join(spellings)}" for group, spellings in groups.items()]
    return "; ".join(parts) + (f"; or {', '.join(others)}" if others else "")


__all__ = [
    "SOURCE_KINDS",
    "VERIFIER",
    "VERIFIERS",
    "SourceKind",
    "build_source",
    "check_source",
    "known_sources",
    "register_source_kind",
    "source_kind",
    "source_kinds",
]
