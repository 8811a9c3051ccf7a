"""Facts about the process code runs in, set by one layer and read by another.

The scoring engine (a higher layer) marks its worker processes; verifiers (a lower layer) read the mark
without importing the engine.
"""

from __future__ import annotations

import os

IN_WORKER_ENV = "REWARDKIT_SCORING_WORKER"
"""Set in scoring-engine worker processes: verifiers can skip their own soft timeouts, the engine enforces one."""


def mark_scoring_worker() -> None:
    """Marks this process as a scoring-engine worker (inherited by the programs it starts)."""
    os.environ[IN_WORKER_ENV] = "1"


def in_scoring_worker() -> bool:
    """Whether this process is a scoring-engine worker, whose engine times items out itself."""
    return bool(os.environ.get(IN_WORKER_ENV))
