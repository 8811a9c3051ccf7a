"""The optional parts of rewardlab, and the one-line error when one is not installed.

``pip install rewardlab`` brings what scoring, serving and evaluating finished completions need; the rest
comes with an extra (pyproject.toml, README "Install"): ``rl`` (torch, transformers: RL training and a model's
generations), ``rm`` (reward-model training and scoring), ``data`` (``datasets``: parquet, CSV, saved-dataset
and hub inputs), ``vllm``, ``ray`` (scoring and serving over Ray), ``search`` (the BM25 index) and
``trackers``. Where a command or a library entry point first needs one, it calls :func:`require`, so a
missing extra reads as one line that names it (the CLI prints a :class:`MissingExtraError` as any
:class:`~rewardlab.errors.UserError`: one line, exit 2)::

    rewardlab rl train needs the rl extra (no module named 'torch'): pip install 'rewardlab[rl]'
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from rewardlab.errors import UserError

EXTRAS = {
    "rl": "RL training, generating with a model (rewardlab rl train, eval --model)",
    "rm": "reward-model training and scoring (rewardlab rm, --reward-model)",
    "data": "parquet, CSV, saved-dataset and hub inputs",
    "vllm": "the vLLM rollout backends",
    "ray": "scoring and serving over Ray (--engine ray, serve --ray-serve)",
    "search": "the BM25 search index (rewardlab index build, the search tools)",
    "trackers": "the trackers of train.report_to (TensorBoard, W&B, trackio, MLflow)",
}
"""Each extra of pyproject.toml's ``[project.optional-dependencies]`` (``all`` and ``dev`` aside): what it is for."""


class MissingExtraError(UserError, ImportError):
    """A part of rewardlab whose extra is not installed. A :class:`~rewardlab.errors.UserError` (the CLI
    prints one line, exit 2) and an ``ImportError`` (code that falls back on a missing import still does)."""


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'rewardlab[extra]'``."""
    return f"pip install 'rewardlab[{extra}]'"


def require(*modules: str, extra: str, what: str) -> ModuleType:
    """Imports ``modules`` and returns the first; when one is not installed, raises
    :class:`MissingExtraError`: ``{what} needs the {extra} extra (no module named ...): pip install ...``.

    ``what`` names the command or the feature (``"rewardlab rl train"``, ``"reading parquet files"``). Only
    an absent module (``ModuleNotFoundError``: the module or one it imports) is reported so: installing the
    extra brings both. An installed module that fails while importing raises its own error, which says more
    than a hint to install it would.
    """
    _check_arguments(modules, extra)
    loaded = []
    for name in modules:
        try:
            loaded.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            raise _missing(exc.name or name, extra, what) from None
    return loaded[0]


def require_installed(*modules: str, extra: str, what: str) -> None:
    """:func:`require` without importing: whether ``modules`` are installed is asked of the import system
    (``importlib.util.find_spec``), for a command that hands them to another process (``vllm serve``) or
    checks a run's settings before loading anything."""
    _check_arguments(modules, extra)
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a dotted name whose parent package is absent
            found = False
        if not found:
            raise _missing(name, extra, what)


def _check_arguments(modules: tuple[str, ...], extra: str) -> None:
    if not modules:
        raise ValueError("require() needs at least one module name")
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r} (known: {sorted(EXTRAS)})")


def _missing(module: str, extra: str, what: str) -> MissingExtraError:
    return MissingExtraError(
        f"{what} needs the {extra} extra (no module named {module!r}): {install_hint(extra)}"
    )


__all__ = ["EXTRAS", "MissingExtraError", "install_hint", "require", "require_installed"]
