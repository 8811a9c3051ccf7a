"""rewardlab's IFEval checks against Google's reference (the copy lm-eval ships), verdict for verdict.

Runs when lm-eval is installed (``pip install --no-deps lm-eval``: the IFEval files need only nltk,
langdetect and immutabledict); skipped otherwise. Both sides use NLTK's English ``punkt_tab`` model and
langdetect seeded with 0 (the reference's own runs are unseeded).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rewardlab.types import Record
from rewardlab.verifiers.ifeval import IFEvalVerifier
from rewardlab.verifiers.ifeval.reference import lm_eval_ifeval_dir, reference_verdicts

pytestmark = pytest.mark.skipif(
    lm_eval_ifeval_dir() is None, reason="lm-eval not installed (pip install --no-deps lm-eval)"
)

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "ifeval" / "sample.jsonl"
PROMPT = "Write a note about tea."

# Instruction/kwargs combinations checked on every generated response.
COMBOS = [
    ("keywords:existence", {"keywords": ["tea", "Art"]}),
    ("keywords:frequency", {"keyword": "tea", "frequency": 2, "relation": "at least"}),
    ("keywords:frequency", {"keyword": "the", "frequency": 3, "relation": "less than"}),
    ("keywords:forbidden_words", {"forbidden_words": ["cat", "tea"]}),
    ("keywords:letter_frequency", {"letter": "e", "let_frequency": 12, "let_relation": "at least"}),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2, "let_relation": "less than"}),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"}),
    ("length_constraints:number_sentences", {"num_sentences": 5, "relation": "less than"}),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}),
    ("length_constraints:number_words", {"num_words": 25, "relation": "at least"}),
    ("length_constraints:number_words", {"num_words": 40, "relation": "less than"}),
    (
        "length_constraints:nth_paragraph_first_word",
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "the"},
    ),
    (
        "length_constraints:nth_paragraph_first_word",
        {"num_paragraphs": 3, "nth_paragraph": 1, "first_word": "tea"},
    ),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}),
    ("detectable_format:constrained_response", {}),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2}),
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 1}),
    ("detectable_format:json_format", {}),
    ("detectable_format:title", {}),
    ("combination:two_responses", {}),
    ("combination:repeat_prompt", {"prompt_to_repeat": PROMPT}),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}),
    ("startend:quotation", {}),
    ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": "at least"}),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "less than"}),
    ("punctuation:no_comma", {}),
]
# langdetect is slow (milliseconds a call, up to eight loose variants): checked on fewer responses.
LANGUAGE_COMBOS = [
    ("language:response_language", {"language": "en"}),
    ("language:response_language", {"language": "es"}),
    ("change_case:english_capital", {}),
    ("change_case:english_lowercase", {}),
]

FRAGMENTS = [
    "Tea is grown on hillsides in Assam, Darjeeling and Kenya.",
    "The leaves are picked, withered and rolled.",
    "Dr. Rao said the U.S. imports most of it at 5 p.m. sharp!",
    "Is green tea better than black tea?",
    "ART and science meet in a cup",
    "the cat sleeps",
    "My answer is yes.",
    "My answer is no",
    "* first point\n* second point",
    "- dash item\n  - nested item",
    "* **bold item**",
    "*highlighted part* and **strong part**",
    "***",
    "******",
    "Section 1\nIntro text.",
    "SECTION 2 more text",
    "[name] lives at [address].",
    "P.S. drink it hot.",
    "p. p. s remember the milk",
    "<<A Title>>",
    "<< >>",
    '{"tea": "green", "cups": 2}',
    '```json\n{"a": [1, 2, 3]}\n```',
    "El té verde es muy popular en España y en América Latina.",
    "Le thé est une boisson très ancienne en Chine.",
    "Any other questions?",
    "I THINK THIS IS VERY GOOD TEA",
    "zebra zoo jazz",
    "",
    "Write a note about tea.",
]


def _generated_responses(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = rng.sample(FRAGMENTS, rng.randint(1, 6))
        text = rng.choice(["\n", "\n\n", " ", "\n\n\n"]).join(parts)
        roll = rng.random()
        if roll < 0.1:
            text = text.upper()
        elif roll < 0.2:
            text = text.lower()
        if rng.random() < 0.15:
            text = f'"{text}"'
        if rng.random() < 0.15:
            text = PROMPT + " " + text
        if rng.random() < 0.2:
            text = "Sure, here you go:\n" + text
        if rng.random() < 0.2:
            text = text + "\nHope this helps!"
        out.append(text)
    return out


def _ours(verifier: IFEvalVerifier, row: dict, response: str) -> dict[str, list[bool]]:
    result = verifier.score(
        Record(
            prompt=row["prompt"],
            completion=response,
            reference={k: row[k] for k in ("instruction_id_list", "kwargs")},
        )
    )
    assert result.error is None, result.error
    entries = result.details["instructions"]
    return {"strict": [e["strict"] for e in entries], "loose": [e["loose"] for e in entries]}


def _compare(rows_and_responses) -> list[str]:
    verifier = IFEvalVerifier()
    diffs = []
    for row, response in rows_and_responses:
        ours, theirs = _ours(verifier, row, response), reference_verdicts(row, response)
        if ours != theirs:
            diffs.append(
                f"{row['instruction_id_list']} {row['kwargs']} {response!r}: ours {ours}, reference {theirs}"
            )
    return diffs


def test_shipped_sample_matches_reference():
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    assert _compare((row, row["response"]) for row in rows) == []
    for row in rows:  # the verdicts stored in the sample are the reference's
        assert reference_verdicts(row, row["response"]) == {
            "strict": row["expected_strict"],
            "loose": row["expected_loose"],
        }


def _rows(combos):
    return [
        {"key": i, "prompt": PROMPT, "instruction_id_list": [iid], "kwargs": [kwargs]}
        for i, (iid, kwargs) in enumerate(combos)
    ]


def test_generated_responses_match_reference():
    responses = _generated_responses(120, seed=7)
    pairs = [(row, response) for response in responses for row in _rows(COMBOS)]
    pairs += [(row, response) for response in responses[:25] for row in _rows(LANGUAGE_COMBOS)]
    diffs = _compare(pairs)
    assert not diffs, "\n".join(diffs[:10])


@pytest.mark.slow
def test_many_generated_responses_match_reference():
    responses = _generated_responses(1500, seed=11)
    pairs = [(row, response) for response in responses for row in _rows(COMBOS + LANGUAGE_COMBOS)]
    diffs = _compare(pairs)
    assert not diffs, "\n".join(diffs[:10])
