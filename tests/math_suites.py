"""Math-Verify's own test cases (``tests/data/math_verify_suite.jsonl``) and how rewardlab reads each one.

Each case carries the settings its Math-Verify test passes to math-verify; :func:`settings_for` maps them
onto the math verifier's settings (``precision`` -> ``float_rounding``, ``strict``, the set-relation flag,
and ``match_types``: latex only drops the last-number fallback, expr only drops the last-math one), so that
a case is scored as its test means it. Shared by ``tests/test_math_suites.py`` and ``bench/score_math.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SUITE = Path(__file__).parent / "data" / "math_verify_suite.jsonl"

_MODES = {
    ("latex",): ("answer_tag", "boxed", "gsm8k", "answer_is", "last_math"),
    ("expr",): ("answer_tag", "boxed", "gsm8k", "answer_is", "last_number"),
    ("latex", "expr"): "auto",
}

# Cases where rewardlab deliberately disagrees with Math-Verify's expected label, and why.
DELIBERATE = {
    "tests/test_yujianll.py::test_string_extraction[9]": (
        "1 - 1/e vs 1 + 1/e: math-verify reads only the prefix '1 - \\frac{1}{' of both sides and calls them "
        "equal; its test records that false positive"
    ),
    "tests/test_numina_cases.py::test_numina_cases[24]": (
        "the gold is an unclosed '\\\\boxed{' with doubled backslashes; math-verify's match comes from reading "
        "'-1' out of a malformed fragment of it, which rewardlab refuses"
    ),
}


def load_suite() -> list[dict[str, Any]]:
    with SUITE.open() as f:
        return [json.loads(line) for line in f]


def settings_for(case: dict[str, Any]) -> dict[str, Any]:
    """The math verifier's settings equivalent to what the case's test passes to math-verify."""
    if case["call"] != "compare_strings":
        return {}  # a bare verify(parse(gold), parse(pred)): math-verify's defaults
    return {
        "mode": _MODES[tuple(case["match_types"])],
        "float_rounding": case["precision"],
        "strict": case["strict"],
        "set_relation": case["allow_set_relation_comp"],
    }
