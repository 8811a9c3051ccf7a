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

from rewardkit.types import Result


def _parts(result: Any) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(result, Result):
        return result.details, result.error
    if isinstance(result, dict):
        return result.get("details"), result.get("error")
    raise TypeError(f"expected Result or dict, got {type(result).__name__}")


def ifeval_summary(results: Iterable[Result | dict[str, Any]]) -> dict[str, Any]:
    """IFEval accuracies of ``results`` (``Result`` objects or their ``to_dict()`` form).

    Returns ``{"prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc",
    "inst_level_loose_acc", "n_prompts", "n_instructions", "n_errors", "per_instruction",
    "per_category"}``; the per-instruction and per-category entries hold ``n``, ``strict_acc``,
    ``loose_acc``. Results without IFEval details (another verifier's) are skipped.
    """
    n_prompts = n_errors = 0
    prompt_strict = prompt_loose = 0
    inst_strict = inst_loose = n_instructions = 0
    per_id: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for result in results:
        details, error = _parts(result)
        entries = (details or {}).get("instructions")
        if error is not None or not isinstance(entries, list):
            if error is None:
                continue  # not an IFEval result
            n_prompts += 1
            n_errors += 1
            continue
        n_prompts += 1
        strict = [bool(e.get("strict")) for e in entries]
        loose = [bool(e.get("loose")) for e in entries]
        prompt_strict += all(strict)
        prompt_loose += all(loose)
        inst_strict += sum(strict)
        inst_loose += sum(loose)
        n_instructions += len(entries)
        for entry, s, lo in zip(entries, strict, loose, strict=True):
            counts = per_id[str(entry.get("id"))]
            counts[0] += 1
            counts[1] += s
            counts[2] += lo

    def ratio(a: int, b: int) -> float | None:
        return a / b if b else None

    per_category: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for instruction_id, (n, s, lo) in per_id.items():
        counts = per_category[instruction_id.split(":", 1)[0]]
        counts[0] += n
        counts[1] += s
        counts[2] += lo

    def table(counts: dict[str, list[int]]) -> dict[str, dict[str, Any]]:
        return {
            key: {"n": n, "strict_acc": ratio(s, n), "loose_acc": ratio(lo, n)}
            for key, (n, s, lo) in sorted(counts.items())
        }

    return {
        "prompt_level_strict_acc": ratio(prompt_strict, n_prompts),
        "inst_level_strict_acc": ratio(inst_strict, n_instructions),
        "prompt_level_loose_acc": ratio(prompt_loose, n_prompts),
        "inst_level_loose_acc": ratio(inst_loose, n_instructions),
        "n_prompts": n_prompts,
        "n_instructions": n_instructions,
        "n_errors": n_errors,
        "per_instruction": table(per_id),
        "per_category": table(per_category),
    }
