"""``choice`` on MMLU-Pro's released DeepSeek-V2 responses, against the official extraction.

The data (tests/data/choice/README.md): 11,997 responses of ``deepseek-chat`` to MMLU-Pro's test questions,
each with the official ``pred`` and the gold ``answer``. ``choice`` must read the official letter wherever
the official regex found one, except on the rows of ``mmlu_pro_disagreements.json``, each listed with its
class (a hedge the official regex accepts, an earlier statement the response supersedes...); a new
disagreement, or a listed row that agrees again, fails. Where the official regex found nothing, the letters
``choice`` reads are checked by hand on a sample.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rewardlab.types import Record
from rewardlab.verifiers.choice import ChoiceVerifier

DATA = Path(__file__).parent / "data" / "choice"


# -- the official extraction, transcribed as the reference ---------------------------------------------------
# TIGER-AI-Lab/MMLU-Pro, run_deepseek.py, commit ff991b5b7f14a383fd41da3987447ab6c08bf138: the extraction that
# produced the stored `pred` of eval_results/deepseek (one regex, first match, None when it fails).
def extract_answer_deepseek_run(text):
    pattern = r"answer is \(?([ABCDEFGHIJ])\)?"
    match = re.search(pattern, text)
    if match:
        return match.group(1)
    else:
        return None


# TIGER-AI-Lab/MMLU-Pro, evaluate_from_api.py, commit ef9890a4db3fd2c4fc50342606aac21093edb03f (unchanged at
# f418b116db00b065c2aea046518d8fcf74d39872): the current official extraction, with its two fallbacks (the
# print of the original is left out).
def extract_answer(text):
    pattern = r"answer is \(?([A-J])\)?"
    match = re.search(pattern, text)
    if match:
        return match.group(1)
    else:
        return extract_again(text)


def extract_again(text):
    match = re.search(r".*[aA]nswer:\s*([A-J])", text)
    if match:
        return match.group(1)
    else:
        return extract_final(text)


def extract_final(text):
    pattern = r"\b[A-J]\b(?!.*\b[A-J]\b)"
    match = re.search(pattern, text, re.DOTALL)
    if match:
        return match.group(0)
    else:
        return None


# -- the expected figures -------------------------------------------------------------------------------------
ROWS = 11997
NULL_PREDS = 2409
DISAGREEMENT_CLASSES = {
    "hedge": 97,  # "The answer is (A) and (E)." / "(B) or (H), depending on ..." / "(A), (F), and (G)"
    "superseded": 13,  # "The answer is (C) 17.30. However, this answer is incorrect ... should be (E) 20.25"
    "final_names_no_option": 9,  # "... The correct answer should be 2500 J, which is not listed"
    "letter_text_conflict": 8,  # "The answer is (E). 3.6 g of baking soda" where 3.6 g of baking soda is J
    "negated_final": 2,  # "The closest answer is (H) 600 psia. However, ... the actual answer is not listed"
    "letter_beyond_options": 1,  # "The answer is (F)" on a 4-option question
    "official_word_initial": 1,  # "The correct answer is Hurler syndrome" read as H
}
READ_WHERE_NULL = 1125
CORRECT = {"official_pred": 6296, "official_extract_answer": 7167, "choice": 6842}

# Null-pred rows read by hand (the response's end), with the letter it commits to: choice must read the same.
HAND_READ = {
    "math/7910": "I",  # "the true statement is:\nI. The sample mean and sample median are equal."
    "computer science/10406": "E",  # "The correct answer is:\nE. int(x [,base])"
    "engineering/12072": "A",  # "The correct option is (A)."
    "computer science/10631": "D",  # "the correct answer is:\nD. True, True"
    "physics/9649": "E",  # "The closest option is:\n\[ \boxed{E} \]"
    "engineering/11531": "A",  # "The correct answer is:\nA. (2uv, 1, 1), ..."
    "chemistry/3740": "G",  # "the correct answer is:\n\[\boxed{G}\]"
    "business/416": "F",  # "The closest option from the given choices is:\n\nF. 5(1/2)%"
    "physics/9387": "H",  # "The closest option is (H) 30 days."
    "biology/3126": "F",  # "the correct answer is:\nF. (a) Slows peristalsis ..."
    "math/8570": "F",  # "So, the correct answer is:\n\nF. 11^8"
    "computer science/10448": "F",  # "the correct answer is:\nF. 0x01001234; page mapped with COPY-ON-WRITE"
    "law/1004": "H",  # "The correct answer is:\nH. liable for the mortgage, ..."
    "economics/7258": "J",  # "the correct answer is:\n\nJ. Fixed costs do not vary ..."
    "engineering/12059": "A",  # "The correct option is (A)."
    "law/1317": "D",  # "The answer is **D. No, because filing the complaint ..."
    "economics/7655": "F",  # "the correct answer is:\nD. ... However, ... the correct answer should be:\nF. ..."
    "business/431": "C",  # "The correct answer is:\n\nC. $13.75 per share, $275.00 total loss"
    "biology/3140": "F",  # "The closest answer among the options is:\n\nF. 1.0 × 10^-5\n\nThis answer is ..."
    "computer science/10679": "J",  # "the correct option is:\nJ. Procedure block may appear anywhere ..."
    "business/822": "A",  # "then the answer would be:\n\nAnswer: A. $1.18"
    "psychology/2241": "I",  # "The answer is not in the options ... the closest option ... is (I) 14.6."
    "chemistry/4210": "F",  # "The closest answer choice is (F) 6.6 × 10^32 molecules."
    "engineering/11484": "C",  # "Comparing with the options provided:\n\[ \text{Answer: C} \]"
}


def read_letter(details: dict) -> str | None:
    """The letter choice committed to (right or wrong), ``None`` when it refused."""
    if details.get("extracted") is None:
        return None
    return details["extracted"] if details["correct"] or details["reason"].startswith("read ") else None


@pytest.fixture(scope="module")
def scored():
    with gzip.open(DATA / "mmlu_pro_deepseek.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    verifier = ChoiceVerifier()
    results = [
        verifier.score(
            Record(completion=row["response"], reference={"answer": row["answer"], "options": row["options"]})
        )
        for row in rows
    ]
    return rows, results


def test_stored_pred_is_the_official_extraction(scored):
    rows, _ = scored
    assert len(rows) == ROWS and sum(row["pred"] is None for row in rows) == NULL_PREDS
    assert all(extract_answer_deepseek_run(row["response"]) == row["pred"] for row in rows)
    assert len({row["id"] for row in rows}) == ROWS


def test_agrees_with_official_pred_except_listed(scored):
    rows, results = scored
    listed = json.loads((DATA / "mmlu_pro_disagreements.json").read_text())
    assert Counter(listed.values()) == DISAGREEMENT_CLASSES
    assert all(result.error is None for result in results)
    unexpected, agreeing_again = [], []
    for row, result in zip(rows, results, strict=True):
        if row["pred"] is None:
            continue
        agrees = read_letter(result.details) == row["pred"]
        if not agrees and row["id"] not in listed:
            unexpected.append(
                (row["id"], row["pred"], result.details.get("extracted"), result.details.get("reason"))
            )
        if agrees and row["id"] in listed:
            agreeing_again.append(row["id"])
    assert not unexpected, f"new disagreements with the official pred: {unexpected[:10]}"
    assert not agreeing_again, (
        f"listed rows that agree now (remove them from the list): {agreeing_again[:10]}"
    )


@pytest.mark.parametrize(
    "klass, reasons",
    [
        ("hedge", ("two options", "several options")),
        ("letter_text_conflict", ("with the text of option",)),
        ("negated_final", ("negated",)),
        ("final_names_no_option", ("names no option letter", "box names no")),
        ("letter_beyond_options", ("is not one of the",)),
    ],
)
def test_refusal_classes_are_refused_for_their_reason(scored, klass, reasons):
    rows, results = scored
    listed = json.loads((DATA / "mmlu_pro_disagreements.json").read_text())
    for row, result in zip(rows, results, strict=True):
        if listed.get(row["id"]) == klass:
            assert result.reward == 0.0 and any(word in result.details["reason"] for word in reasons), row[
                "id"
            ]


def test_reads_where_the_official_regex_failed(scored):
    rows, results = scored
    read = {
        row["id"]: read_letter(r.details) for row, r in zip(rows, results, strict=True) if row["pred"] is None
    }
    assert sum(letter is not None for letter in read.values()) == READ_WHERE_NULL
    assert {key: read[key] for key in HAND_READ} == HAND_READ


def test_accuracy_both_ways(scored):
    rows, results = scored
    assert sum(row["pred"] == row["answer"] for row in rows) == CORRECT["official_pred"]
    assert sum(result.reward == 1.0 for result in results) == CORRECT["choice"]


@pytest.mark.slow  # the last fallback's lookahead is quadratic in the response length: ~7 s over all rows
def test_accuracy_of_the_current_official_extraction(scored):
    rows, _ = scored
    assert (
        sum(extract_answer(row["response"]) == row["answer"] for row in rows)
        == CORRECT["official_extract_answer"]
    )
