"""The default suite's time conventions (issue 47), in one place: no wall-clock bound under 10 s, room for
legitimate work on a loaded 2-core machine, and polling instead of sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable

HANG_S = 10.0
"""A bound that guards a hang or a kill, never a speed: room for a loaded 2-core machine, far below what the
hostile work it guards against would take (30 s or more, or forever)."""

ROOM_S = 30.0
"""The timeout of work that must end by itself (legitimate programs, queries and tool calls, and hacks
stopped by a limit other than time), so that a slow run never reads as a wrong verdict. It costs nothing when
they pass; work whose kill is what a test checks gets a short timeout of its own."""


def eventually(condition: Callable[[], bool], within: float = HANG_S) -> bool:
    """Whether ``condition()`` holds within ``within`` seconds, polled (a killed process is reaped a moment
    after the call that killed it returns; a request queues a moment after it is sent): true at once when it
    already holds, so a pass costs no wait, and the bound is room for a loaded machine, not a speed."""
    end = time.monotonic() + within
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True
