"""Facts about the process code runs in, set by one layer and read by another.

The scoring engine (a higher layer) marks its worker processes; verifiers (a lower layer) read the mark
without importing the engine. :class:`StandInModules` puts modules into ``sys.modules`` for a while (code
loaded from files whose imports must find stand-ins) and leaves the import system as it found it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

IN_WORKER_ENV = "REWARDLAB_SCORING_WORKER"
"""Set in scoring-engine worker processes: verifiers can skip their own soft timeouts, the engine enforces one."""


def mark_scoring_worker() -> None:
    """Marks this process as a scoring-engine worker (inherited by the programs it starts)."""
    os.environ[IN_WORKER_ENV] = "1"


def in_scoring_worker() -> bool:
    """Whether this process is a scoring-engine worker, whose engine times items out itself."""
    return bool(os.environ.get(IN_WORKER_ENV))


class StandInModules:
    """A context manager that puts modules into ``sys.modules`` under given names while it is open, and on
    exit gives every name it touched back its earlier module (or removes it), so that a later real
    ``import`` of those names gets the real package.

    ``with StandInModules({"pkg": bare}) as modules: modules.add("pkg.sub", module)``: :meth:`add` puts
    more names in while the block runs (modules loaded one at a time, each importable by the next).
    """

    def __init__(self, modules: Mapping[str, ModuleType] | None = None) -> None:
        self._initial = dict(modules or {})
        self._saved: dict[str, ModuleType | None] = {}

    def add(self, name: str, module: ModuleType) -> None:
        """Puts ``module`` into ``sys.modules`` as ``name`` until the block ends."""
        if name not in self._saved:
            self._saved[name] = sys.modules.get(name)
        sys.modules[name] = module

    def __enter__(self) -> StandInModules:
        for name, module in self._initial.items():
            self.add(name, module)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, module in reversed(list(self._saved.items())):
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        self._saved.clear()
