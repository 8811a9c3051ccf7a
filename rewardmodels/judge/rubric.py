"""Rubrics as rewards (RaR; Gunjal et al., 2025, arXiv 2507.17746): the rubric model and RaR's two reward
formulas. Pure Python, no I/O: :mod:`rewardlab.rewardmodels.judge.sources` asks the judge.

A rubric is a list of criteria, each with a weight. :func:`parse_rubric` reads the forms in use:

* ``{"criterion": "States X", "weight": 5}`` (``points`` is read as ``weight``: HealthBench's
  ``{"criterion", "points", "tags"}`` rows parse too);
* RaR's released rows (``ScaleAI/RaR-Medicine``, ``RaR-Science``, column ``rubric``):
  ``{"title": "...", "description": "Essential Criteria: ...", "weight": 5}``; the description's prefix
  (``Essential`` / ``Important`` / ``Optional`` / ``Pitfall Criteria:``) is the category, the rest the
  criterion's text. The authors' generation prompt asks for weights 1-5 (Essential 5, Important 3-4,
  Optional 1-2) and -1 or -2 for pitfalls, phrased ``"Pitfall Criteria: Does not mention ..."`` or
  ``"... Recommends ..."`` (paper, appendix: "Prompt for Synthetic Rubrics Generation");
* category-only items, ``{"criterion": "...", "category": "important"}``: RaR's categorical weights
  (:data:`CATEGORY_WEIGHTS`, the weights of RaR-Explicit's runs: Essential 1.0, Important 0.7, Optional 0.3,
  Pitfall 0.9);
* a bare string (weight 1, or its category's weight when it has a RaR prefix): equal weights, RaR's "No
  Categorical Labels" ablation;
* any of these with ``"gate": true`` (unmet: the whole reward is 0), and the list as a JSON string.

**Pitfalls.** The judge is asked whether the response *makes the mistake* a pitfall describes
(``templates.RUBRIC_PITFALL``): a pitfall's verdict ``met = True`` means the pitfall occurred, whatever way
it is phrased ("Does not mention X", "Recommends X", "should not omit X"). Asking about the mistake rather
than about the literal sentence is deliberate: RaR's released data phrases pitfalls both ways with the same
negative weights (an avoided mistake read as "met" would be penalised), so the literal reading would reward
the wrong responses on one of the two data sets. The weight's sign then says how it counts: a negative
weight is a penalty when the mistake is made (RaR's data, HealthBench's negative points); a positive one is
earned when the mistake is avoided (RaR-Explicit's +0.9 for pitfalls phrased "avoids ...", the paper's
footnote on pitfall criteria). A negative weight is a pitfall's: a criterion of another category with one is
refused.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CATEGORIES = ("essential", "important", "optional", "pitfall")
"""RaR's criterion categories (an item may also have none: ``""``)."""

CATEGORY_WEIGHTS = {"essential": 1.0, "important": 0.7, "optional": 0.3, "pitfall": 0.9}
"""RaR-Explicit's weights of category-only criteria (Gunjal et al., 2025, section 4: "Essential 1.0,
Important 0.7, Optional 0.3, Pitfall 0.9"); the pitfall's is positive: earned when the mistake is avoided."""

_PREFIX = re.compile(r"^\s*(essential|important|optional|pitfall)\s+criteri(?:a|on)\s*:\s*", re.I)
_TEXT_KEYS = ("criterion", "description", "text")
_WEIGHT_KEYS = ("weight", "points")


@dataclass(frozen=True)
class Criterion:
    """One rubric criterion.

    Attributes:
        text: What the judge checks, as one self-contained statement (a RaR prefix removed).
        weight: Its weight; negative: a pitfall's penalty.
        category: ``essential``, ``important``, ``optional``, ``pitfall`` or ``""``.
        gate: Unmet (a pitfall: made), the whole reward is 0 (explicit aggregation).
    """

    text: str
    weight: float
    category: str = ""
    gate: bool = False

    @property
    def is_pitfall(self) -> bool:
        """Whether the judge is asked if the response makes this mistake (``met`` = the mistake was made)."""
        return self.category == "pitfall"


def parse_rubric(value: Any) -> list[Criterion]:
    """The criteria of a rubric in any of the forms of the module docstring.

    Raises:
        ValueError: one line naming the item and what is wrong with it.
    """
    items = _as_list(value)
    criteria = [_criterion(i, item) for i, item in enumerate(items)]
    if not any(c.weight > 0 for c in criteria):
        raise ValueError("the rubric has no criterion with a positive weight (nothing to normalise by)")
    return criteria


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the rubric is a string but not JSON ({exc.msg} at {exc.pos})") from None
    if isinstance(value, dict) and "rubric" in value:  # a row's {"rubric": [...]} passed whole
        value = value["rubric"]
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise ValueError(f"a rubric is a list of criteria, got {type(value).__name__}")
    if not value:
        raise ValueError("the rubric has no criteria")
    return value


def _criterion(index: int, item: Any) -> Criterion:
    where = f"rubric item {index}"
    if isinstance(item, str):
        item = {"criterion": item}
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected an object or a string, got {type(item).__name__}")
    text = next((item[k] for k in _TEXT_KEYS if item.get(k) not in (None, "")), None)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: no criterion text (a non-empty 'criterion' or 'description')")
    text, prefixed = _split_prefix(text)
    if not text:
        raise ValueError(f"{where}: the criterion is only a category prefix")
    category = _category(where, item.get("category"), prefixed)
    weight = _weight(where, item, category)
    if weight < 0 and category not in ("", "pitfall"):
        raise ValueError(f"{where}: a negative weight is a pitfall's, not an {category} criterion's")
    gate = item.get("gate", False)
    if not isinstance(gate, bool):
        raise ValueError(f"{where}: gate must be true or false, got {gate!r:.40}")
    return Criterion(
        text=text, weight=weight, category=category or ("pitfall" if weight < 0 else ""), gate=gate
    )


def _split_prefix(text: str) -> tuple[str, str]:
    """``("States X", "essential")`` for ``"Essential Criteria: States X"``; ``(text, "")`` without one."""
    match = _PREFIX.match(text)
    if not match:
        return text.strip(), ""
    return text[match.end() :].strip(), match.group(1).lower()


def _category(where: str, given: Any, prefixed: str) -> str:
    if given in (None, ""):
        return prefixed
    if not isinstance(given, str) or given.strip().lower() not in CATEGORIES:
        raise ValueError(f"{where}: unknown category {given!r:.40} (known: {', '.join(CATEGORIES)})")
    category = given.strip().lower()
    if prefixed and prefixed != category:
        raise ValueError(f"{where}: category {category!r} but the text says {prefixed.title()} Criteria")
    return category


def _weight(where: str, item: dict[str, Any], category: str) -> float:
    raw = next((item[k] for k in _WEIGHT_KEYS if item.get(k) is not None), None)
    if raw is None:
        return CATEGORY_WEIGHTS.get(category, 1.0)
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ValueError(f"{where}: weight must be a finite number, got {raw!r:.40}")
    if raw == 0:
        raise ValueError(f"{where}: weight 0 counts for nothing (leave the criterion out)")
    return float(raw)


def earned_share(criterion: Criterion, p_yes: float) -> float:
    """The share of ``criterion``'s weight counted, from the judge's P(yes) (1/0 for a hard verdict): P(yes)
    for a criterion; for a pitfall (yes = the mistake was made) P(yes) with a negative weight (the penalty
    is incurred) and 1 - P(yes) with a positive one (earned when avoided)."""
    if criterion.is_pitfall and criterion.weight > 0:
        return 1.0 - p_yes
    return p_yes


def gate_passed(criterion: Criterion, met: bool) -> bool:
    """Whether a verdict satisfies a gate: met for a criterion, not made for a pitfall."""
    return not met if criterion.is_pitfall else met


def explicit_reward(
    criteria: Sequence[Criterion],
    verdicts: Sequence[float | bool],
    gate_verdicts: Sequence[bool] | None = None,
) -> float:
    """RaR-Explicit: each criterion judged on its own, then ``r = sum_j w_j c_j / sum_j w_j`` (the paper's
    Eq. 1), with ``c_j`` the judge's verdict (1/0) or its probability (soft).

    Negative weights (pitfalls) enter the numerator only: the denominator is the sum of the *positive*
    weights, as HealthBench scores its rubrics (``calculate_score`` in openai/simple-evals'
    ``healthbench_eval.py``: achieved points over the total of the positive points), and the result is
    clipped to [0, 1] (HealthBench clips its mean; a per-row reward is clipped here, so a pile of pitfalls
    cannot push it below 0). With only positive weights this is exactly Eq. 1. For a pitfall ``c_j`` is
    :func:`earned_share`: with a negative weight the penalty counts when the mistake is made.

    Gates: when any gate criterion's verdict (``gate_verdicts``, the voted yes/no; default ``verdicts``
    read as yes above 0.5) fails it (:func:`gate_passed`), the reward is 0.

    Args:
        criteria: The rubric.
        verdicts: Per criterion, P(yes) in [0, 1] or a bool; for a pitfall, yes = the mistake was made.
        gate_verdicts: Per criterion, the hard verdict the gates read.

    Raises:
        ValueError: lengths differ, a verdict outside [0, 1], or no positive weight.
    """
    if len(verdicts) != len(criteria):
        raise ValueError(f"{len(verdicts)} verdicts for {len(criteria)} criteria")
    shares = [float(v) for v in verdicts]
    if any(not 0.0 <= v <= 1.0 for v in shares):
        raise ValueError("verdicts are probabilities in [0, 1]")
    hard = list(gate_verdicts) if gate_verdicts is not None else [v > 0.5 for v in shares]
    if any(c.gate and not gate_passed(c, met) for c, met in zip(criteria, hard, strict=True)):
        return 0.0
    total = sum(c.weight for c in criteria if c.weight > 0)
    if total <= 0:
        raise ValueError("the rubric has no criterion with a positive weight")
    earned = sum(c.weight * earned_share(c, v) for c, v in zip(criteria, shares, strict=True))
    return min(1.0, max(0.0, earned / total))


def implicit_reward(score: float, scale: tuple[float, float] = (1, 10)) -> float:
    """RaR-Implicit: one judge call sees the whole rubric and gives a Likert score on ``scale`` (the
    paper's 1-10); the reward is ``(score - lo) / (hi - lo)``, in [0, 1].

    Raises:
        ValueError: the score is outside the scale, or the scale is empty.
    """
    lo, hi = float(scale[0]), float(scale[1])
    if not hi > lo:
        raise ValueError(f"an empty scale {lo:g}-{hi:g}")
    if not lo <= score <= hi:
        raise ValueError(f"score {score:g} is outside {lo:g}-{hi:g}")
    return (float(score) - lo) / (hi - lo)


def rubric_text(criteria: Sequence[Criterion]) -> str:
    """The rubric as the implicit judge reads it: one numbered line per criterion with its category and
    weight (RaR-Implicit gives the judge the criteria with their categorical weights)."""
    lines = []
    for i, c in enumerate(criteria, 1):
        tags = [c.category or "criterion", f"weight {c.weight:g}"]
        if c.is_pitfall:
            tags.append("a mistake to avoid")
        if c.gate:
            tags.append("required")
        lines.append(f"{i}. ({', '.join(tags)}) {c.text}")
    return "\n".join(lines)


def criterion_details(
    criterion: Criterion,
    met: bool | None = None,
    probability: float | None = None,
    verdict_text: str = "",
) -> dict[str, Any]:
    """One entry of ``details["criteria"]`` (the viewer reads these keys): ``met`` is the judge's voted
    verdict (a pitfall: the mistake was made), ``probability`` P(yes) when the judge gave log-probabilities,
    ``verdict_text`` the judge's first output, cut to :data:`VERDICT_TEXT_CHARS` characters."""
    return {
        "criterion": criterion.text,
        "weight": criterion.weight,
        "category": criterion.category,
        "gate": criterion.gate,
        "met": met,
        "probability": probability,
        "verdict_text": verdict_text[:VERDICT_TEXT_CHARS],
    }


VERDICT_TEXT_CHARS = 500
"""How much of the judge's output a criterion's details keep."""

__all__ = [
    "CATEGORIES",
    "CATEGORY_WEIGHTS",
    "Criterion",
    "criterion_details",
    "earned_share",
    "explicit_reward",
    "gate_passed",
    "implicit_reward",
    "parse_rubric",
    "rubric_text",
]
