"""The ``py:`` reward source: a Python reward function, named ``py:module:fn`` in an RL run's
``reward.sources``, as a reward source (:class:`CallableSource`).

The function has TRL's reward-function shape, ``fn(prompts, completions, references) -> rewards``; nothing
here imports torch, so ``py:`` sources work in the light install. The kind itself (its match, builder and
check) is in :mod:`rewardlab.verifiers.sources`'s table of this floor's kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rewardlab.config import ConfigError
from rewardlab.registry import lazy
from rewardlab.types import Record, Result, as_reward

__all__ = ["CallableSource", "check_python_path", "check_python_source", "python_source"]


def _to_result(value: Any) -> Result:
    """A reward function's value as a result: ``None`` / NaN is a missing reward."""
    if isinstance(value, Result):
        return value
    return Result(reward=as_reward(value))


class CallableSource:
    """A Python reward function as a reward source: ``fn(prompts, completions, references) -> rewards``.

    The signature is TRL's reward-function shape. A crash of the batch call falls back to one call per
    sample; a sample whose call crashes gets reward 0 and an error (the run goes on). ``None`` is a missing
    reward.
    """

    def __init__(self, fn: Callable[..., Sequence[float | None]], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "reward_fn")

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        prompts = [r.prompt_text for r in records]
        completions = [r.completion_text for r in records]
        refs = [r.reference for r in records]
        try:
            values = list(self.fn(prompts, completions, refs))
            if len(values) != len(records):
                raise ValueError(f"returned {len(values)} rewards for {len(records)} samples")
            return [_to_result(v) for v in values]
        except Exception:
            out = []
            for p, c, ref in zip(prompts, completions, refs, strict=True):
                try:
                    out.append(_to_result(list(self.fn([p], [c], [ref]))[0]))
                except Exception as exc:
                    out.append(Result.failure(f"reward function crashed: {type(exc).__name__}: {exc}"))
            return out

    def close(self) -> None:
        pass


def python_source(path: str) -> CallableSource:
    """The reward function ``py:module:fn`` names (``path`` is ``module:fn``), as a reward source."""
    return CallableSource(lazy(path), name=path.split(":")[-1])


def check_python_path(spec: str, where: str) -> None:
    """A ``module:attribute`` a ``py:`` spec names must import, so a typo fails now, not after the model."""
    if ":" not in spec:
        raise ConfigError(f"{where}: {'py:' + spec!r} must be py:module:attribute")
    try:
        lazy(spec)
    except Exception as exc:
        raise ConfigError(f"{where}: cannot import {spec!r}: {type(exc).__name__}: {exc}") from None


def check_python_source(name: str, config: dict[str, Any], where: str) -> None:
    """The ``py:`` kind's check: the function ``name`` (``py:module:fn``) names imports."""
    check_python_path(name[3:], f"{where}.name")
