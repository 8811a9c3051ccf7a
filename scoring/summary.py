"""The end-of-run summary: rows, mean reward, errors by kind, throughput, reward times and the slowest rows."""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import Result, error_kind, jsonable

SLOWEST = 5
"""How many of the slowest rows the summary names."""


def percentile(ordered: list[float], q: float) -> float:
    """The ``q``-th percentile (0 to 100) of sorted values, interpolated linearly between the two nearest
    ranks (numpy's default method)."""
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def time_stats(times: Iterable[float | None]) -> dict[str, float]:
    """``p50``, ``p99`` and ``max`` of the reward times that were measured (``None`` ones left out);
    ``{}`` when none was."""
    ordered = sorted(t for t in times if t is not None)
    if not ordered:
        return {}
    return {"p50": percentile(ordered, 50), "p99": percentile(ordered, 99), "max": ordered[-1]}


@dataclass
class Summary:
    """Totals of a scoring run.

    Attributes:
        rows: Output rows in the file (including rows kept from an earlier run when resuming).
        scored: Rows scored by this run.
        resumed: Rows found already done in the output file (``--resume``).
        reward_sum: Sum of rewards over all ``rows`` that have one.
        missing: Rows without a reward (the source returned ``None``, no error); the mean leaves them out.
        errors: Rows with an error, by kind (:func:`rewardlab.types.error_kind`).
        seconds: Wall-clock time of this run.
        moved: Input fields named like an added field (``reward``, ``details``, ``error``), by name: how many
            rows had them; the output keeps them as ``input_<name>``.
        tallies: Verifier-specific running summaries (``name -> object`` with ``add(row)``, ``to_dict()``,
            ``format()``), fed every output row; e.g. IFEval's instruction- and prompt-level accuracies.
        usage: What a source that calls a server used in this run (requests, retries, failures; a judge's
            tokens and cache hits), or ``None``.
        times: The reward time of every row that has one (seconds; resumed rows' as their output says).
        slowest: The :data:`SLOWEST` slowest rows, a heap of ``(seconds, -position, id, error)``: the first of
            equally slow rows stays.
    """

    rows: int = 0
    scored: int = 0
    resumed: int = 0
    reward_sum: float = 0.0
    missing: int = 0
    errors: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    moved: Counter = field(default_factory=Counter)
    tallies: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    times: array = field(default_factory=lambda: array("d"))  # 8 bytes a row: a run may have millions
    slowest: list[tuple[float, int, Any, str | None]] = field(default_factory=list)

    def observe(self, row: dict[str, Any]) -> None:
        """Feeds one output row to the verifier-specific tallies."""
        for tally in self.tallies.values():
            tally.add(row)

    def add(
        self,
        reward: float | None,
        error: str | None,
        *,
        new: bool = True,
        time_s: float | None = None,
        id: Any = None,
    ) -> None:
        """Counts one output row; ``time_s``: its reward time, ``id``: its id (``None``: its position)."""
        if time_s is not None:
            self._add_time(time_s, self.rows, self.rows if id is None else id, error)
        self.rows += 1
        self.scored += int(new)
        self.resumed += int(not new)
        if reward is None and error is None:
            self.missing += 1
        else:
            self.reward_sum += float(reward or 0.0)
        if error is not None:
            self.errors[error_kind(error)] += 1

    def add_result(self, result: Result) -> None:
        self.add(result.reward, result.error, time_s=result.time_s)

    def _add_time(self, seconds: float, position: int, key: Any, error: str | None) -> None:
        self.times.append(seconds)
        entry = (seconds, -position, key, error)
        if len(self.slowest) < SLOWEST:
            heapq.heappush(self.slowest, entry)
        elif entry[:2] > self.slowest[0][:2]:
            heapq.heapreplace(self.slowest, entry)

    def slowest_rows(self) -> list[dict[str, Any]]:
        """The slowest rows, slowest first: ``id``, ``row`` (position in the output, from 0), ``seconds``,
        ``error``."""
        ordered = sorted(self.slowest, key=lambda e: (-e[0], -e[1]))
        return [{"id": jsonable(k), "row": -p, "seconds": t, "error": e} for t, p, k, e in ordered]

    @property
    def mean_reward(self) -> float:
        """The mean over rows with a reward (rows with an error count as their reward, 0)."""
        rewarded = self.rows - self.missing
        return self.reward_sum / rewarded if rewarded else 0.0

    @property
    def rows_per_s(self) -> float:
        return self.scored / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "scored": self.scored,
            "resumed": self.resumed,
            "mean_reward": self.mean_reward,
            "missing_reward": self.missing,
            "errors": dict(self.errors),
            "seconds": self.seconds,
            "rows_per_s": self.rows_per_s,
            "moved_input_fields": {f"{key} -> input_{key}": n for key, n in self.moved.items()},
            **{name: tally.to_dict() for name, tally in self.tallies.items()},
            **({"usage": self.usage} if self.usage is not None else {}),
            **({"reward_time_s": time_stats(self.times)} if self.times else {}),
            **({"slowest": self.slowest_rows()} if self.slowest else {}),
        }

    def format(self) -> str:
        """A few human-readable lines."""
        lines = [f"rows         {self.rows}" + (f" ({self.resumed} resumed)" if self.resumed else "")]
        lines.append(f"mean reward  {self.mean_reward:.4f}")
        if self.missing:
            lines.append(f"no reward    {self.missing} (the source returned none; left out of the mean)")
        total_errors = sum(self.errors.values())
        if total_errors:
            kinds = ", ".join(f"{kind}: {n}" for kind, n in self.errors.most_common())
            lines.append(f"errors       {total_errors} ({kinds})")
        else:
            lines.append("errors       0")
        lines.append(
            f"throughput   {self.rows_per_s:.1f} rows/s ({self.scored} rows in {self.seconds:.2f} s)"
        )
        for key, n in self.moved.most_common():
            rows = f"{n} row" + ("s" if n != 1 else "")
            lines.append(f"input field  '{key}' kept as 'input_{key}' ({rows}): scoring writes '{key}'")
        if self.usage:
            lines.append("usage        " + ", ".join(f"{key} {value}" for key, value in self.usage.items()))
        lines += self._time_lines()
        lines += [text for text in (tally.format() for tally in self.tallies.values()) if text]
        return "\n".join(lines)

    def _time_lines(self) -> list[str]:
        if not self.times:
            return []
        stats = time_stats(self.times)
        lines = ["reward time  " + ", ".join(f"{name} {value:.4f} s" for name, value in stats.items())]
        for k, row in enumerate(self.slowest_rows()):
            error = f"  ({row['error']})" if row["error"] else ""
            head = "slowest rows " if k == 0 else " " * 13
            lines.append(f"{head}{row['seconds']:.4f} s  id {str(row['id'])[:60]}{error[:80]}")
        return lines


def summarize(results: list[Result], seconds: float = 0.0) -> Summary:
    """The summary of a list of results."""
    summary = Summary(seconds=seconds)
    for result in results:
        summary.add_result(result)
    return summary
