"""The math verifier: the equivalence table (>= 150 cases), extraction (>= 40 cases), details, errors."""

from __future__ import annotations

import pickle
import sys
import threading
import time
from pathlib import Path

import pytest
from time_bounds import HANG_S  # tests/time_bounds.py

sys.path.insert(0, str(Path(__file__).parent))  # math_cases.py is shared with bench/score_math.py
from math_cases import EQUIVALENCE, EXTRACTION  # noqa: E402

from rewardlab.types import Record
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.math import MathVerifier, extract_answer, normalize_answer, parse_number
from rewardlab.verifiers.math.extract import resolve_mode


@pytest.fixture(scope="module")
def verifier() -> MathVerifier:
    return get_verifier("math")


def test_tables_are_big_enough_and_unique():
    assert len(EQUIVALENCE) >= 150
    assert sum(1 for case in EQUIVALENCE if not case[3]) >= 40  # both verdicts are covered
    assert len(EXTRACTION) >= 40
    assert len({c[0] for c in EQUIVALENCE}) == len(EQUIVALENCE)
    assert len({c[0] for c in EXTRACTION}) == len(EXTRACTION)


@pytest.mark.parametrize("case_id,answer,gold,expected", EQUIVALENCE, ids=[c[0] for c in EQUIVALENCE])
def test_equivalence(verifier, case_id, answer, gold, expected):
    result = verifier.score(Record(completion=f"The final answer is $\\boxed{{{answer}}}$.", reference=gold))
    assert result.error is None, result
    assert (result.reward == 1.0) is expected, result.details
    assert result.details["match"] is expected
    assert result.details["extracted_by"] == "boxed"


@pytest.mark.parametrize("case_id,mode,completion,expected", EXTRACTION, ids=[c[0] for c in EXTRACTION])
def test_extraction(case_id, mode, completion, expected):
    answer, how = extract_answer(completion, resolve_mode(mode))
    assert answer == expected
    assert (how is None) is (expected is None)


def test_details_explain_the_verdict(verifier):
    result = verifier.score(Record(completion="so we get \\boxed{1,000} apples", reference="1000"))
    assert result.reward == 1.0
    d = result.details
    assert d["extracted"] == "1,000" and d["extracted_by"] == "boxed" and d["normalized"] == "1000"
    assert d["gold"] == "1000" and d["gold_extracted_by"] == "whole"
    assert d["method"] == "numeric" and "exact" in d["reason"]
    wrong = verifier.score(Record(completion="\\boxed{x^2-1}", reference="x^2+1"))
    assert wrong.reward == 0.0 and wrong.error is None
    assert wrong.details["method"] == "math-verify" and "not equivalent" in wrong.details["reason"]


def test_gold_from_full_solutions(verifier):
    math_solution = "We compute ... so the area is $\\boxed{\\frac{3}{4}}$."
    assert verifier.score(Record(completion="\\boxed{0.75}", reference=math_solution)).reward == 1.0
    gsm8k_solution = "She buys 3 packs of 400.\n#### 1,200"
    result = verifier.score(Record(completion="The answer is 1200.", reference=gsm8k_solution))
    assert result.reward == 1.0 and result.details["gold_extracted_by"] == "gsm8k"


def test_several_acceptable_golds_and_numeric_gold(verifier):
    assert verifier.score(Record(completion="\\boxed{2}", reference=["1", "2"])).reward == 1.0
    assert verifier.score(Record(completion="\\boxed{3}", reference=["1", "2"])).reward == 0.0
    assert verifier.score(Record(completion="\\boxed{0.5}", reference=0.5)).reward == 1.0
    assert verifier.score(Record(completion="\\boxed{12}", reference=12)).reward == 1.0


def test_failures_are_results(verifier):
    none = verifier.score(Record(completion="I have no idea.", reference="4"))
    assert none.reward == 0.0 and none.error == "no answer found"
    assert none.details["gold"] == "4"
    empty_gold = verifier.score(Record(completion="\\boxed{1}", reference=""))
    assert empty_gold.error.startswith("invalid reference")
    odd = verifier.score(Record(completion=None, reference="1"))
    assert odd.error == "no answer found"
    garbage = verifier.score(Record(completion="\\boxed{\\frac{{{}", reference="1"))
    assert garbage.reward == 0.0


def test_chat_completion_is_scored_on_last_message(verifier):
    chat = [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "\\boxed{2}"}]
    assert verifier.score(Record(completion=chat, reference="2")).reward == 1.0


def test_strict_mode_requires_a_box():
    strict = get_verifier("math", mode="strict")
    assert strict.score(Record(completion="The answer is 5.", reference="5")).error == "no answer found"
    assert strict.score(Record(completion="\\boxed{5}", reference="5")).reward == 1.0
    custom = get_verifier("math", mode=["gsm8k", "last_number"])
    assert custom.score(Record(completion="blah 3\n#### 5", reference="5")).reward == 1.0


def test_numeric_tolerance():
    assert get_verifier("math").score(Record(completion="\\boxed{3.14}", reference="3.1416")).reward == 0.0
    loose = get_verifier("math", rel_tol=1e-2)
    assert loose.score(Record(completion="\\boxed{3.14}", reference="3.1416")).reward == 1.0
    assert loose.score(Record(completion="\\boxed{3.3}", reference="3.1416")).reward == 0.0


def test_rewards_are_configurable():
    v = get_verifier("math", correct_reward=2.0, incorrect_reward=-1.0)
    assert v.score(Record(completion="\\boxed{1}", reference="1")).reward == 2.0
    assert v.score(Record(completion="\\boxed{2}", reference="1")).reward == -1.0


def test_unknown_mode_is_a_config_error():
    with pytest.raises(ValueError, match="unknown extraction mode"):
        get_verifier("math", mode="nope")


def test_gold_is_parsed_once_per_reference(monkeypatch):
    import rewardlab.verifiers.math.verifier as module

    v = get_verifier("math")
    calls = []
    original = module._read_gold
    monkeypatch.setattr(module, "_read_gold", lambda text, *args: calls.append(text) or original(text, *args))
    records = [Record(completion=f"\\boxed{{{i}}}", reference="\\frac{1}{2}") for i in range(16)]
    results = v.score_batch(records)
    assert len(calls) == 1  # the gold of 16 completions is extracted and parsed once
    assert [r.reward for r in results] == [0.0] * 16


def test_verifier_pickles_for_workers():
    v = get_verifier("math", mode="strict")
    clone = pickle.loads(pickle.dumps(v))
    assert clone.settings.mode == "strict"
    assert clone.score(Record(completion="\\boxed{1}", reference="1")).reward == 1.0


def test_normalize_and_parse_number_helpers():
    assert normalize_answer("$\\$1,000.$") == "1000"
    assert normalize_answer("x = \\dfrac{1}{2}") == "\\frac{1}{2}"
    assert normalize_answer("5 x") == "5 x"  # a variable is not a unit
    assert parse_number("1.5e3").value == 1500
    assert parse_number("\\frac{3}{4}").value * 4 == 3
    assert parse_number("50\\%").percent
    assert parse_number("x+1") is None


def test_signal_timeout_on_the_main_thread(monkeypatch):
    # Outside the engine (main thread), math-verify's own signal timeout is armed for each parse and
    # comparison, in whole seconds. It is soft: math-verify catches its own TimeoutException in places and
    # goes on (a CI run took 34.6 s, the whole work, on the 5,000-term sum that takes ~32 s), so what is
    # checked here is that the verifier arms it; the scoring engine's per-item timeout is the hard limit
    # (tests/test_scoring.py). Off the main thread it cannot be armed, and is not.
    import signal as signal_module

    armed: list[int] = []
    real_alarm = signal_module.alarm

    def spy(seconds: int) -> int:
        armed.append(seconds)
        return real_alarm(seconds)

    monkeypatch.setattr(signal_module, "alarm", spy)
    v = get_verifier("math", timeout=1.5)
    result = v.score(Record(completion="\\boxed{\\frac{2}{4}+x}", reference="x+0.5"))
    assert result.reward == 1.0
    assert 2 in armed  # ceil(1.5) s, for at least one parse or comparison
    armed.clear()
    done = threading.Event()

    def off_main() -> None:
        v.score(Record(completion="\\boxed{\\frac{2}{4}+y}", reference="y+0.5"))
        done.set()

    worker = threading.Thread(target=off_main)
    worker.start()
    worker.join(HANG_S)
    assert done.is_set() and 2 not in armed


def test_adversarial_completions_extract_in_linear_time(verifier):
    floods = [
        "\\boxed{" * 5000,
        "{" * 100_000 + "\\boxed{3}",
        "1,2," * 5000,
        "the answer is. " * 5000,
        "$" * 20_000,
    ]
    for text in floods:
        # a hang guard only: quadratic or worse would take minutes on the longer floods; how the time grows
        # with the length (the linear-time claim, as a ratio) is bench/latency.py's `math extract` figure
        start = time.perf_counter()
        verifier.extract(text)
        assert time.perf_counter() - start < 10, text[:20]
    assert verifier.score(Record(completion="{" * 100_000 + "\\boxed{3}", reference="3")).reward == 1.0


@pytest.mark.parametrize(
    "completion,gold,reason",
    [
        ("\\boxed{5}. Wait, that's wrong.", "5", "retracted"),
        ("\\boxed{7}, or possibly 8.", "7", "hedged"),
        ("The answer is not \\boxed{5}.", "5", "negated"),
        ("\\boxed{59}{94}{7", "59", "glued"),
        ("\\boxed{3^}", "3", "malformed answer: a dangling operator"),
        (
            "So \\boxed{5}. Checking the other case gives a bigger count of pairs overall: \\boxed{6}.",
            "6",
            "ambiguous: the completion states different answers",
        ),
        ("The answer is 4 pairs.", "4", "changes its value"),
        ("\\boxed{\\{1, 2\\}}", "(1, 2)", "a set is not a tuple"),
        ("\\boxed{2\\sqrt(16)}", "2", "malformed latex command \\sqrt"),
        ("\\boxed{\\frac123}", "\\frac{1}{23}", "malformed latex command \\frac"),
        ("\\boxed{99}69", "99", "glued to the end of the box"),
        ("\\boxed{50\\%}", "50", "a percent answer against a bare gold number"),
        ("\\boxed{33\\frac{1}{3}\\%}", "33\\frac{1}{3}", "a percent answer against a bare gold number"),
    ],
)
def test_rejections_say_why(verifier, completion, gold, reason):
    result = verifier.score(Record(completion=completion, reference=gold))
    assert result.reward == 0.0 and result.error is None
    assert result.details["match"] is False and reason in result.details["reason"], result.details


def test_a_cut_off_box_is_no_answer_and_says_so(verifier):
    result = verifier.score(Record(completion="\\boxed{3} and then \\boxed{4", reference="3"))
    assert result.error == "no answer found" and "cut off" in result.details["reason"]


def test_reasoning_before_think_end_is_a_draft(verifier):
    completion = "<think>maybe \\boxed{3}, or \\boxed{4}</think>\nThe total is \\boxed{4}."
    assert verifier.score(Record(completion=completion, reference="4")).reward == 1.0


def test_one_token_latex_arguments_still_read():
    v = get_verifier("math")
    for answer, gold in [
        ("\\frac12", "0.5"),
        ("\\frac 1 2", "1/2"),
        ("\\sqrt2", "\\sqrt{2}"),
        ("\\sqrt[3]{8}", "2"),
    ]:
        assert v.score(Record(completion=f"\\boxed{{{answer}}}", reference=gold)).reward == 1.0, answer


def test_percent_after_a_box_belongs_to_its_answer():
    v = get_verifier("math")
    assert v.extract("so \\boxed{20}\\% of them").raw == "20\\%"
    assert v.score(Record(completion="so $\\boxed{20}$ percent", reference="0.2")).reward == 1.0
    # a percent gold accepts the number and its hundredths; a bare gold only the hundredths of a percent answer
    assert v.score(Record(completion="\\boxed{20}", reference="20\\%")).reward == 1.0
    assert v.score(Record(completion="\\boxed{20\\%}", reference="20")).reward == 0.0


def test_exact_constants_with_the_imaginary_unit():
    v = get_verifier("math")
    result = v.score(Record(completion="\\boxed{e^{i\\pi}}", reference="-1"))
    assert result.reward == 1.0 and result.details["method"] == "sympy", result.details
    assert v.score(Record(completion="\\boxed{e^{i\\pi}}", reference="1")).reward == 0.0
    assert v.score(Record(completion="\\boxed{e^{i\\pi}}", reference="-1.0000001")).reward == 0.0
    # the exact step is bounded: a long expression is not simplified (no proof, no hang)
    big = "+".join(f"i^{{{k}}}" for k in range(60))
    start = time.perf_counter()
    assert v.score(Record(completion=f"\\boxed{{{big}}}", reference="7")).reward == 0.0
    assert time.perf_counter() - start < 10


def test_boxes_setting_group_or_last():
    group, last = get_verifier("math"), get_verifier("math", boxes="last")
    listed = Record(completion="\\boxed{1} and \\boxed{2}", reference="1, 2")
    assert group.score(listed).reward == 1.0
    result = last.score(listed)  # the last box alone is 2; the earlier, different box makes it ambiguous
    assert result.reward == 0.0 and "ambiguous" in result.details["reason"]
    assert extract_answer("\\boxed{1} and \\boxed{2}", "auto", boxes="last") == ("2", "boxed")
    # a reference with two boxes: MATH's rule takes its last box, math-verify's the listed pair
    solution = "The roots are $\\boxed{3}$ and $\\boxed{5}$."
    assert last.score(Record(completion="\\boxed{5}", reference=solution)).reward == 1.0
    assert group.score(Record(completion="\\boxed{5}", reference=solution)).reward == 0.0
    assert group.score(Record(completion="\\boxed{3, 5}", reference=solution)).reward == 1.0
    assert last.score(Record(completion="\\boxed{3} or \\boxed{4}", reference="4")).reward == 0.0
    assert last.describe()["boxes"] == "last"
    with pytest.raises(ValueError, match="unknown boxes rule"):
        get_verifier("math", boxes="first")
