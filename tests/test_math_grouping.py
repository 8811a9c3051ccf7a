"""Answer grouping for maj@k: ``rewardlab.verifiers.math.equivalent`` against math-verify's own ``verify``,
its one-way meaning, and the verifiers' ``group_answers`` hook that ``rewardlab eval`` asks."""

from __future__ import annotations

import math_verify
import pytest

from rewardlab.eval.benchmarks import Benchmark, answer_grouping, custom_benchmark
from rewardlab.rl.label_free import math_equivalent as ttrl_equivalent
from rewardlab.verifiers import VERIFIERS, Verifier
from rewardlab.verifiers.base import group_texts
from rewardlab.verifiers.math import MathVerifier, equivalent, group_answers

# (gold a, answer b): pairs the math verifier's decision policy leaves to math-verify
PAIRS = [
    ("1/2", "0.5"),
    ("\\frac{1}{2}", "0.5"),
    ("\\frac12", "0.5"),
    ("2", "\\sqrt{4}"),
    ("x^2+2x+1", "(x+1)^2"),
    ("3\\sqrt{2}", "\\sqrt{18}"),
    ("2^{1/2}", "\\sqrt{2}"),
    ("1/3", "0.333333"),
    ("1/3", "0.333"),
    ("x>1", "(1,\\infty)"),
    ("\\{1,2\\}", "\\{2,1\\}"),
    ("y=2x+1", "2x+1"),
    ("10^{3}", "1000"),
    ("3", "4"),
    ("x^2", "y^2"),
    ("(1,2)", "[1,2]"),
    ("\\pi", "3.14159"),
]


def _reference_verify(gold: str, answer: str) -> bool:
    """math-verify's verdict on ``answer`` against ``gold``, with the math verifier's settings."""
    return math_verify.verify(
        math_verify.parse(f"${gold}$"),
        math_verify.parse(f"${answer}$"),
        strict=True,
        allow_set_relation_comp=True,
    )


@pytest.mark.parametrize("a, b", PAIRS)
def test_equivalent_agrees_with_math_verify(a, b):
    assert equivalent(a, b) == _reference_verify(a, b)
    assert equivalent(b, a) == _reference_verify(b, a)


def test_equivalent_is_one_way_where_the_decision_policy_is():
    # 50 against gold 50% is accepted; 50% against gold 50 counts as 0.5 (docs/math.md): refused.
    # math-verify alone accepts both orders, so this is the verifier's own meaning.
    assert equivalent("50\\%", "50") and not equivalent("50", "50\\%")
    assert _reference_verify("50\\%", "50") and _reference_verify("50", "50\\%")


def test_equivalent_never_raises():
    for a, b in [("", "1"), ("\\frac{", "}"), ("1", "\\boxed{"), ("x" * 2000, "y")]:
        assert equivalent(a, b) in (True, False)


def test_group_answers_compares_new_answers_with_each_class_first_answer():
    calls = []

    def same(a, b):
        calls.append((a, b))
        return a.strip("()") == b.strip("()")

    assert group_answers(["(a)", "b", "a", "(b)", None, "a"], same) == [0, 1, 0, 1, None, 0]
    assert ("(a)", "a") in calls and ("b", "(b)") in calls  # (first of the class, newcomer)


def test_plain_numbers_group_by_value_and_ttrl_compares_both_ways():
    # eval's maj@k keys plain numbers by value (percent sign aside) before any comparison;
    # TTRL's vote asks the math verifier both ways, so 50% and 50 are two answers there.
    assert group_answers(["50\\%", "50"]) == [0, 0] and group_answers(["50", "50\\%"]) == [0, 0]
    assert not ttrl_equivalent("50\\%", "50") and not ttrl_equivalent("50", "50\\%")
    assert ttrl_equivalent("1/2", "0.5") and equivalent("1/2", "0.5")


def test_the_verifiers_group_their_own_answers():
    assert MathVerifier.group_answers(["1/2", "0.5", "2", None]) == [0, 0, 1, None]
    assert Verifier.group_answers(["B", " b ", "A", None]) == group_texts(["B", " b ", "A", None])
    assert group_texts(["B", " b ", "A", None]) == [0, 0, 1, None]
    assert VERIFIERS.get("choice").group_answers(["1/2", "0.5"]) == [0, 1]  # exact text


def test_eval_asks_the_benchmarks_verifier():
    math_bench = custom_benchmark("m", "math")
    assert answer_grouping(math_bench)(["1/2", "0.5"]) == [0, 0]
    assert answer_grouping(custom_benchmark("c", "choice"))(["1/2", "0.5"]) == [0, 1]
    assert answer_grouping(custom_benchmark("k", "code")) is None
    remote = Benchmark(name="r", verifier="http://localhost:1/score", answer_votes="exact")
    assert answer_grouping(remote)(["A", "a"]) == [0, 0]
