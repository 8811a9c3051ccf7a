"""IFEval's four accuracies over scored results, the numbers the IFEval paper and lm-eval report.

- prompt-level strict / loose accuracy: share of prompts whose instructions are *all* followed;
- instruction-level strict / loose accuracy: share of all instructions followed, pooled over prompts.

Results whose scoring failed (``error`` set, e.g. a timeout or an unknown instruction id) count as a
prompt not followed; their instructions are unknown, so they are left out of the instruction-level
denominator and counted in ``n_errors``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from rewardlab.types import Result


def _parts(result: Any) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(result, Result):
        return result.details, result.error
    if isinstance(result, dict):
        return result.get("details"), result.get("error")
    raise TypeError(f"expected Result or dict, got {type(result).__name__}")


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


class IFEvalTally:
    """Running IFEval accuracies, fed one result (or output row) at a time, for streaming summaries.

    ``add`` takes a :class:`~rewardlab.types.Result` or a dict with ``details`` and ``error`` (an
    output row of ``rewardlab score``); rows that are not IFEval results (no ``details.instructions``
    and no error) are ignored. ``to_dict()`` is :func:`ifeval_summary`'s answer; ``format()`` gives
    the lines a CLI prints.
    """

    def __init__(self) -> None:
        self.n_prompts = 0
        self.n_errors = 0
        self.prompt_strict = 0
        self.prompt_loose = 0
        self.inst_strict = 0
        self.inst_loose = 0
        self.n_instructions = 0
        self.per_id: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

    def add(self, result: Result | dict[str, Any]) -> None:
        details, error = _parts(result)
        entries = (details or {}).get("instructions") if isinstance(details, dict) else None
        if error is not None or not isinstance(entries, list):
            if error is not None:
                self.n_prompts += 1
                self.n_errors += 1
            return
        self.n_prompts += 1
        strict = [bool(e.get("strict")) for e in entries]
        loose = [bool(e.get("loose")) for e in entries]
        self.prompt_strict += all(strict)
        self.prompt_loose += all(loose)
        self.inst_strict += sum(strict)
        self.inst_loose += sum(loose)
        self.n_instructions += len(entries)
        for entry, s, lo in zip(entries, strict, loose, strict=True):
            counts = self.per_id[str(entry.get("id"))]
            counts[0] += 1
            counts[1] += s
            counts[2] += lo

    def to_dict(self) -> dict[str, Any]:
        per_category: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for instruction_id, (n, s, lo) in self.per_id.items():
            counts = per_category[instruction_id.split(":", 1)[0]]
            counts[0] += n
            counts[1] += s
            counts[2] += lo

        def table(counts: dict[str, list[int]]) -> dict[str, dict[str, Any]]:
            return {
                key: {"n": n, "strict_acc": _ratio(s, n), "loose_acc": _ratio(lo, n)}
                for key, (n, s, lo) in sorted(counts.items())
            }

        return {
            "prompt_level_strict_acc": _ratio(self.prompt_strict, self.n_prompts),
            "inst_level_strict_acc": _ratio(self.inst_strict, self.n_instructions),
            "prompt_level_loose_acc": _ratio(self.prompt_loose, self.n_prompts),
            "inst_level_loose_acc": _ratio(self.inst_loose, self.n_instructions),
            "n_prompts": self.n_prompts,
            "n_instructions": self.n_instructions,
            "n_errors": self.n_errors,
            "per_instruction": table(self.per_id),
            "per_category": table(per_category),
        }

    def format(self) -> str:
        """Human-readable lines: the four accuracies (empty string when nothing was added)."""
        if not self.n_prompts:
            return ""
        d = self.to_dict()

        def pct(value: float | None) -> str:
            return "n/a" if value is None else f"{100 * value:.1f}%"

        return "\n".join(
            [
                f"IFEval       {self.n_prompts} prompts, {self.n_instructions} instructions"
                + (f", {self.n_errors} not scored" if self.n_errors else ""),
                f"  prompt-level  strict {pct(d['prompt_level_strict_acc'])}  loose {pct(d['prompt_level_loose_acc'])}",
                f"  instr.-level  strict {pct(d['inst_level_strict_acc'])}  loose {pct(d['inst_level_loose_acc'])}",
            ]
        )


def ifeval_summary(results: Iterable[Result | dict[str, Any]]) -> dict[str, Any]:
    """IFEval accuracies of ``results`` (``Result`` objects or their ``to_dict()`` form / output rows).

    Returns ``{"prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc",
    "inst_level_loose_acc", "n_prompts", "n_instructions", "n_errors", "per_instruction",
    "per_category"}``; the per-instruction and per-category entries hold ``n``, ``strict_acc``,
    ``loose_acc``. Results without IFEval details (another verifier's) are skipped. The metric names
    are lm-eval's.
    """
    tally = IFEvalTally()
    for result in results:
        tally.add(result)
    return tally.to_dict()
