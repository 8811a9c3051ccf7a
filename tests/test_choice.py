"""The ``choice`` verifier: the forms it reads, the final statement rule, hedges and hacks, references, settings."""

from __future__ import annotations

import pickle

import pytest

from rewardlab.types import Record, Result
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.choice import ChoiceVerifier

SUGARS = ["Fructose", "Glucose", "Sucrose", "Lactose"]
WITH_OPTIONS = {"answer": "B", "options": SUGARS}


def score(completion: str, reference=WITH_OPTIONS, **config) -> Result:
    return ChoiceVerifier(**config).score(Record(completion=completion, reference=reference))


# (id, response, reference, letter read, method)
READS = [
    ("answer-is-paren", "Glucose is an aldose. The answer is (B).", "B", "B", "answer_is"),
    ("answer-is-bold-text", "The answer is **B. Glucose**", WITH_OPTIONS, "B", "answer_is"),
    ("answer-colon", "Some reasoning.\nAnswer: C", "C", "C", "answer_is"),
    ("answer-colon-bold", "**Answer:** (D)", "D", "D", "answer_is"),
    ("answer-is-boxed", r"So the answer is \(\boxed{E}\).", "E", "E", "answer_is"),
    ("boxed", r"Therefore $\boxed{D}$", "D", "D", "boxed"),
    ("boxed-text", r"Final: \boxed{\text{D}}", "D", "D", "boxed"),
    ("boxed-paren", r"\boxed{(D)}", "D", "D", "boxed"),
    ("boxed-letter-text", r"\boxed{B. Glucose}", WITH_OPTIONS, "B", "boxed"),
    ("last-line-text", "Aldoses have an aldehyde group.\nGlucose", WITH_OPTIONS, "B", "option_text"),
    ("last-line-paren", "Reasoning first.\n\n(B)", "B", "B", "last_line_letter"),
    ("last-line-dot", "Reasoning first.\n\nB.", "B", "B", "last_line_letter"),
    ("last-line-bold", "Reasoning first.\n\n**B**", "B", "B", "last_line_letter"),
    ("answer-text", "The answer is Glucose.", WITH_OPTIONS, "B", "option_text"),
    ("answer-colon-text", "**Answer:** glucose", WITH_OPTIONS, "B", "option_text"),
    ("cue-next-line", "Therefore, the correct answer is:\n\nB. Glucose", WITH_OPTIONS, "B", "answer_is"),
    ("closest-answer", "The closest answer from the options is (C) 212 g/mol.", "C", "C", "answer_is"),
    ("closest-to-option", "The answer is closest to option (A): 6.2 kg.", "A", "A", "answer_is"),
    ("is-the-answer", "Hence option B is the correct answer.", "B", "B", "is_answer"),
    ("best-option", "The best option would be:\n\nH. 1.8 N", "H", "H", "answer_is"),
    ("best-noun", "The best definition among the options is (E) the city.", "E", "E", "answer_is"),
    ("bare-because", "The answer is A because the rest are wrong.", "A", "A", "answer_is"),
    ("not-other", "The answer is (B), not (A).", "B", "B", "answer_is"),
    ("final-wins", "I first thought the answer is (A)... so the answer is (C)", "C", "C", "answer_is"),
    (
        "final-wins-lines",
        "The answer is (A).\nWait, that is wrong. The answer is (D).",
        "D",
        "D",
        "answer_is",
    ),
    ("after-think", "<think>the answer is (A)</think>\nThe answer is (B).", "B", "B", "answer_is"),
    (
        "own-text-mentions",
        "The answer is (D) Both (A) and (B)",
        {"answer": "D", "options": ["x", "y", "z", "Both (A) and (B)"]},
        "D",
        "answer_is",
    ),
    (
        "option-dict",
        "The answer is (C)",
        {"answer": "C", "options": {"A": "x", "B": "y", "C": "z"}},
        "C",
        "answer_is",
    ),
    ("minus-text", "The answer is (B) -2.", {"answer": "B", "options": ["2", "−2", "0"]}, "B", "answer_is"),
]


@pytest.mark.parametrize("case_id, text, reference, letter, method", READS, ids=[c[0] for c in READS])
def test_reads(case_id, text, reference, letter, method):
    result = score(text, reference)
    assert result.error is None
    assert result.details["extracted"] == letter, result.details
    assert result.details["method"] == method
    assert result.details["correct"] is True and result.reward == 1.0
    start, end = result.details["extracted_span"]
    assert start < end <= len(text)


def test_span_points_at_the_letter_after_think():
    text = "<think>(A)?</think>Then the answer is (C)."
    result = score(text, "C")
    start, end = result.details["extracted_span"]
    assert text[start:end] == "C"


def test_wrong_letter_scores_incorrect_reward():
    result = score("The answer is (C).", "B")
    assert result.reward == 0.0 and result.details["extracted"] == "C"
    assert result.details["correct"] is False and "gold is B" in result.details["reason"]
    assert score("The answer is (C).", "B", incorrect_reward=-1.0).reward == -1.0


# (id, response, reference, words of the reason): each scores 0, whatever the gold
REFUSED = [
    ("hedge-or", "The answer is (A) or (B).", "A", "two options"),
    ("hedge-bare-or", "Reasoning.\nA or B", "A", "several options"),
    ("hedge-slash", "The answer is A/B", "A", "two options"),
    ("hedge-both", "The answer is both A and C.", "A", "several options"),
    ("hedge-either", "Answer: either (B) or (C)", "B", "several options"),
    ("hedge-list", "Answer: A, B, C or D", "A", "two options"),
    ("hedge-list-spaced", "The answer is (A), (F), and (G).", "A", "two options"),
    ("hedge-boxed-or", r"The answer is (A) or \boxed{B}", "B", "two options"),
    ("hedge-box-content", r"\boxed{A \text{ or } B}", "A", "two options"),
    ("hedge-also", "The answer is (B), though (C) is also possible.", "B", "two options"),
    ("hedge-pre", "(A) or (B) is the correct answer.", "B", "two options"),
    ("no-letter", "The answer is: it depends on the jurisdiction.", "A", "no option letter"),
    ("no-letter-after", "The answer is (B). Hmm.\nThe correct answer is 2500 J.", "B", "no option letter"),
    ("nothing", "Glucose is a sugar that the body uses for energy.", WITH_OPTIONS, "no answer"),
    ("negated", "The answer is not (A).", "B", "negated"),
    ("negated-final", "The answer is (B). Actually, the correct answer is not listed.", "B", "negated"),
    ("beyond-options", "The answer is (H).", WITH_OPTIONS, "not one of the 4 options"),
    ("beyond-letters", "The answer is (K).", "A", "not one of the 10 options"),
    ("option-list-line", "A. Fructose B. Glucose C. Sucrose D. Lactose", WITH_OPTIONS, "no answer"),
    (
        "option-list-lines",
        "A. Fructose\nB. Glucose\nC. Sucrose\nD. Lactose",
        {"answer": "D", "options": SUGARS},
        "list the options",
    ),
    (
        "option-texts-copied",
        "Fructose\nGlucose\nSucrose\nLactose",
        {"answer": "D", "options": SUGARS},
        "list the options",
    ),
    ("text-inside-sentence", "I believe Glucose matters here, as do others.", WITH_OPTIONS, "no answer"),
    ("letter-text-conflict", "The answer is (B) Sucrose.", WITH_OPTIONS, "text of option C"),
    ("article-a", "Answer: A combination of both effects.", "A", "several options"),
    ("pronoun-i", "The answer is I think unclear.", "I", "no option letter"),
    ("think-unclosed", "<think>The answer is (B).", "B", "never closed"),
    ("draft-only", "<think>The answer is (B).</think>\nI am not sure.", "B", "no answer"),
    ("box-not-letter", r"\boxed{42}", "A", "box names no option letter"),
    ("empty", "", "A", "no answer"),
]


@pytest.mark.parametrize("case_id, text, reference, reason", REFUSED, ids=[c[0] for c in REFUSED])
@pytest.mark.parametrize("config", [{}, {"last_line": False}, {"allow_option_text": False}])
def test_refused(case_id, text, reference, reason, config):
    result = score(text, reference, **config)
    assert result.reward == 0.0 and result.error is None
    assert result.details["correct"] is False
    if config == {}:
        assert reason in result.details["reason"], result.details


def test_last_line_setting():
    assert score("Reasoning.\n(B)", "B").reward == 1.0
    assert score("Reasoning.\n(B)", "B", last_line=False).reward == 0.0
    assert score("Reasoning.\nGlucose", last_line=False).reward == 0.0


def test_option_text_setting():
    assert score("The answer is Glucose.", allow_option_text=False).reward == 0.0
    # the options still bound the letters
    assert "not one of the 4" in score("The answer is (H).", allow_option_text=False).details["reason"]


def test_strip_reasoning_setting():
    text = "<think>The answer is (B).</think>"
    assert score(text, "B").reward == 0.0
    assert score(text, "B", strip_reasoning=False).reward == 1.0


def test_letters_setting_bounds_plain_references():
    assert score("The answer is (E).", "E", letters=4).error is not None  # the gold itself is out of range
    assert "not one of the 4" in score("The answer is (E).", "A", letters=4).details["reason"]


@pytest.mark.parametrize(
    "gold", ["B", "(B)", "b", " B. ", 1, {"answer": "b"}, {"answer": 1, "options": SUGARS}]
)
def test_reference_forms(gold):
    assert score("The answer is (B).", gold).reward == 1.0


def test_metadata_options():
    record = Record(completion="The answer is Glucose.", reference="B", metadata={"options": SUGARS})
    assert ChoiceVerifier().score(record).reward == 1.0
    record = Record(completion="The answer is (H).", reference="B", metadata={"options": SUGARS})
    assert "not one of the 4" in ChoiceVerifier().score(record).details["reason"]


@pytest.mark.parametrize(
    "reference",
    [
        None,
        "",
        "BB",
        "K1",
        True,
        2.5,
        7,
        -1,
        {"options": SUGARS},
        {"answer": "E", "options": SUGARS},
        {"answer": "A", "options": "A. x B. y"},
        {"answer": "A", "options": {"AA": "x"}},
        {"answer": "A", "options": []},
    ],
)
def test_malformed_reference_is_a_failure(reference):
    result = score("The answer is (A).", reference, letters=4)
    assert result.reward == 0.0 and result.error.startswith("bad reference: ")
    assert "\n" not in result.error


@pytest.mark.parametrize(
    "completion", [None, 12, [{"role": "assistant", "content": "The answer is (B)."}], "\x00" * 10]
)
def test_any_completion_never_raises(completion):
    result = ChoiceVerifier().score(Record(completion=completion, reference="B"))
    assert result.error is None


def test_chat_completion_reads_last_message():
    messages = [
        {"role": "user", "content": "The answer is (A)?"},
        {"role": "assistant", "content": "The answer is (B)."},
    ]
    assert ChoiceVerifier().score(Record(completion=messages, reference="B")).reward == 1.0


@pytest.mark.parametrize(
    "config, words",
    [
        ({"letters": 1}, "letters must be an integer from 2 to 26"),
        ({"letters": 27}, "letters must be"),
        ({"letters": True}, "letters must be"),
        ({"last_line": "yes"}, "last_line must be true or false"),
        ({"correct_reward": "1"}, "correct_reward must be a number"),
        ({"letter": 4}, "unknown choice verifier option"),
    ],
)
def test_bad_config(config, words):
    with pytest.raises(ValueError, match=words):
        ChoiceVerifier(**config)


def test_registry_and_pickle():
    verifier = get_verifier("choice", letters=4, last_line=False)
    assert isinstance(verifier, ChoiceVerifier)
    clone = pickle.loads(pickle.dumps(verifier))
    assert clone.settings == verifier.settings
    record = Record(completion="The answer is (B).", reference="B")
    assert clone.score(record).to_dict() == verifier.score(record).to_dict()
    assert ChoiceVerifier.answer_votes == "exact"
