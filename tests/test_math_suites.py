"""The math verifier on data nobody here wrote (Math-Verify's own test suite) and on the adversarial table:
every negative case scores 0 in every extraction mode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # shared with bench/score_math.py
from math_adversarial import ADVERSARIAL, ALL_MODES  # noqa: E402
from math_suites import DELIBERATE, load_suite, settings_for  # noqa: E402

from rewardlab.types import Record
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.math.extract import BOX_RULES

SUITE = load_suite()
_VERIFIERS: dict[str, object] = {}


def _verifier(**settings):
    key = repr(sorted(settings.items()))
    if key not in _VERIFIERS:
        _VERIFIERS[key] = get_verifier("math", **settings)
    return _VERIFIERS[key]


def test_suite_is_math_verifys_270_cases():
    assert len(SUITE) == 270
    assert {case["expected"] for case in SUITE} == {0, 1}
    assert set(DELIBERATE) <= {case["test"] for case in SUITE}


@pytest.mark.parametrize("case", SUITE, ids=[case["test"].removeprefix("tests/") for case in SUITE])
def test_math_verify_suite(case):
    """Each Math-Verify case, scored with the settings its test gives math-verify, gets its expected label
    (except the deliberate disagreements, which get the other one)."""
    result = _verifier(**settings_for(case)).score(
        Record(completion=case["prediction"], reference=case["gold"])
    )
    expected = case["expected"] if case["test"] not in DELIBERATE else 1 - case["expected"]
    assert int(result.reward == 1.0) == expected, result.details


def test_adversarial_table_is_big_and_balanced():
    assert len(ADVERSARIAL) >= 100
    assert len({case[0] for case in ADVERSARIAL}) == len(ADVERSARIAL)
    assert sum(not case[4] for case in ADVERSARIAL) >= 80 and sum(case[4] for case in ADVERSARIAL) >= 20


@pytest.mark.parametrize("case", ADVERSARIAL, ids=[case[0] for case in ADVERSARIAL])
def test_adversarial(case):
    """A negative case scores 0 in every mode and with either box rule (a false positive is a reward hack); a
    positive one scores 1 with the defaults."""
    _, _, completion, gold, expected, prompt = case
    record = Record(prompt=prompt, completion=completion, reference=gold)
    if expected:
        result = _verifier().score(record)
        assert result.reward == 1.0, result.details
        return
    for mode in ALL_MODES:
        for boxes in BOX_RULES:
            result = _verifier(mode=mode, boxes=boxes).score(record)
            assert result.reward == 0.0, (mode, boxes, result.details)
