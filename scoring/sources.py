"""Reward sources as the scoring engine holds them: resolving a source, the recipe a worker rebuilds it from,
where it runs (the worker pool or this process), which source a row's ``verifier`` field names, and the one
guarded ``score_batch`` call every job makes.

A *source* is a verifier name (or ``http:URL``), a :class:`~rewardlab.verifiers.Verifier`, or any object with
``score_batch(records)`` and ``name``. Verifiers with ``runs_in_process = False`` (rule verifiers: math, SQL,
IFEval...) go to the worker pool; the others (reward models, a code verifier with its own sandbox, any object
that is not a Verifier unless it says otherwise) are scored in this process.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.registry import UnknownNameError
from rewardlab.types import Record, Result, jsonable, result_reward
from rewardlab.verifiers import get_source
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.remote import is_remote


@dataclass
class Source:
    """A resolved source: the object, how to rebuild it in a worker, and whether it goes to the pool."""

    key: str
    obj: Any
    spec: tuple
    pooled: bool


def resolve_source(source: Any, config: dict[str, Any] | None = None) -> Any:
    """The source object for a name (a verifier, or ``http:URL`` for a reward server; built with ``config``), a
    Verifier, or any ``score_batch`` object.

    Raises:
        UnknownNameError: for an unknown verifier name.
        TypeError: for an object without ``score_batch``. ValueError: bad settings of a named source.
    """
    if isinstance(source, str):
        return get_source(source, **(config or {}))
    if not callable(getattr(source, "score_batch", None)):
        raise TypeError(f"a reward source needs score_batch(records); got {type(source).__name__}")
    return source


def spec_of(obj: Any) -> tuple:
    """A picklable recipe for rebuilding ``obj`` in a worker (a Verifier from its class and config)."""
    if isinstance(obj, Verifier):
        return ("class", type(obj), dict(obj.config))
    return ("object", obj)


def build_spec(spec: tuple) -> Any:
    """The source a recipe of :func:`spec_of` (or ``("name", name, config)``) describes, built now."""
    if spec[0] == "class":
        return spec[1](**spec[2])
    if spec[0] == "name":
        return resolve_source(spec[1], spec[2])
    return spec[1]


def is_pooled(obj: Any) -> bool:
    """Whether ``obj`` is scored in the worker pool (``runs_in_process`` false; a Verifier's default)."""
    default = not isinstance(obj, Verifier)
    return not bool(getattr(obj, "runs_in_process", default))


def default_source(source: Any, config: dict[str, Any] | None) -> tuple[str, Source]:
    """A run's default source and its name, from what ``Scorer`` was given (a name is built with ``config``).

    Raises:
        UnknownNameError, TypeError, ValueError: as :func:`resolve_source`.
    """
    obj = resolve_source(source, config)
    name = source if isinstance(source, str) else getattr(obj, "name", type(obj).__name__)
    spec = ("name", source, dict(config or {})) if isinstance(source, str) else spec_of(obj)
    return name, Source(key=f"default:{name}", obj=obj, spec=spec, pooled=is_pooled(obj))


class SourceTable:
    """The sources of a run: the default one and those rows name in their ``verifier`` field (each built once,
    with default settings), or why a name loads none."""

    def __init__(self, default: Source, default_name: str) -> None:
        self.default = default
        self.default_name = default_name
        self._by_name: dict[str, Source | str] = {}

    def for_name(self, name: str | None) -> Source | str:
        """The source a row's ``verifier`` names, or an error message when it names none that loads."""
        if not name or name == self.default_name:
            return self.default
        if is_remote(name):  # an input row must not send rows to a server of its choosing
            return (
                f"invalid record: a row's 'verifier' cannot name a reward server ({name!r:.80}); "
                "pass it as the run's source"
            )
        if name not in self._by_name:
            self._by_name[name] = _named_source(name)
        return self._by_name[name]

    def pooled_objects(self) -> dict[str, Any]:
        """The built objects of the pooled sources, by key (what a forked worker starts with)."""
        named = [s for s in self._by_name.values() if isinstance(s, Source)]
        return {s.key: s.obj for s in [self.default, *named] if s.pooled}


def _named_source(name: str) -> Source | str:
    try:
        obj = resolve_source(name)
    except UnknownNameError:
        return f"unknown verifier: {name!r}"
    except Exception as exc:
        return f"source error: verifier {name!r} failed to load: {last_line(exc)}"
    return Source(key=f"name:{name}", obj=obj, spec=("name", name, {}), pooled=is_pooled(obj))


def last_line(exc: BaseException) -> str:
    """The last line of ``exc``'s traceback (``TypeError: ...``): what an error row says."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def call_score_batch(obj: Any, records: Sequence[Record], *, json_safe: bool = True) -> list[Result]:
    """``obj.score_batch(records)`` that never raises and always returns one Result per record.

    ``json_safe``: details made JSON-safe here (callers that serialise them anyway do it only on failure)."""
    try:
        results = list(obj.score_batch(records))
    except Exception as exc:
        return [Result.failure(f"source error: {last_line(exc)}") for _ in records]
    if len(results) != len(records):
        return [
            Result.failure(f"source error: score_batch returned {len(results)} results for {len(records)}")
            for _ in records
        ]
    return [_clean(r, json_safe) for r in results]


def _clean(result: Any, json_safe: bool = True) -> Result:
    """A result with a float reward, or ``None`` for a missing one (``None`` or NaN from the source, with no
    error: a failure's reward is 0), and (``json_safe``) JSON-safe details (sympy objects, sets... become
    strings/lists). A reward that is not a number is a source error."""
    if not isinstance(result, Result):
        return Result.failure(f"source error: returned {type(result).__name__}, not Result")
    try:
        reward = result_reward(result)
    except (TypeError, ValueError):
        value = result.reward
        return Result.failure(f"source error: reward is {type(value).__name__} {value!r:.80}, not a number")
    details = result.details or {}
    details = jsonable(details) if json_safe else details
    return Result(reward=reward, details=details, error=result.error, time_s=_seconds(result.time_s))


def _seconds(value: Any) -> float | None:
    """A source's own per-record time, kept when it is a number of seconds (anything else: not measured)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < float("inf"):
        return float(value)
    return None
