"""rewardlab's reward sources as a TRL ``GRPOTrainer`` reward function.

::

    from trl import GRPOConfig, GRPOTrainer
    from rewardlab.integrations.trl import reward_function

    math_reward = reward_function("math", reference="solution", workers=4, timeout=10)
    trainer = GRPOTrainer(model=..., reward_funcs=[math_reward], train_dataset=ds, args=GRPOConfig(...))
    trainer.train()
    math_reward.close()  # optional: also done at garbage collection and at interpreter exit

The source is any name ``rewardlab score --verifier`` or an RL run's ``reward.sources`` takes (a verifier
such as ``math`` / ``code`` / ``qa``, ``http:URL``, ``rm:PATH``, ``py:module:fn``, ``ttrl``) with its
settings as keywords, or a weighted sum of several (``{"math": 1.0, "format": 0.2}``): one
:class:`~rewardlab.verifiers.combine.CombinedSource` of :class:`~rewardlab.scoring.WarmPool` parts, as
an RL run builds it. Each source is scored through a warm scoring pool (worker processes with a per-row
``timeout``) built on the first call and kept until :meth:`RewardFunction.close`.

What a row gets back:

* a float: the source's reward;
* ``None``: the source has no reward for the row (TRL's meaning: the function does not apply; TRL leaves
  it out of this function's mean and, when every function says ``None``, zeroes the row's advantage);
* an error row (timeout, no answer found, a crashed verifier, a malformed row) is reward 0 (or the reward
  the source reported with its error), as in rewardlab's RL loop: it stays in the group, and is counted.

Nothing about one completion raises: errors are rows. Each call logs through the loggers TRL passes (TRL
1.16 passes ``log_metric`` and ``log_extra``; a version that does not is accepted and not logged to):

* ``log_metric``, one value per batch, which TRL averages over its logging steps: ``rewardlab/NAME/errors``
  (the fraction of rows with an error), ``rewardlab/NAME/errors/KIND`` (the fraction with that
  :func:`~rewardlab.types.error_kind`, spaces as ``_``; from the first batch with that kind on, 0 when
  absent, so the average is over every batch since) and ``rewardlab/NAME/missing`` (the fraction of
  ``None`` rewards);
* ``log_extra``, one value per row, into TRL's completions table: ``NAME/answer`` (the answer the source
  extracted), ``NAME/error`` and ``NAME/details`` (JSON, cut at :data:`DETAILS_CHARS` characters).

``timeout`` cuts a row in the worker processes that score rule verifiers (``math``, ``qa``, ...); sources
the engine scores in this process (``code``, which sandboxes itself, ``http:URL``, ``rm:PATH``, ``py:``)
keep their own limits, as in RL.

:func:`async_reward_function` is the same function for TRL's asynchronous path (TRL 1.16 runs ``async``
reward functions together on its event loop after the synchronous ones): scoring then overlaps with the
other asynchronous reward functions (an LLM judge, an environment's reward) instead of running before them.

Importing this module imports neither TRL nor torch; a source that needs torch (``rm:PATH``, ``py:``)
loads it when built.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# Every kind of an RL run's source names (rm:PATH, py:, ttrl) is a name here too.
from rewardlab.rl.sources import VERIFIER, check_source, source_kind
from rewardlab.scoring.pool import WarmPool
from rewardlab.types import Record, Result, details_answer, error_kind, jsonable, result_reward
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.combine import CombinedSource

__all__ = [
    "DETAILS_CHARS",
    "AsyncRewardFunction",
    "RewardFunction",
    "async_reward_function",
    "reward_function",
]

DETAILS_CHARS = 2000
"""Longest ``NAME/details`` value in TRL's completions table: a code verifier's test output can be long,
and the table keeps a whole generation batch."""

SourceSpec = str | Mapping[str, float] | Sequence[Any]
"""A source name, ``{name: weight}``, or a list of names, ``(name, weight[, kwargs])`` or
``{"name": ..., "weight": ..., "kwargs": ...}``."""

# Keyword arguments TRL passes that are not dataset columns (they never go into a record's metadata).
_TRL_KEYWORDS = ("completion_ids", "trainer_state", "log_extra", "log_metric", "environments")


# ----------------------------------------------------------------------------------------------------------
# Construction
# ----------------------------------------------------------------------------------------------------------
def reward_function(
    source: SourceSpec,
    reference: str | None = "solution",
    *,
    workers: int = 1,
    timeout: float = 10.0,
    name: str | None = None,
    **config: Any,
) -> RewardFunction:
    """A TRL reward function (``GRPOTrainer(reward_funcs=[...])``) scoring with rewardlab's ``source``.

    Args:
        source: A source name (``math``, ``http:URL``, ``rm:PATH``, ...) or a weighted sum of several (see
            :data:`SourceSpec`).
        reference: The dataset column holding each row's reference (the gold answer, tests...); ``None``:
            the rows have none. Other columns go into each record's ``metadata``.
        workers: Worker processes of each source's scoring pool.
        timeout: CPU seconds one row may use before it is an error row (``timeout``; a wall-clock cap of 10x
            stops a row that waits).
        name: The function's ``__name__``, which TRL logs it under (``rewards/NAME/mean``); default: the
            source's name, or the sum's ``1*math+0.2*format``.
        **config: The source's settings (a single source only; a sum's parts take ``kwargs``). A setting
            named like an argument here (an ``http:`` source's own request ``timeout``) goes in the list
            form's ``kwargs``: ``[{"name": "http:URL", "kwargs": {"timeout": 60}}]``.

    Raises:
        ValueError: an unknown source name (``ConfigError``, naming the known ones), bad settings, or a
            source that cannot run outside an RL run (``self_certainty``). A source that fails to load when
            built (an ``rm:PATH`` that is not a model) raises at the first call.
    """
    return RewardFunction(source, reference, workers=workers, timeout=timeout, name=name, **config)


def async_reward_function(
    source: SourceSpec, reference: str | None = "solution", **options: Any
) -> AsyncRewardFunction:
    """:func:`reward_function` as a coroutine function, for TRL's asynchronous reward path (see the module
    docstring); the arguments are :func:`reward_function`'s."""
    return AsyncRewardFunction(source, reference, **options)


def _parts(source: SourceSpec, config: Mapping[str, Any]) -> list[tuple[str, float, dict[str, Any]]]:
    """``(name, weight, kwargs)`` of each part of ``source`` (one part for a single name)."""
    if isinstance(source, str):
        return [(source, 1.0, dict(config))]
    if config:
        raise ValueError(f"settings {sorted(config)} for a combination: give each part its own 'kwargs'")
    if isinstance(source, Mapping):
        items: list[Any] = list(source.items())
    elif isinstance(source, Sequence):
        items = list(source)
    else:
        raise TypeError(f"source must be a name, a mapping name -> weight, or a list; got {source!r}")
    if not items:
        raise ValueError("a combination needs at least one source")
    return [_part(item, i) for i, item in enumerate(items)]


def _part(item: Any, i: int) -> tuple[str, float, dict[str, Any]]:
    if isinstance(item, str):
        return item, 1.0, {}
    if isinstance(item, Mapping):
        unknown = set(item) - {"name", "weight", "kwargs"}
        if unknown or "name" not in item:
            raise ValueError(f"source[{i}]: expected keys name, weight, kwargs; got {sorted(item)}")
        return item["name"], float(item.get("weight", 1.0)), dict(item.get("kwargs") or {})
    if isinstance(item, Sequence) and len(item) in (2, 3):
        kwargs = dict(item[2] or {}) if len(item) == 3 else {}
        return item[0], float(item[1]), kwargs
    raise ValueError(f"source[{i}]: expected a name, (name, weight[, kwargs]) or a dict; got {item!r}")


def _check_part(name: Any, kwargs: dict[str, Any], where: str) -> None:
    """Fails now, not at the first training step, on a name or settings that cannot work.

    Raises:
        ValueError: naming ``where``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: a source name must be a non-empty string, got {name!r}")
    kind = source_kind(name)
    if kind.run_objects:  # self_certainty scores with the policy's forward pass, which TRL does not lend
        needs = "; ".join(kind.run_objects.values())
        raise ValueError(f"{where}: the {name} reward source needs {needs}, not a TRL reward function")
    check_source(name, kwargs, where)
    if kind is VERIFIER:  # a verifier is cheap to build: its settings are checked by building it once
        try:
            verifier = get_verifier(name, **kwargs)
        except TypeError as exc:  # an unknown setting
            raise ValueError(f"{where}.kwargs: {exc}") from exc
        with contextlib.suppress(Exception):
            if callable(getattr(verifier, "close", None)):
                verifier.close()


def _default_name(parts: list[tuple[str, float, dict[str, Any]]], single: bool) -> str:
    if single:
        return parts[0][0]
    return "+".join(f"{weight:g}*{name}" for name, weight, _ in parts)


def _discard_all(pools: list[WarmPool]) -> None:
    """Stops the pools' workers (a later call builds them again)."""
    for pool in pools:
        pool.discard()


# ----------------------------------------------------------------------------------------------------------
# The reward function
# ----------------------------------------------------------------------------------------------------------
class RewardFunction:
    """A rewardlab source as a TRL reward function; build it with :func:`reward_function`.

    Called as TRL calls a reward function: ``fn(prompts=..., completions=..., completion_ids=..., **columns,
    trainer_state=..., log_extra=..., log_metric=...)``; returns one reward per completion (see the module
    docstring for ``None`` and errors). The scoring pool is built on the first call and reused;
    :meth:`close` stops it (a later call builds a new one).
    """

    def __init__(
        self,
        source: SourceSpec,
        reference: str | None = "solution",
        *,
        workers: int = 1,
        timeout: float = 10.0,
        name: str | None = None,
        **config: Any,
    ) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        if not (isinstance(timeout, (int, float)) and 0 < timeout < math.inf):
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout}")
        single = isinstance(source, str)
        self.parts = _parts(source, config)
        for i, (part, _, kwargs) in enumerate(self.parts):
            _check_part(part, kwargs, "source" if single else f"source[{i}]")
        self.combined = not single
        self.reference = reference
        self.workers = workers
        self.timeout = float(timeout)
        self.__name__ = name or _default_name(self.parts, single)
        self.kinds_seen: set[str] = set()
        self._warned_reference = False
        # One warm pool per part, built on the first call; run={}: run-only kinds (rm:, py:, ttrl) are known
        # names here, as in an RL run. A sum is one CombinedSource of them, as RL builds it.
        self._pools = [
            WarmPool(part, kwargs, workers=workers, timeout=self.timeout, run={})
            for part, _, kwargs in self.parts
        ]
        weights = [weight for _, weight, _ in self.parts]
        self._source = CombinedSource(self._pools, weights) if self.combined else self._pools[0]
        # Stops the pools when the function is collected, or at interpreter exit, whichever comes first (the
        # list of pools holds no reference to the function, so that it can be collected).
        self._finalizer = weakref.finalize(self, _discard_all, self._pools)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__name__!r}, reference={self.reference!r})"

    def close(self) -> None:
        """Stops the scoring pools' workers (a later call builds them again)."""
        _discard_all(self._pools)

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        *,
        log_extra: Callable[[str, list], None] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        results = self.score(prompts, completions, **columns)
        self._log(results, log_extra, log_metric)
        return [_reward(result) for result in results]

    # -- scoring -----------------------------------------------------------------------------------------
    def score(
        self, prompts: Sequence[Any] | None, completions: Sequence[Any] | None, **columns: Any
    ) -> list[Result]:
        """One :class:`Result` per completion (the rows of a call, before they become rewards); never raises
        on a row: a malformed one is an error row."""
        completions = list(completions or [])
        references = self._references(columns, len(completions))
        metadata = {k: v for k, v in columns.items() if k not in _TRL_KEYWORDS}
        built = [_record(i, prompts, completions, references, metadata) for i in range(len(completions))]
        records = [r for r in built if isinstance(r, Record)]
        scored = iter(self._score_records(records))
        return [next(scored) if isinstance(r, Record) else r for r in built]

    def _references(self, columns: dict[str, Any], n: int) -> Sequence[Any]:
        if self.reference is None:
            return [None] * n
        if self.reference not in columns:
            if not self._warned_reference:  # once: every batch of the run lacks it alike
                self._warned_reference = True
                known = sorted(k for k in columns if k not in _TRL_KEYWORDS)
                warnings.warn(
                    f"reward function {self.__name__!r}: no {self.reference!r} column in the dataset "
                    f"(columns: {known}); rows are scored without a reference (reference=None to say so)",
                    stacklevel=3,
                )
            return [None] * n
        return columns.pop(self.reference)

    def _score_records(self, records: list[Record]) -> list[Result]:
        if not records:
            return []
        # Not caught: a source that cannot be built (an rm:PATH that does not load) is a bad argument, and a
        # run of all-zero rewards would hide it.
        for pool in self._pools:
            pool.build()
        try:
            results = list(self._source.score_batch(records))
            if len(results) != len(records):
                raise ValueError(f"{len(results)} results for {len(records)} records")
            return results
        except Exception as exc:  # the pools never raise; a sum's combining might: every row is an error
            return [Result.failure(f"source error: {type(exc).__name__}: {exc}") for _ in records]

    # -- logging ------------------------------------------------------------------------------------------
    def _log(
        self,
        results: list[Result],
        log_extra: Callable[[str, list], None] | None,
        log_metric: Callable[[str, float], None] | None,
    ) -> None:
        if not results:
            return
        # A logger that fails must not take the rewards down with it.
        if log_metric is not None:
            with contextlib.suppress(Exception):
                for key, value in self.metrics(results).items():
                    log_metric(key, value)
        if log_extra is not None:
            with contextlib.suppress(Exception):
                for key, values in self.extra_columns(results).items():
                    log_extra(key, values)

    def metrics(self, results: Sequence[Result]) -> dict[str, float]:
        """The batch's fractions of error rows, of each error kind seen so far, and of missing rewards."""
        n = len(results)
        kinds: Counter = Counter()
        for result in results:
            kinds.update(set(self._error_kinds(result)))
        self.kinds_seen.update(kinds)
        prefix = f"rewardlab/{self.__name__}"
        out = {
            f"{prefix}/errors": sum(r.error is not None for r in results) / n,
            f"{prefix}/missing": sum(_reward(r) is None for r in results) / n,
        }
        out.update(
            {f"{prefix}/errors/{_metric_key(kind)}": kinds[kind] / n for kind in sorted(self.kinds_seen)}
        )
        return out

    def _error_kinds(self, result: Result) -> list[str]:
        """The error kinds of a row: a sum's are its parts' (its own error is ``"part: error"``)."""
        if self.combined:
            components = (result.details or {}).get("components") or {}
            kinds = [error_kind(c.get("error")) for c in components.values() if isinstance(c, dict)]
            kinds = [k for k in kinds if k]
            if kinds or result.error is None:
                return kinds
        return [error_kind(result.error) or "error"] if result.error is not None else []

    def extra_columns(self, results: Sequence[Result]) -> dict[str, list[Any]]:
        """Columns of TRL's completions table: each row's extracted answer, error and details."""
        return {
            f"{self.__name__}/answer": [self._answer(r) for r in results],
            f"{self.__name__}/error": [r.error for r in results],
            f"{self.__name__}/details": [_details_text(r.details) for r in results],
        }

    def _answer(self, result: Result) -> str | None:
        details = result.details or {}
        answer = details_answer(details)
        if answer is None and self.combined:  # a sum's answer: its first part's
            first = next(iter((details.get("components") or {}).values()), None)
            if isinstance(first, dict) and isinstance(first.get("details"), dict):
                answer = details_answer(first["details"])
        return answer


class AsyncRewardFunction(RewardFunction):
    """:class:`RewardFunction` as a coroutine function: TRL awaits it on its event loop, and the scoring runs
    in a thread so other asynchronous reward functions go on meanwhile."""

    async def __call__(  # type: ignore[override]
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        *,
        log_extra: Callable[[str, list], None] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        call = super().__call__
        return await asyncio.to_thread(
            call, prompts, completions, log_extra=log_extra, log_metric=log_metric, **columns
        )


# ----------------------------------------------------------------------------------------------------------
# Rows
# ----------------------------------------------------------------------------------------------------------
def _record(
    i: int,
    prompts: Sequence[Any] | None,
    completions: list[Any],
    references: Sequence[Any],
    metadata: Mapping[str, Any],
) -> Record | Result:
    """Row ``i`` as a record, or the error row of a malformed one (a completion that is neither text nor
    chat messages, a column shorter than the batch)."""
    try:
        completion = completions[i]
        if not _is_completion(completion):
            raise TypeError(f"completion is {type(completion).__name__}, not text or chat messages")
        prompt = prompts[i] if prompts is not None else ""
        meta = {key: values[i] for key, values in metadata.items()}
        return Record(id=i, prompt=prompt, completion=completion, reference=references[i], metadata=meta)
    except Exception as exc:
        return Result.failure(f"invalid record: {type(exc).__name__}: {exc}")


def _is_completion(value: Any) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, list) and all(isinstance(m, dict) for m in value)


def _reward(result: Result) -> float | None:
    """The row's reward as TRL gets it: :func:`result_reward` (an error row: 0), or 0 for a reward that is
    not a number (the pool already turns those into error rows)."""
    try:
        return result_reward(result)
    except (TypeError, ValueError):
        return 0.0


def _metric_key(kind: str) -> str:
    """An error kind as a metric name's last part: trackers' names take no spaces (``no_answer_found``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", kind).strip("_") or "error"


def _details_text(details: Any) -> str | None:
    if not details:
        return None
    text = json.dumps(jsonable(details), ensure_ascii=False, sort_keys=True)
    return text if len(text) <= DETAILS_CHARS else text[: DETAILS_CHARS - 3] + "..."
