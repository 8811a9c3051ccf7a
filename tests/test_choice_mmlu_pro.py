"""``choice`` on MMLU-Pro's released DeepSeek-V2 responses, against the official extraction.

The data is real model output (tests/data/choice/README.md): 11,997 responses of ``deepseek-chat`` to
MMLU-Pro's test questions as released by the MMLU-Pro authors, each with the official ``pred`` and the gold
``answer``. The reference is MMLU-Pro's own extraction, transcribed below. Three comparisons:

1. Where the official regex read a letter (``pred``, 9,588 rows), ``choice`` must read that letter.
2. Where it read none but the official first fallback (``extract_again``: "answer: X") reads one (66 rows),
   ``choice`` must read that letter.
3. Where the official regex read none (2,409 rows), a seeded sample of 124 (100 drawn with seed 47 and the 24
   of an earlier hand check) was labelled by reading each response (``mmlu_pro_hand_labels.json``: the letter
   the response's final statement commits to, by its letter or an option's exact text; ``null`` where it
   commits to none: no option, several, a closest option it calls wrong, a truncated response). ``choice``
   must read the hand letter or abstain, and abstains on at most ``HAND_ABSTENTIONS_BOUND`` lettered rows.

In 1 and 2 a disagreement must fall in a class of ``DIFFERENCES``, a predicate on the response text at the
reference's match (never on ``choice``'s output), each with a hand-checked example (``EXAMPLES``) and a bound
(``BOUNDS``, the measured count plus max(2, 5%)). ``KNOWN_MISREADS`` lists, by id, the rows where ``choice``
is wrong by hand check (verifier defects, reported; not classes): the test fails when one of them is read
right again, so the list only shrinks.

The official last fallback (``extract_final``: the last standalone capital A-J anywhere) is a guess, not a
reading, and is not used as a reference.
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


OFFICIAL = re.compile(r"answer is \(?([ABCDEFGHIJ])\)?")
_AGAIN = re.compile(r"[aA]nswer:\s*([A-J])")


def again_match(text: str) -> re.Match[str] | None:
    """The match ``extract_again``'s regex reads, found in linear time: ``.*`` does not cross a newline, so
    re.search succeeds first on the line of the first "answer: X" and ``.*`` takes that line's last one
    (checked against the transcription on every row by the slow test)."""
    matches = list(_AGAIN.finditer(text))
    if not matches:
        return None
    line_end = text.find("\n", matches[0].start())
    return [m for m in matches if line_end < 0 or m.start() < line_end][-1]


def read_letter(details: dict) -> str | None:
    """The letter choice committed to (right or wrong), ``None`` when it refused."""
    if details.get("extracted") is None:
        return None
    return details["extracted"] if details["correct"] or details["reason"].startswith("read ") else None


# -- the classes of disagreement: predicates on the response at the reference's match ----------------------
# ``m`` is the reference's match (group 1: its letter); none of them looks at what choice read.
_SENTENCE_END = re.compile(r"\n|(?<![\s(][A-Z])[.!?](?=\s|$)")  # "S." of "Ulysses S. Grant" ends nothing
_LATER_STATEMENT = re.compile(r"(?i:answer|option)\b[^.\n]{0,40}?\b(?:is|be)\b[\s:*]*\(?([A-J])\b(?![a-z'’])")
_DISOWNING = re.compile(
    r"\b(?:incorrect|not (?:the )?correct|not listed|not among|not (?:an )?exact|not accurate|typo|error|"
    r"mistake|double-check)\b|correct answer (?:is|should be|would be)\s*(?:that|approximately|closer|\d)",
    re.IGNORECASE,
)


def _norm(text: str) -> str:
    """Lower case without spaces, markdown or LaTeX brackets, and without a final full stop."""
    return re.sub(r"[\s$*_`\\{}()\[\]]+", "", text.lower()).rstrip(".")


def _sentence(text: str, m: re.Match[str]) -> str:
    end = _SENTENCE_END.search(text, m.end())
    return text[m.end() : end.start() if end else len(text)]


def letter_beyond_options(row: dict, m: re.Match[str]) -> bool:
    """The reference's letter is past the record's options ("(F)" on a 4-option question)."""
    return ord(m.group(1)) - ord("A") >= len(row["options"])


def letter_starts_a_word(row: dict, m: re.Match[str]) -> bool:
    """The reference's letter is a word's first letter ("answer is Hurler syndrome", "Answer: Chemical")."""
    return re.match(r"[a-z]", row["response"][m.end() :]) is not None


def statement_names_several(row: dict, m: re.Match[str]) -> bool:
    """The reference's sentence goes on to another letter: joined to its own ("(A) and (E)", "D, F, and H",
    "(C, G, D, F)") or in parentheses ("(A) Baking soda, (C) Water")."""
    sentence, own = _sentence(row["response"], m), m.group(1)
    joined = re.match(r"\s*(?:,|/|&|\band\b|\bor\b)\s*(?:and\s+|or\s+)?\(?([A-J])\b(?![a-z'’])", sentence)
    return bool(joined and joined.group(1) != own) or any(
        x != own for x in re.findall(r"(?<!\w)\(([A-J])\)", sentence)
    )


def letter_with_another_options_text(row: dict, m: re.Match[str]) -> bool:
    """The words after the reference's letter (its sentence or its line) are another option's exact text, not
    its own ("(E). 3.6 g of baking soda" where that is option J)."""
    text = row["response"]
    line = text[m.end() :].split("\n", 1)[0]
    said = {_norm(_sentence(text, m).strip(" .:)")), _norm(line.strip(" .:)"))} - {""}
    named = [i for i, option in enumerate(row["options"]) if _norm(option) in said]
    return bool(named) and ord(m.group(1)) - ord("A") not in named


def later_statement_names_another_letter(row: dict, m: re.Match[str]) -> bool:
    """After the reference's match, the last answer statement ("answer ... is/be X", "option ... is X") names
    another letter ("The answer is (C). However, ... The correct answer should be (E)")."""
    later = list(_LATER_STATEMENT.finditer(row["response"], m.end()))
    return bool(later) and later[-1].group(1) != m.group(1)


def later_text_disowns_the_letter(row: dict, m: re.Match[str]) -> bool:
    """After the reference's match the response calls the answer wrong, not listed or inexact ("The closest
    answer is (H) 600 psia. However, ... the actual answer is not listed among the options")."""
    return _DISOWNING.search(row["response"], m.end()) is not None


# In this order: a disagreement is counted in the first class whose predicate holds.
DIFFERENCES = {
    f.__name__: f
    for f in (
        letter_beyond_options,
        letter_starts_a_word,
        statement_names_several,
        letter_with_another_options_text,
        later_statement_names_another_letter,
        later_text_disowns_the_letter,
    )
}

# Hand-checked, per class: (comparison, id, an excerpt of the response, the reference's letter, choice's read,
# why choice's read is right).
EXAMPLES = {
    "letter_beyond_options": [
        (
            "official",
            "economics/6985",
            "The answer is (F) because it correctly describes",
            "F",
            None,
            "the question has 4 options (A-D): F is none of them",
        ),
    ],
    "letter_starts_a_word": [
        (
            "official",
            "health/6218",
            "The correct answer is Hurler syndrome, also known as mucopolysaccharidosis "
            "type I (MPS I). Therefore, the answer is (I).",
            "H",
            "I",
            "H is the initial of Hurler; the response answers (I), the gold",
        ),
        (
            "fallback",
            "engineering/11905",
            "Approximate answer:\nHeat transfer",
            "A",
            None,
            'A is the initial of "Approximate"; the response ends: the options do not match its values',
        ),
    ],
    "statement_names_several": [
        ("official", "biology/2907", "The answer is (A) and (E).", "A", None, "two options: a hedge"),
    ],
    "letter_with_another_options_text": [
        (
            "official",
            "chemistry/3782",
            "The answer is (E). 3.6 g of baking soda",
            "E",
            None,
            'option E is "7.0 g of baking soda", J is "3.6 g of baking soda": letter and text disagree',
        ),
    ],
    "later_statement_names_another_letter": [
        (
            "official",
            "business/135",
            "The answer is (C) 17.30. However, this answer is incorrect based on the "
            "calculations. The correct answer should be (E) 20.25",
            "C",
            "E",
            "the response replaces (C) by (E): its final answer is E",
        ),
        (
            "fallback",
            "physics/9604",
            "The correct answer is:\n\nB. R = 2 × 10^10 m",
            "A",
            "B",
            'the fallback read "answer:\\n\\nA." that opens the list of options; the response then answers B',
        ),
    ],
    "later_text_disowns_the_letter": [
        (
            "official",
            "engineering/11903",
            "The closest answer is (H) 600 psia. However, the calculated value is "
            "slightly higher, so the actual answer is not listed among the options.",
            "H",
            None,
            "the response says its closest option is not the answer",
        ),
    ],
}

# The most disagreements allowed per (comparison, class): measured count + max(2, ceil(5%)).
BOUNDS = {
    ("official", "letter_beyond_options"): 3,  # measured 1
    ("official", "letter_starts_a_word"): 3,  # measured 1
    ("official", "statement_names_several"): 101,  # measured 96
    ("official", "letter_with_another_options_text"): 11,  # measured 9
    ("official", "later_statement_names_another_letter"): 14,  # measured 12
    ("official", "later_text_disowns_the_letter"): 13,  # measured 11
    ("fallback", "letter_beyond_options"): 2,  # measured 0
    ("fallback", "letter_starts_a_word"): 4,  # measured 2
    ("fallback", "statement_names_several"): 2,  # measured 0
    ("fallback", "letter_with_another_options_text"): 2,  # measured 0
    ("fallback", "later_statement_names_another_letter"): 3,  # measured 1
    ("fallback", "later_text_disowns_the_letter"): 3,  # measured 1
}

# Rows where choice is wrong by hand check (verifier defects, not classes): id -> (choice's read, why).
KNOWN_MISREADS = {
    "other/5762": (
        None,
        'refuses "The answer is (B) Ulysses S. Grant" as naming two options (B and S): the '
        'initial "S." is read as an option letter (there are 4, A-D); B is the gold',
    ),
    "physics/9902": (
        "I",
        "reads \"The closest option to our calculated value is (I) 6000 per cm, but it's not "
        'the correct answer." as I',
    ),
    "physics/9506": (
        "H",
        "reads \"The closest option to our calculated value is (H) 3,200 candles, but it's "
        'not the correct answer based on our calculation." as H',
    ),
    "biology/3299": (
        "H",
        'reads "the closest option is (H) (a) 1/4, (b) Seven, which is incorrect for part (b)" as H',
    ),
    "philosophy/11206": (
        "A",
        'a truncated response whose last line, "A. Begging the Question:", opens its '
        "review of option A, read as the answer A",
    ),
}
HAND_ABSTENTIONS_BOUND = 24  # measured 22 of the 85 hand-lettered rows


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


def reference_match(row: dict) -> tuple[str, re.Match[str]] | None:
    """The comparison a row is in (``official`` or ``fallback``) and the reference's match, or None."""
    m = OFFICIAL.search(row["response"])
    if m is not None:
        return "official", m
    m = again_match(row["response"])
    return None if m is None else ("fallback", m)


def classify(row: dict, m: re.Match[str]) -> str | None:
    return next((name for name, predicate in DIFFERENCES.items() if predicate(row, m)), None)


def test_stored_pred_is_the_official_extraction(scored):
    rows, _ = scored
    assert len(rows) == 11997 and sum(row["pred"] is None for row in rows) == 2409
    assert all(extract_answer_deepseek_run(row["response"]) == row["pred"] for row in rows)
    assert len({row["id"] for row in rows}) == len(rows)


def test_disagreements_with_the_official_extraction_are_bounded_by_class(scored):
    rows, results = scored
    counts: Counter = Counter()
    unclassified, misreads = [], {}
    for row, result in zip(rows, results, strict=True):
        found = reference_match(row)
        if found is None:
            continue
        comparison, m = found
        read = read_letter(result.details)
        if read == m.group(1):
            counts[comparison, "agree"] += 1
        elif row["id"] in KNOWN_MISREADS:
            misreads[row["id"]] = read
        elif (klass := classify(row, m)) is not None:
            counts[comparison, klass] += 1
        else:
            unclassified.append(
                (row["id"], comparison, m.group(1), read, row["response"][m.start() : m.end() + 80])
            )
    assert not unclassified, f"disagreements in no class: {unclassified[:10]}"
    over = {k: (n, BOUNDS[k]) for k, n in counts.items() if k[1] != "agree" and n > BOUNDS[k]}
    assert not over, f"(comparison, class): (count, bound) over the bound: {over}"
    compared = {row["id"] for row in rows if reference_match(row) is not None}
    expected = {key: v[0] for key, v in KNOWN_MISREADS.items() if key in compared}
    assert misreads == expected, f"known misreads changed (remove the ones read right): {misreads}"


def test_a_hedged_reference_statement_is_never_read_as_its_first_letter(scored):
    # The converse of statement_names_several: where the reference's sentence names several letters and no
    # later answer statement follows, the reference's first letter is a guess; choice must not read it
    # (a reward hack the agreement above cannot see, since there the reference reads it too).
    rows, results = scored
    hedged, read_first = 0, []
    for row, result in zip(rows, results, strict=True):
        found = reference_match(row)
        if found is None or not statement_names_several(row, found[1]):
            continue
        if _LATER_STATEMENT.search(row["response"], found[1].end()) is None:
            hedged += 1
            if read_letter(result.details) == found[1].group(1):
                read_first.append(row["id"])
    assert hedged >= 90 and not read_first, (hedged, read_first)  # hedged: measured 94


def test_hand_labelled_rows_where_the_official_regex_read_nothing(scored):
    rows, results = scored
    labels = json.loads((DATA / "mmlu_pro_hand_labels.json").read_text())
    assert len(labels) == 124 and sum(v is not None for v in labels.values()) == 85
    read = {
        row["id"]: read_letter(r.details) for row, r in zip(rows, results, strict=True) if row["id"] in labels
    }
    assert all(row["pred"] is None for row in rows if row["id"] in labels)
    wrong = {key: read[key] for key, label in labels.items() if read[key] not in (label, None)}
    expected = {key: v[0] for key, v in KNOWN_MISREADS.items() if key in labels}
    assert wrong == expected, f"reads that are neither the hand label nor an abstention: {wrong}"
    abstained = [key for key, label in labels.items() if label is not None and read[key] is None]
    assert len(abstained) <= HAND_ABSTENTIONS_BOUND, abstained


def test_every_class_has_a_bound_and_a_hand_checked_example():
    assert set(EXAMPLES) == set(DIFFERENCES)
    assert {k for _, k in BOUNDS} == set(DIFFERENCES)


@pytest.mark.parametrize(
    "klass, example",
    [(k, e) for k, examples in EXAMPLES.items() for e in examples],
    ids=lambda v: str(v)[:40],
)
def test_hand_checked_example_of_each_class(scored, klass, example):
    rows, results = scored
    comparison, key, excerpt, theirs, ours, _why = example
    index = next(i for i, row in enumerate(rows) if row["id"] == key)
    row = rows[index]
    assert excerpt in row["response"]
    found = reference_match(row)
    assert found is not None and found[0] == comparison and found[1].group(1) == theirs
    assert classify(row, found[1]) == klass
    assert read_letter(results[index].details) == ours


@pytest.mark.slow  # extract_again's `.*` is quadratic in the response length: ~15 s over the null rows
def test_again_match_is_the_official_fallback(scored):
    rows, _ = scored
    for row in rows:
        if row["pred"] is None:
            m = again_match(row["response"])
            official = re.search(r".*[aA]nswer:\s*([A-J])", row["response"])
            assert (m and m.group(1)) == (official and official.group(1)), row["id"]
