"""Progress bars of every long-running command, in one style.

A bar shows on a terminal (stderr is a tty) and stays quiet in a pipe or a log file, unless asked for
(``enabled=True``) or refused (``enabled=False``, the commands' ``--no-progress``). Bars are tqdm's: count,
rate and ETA when the total is known. A disabled bar is a real tqdm object with ``disable=True``, so callers
call ``update``/``set_postfix``/``close`` without checking.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def on_terminal() -> bool:
    """Whether stderr, where bars go, is a terminal."""
    return sys.stderr.isatty()


def wanted(enabled: bool | None) -> bool:
    """Whether to show a bar: ``enabled`` when given, else whether stderr is a terminal."""
    if enabled is None:
        return on_terminal()
    return bool(enabled)


def progress_bar(total: int | None, desc: str, *, unit: str = "row", enabled: bool | None = None) -> Any:
    """A tqdm bar on stderr (disabled off a terminal unless ``enabled``); use it as a context manager."""
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        disable=not wanted(enabled),
        file=sys.stderr,
        smoothing=0.1,
    )


def track(
    items: Iterable[T], desc: str, *, total: int | None = None, unit: str = "row", enabled: bool | None = None
) -> Iterator[T]:
    """``items``, with a bar that advances by one per item (``total`` from ``len(items)`` when it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress_bar(total, desc, unit=unit, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.update(1)


def quiet_libraries_off_terminal() -> None:
    """Off a terminal, turns off the bars transformers, datasets and the hub draw on their own ("Loading
    weights", "Map"): in a log file they are noise. Call before those libraries are imported."""
    if not on_terminal():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


__all__ = ["on_terminal", "progress_bar", "quiet_libraries_off_terminal", "track", "wanted"]
