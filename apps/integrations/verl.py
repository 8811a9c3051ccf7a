"""rewardlab's verifiers as verl's reward function: ``compute_score`` for ``custom_reward_function``.

verl (0.9.1) calls ``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)``
once per response: its reward loop's managers (``naive``, ``dapo``, ``remote``...) do, from several threads at
once. ``compute_score_batch(data_sources=..., solution_strs=..., ground_truths=..., extra_infos=...)`` is the
batched form of ``verl.workers.reward_manager.BatchRewardManager`` (trainers before the reward loop, or your
own manager). Both route each row by its ``data_source`` (:data:`ROUTES`: the names verl's own
``default_compute_score`` knows) to a rewardlab source, convert verl's ground truth into the reference that
source reads, and score through one warm :class:`~rewardlab.scoring.WarmPool` per source and settings (worker
processes, a per-row timeout). Rows of concurrent calls share the pool's workers through its stream: each
call is answered as soon as its own rows are done. A source that fails to build is tried again after
``rewardlab.scoring.pool.BUILD_RETRY_S`` (its rows are error rows meanwhile); a call interrupted while it waits
(verl's SIGALRM timeout, Ctrl-C) aborts the pool, so that its rows do not keep the workers busy.

Every row returns the same keys (verl appends each to a ``reward_extra_info`` list that must be as long as the
batch): ``score``, ``acc``, ``pred``, ``error``, ``source`` and :data:`DETAIL_KEYS`. Nothing a completion, a
ground truth or a route does raises: a failure is a row with score 0 and ``error`` set.

verl settings (``pkg://`` imports the module by name, so Ray can pickle the function by reference)::

    reward.custom_reward_function.path=pkg://rewardlab.integrations.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.default_source=math
    +reward.custom_reward_function.reward_kwargs.routes.my_gsm8k=math

Importing this module imports neither torch nor verl. Example: ``docs/examples/verl_reward.py``.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import rewardlab.rl.sources  # noqa: F401  (every kind of an RL run's source names, rm:PATH too, is a name here)
from rewardlab.scoring.pool import WarmPool
from rewardlab.types import Record, Result, details_answer, jsonable, result_reward

log = logging.getLogger(__name__)

DEFAULT_WORKERS = max(1, min(4, os.cpu_count() or 1))
"""Worker processes per pool (one pool per source and settings, per process)."""

DEFAULT_TIMEOUT = 10.0
"""Seconds one row may take before it is an error row (``timeout``), as in rewardlab's RL runs."""

DETAIL_KEYS: tuple[str, ...] = ("reason",)
"""Keys of rewardlab's ``details`` copied into every row (``None`` where a source has none): scalars and
strings only, so verl's ``reward_extra_info`` lists stay one type per key."""


# ----------------------------------------------------------------------------------------------------------
# Ground truth -> reference
# ----------------------------------------------------------------------------------------------------------
def plain(value: Any) -> Any:
    """``value`` with numpy arrays and scalars, OmegaConf containers and tuples made plain Python (verl's
    parquet rows hold numpy arrays; ``reward_kwargs`` from YAML hold ``DictConfig``)."""
    if isinstance(value, str | bytes | bool | int | float) or value is None:
        return value.decode() if isinstance(value, bytes) else value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):  # numpy array or scalar
        return plain(value.tolist())
    if isinstance(value, Sequence) or hasattr(value, "__iter__"):
        return [plain(v) for v in value]
    return value


def text_reference(ground_truth: Any) -> str:
    """A gold answer string (math): verl's gsm8k number, MATH's boxed answer, or a full solution whose
    ``\\boxed{}`` / ``#### N`` the math verifier reads."""
    value = plain(ground_truth)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None or isinstance(value, dict | list):
        raise ValueError(f"expected a gold answer string, got {type(value).__name__}")
    return str(value)


def qa_reference(ground_truth: Any) -> dict[str, list[str]]:
    """Search-R1's ``{"target": [aliases]}`` (a string or a list of aliases also works)."""
    value = plain(ground_truth)
    if isinstance(value, dict):
        if "target" not in value:
            raise ValueError(f"expected {{'target': [...]}}, got keys {sorted(value)}")
        value = value["target"]
    aliases = value if isinstance(value, list) else [value]
    if not aliases or any(a is None or isinstance(a, dict | list) for a in aliases):
        raise ValueError(f"expected a list of answer strings, got {value!r:.80}")
    return {"target": [str(a) for a in aliases]}


def code_reference(ground_truth: Any) -> dict[str, Any]:
    """verl's code tests (codecontests, apps, codeforces, taco): JSON ``{"inputs", "outputs", "fn_name"?}``,
    which the code verifier reads as stdin/stdout cases, or as APPS call-based ones with ``fn_name``."""
    value = plain(ground_truth)
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(f"expected a dict of tests (or its JSON), got {type(value).__name__}")
    return value


REFERENCES: dict[str, Callable[[Any], Any]] = {
    "plain": plain,
    "text": text_reference,
    "qa": qa_reference,
    "code": code_reference,
}
"""Ground-truth converters by name (a route given in YAML names one)."""


# ----------------------------------------------------------------------------------------------------------
# Routes
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    """Where rows of one ``data_source`` go.

    Attributes:
        source: The rewardlab source name (``math``, ``qa``, ``code``, ..., ``http:URL``, ``rm:PATH``).
        settings: The source's settings (``get_verifier(source, **settings)``).
        reference: How verl's ground truth becomes the record's ``reference``: a name in :data:`REFERENCES`
            or a function.
    """

    source: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    reference: str | Callable[[Any], Any] = "plain"

    def convert(self, ground_truth: Any) -> Any:
        fn = REFERENCES[self.reference] if isinstance(self.reference, str) else self.reference
        return fn(ground_truth)


_GSM8K = Route("math", {"mode": "gsm8k"}, "text")  # verl's gsm8k reads only "#### N": the format is the task
_MATH = Route("math", {"mode": "boxed", "boxes": "last"}, "text")  # verl's math_reward: the last \boxed{}
# DAPO's math_dapo: "Answer: X" (Minerva) first, else the last box. verl scores it +1/-1, rewardlab 1/0: an
# affine map that group-normalised advantages (GRPO, DAPO) cancel.
_DAPO = Route("math", {"mode": ["answer_is", "boxed"], "boxes": "last"}, "text")
_NUMINA = Route("math", {}, "text")  # PRIME's grader: explicit answer markers and boxes, else the last value
_CODE = Route("code", {"partial": True}, "code")  # verl calls prime_code with continuous=True: cases passed
# Search-R1: SQuAD exact match of the last <answer> block. read="tagged" also reads an "Answer:" line or a box
# (verl reads only the tag), and a hedge or two different answers score 0 here (verl pays the last block).
_SEARCH_QA = Route("qa", {"mode": "em", "read": "tagged"}, "qa")

ROUTES: dict[str, Route] = {
    "openai/gsm8k": _GSM8K,
    "lighteval/MATH": _MATH,
    "DigitalLearningGmbH/MATH-lighteval": _MATH,
    "HuggingFaceH4/MATH-500": _MATH,
    "math_dapo": _DAPO,
    "math": _DAPO,
    "math_dapo_reasoning": _DAPO,
    "aime*": _DAPO,  # verl: data_source.startswith("aime")
    **{
        f"numina_{name}": _NUMINA
        for name in ("aops_forum", "synthetic_math", "amc_aime", "synthetic_amc", "cn_k12", "olympiads")
    },
    **{name: _CODE for name in ("codecontests", "apps", "codeforces", "taco")},
    **{
        f"searchR1_{name}": _SEARCH_QA
        for name in ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
    },
    # Not routed: hiyouga/geometry3k (an image task). verl scores it 0.9 * mathruler's grade_answer of the
    # box + 0.1 * a <think>...</think>...\boxed{} format check; no one rewardlab source checks that sum, so a
    # route would pay something else under verl's name. Route it yourself (routes=) if math alone will do.
}
"""verl ``data_source`` -> :class:`Route`; a key ending in ``*`` is a prefix (the longest match wins)."""


def as_route(spec: Any, where: str) -> Route:
    """A route from its forms: a :class:`Route`, a source name, or ``{source, settings?, reference?}``.

    Raises:
        ValueError: a malformed spec (``where`` names it).
    """
    if isinstance(spec, Route):
        return spec
    if isinstance(spec, str) and spec:
        return Route(spec)
    if isinstance(spec, Mapping):
        spec = plain(spec)  # a DictConfig from YAML; a function given as reference stays as it is
        unknown = set(spec) - {"source", "settings", "reference"}
        if unknown or not isinstance(spec.get("source"), str):
            raise ValueError(f"{where}: a route is {{source, settings?, reference?}}, got {sorted(spec)}")
        reference = spec.get("reference", "plain")
        if isinstance(reference, str) and reference not in REFERENCES:
            raise ValueError(
                f"{where}: unknown reference converter {reference!r} (known: {sorted(REFERENCES)})"
            )
        return Route(spec["source"], plain(spec.get("settings") or {}), reference)
    raise ValueError(f"{where}: a route is a source name, a dict or a Route, got {type(spec).__name__}")


def route_table(routes: Mapping[str, Any] | None) -> dict[str, Route]:
    """:data:`ROUTES` with ``routes`` over it (a ``None`` value removes a route).

    Raises:
        ValueError: ``routes`` is not a mapping, or holds a malformed route.
    """
    if routes is not None and not isinstance(routes, Mapping):
        raise ValueError(f"routes maps data_source -> route, got {type(routes).__name__}")
    table = dict(ROUTES)
    for name, spec in (routes or {}).items():
        if spec is None:
            table.pop(str(name), None)
        else:
            table[str(name)] = as_route(spec, f"routes[{name!r}]")
    return table


def find_route(data_source: str, table: Mapping[str, Route]) -> Route | None:
    """The route of ``data_source``: its exact name, else the longest ``prefix*`` it starts with."""
    if data_source in table:
        return table[data_source]
    prefixes = [k for k in table if k.endswith("*") and data_source.startswith(k[:-1])]
    return table[max(prefixes, key=len)] if prefixes else None


# ----------------------------------------------------------------------------------------------------------
# Warm pools
# ----------------------------------------------------------------------------------------------------------
_POOLS: dict[tuple, WarmPool] = {}
_LOCK = threading.Lock()


def _pool(name: str, settings: Mapping[str, Any], workers: int, timeout: float) -> WarmPool:
    """This process's warm pool of a source and settings: built on first use, rebuilt after a failure, its
    stream shared by verl's reward threads."""
    # Keyed by process id: verl's reward workers may be forked from a process that already scored (a pool
    # forgets what it inherited through fork).
    settings_key = json.dumps(jsonable(settings), sort_keys=True)
    key = (os.getpid(), name, settings_key, workers, float(timeout))
    with _LOCK:
        if key not in _POOLS:
            _POOLS[key] = WarmPool(name, settings, workers=workers, timeout=timeout, run={}, stream=True)
        return _POOLS[key]


def close_pools() -> None:
    """Stops this process's warm pools (registered with ``atexit``); the next call builds new ones."""
    with _LOCK:
        mine = [key for key in _POOLS if key[0] == os.getpid()]
        pools = [_POOLS.pop(key) for key in mine]
    for pool in pools:
        pool.close()


def _after_fork_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # another thread may have held it at the fork


atexit.register(close_pools)
os.register_at_fork(after_in_child=_after_fork_in_child)


# ----------------------------------------------------------------------------------------------------------
# compute_score
# ----------------------------------------------------------------------------------------------------------
_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED and len(_WARNED) < 100:
        _WARNED.add(message)
        log.warning("rewardlab: %s", message)


def _verdict(result: Result, score: float) -> bool:
    """Whether the row is correct: the source's own verdict where it reports one, else a positive reward."""
    details = result.details or {}
    verdict = details.get("correct", details.get("match"))
    if isinstance(verdict, bool):
        return verdict
    if isinstance(details.get("status"), str):  # the code verifier: every case passed (partial pays less)
        return details["status"] == "passed"
    return score > 0


def _scalar(value: Any) -> Any:
    return value if isinstance(value, str | bool | int | float) or value is None else None


def _row(result: Result, source: str | None, detail_keys: Sequence[str]) -> dict[str, Any]:
    """verl's dict form of one result; the same keys for every row, whatever happened."""
    try:
        reward = result_reward(result)
    except (TypeError, ValueError):
        reward, result = 0.0, Result.failure(f"source error: reward {result.reward!r:.60} is not a number")
    error = result.error
    if reward is None:  # verl has no missing reward: 0, and said so
        reward, error = 0.0, "missing reward: the source gave none (scored 0)"
    details = result.details if isinstance(result.details, dict) else {}
    row = {
        "score": float(reward),
        "acc": _verdict(result, float(reward)) if error is None else False,
        "pred": details_answer(details),
        "error": error,
        "source": source,
    }
    for key in detail_keys:
        row.setdefault(str(key), _scalar(details.get(key)))
    return row


@dataclass
class _Plan:
    """One row: its route and record, or the error that stops it before scoring."""

    route: Route | None = None
    record: Record | None = None
    error: str | None = None


def _plan(
    index: int,
    data_source: Any,
    solution: Any,
    ground_truth: Any,
    extra_info: Any,
    table: Mapping[str, Route],
    default: Route | None,
) -> _Plan:
    name = str(plain(data_source))
    route = find_route(name, table) or default
    if route is None:
        error = (
            f"unknown data_source {name!r}: no rewardlab route (add one with routes=, or set default_source=)"
        )
        _warn_once(error)
        return _Plan(error=error)
    try:
        reference = route.convert(ground_truth)
    except Exception as exc:
        return _Plan(route, error=f"invalid reference: {name}: {type(exc).__name__}: {exc}")
    metadata = plain(extra_info) if isinstance(extra_info, Mapping) else {}
    metadata = {**jsonable(metadata), "data_source": name}
    completion = solution if isinstance(solution, str) else str(plain(solution) or "")
    return _Plan(route, Record(id=index, completion=completion, reference=reference, metadata=metadata))


def _error_rows(n: int, error: str, detail_keys: Sequence[str]) -> list[dict[str, Any]]:
    return [_row(Result.failure(error), None, detail_keys) for _ in range(n)]


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[Any],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    *,
    routes: Mapping[str, Any] | None = None,
    default_source: Any = None,
    workers: int = DEFAULT_WORKERS,
    timeout: float = DEFAULT_TIMEOUT,
    detail_keys: Sequence[str] = DETAIL_KEYS,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's batched reward function (``BatchRewardManager``): one dict per row, in order; each source's rows
    are scored together through its warm pool.

    Args:
        data_sources, solution_strs, ground_truths, extra_infos: verl's columns.
        routes: Routes over :data:`ROUTES` (``data_source`` -> a source name, ``{source, settings?,
            reference?}`` or a :class:`Route`; ``None`` removes one); verl passes it from ``reward_kwargs``.
        default_source: The route of data sources no route names (the same forms); without it they are
            error rows.
        workers, timeout: Worker processes per pool and seconds per row.
        detail_keys: Keys of rewardlab's ``details`` copied into every row.
        kwargs: What else verl passes (``sandbox_fusion_url``, ``reward_router_address``...): ignored.
    """
    keys = _detail_keys(detail_keys)
    n = len(solution_strs)
    try:
        table = route_table(routes)
        default = as_route(default_source, "default_source") if default_source is not None else None
        columns = _columns(n, data_sources, ground_truths, extra_infos)
    except Exception as exc:  # bad reward_kwargs: every row says so, and training goes on
        error = f"invalid reward_kwargs: {type(exc).__name__}: {exc}"
        _warn_once(error)
        return _error_rows(n, error, keys)
    try:
        plans = [
            _plan(i, ds, solution_strs[i], gt, extra, table, default)
            for i, (ds, gt, extra) in enumerate(columns)
        ]
        results = _score_plans(plans, workers, timeout)
        return [
            _row(result, plan.route.source if plan.route else None, keys)
            for plan, result in zip(plans, results, strict=True)
        ]
    except Exception as exc:  # a last guard: a reward function must not stop training
        log.exception("rewardlab: scoring a batch failed")
        return _error_rows(n, f"scoring failed: {type(exc).__name__}: {exc}", keys)


def _detail_keys(detail_keys: Any) -> list[str]:
    """``detail_keys`` as a list of names (:data:`DETAIL_KEYS` when it is not a list or a name)."""
    try:
        value = plain(detail_keys)
    except Exception:
        return list(DETAIL_KEYS)
    if isinstance(value, str):
        return [value]
    return [str(k) for k in value] if isinstance(value, list) else list(DETAIL_KEYS)


def _columns(n: int, data_sources: Any, ground_truths: Any, extra_infos: Any) -> list[tuple[Any, Any, Any]]:
    extras = [None] * n if extra_infos is None else list(extra_infos)
    sources, truths = list(data_sources), list(ground_truths)
    if not len(sources) == len(truths) == len(extras) == n:
        raise ValueError(
            f"columns differ in length: {len(sources)} data_sources, {n} solution_strs, "
            f"{len(truths)} ground_truths, {len(extras)} extra_infos"
        )
    return list(zip(sources, truths, extras, strict=True))


def _score_plans(plans: list[_Plan], workers: int, timeout: float) -> list[Result]:
    """Each plan's result: the rows of one route's source and settings go to its pool as one request."""
    results: list[Result] = [Result.failure(p.error or "not scored") for p in plans]
    groups: dict[tuple, list[int]] = {}
    for i, plan in enumerate(plans):
        if plan.record is not None and plan.route is not None:
            key = (plan.route.source, json.dumps(jsonable(plan.route.settings), sort_keys=True))
            groups.setdefault(key, []).append(i)
    for indices in groups.values():
        route = plans[indices[0]].route
        assert route is not None
        try:
            pool = _pool(route.source, plain(route.settings), int(workers), float(timeout))
            scored = pool.score_batch([plans[i].record for i in indices])  # type: ignore[misc]
        except Exception as exc:  # e.g. workers=-1: this source's rows are error rows
            scored = [Result.failure(f"scoring failed: {type(exc).__name__}: {exc}") for _ in indices]
        for i, result in zip(indices, scored, strict=True):
            results[i] = result
    return results


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's reward function (``custom_reward_function.name=compute_score``): the dict form
    ``{"score", "acc", "pred", "error", "source", *DETAIL_KEYS}`` of one response.

    ``kwargs``: ``routes``, ``default_source``, ``workers``, ``timeout``, ``detail_keys`` as in
    :func:`compute_score_batch` (from verl's ``reward_kwargs``); anything else verl passes is ignored.
    """
    try:
        return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]
    except Exception as exc:  # a last guard: a reward function must not stop training
        keys = _detail_keys(kwargs.get("detail_keys", DETAIL_KEYS))
        return _error_rows(1, f"scoring failed: {type(exc).__name__}: {exc}", keys)[0]


__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_WORKERS",
    "DETAIL_KEYS",
    "REFERENCES",
    "ROUTES",
    "Route",
    "as_route",
    "close_pools",
    "code_reference",
    "compute_score",
    "compute_score_batch",
    "find_route",
    "plain",
    "qa_reference",
    "route_table",
    "text_reference",
]
