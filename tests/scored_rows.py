"""Output files of ``rewardlab score`` compared across runs: equal but for each row's reward time, which
differs from run to run (its presence and type checked instead)."""

from __future__ import annotations

import json
from pathlib import Path


def untimed(path: Path) -> list[dict]:
    """The rows of an output file without their ``reward_time_s``, each checked to be there: seconds, or
    null for a row never scored."""
    out = []
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        seconds = row.pop("reward_time_s")
        assert seconds is None or (isinstance(seconds, float) and seconds >= 0), seconds
        out.append(row)
    return out
