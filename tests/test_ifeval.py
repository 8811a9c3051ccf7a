"""IFEval verifier: every instruction type followed and violated, strict/loose, record mapping, summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardlab.types import Record, Result
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.ifeval import (
    INSTRUCTION_IDS,
    IFEvalVerifier,
    InstructionArgumentError,
    build_instruction,
    ifeval_summary,
)
from rewardlab.verifiers.ifeval.text import count_sentences, loose_variants, word_tokenize

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "ifeval" / "sample.jsonl"

# The instruction ids of Google's instructions_registry.INSTRUCTION_DICT.
GOOGLE_IDS = {
    "keywords:existence",
    "keywords:frequency",
    "keywords:forbidden_words",
    "keywords:letter_frequency",
    "language:response_language",
    "length_constraints:number_sentences",
    "length_constraints:number_paragraphs",
    "length_constraints:number_words",
    "length_constraints:nth_paragraph_first_word",
    "detectable_content:number_placeholders",
    "detectable_content:postscript",
    "detectable_format:number_bullet_lists",
    "detectable_format:constrained_response",
    "detectable_format:number_highlighted_sections",
    "detectable_format:multiple_sections",
    "detectable_format:json_format",
    "detectable_format:title",
    "combination:two_responses",
    "combination:repeat_prompt",
    "startend:end_checker",
    "change_case:capital_word_frequency",
    "change_case:english_capital",
    "change_case:english_lowercase",
    "punctuation:no_comma",
    "startend:quotation",
}

# (id, kwargs, a response that follows, a response that violates)
CASES = [
    ("keywords:existence", {"keywords": ["apple", "pear"]}, "An Apple and a pear.", "Only an apple."),
    (
        "keywords:frequency",
        {"keyword": "tea", "frequency": 2, "relation": "at least"},
        "Tea, TEA!",
        "tea once",
    ),
    (
        "keywords:frequency",
        {"keyword": "tea", "frequency": 2, "relation": "less than"},
        "tea once",
        "tea tea",
    ),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "A category of dogs.", "The Cat sat."),
    (
        "keywords:letter_frequency",
        {"letter": "Z", "let_frequency": 2, "let_relation": "at least"},
        "zig Zag",
        "zag",
    ),
    (
        "keywords:letter_frequency",
        {"letter": "e", "let_frequency": 3, "let_relation": "less than"},
        "hello",
        "eeee",
    ),
    (
        "language:response_language",
        {"language": "es"},
        "Hoy hace buen tiempo y vamos a caminar por el parque con mis amigos.",
        "Today the weather is nice and we are going for a walk in the park with my friends.",
    ),
    (
        "length_constraints:number_sentences",
        {"num_sentences": 3, "relation": "at least"},
        "One. Two! Three?",
        "Mr. Smith went to Washington. He stayed.",
    ),
    (
        "length_constraints:number_sentences",
        {"num_sentences": 2, "relation": "less than"},
        "Just one sentence here.",
        "One. Two.",
    ),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\nb", "a\n***\n***\nb"),
    (
        "length_constraints:number_words",
        {"num_words": 4, "relation": "less than"},
        "one two three",
        "a b c d",
    ),
    ("length_constraints:number_words", {"num_words": 3, "relation": "at least"}, "it's fine", "two words"),
    (
        "length_constraints:nth_paragraph_first_word",
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "Then"},
        'First part.\n\n"Then, second.',
        "First part.\n\nAfter that.",
    ),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[a] and [b]", "[a] only"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi.\np. s. bye", "Hi. PS bye"),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Hi.\nP.P.S more", "Hi.\nP.S. more"),
    ("detectable_content:postscript", {"postscript_marker": "Note:"}, "Text\nNOTE: x", "Text only"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n- b", "* a\n* b\n- c"),
    ("detectable_format:constrained_response", {}, "Well. My answer is maybe.", "My answer is perhaps."),
    (
        "detectable_format:number_highlighted_sections",
        {"num_highlights": 2},
        "*a* and **b**",
        "*a* and ** **",
    ),
    (
        "detectable_format:multiple_sections",
        {"section_spliter": "Section", "num_sections": 2},
        "Section 1\nx\nSection 2\ny",
        "Section 1\nx\nsection 2\ny",
    ),
    ("detectable_format:json_format", {}, '```JSON\n{"a": [1, 2]}\n```', '{"a": 1} trailing'),
    ("detectable_format:title", {}, "<<My Title>>\nbody", "<< >> body"),
    ("combination:two_responses", {}, "first\n******\nsecond", "same\n******\nsame"),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "say HI. Hi!", "Hi! Say hi."),
    ("startend:end_checker", {"end_phrase": "The end."}, '"Story... the END."', "The end. Really."),
    ("startend:quotation", {}, '  "quoted"  ', '"unfinished'),
    (
        "change_case:capital_word_frequency",
        {"capital_frequency": 2, "capital_relation": "at least"},
        "I SAID no.",
        "Nothing Loud here.",
    ),
    (
        "change_case:capital_word_frequency",
        {"capital_frequency": 2, "capital_relation": "less than"},
        "Only ONE loud word.",
        "TWO LOUD words.",
    ),
    (
        "change_case:english_capital",
        {},
        "THIS IS A SHORT NOTE ABOUT THE WEATHER TODAY.",
        "THIS IS A SHORT note ABOUT THE WEATHER TODAY.",
    ),
    (
        "change_case:english_lowercase",
        {},
        "this is a short note about the weather today.",
        "This is a short note about the weather today.",
    ),
    ("punctuation:no_comma", {}, "No commas here.", "One, comma."),
]


def test_registry_has_exactly_the_25_ifeval_ids():
    assert set(INSTRUCTION_IDS) == GOOGLE_IDS
    assert len(INSTRUCTION_IDS) == 25
    assert {case[0] for case in CASES} == GOOGLE_IDS  # every type is exercised below


@pytest.mark.parametrize(("instruction_id", "kwargs", "follows", "violates"), CASES)
def test_instruction_followed_and_violated(instruction_id, kwargs, follows, violates):
    check = build_instruction(instruction_id, kwargs, prompt="Say hi.")
    assert check.check(follows).followed, check.check(follows)
    assert not check.check(violates).followed, check.check(violates)
    assert isinstance(check.description(), str) and check.description()


@pytest.mark.parametrize(("instruction_id", "kwargs", "follows", "violates"), CASES)
def test_verifier_scores_each_case(instruction_id, kwargs, follows, violates):
    verifier = IFEvalVerifier()
    reference = {"instruction_id_list": [instruction_id], "kwargs": [kwargs]}
    good = verifier.score(Record(prompt="Say hi.", completion=follows, reference=reference))
    bad = verifier.score(Record(prompt="Say hi.", completion=violates, reference=reference))
    assert good.error is None and good.reward == 1.0
    assert bad.error is None and bad.reward == 0.0
    entry = bad.details["instructions"][0]
    assert entry["id"] == instruction_id and entry["strict"] is False
    json.dumps(good.to_dict())  # details are JSON-serialisable


def test_reference_quirks_are_kept():
    # keywords are unanchored regexes, as in the reference
    assert build_instruction("keywords:existence", {"keywords": ["art"]}).check("Start now").followed
    # **bold** counts as one highlight, an empty ** ** does not
    highlights = build_instruction("detectable_format:number_highlighted_sections", {"num_highlights": 1})
    assert highlights.check("**bold**").followed
    assert not highlights.check("** **").followed
    # a markdown rule '---' counts as a bullet
    assert (
        build_instruction("detectable_format:number_bullet_lists", {"num_bullets": 1}).check("---").followed
    )
    # an undetectable language (no letters) counts as followed
    assert build_instruction("language:response_language", {"language": "fr"}).check("1234 !!").followed
    # a keyword that is not a valid regex is matched literally instead of crashing
    assert (
        build_instruction("keywords:frequency", {"keyword": "c++(", "frequency": 1, "relation": "at least"})
        .check("I like c++( a lot")
        .followed
    )


def test_non_letter_letter_frequency_counts_the_character():
    # IFEval rows 1122 and 1129 ask for '#' and '!'; the reference would check a random letter.
    check = build_instruction(
        "keywords:letter_frequency", {"letter": "#", "let_frequency": 2, "let_relation": "at least"}
    )
    assert check.check("#one #two").followed and not check.check("#one").followed
    assert "random" in check.note
    result = IFEvalVerifier().score(
        Record(
            completion="Wow! Great! Yes!",
            reference={
                "instruction_id_list": ["keywords:letter_frequency"],
                "kwargs": [{"let_relation": "at least", "letter": "!", "let_frequency": 3}],
            },
        )
    )
    assert result.reward == 1.0 and "random" in result.details["instructions"][0]["note"]


def test_sentence_counting_matches_punkt():
    assert count_sentences("Dr. Smith arrived at 5 p.m. He left early. Then what?") == 3
    assert count_sentences("* item one\n* item two") == 1  # no final punctuation: one sentence
    assert word_tokenize("I can't go.") == ["I", "ca", "n't", "go", "."]


def test_loose_variants_in_reference_order():
    names = [name for name, _ in loose_variants("Sure:\n*a*\nbye")]
    assert names[0] == "response" and "no_first_last_lines_no_asterisks" in names
    assert all(text.strip() for _, text in loose_variants("x\n\ny"))
    assert loose_variants("one line") == [("response", "one line")]


def test_loose_passes_where_strict_fails():
    verifier = IFEvalVerifier()
    record = Record(
        completion='Sure, here it is:\n"Ride on."',
        reference={"instruction_id_list": ["startend:quotation", "punctuation:no_comma"], "kwargs": [{}, {}]},
    )
    result = verifier.score(record)
    entries = result.details["instructions"]
    assert [e["strict"] for e in entries] == [False, False]
    assert [e["loose"] for e in entries] == [True, True]
    assert entries[0]["loose_variant"] == "no_first_line"
    assert result.reward == 0.0
    assert IFEvalVerifier(mode="loose").score(record).reward == 1.0


def test_reward_fraction_and_all_or_nothing():
    reference = {
        "instruction_id_list": ["punctuation:no_comma", "startend:quotation", "detectable_format:title"],
        "kwargs": [{}, {}, {}],
    }
    record = Record(completion='"<<T>> no commas"', reference=reference)
    assert IFEvalVerifier().score(record).reward == 1.0
    record = Record(completion="<<T>> no commas", reference=reference)
    assert IFEvalVerifier().score(record).reward == pytest.approx(2 / 3)
    assert IFEvalVerifier(all_or_nothing=True).score(record).reward == 0.0


def test_blank_response_follows_nothing():
    reference = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    result = IFEvalVerifier().score(Record(completion="  \n", reference=reference))
    assert result.reward == 0.0 and result.details["instructions"][0]["loose"] is False


def test_record_mapping_row_itself_and_response_column():
    row = json.loads(SAMPLE.read_text().splitlines()[0])
    record = Record.from_dict(row)  # key/instruction_id_list/kwargs/response land in metadata
    result = get_verifier("ifeval").score(record)
    assert result.error is None
    assert [e["strict"] for e in result.details["instructions"]] == row["expected_strict"]
    # reference given as JSON text, kwargs in the Hugging Face layout (every name, unused ones None)
    reference = json.dumps(
        {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"num_words": None, "relation": None}]}
    )
    assert IFEvalVerifier().score(Record(completion="no comma", reference=reference)).reward == 1.0


def test_repeat_prompt_falls_back_to_record_prompt():
    reference = {"instruction_id_list": ["combination:repeat_prompt"], "kwargs": [{}]}
    record = Record(prompt="Name a colour.", completion="Name a colour. Blue.", reference=reference)
    assert IFEvalVerifier().score(record).reward == 1.0


@pytest.mark.parametrize(
    ("reference", "error_kind"),
    [
        ({"instruction_id_list": ["keywords:nope"], "kwargs": [{}]}, "unknown instruction"),
        (
            {"instruction_id_list": ["length_constraints:number_words"], "kwargs": [{"num_words": 3}]},
            "invalid kwargs",
        ),
        (
            {
                "instruction_id_list": ["length_constraints:number_words"],
                "kwargs": [{"num_words": 3, "relation": "<"}],
            },
            "invalid kwargs",
        ),
        ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"oops": 1}]}, "invalid kwargs"),
        ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]}, "invalid reference"),
        (None, "invalid reference"),
    ],
)
def test_bad_references_are_errors_not_crashes(reference, error_kind):
    result = IFEvalVerifier().score(Record(completion="text", reference=reference))
    assert result.reward == 0.0 and result.error.startswith(error_kind)


def test_invalid_arguments_refused_where_reference_would_randomise():
    with pytest.raises(InstructionArgumentError):
        build_instruction(
            "keywords:letter_frequency", {"letter": "ab", "let_frequency": 1, "let_relation": "at least"}
        )
    with pytest.raises(InstructionArgumentError):
        build_instruction(
            "length_constraints:nth_paragraph_first_word",
            {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "a"},
        )
    with pytest.raises(ValueError):
        IFEvalVerifier(mode="lenient")
    with pytest.raises(ValueError):
        IFEvalVerifier(strictness=1)


def test_language_detection_is_seeded_and_deterministic():
    check = build_instruction("language:response_language", {"language": "en"}, language_seed=0)
    text = "ok sure"  # short text: langdetect's guess depends on its random state
    verdicts = {json.dumps(check.check(text).observed) for _ in range(5)}
    assert len(verdicts) == 1


def test_shipped_sample_matches_reference_verdicts():
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    assert len(rows) >= 50
    verifier = IFEvalVerifier()
    results = verifier.score_batch([Record.from_dict(row) for row in rows])
    for row, result in zip(rows, results, strict=True):
        assert result.error is None, (row["key"], result.error)
        assert [e["strict"] for e in result.details["instructions"]] == row["expected_strict"], row["key"]
        assert [e["loose"] for e in result.details["instructions"]] == row["expected_loose"], row["key"]
    summary = ifeval_summary(results)
    n_inst = sum(len(r["instruction_id_list"]) for r in rows)
    assert summary["n_prompts"] == len(rows) and summary["n_instructions"] == n_inst
    expected_prompt_strict = sum(all(r["expected_strict"]) for r in rows) / len(rows)
    expected_inst_loose = sum(sum(r["expected_loose"]) for r in rows) / n_inst
    assert summary["prompt_level_strict_acc"] == pytest.approx(expected_prompt_strict)
    assert summary["inst_level_loose_acc"] == pytest.approx(expected_inst_loose)
    assert set(summary["per_instruction"]) == GOOGLE_IDS


def test_summary_counts_errors_and_accepts_dicts():
    ok = IFEvalVerifier().score(
        Record(completion="a, b", reference={"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]})
    )
    results = [ok.to_dict(), Result.failure("timeout"), Result(reward=1.0, details={"other": 1})]
    summary = ifeval_summary(results)
    assert summary["n_prompts"] == 2 and summary["n_errors"] == 1 and summary["n_instructions"] == 1
    assert summary["prompt_level_strict_acc"] == 0.0 and summary["inst_level_strict_acc"] == 0.0
    assert summary["per_category"]["punctuation"]["n"] == 1
    assert ifeval_summary([])["prompt_level_strict_acc"] is None


def test_language_detection_is_langdetects_bit_for_bit():
    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

    from rewardlab.verifiers.ifeval.text import _detector_factory, _fast_detector

    reference = DetectorFactory()
    reference.load_profile(PROFILES_DIRECTORY)
    reference.set_seed(0)
    texts = [case[2] for case in CASES] + [case[3] for case in CASES]
    texts += [
        "ok sure",
        "Hola amigo",
        "Le thé est une boisson.",
        "日本語のテキストです",
        "Привет мир",
        "42 !!",
    ]
    for text in texts:
        expected = reference.create()
        expected.append(text)
        ours = _fast_detector(_detector_factory(0))
        ours.append(text)
        try:
            want = [(p.lang, p.prob) for p in expected.get_probabilities()]
        except Exception as exc:
            want = type(exc).__name__
        try:
            got = [(p.lang, p.prob) for p in ours.get_probabilities()]
        except Exception as exc:
            got = type(exc).__name__
        assert got == want, text


def test_tally_streams_output_rows_and_formats():
    from rewardlab.verifiers.ifeval import IFEvalTally

    verifier = IFEvalVerifier()
    verifier.warmup()
    reference = {"instruction_id_list": ["punctuation:no_comma", "startend:quotation"], "kwargs": [{}, {}]}
    tally = IFEvalTally()
    for text in ['"no commas"', "a, b"]:
        result = verifier.score(Record(completion=text, reference=reference))
        tally.add({"reward": result.reward, "details": result.details, "error": result.error})
    tally.add({"reward": 0.0, "details": {}, "error": "timeout"})
    out = tally.to_dict()
    assert out["n_prompts"] == 3 and out["n_instructions"] == 4 and out["n_errors"] == 1
    assert out["prompt_level_strict_acc"] == pytest.approx(1 / 3)
    assert out["inst_level_strict_acc"] == pytest.approx(2 / 4)
    text = tally.format()
    assert "prompt-level" in text and "33.3%" in text


def test_scoring_engine_scores_ifeval_rows_as_they_are(tmp_path):
    from rewardlab.scoring import score_records

    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()[:8]]
    results = score_records(rows, "ifeval", workers=0, config={"mode": "loose"})
    for row, result in zip(rows, results, strict=True):
        assert result.error is None
        assert [e["loose"] for e in result.details["instructions"]] == row["expected_loose"]
        assert result.reward == pytest.approx(sum(row["expected_loose"]) / len(row["expected_loose"]))


def test_a_crashing_check_fails_alone():
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError
    reference = {
        "instruction_id_list": ["detectable_format:json_format", "punctuation:no_comma"],
        "kwargs": [{}, {}],
    }
    result = IFEvalVerifier().score(Record(completion=deep, reference=reference))
    assert result.error is None and result.reward == 0.5
    assert "RecursionError" in result.details["instructions"][0]["observed"]["check_error"]


def test_docs_examples_run(tmp_path, monkeypatch, capsys):
    import re

    from rewardlab.cli import main

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ifeval").symlink_to(root / "data" / "ifeval")
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "score",
                "data/ifeval/sample.jsonl",
                "-o",
                "scored.jsonl",
                "--verifier",
                "ifeval",
                "--workers",
                "0",
            ]
        )
        == 0
    )
    blocks = re.findall(r"```python\n(.*?)```", (root / "docs" / "ifeval.md").read_text(), flags=re.DOTALL)
    assert len(blocks) >= 4
    for block in blocks:
        if "Scorer(" in block:  # worker processes: covered by the scoring engine's own tests
            continue
        exec(compile(block, "docs/ifeval.md", "exec"), {})
    out = capsys.readouterr().out
    assert "0.5" in out and "prompt_level_strict_acc" in out


def test_module_cli_prints_accuracies(tmp_path, capsys):
    from rewardlab.verifiers.ifeval.__main__ import main

    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()[:5]]
    results = IFEvalVerifier().score_batch([Record.from_dict(row) for row in rows])
    scored = tmp_path / "scored.jsonl"
    scored.write_text(
        "".join(json.dumps({**row, **res.to_dict()}) + "\n" for row, res in zip(rows, results, strict=True))
    )
    assert main([str(scored)]) == 0
    assert "prompt-level" in capsys.readouterr().out
    assert main([str(scored), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_prompts"] == 5
    assert main([str(tmp_path / "missing.jsonl")]) == 2
