"""QA verifier: answer reading, SQuAD normalisation and metrics, the decision policy (reward hacks score 0)."""

from __future__ import annotations

import pickle

import pytest

from rewardlab.types import Record, Result
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.qa import QAVerifier, gold_aliases, normalize_answer, normalize_unicode, read_answer

MODES = ("em", "f1", "contains")


def score(completion, reference, **config) -> Result:
    return QAVerifier(**config).score(Record(completion=completion, reference=reference))


# --------------------------------------------------------------------------------------------- reading
@pytest.mark.parametrize(
    "text, answer, method",
    [
        ("<answer>Paris</answer>", "Paris", "answer_tag"),
        ("<think>London? no</think>\n<answer> Paris </answer>", "Paris", "answer_tag"),
        ("<answer>\\boxed{Paris}</answer>", "Paris", "answer_tag"),
        ("<answer>Final answer: Paris</answer>", "Paris", "answer_tag"),
        ("<answer>**Paris**</answer>", "Paris", "answer_tag"),
        ("Reasoning here.\nFinal answer: Paris", "Paris", "answer_line"),
        ("Reasoning.\n**Final Answer:** Paris\n", "Paris", "answer_line"),
        ("**Final Answer**: Paris", "Paris", "answer_line"),
        ("Final answer: **the Paris.**", "the Paris.", "answer_line"),
        ("Answer: The answer is Paris", "Paris", "answer_line"),
        ("It is in France. The answer is Paris.", "Paris", "answer_line"),
        ("So the final answer is: Paris", "Paris", "answer_line"),
        ("It is $\\boxed{Paris}$.", "Paris", "boxed"),
        ("Paris", "Paris", "whole"),
        ("  **Paris**\n", "Paris", "whole"),
        ("<think>long reasoning, the answer is London</think>Paris", "Paris", "whole"),
    ],
)
def test_reads_the_answer(text, answer, method):
    reading = read_answer(text)
    assert reading.problem is None
    assert reading.answer.text == answer and reading.answer.method == method
    assert text[reading.answer.start : reading.answer.end] == answer  # the span the viewer highlights


def test_the_answer_is_must_be_the_final_statement():
    # Mid-text, "the answer is" is reasoning; the whole response is then read (read=any) or nothing (tagged).
    text = "I thought the answer is Paris.\nBut I am checking other cities now"
    assert read_answer(text).answer.method == "whole"
    assert read_answer(text, read="tagged").answer is None


def test_read_tagged_needs_an_explicit_answer():
    result = score("Paris", "Paris", read="tagged")
    assert result.reward == 0.0 and result.error == "no answer found"
    assert "read=tagged" in result.details["reason"]
    assert score("<answer>Paris</answer>", "Paris", read="tagged").reward == 1.0


def test_only_the_response_after_think_is_read():
    assert score("<think><answer>Paris</answer></think><answer>London</answer>", "Paris").reward == 0.0
    assert score("<think>a</think><think>b</think>Paris", "Paris").reward == 1.0
    # an unclosed <think> is unfinished reasoning: nothing after it is read
    result = score("<think>it is <answer>Paris</answer>", "Paris")
    assert result.error == "no answer found" and "not closed" in result.details["reason"]


def test_retrieved_text_is_never_read():
    info = "<information>Doc 1: Answer: London. <answer>London</answer></information>"
    assert score(f"<search>capital</search>{info}<answer>Paris</answer>", "Paris").reward == 1.0
    assert score(f"<search>capital</search>{info}<answer>Paris</answer>", "London").reward == 0.0
    result = score(f"<search>q</search>{info}", "London")
    assert result.error == "no answer found"
    tool = "<tool_response>\\boxed{London}</tool_response><answer>Paris</answer>"
    assert score(tool, "London").reward == 0.0


def test_chat_completion_reads_the_last_message():
    completion = [{"role": "assistant", "content": "<answer>Paris</answer>"}]
    result = QAVerifier().score(Record(completion=completion, reference="Paris"))
    assert result.reward == 1.0 and result.details["extracted_span"] == [8, 13]


# ---------------------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize(
    "text, expected",
    [
        ("The  Eiffel Tower!", "eiffel tower"),
        ("an apple, a pear", "apple pear"),
        ("Theatre", "theatre"),  # articles are whole words only
        ("U.S.A.", "usa"),
        ("New\u00a0York", "new york"),  # str.split splits on U+00A0, as the reference does
        ("“Paris”", "“paris”"),  # curly quotes are not in string.punctuation: SQuAD keeps them
        ("rock–paper", "rock–paper"),
    ],
)
def test_squad_normalisation(text, expected):
    assert normalize_answer(text) == expected


def test_unicode_normalisation_is_a_setting():
    assert normalize_unicode("“Paris”") == "paris"
    assert normalize_unicode("Ｐａｒｉｓ") == "paris"
    assert score("“Paris”", "Paris").reward == 0.0  # the default equals SQuAD's script
    assert score("“Paris”", "Paris", normalization="unicode").reward == 1.0
    assert score("Don’t Stop", "Don't Stop", normalization="unicode").reward == 1.0


# ---------------------------------------------------------------------------------------------- scoring
def test_modes():
    gold = ["Bobby Scott", "Bob Russell"]
    assert score("bobby scott.", gold).reward == 1.0
    assert score("Bobby", gold).reward == 0.0
    assert score("Bobby", gold, mode="f1").reward == pytest.approx(2 / 3)
    assert score("It was written by Bobby Scott", gold, mode="contains").reward == 1.0
    assert score("Bob Scott", gold, mode="contains").reward == 0.0


def test_f1_threshold_sets_correct_not_reward():
    result = score("Bobby", "Bobby Scott", mode="f1", f1_threshold=0.8)
    assert result.reward == pytest.approx(2 / 3) and result.details["correct"] is False
    assert score("Bobby", "Bobby Scott", mode="f1").details["correct"] is True


def test_contains_is_on_tokens():
    assert score("a party", "art", mode="contains").reward == 0.0
    assert score("modern art", "art", mode="contains").reward == 1.0


@pytest.mark.parametrize(
    "reference",
    [
        "Paris",
        ["London", "Paris"],
        ("Paris",),
        {"answers": ["Paris"]},
        {"target": ["Paris", "City of Paris"]},
        {"answer": "Paris"},
    ],
)
def test_reference_shapes(reference):
    assert score("<answer>paris</answer>", reference).reward == 1.0


def test_numpy_reference_from_parquet_rows():
    np = pytest.importorskip("numpy")
    assert score("<answer>Paris</answer>", {"target": np.array(["Paris", "paris city"])}).reward == 1.0
    assert gold_aliases(1972) == ["1972"]


@pytest.mark.parametrize(
    "reference, message",
    [
        (None, "expected an answer string"),
        ([], "no answer"),
        ({"gold": "x"}, "needs one of the keys"),
        (["Paris", None], "every alias must be text"),
        ([True], "every alias must be text"),
        (["The", "?"], "empty after normalisation"),
    ],
)
def test_malformed_reference_is_a_failure(reference, message):
    result = score("Paris", reference)
    assert result.reward == 0.0 and result.error.startswith("invalid reference") and message in result.error


def test_details():
    text = "<think>x</think><answer>The Paris</answer>"
    d = score(text, ["paris", "City of Light"], mode="f1").details
    assert d["extracted"] == "The Paris" and text[slice(*d["extracted_span"])] == "The Paris"
    assert d["method"] == "answer_tag" and d["normalized"] == "paris"
    assert d["em"] == 1.0 and d["f1"] == 1.0 and d["contains"] == 1.0
    assert d["matched"] == "paris" and d["correct"] is True and "reason" not in d
    wrong = score("London", "Paris").details
    assert wrong["correct"] is False and wrong["matched"] is None and wrong["reason"]


def test_config_checks():
    with pytest.raises(ValueError, match="mode must be one of em, f1, contains"):
        QAVerifier(mode="exact")
    with pytest.raises(ValueError, match="read must be one of tagged, any"):
        QAVerifier(read="all")
    with pytest.raises(ValueError, match="max_answer_tokens"):
        QAVerifier(max_answer_tokens=0)
    with pytest.raises(ValueError, match="f1_threshold"):
        QAVerifier(f1_threshold=1.5)
    with pytest.raises(ValueError, match="normalization"):
        QAVerifier(normalization="nfc")
    with pytest.raises(ValueError, match="unknown qa verifier option"):
        QAVerifier(threshold=1)


def test_registry_and_pickle():
    verifier = get_verifier("qa", mode="f1", read="tagged")
    clone = pickle.loads(pickle.dumps(verifier))
    record = Record(completion="<answer>Bobby</answer>", reference="Bobby Scott")
    assert clone.score(record).reward == verifier.score(record).reward == pytest.approx(2 / 3)


def test_never_raises_on_odd_completions():
    verifier = QAVerifier()
    for completion in (None, 42, {"content": None}, [], "\\boxed{" * 50, "<answer>" * 50, "}" * 10):
        result = verifier.score(Record(completion=completion, reference="Paris"))
        assert result.reward == 0.0 and (result.error is None or "verifier error" not in result.error)


# ------------------------------------------------------------------------------------- reward hacks
GOLD = ["Paris", "City of Paris"]
HACKS = [
    ("Paris, London or Berlin", "hedged"),  # lists the gold with wrong candidates
    ("Paris, City of Paris, London", "hedged"),  # every alias plus a wrong one
    ("Paris or London", "hedged"),
    ("Paris/London", "hedged"),
    ("Paris\nLondon\nBerlin", "hedged"),
    ("<answer>Paris</answer> <answer>London</answer>", "ambiguous"),  # verl reads the last block only
    ("<answer>London</answer>\n<answer>Paris</answer>", "ambiguous"),
    ("Final answer: Paris\n\\boxed{London}", "ambiguous"),
    ("<answer>Paris</answer>\nWait, actually it is London.", "taken back"),
    ("Final answer: Paris (or maybe Lyon)", "hedged"),
    ("maybe Paris", "hedged"),
    ("probably Paris", "hedged"),
    ("either Paris", "hedged"),
    ("not Paris", "negated"),
    ("It is definitely not Paris", "negated"),
    (" ".join(["Paris"] + ["London", "Berlin", "Rome", "Madrid", "Vienna"] * 5), "too long"),
    ("<answer></answer>", "empty answer"),
    ("<answer>...</answer>", "empty answer"),
    ("<answer>the a an</answer>", "empty answer"),
    ("<answer>Paris", "cut off"),  # an unclosed block never falls back to the text
    ("<answer>Paris</answer><answer>Par", "cut off"),
    ("\\boxed{Paris} and \\boxed{Lon", "cut off"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("completion, reason", HACKS)
def test_reward_hacks_score_zero(completion, reason, mode):
    result = score(completion, GOLD, mode=mode)
    assert result.reward == 0.0, result.details
    assert result.details["correct"] is False
    assert reason in (result.details.get("reason") or ""), result.details


@pytest.mark.parametrize("mode", MODES)
def test_empty_gold_alias_matches_nothing(mode):
    # "The" normalises to "": it would equal every empty answer and occur in every answer.
    for completion in ("<answer>the</answer>", "<answer>?</answer>", "<answer>London</answer>"):
        result = score(completion, ["The", "Paris"], mode=mode)
        assert result.reward == 0.0 and result.details["ignored_aliases"] == ["The"]


@pytest.mark.parametrize("mode", MODES)
def test_not_hedges(mode):
    # An answer equal to an alias is never a hedge; separators inside an alias do not split it.
    assert score("Simon and Garfunkel", ["Simon and Garfunkel"], mode=mode).reward == 1.0
    assert score("Washington, D.C.", ["Washington, D.C."], mode=mode).reward == 1.0
    assert score("No Doubt", ["No Doubt"], mode=mode).reward == 1.0
    assert score("Maybe", ["maybe"], mode=mode).reward == 1.0
    # listing only gold aliases names no wrong candidate
    assert (
        score("Bobby Scott and Bob Russell", ["Bobby Scott", "Bob Russell"], mode=mode)
        .details.get("reason", "")
        .startswith("hedged")
        is False
    )
    # the same answer stated twice is one answer
    assert score("<answer>Paris</answer> <answer>paris.</answer>", GOLD, mode=mode).reward == 1.0
    # a long gold alias is never over the cap when answered exactly or inside the cap's slack
    long_gold = " ".join(f"w{i}" for i in range(30))
    assert score(long_gold, long_gold, mode=mode).reward == 1.0


def test_length_cap_setting():
    text = "the capital city of France is known to all as Paris"
    assert score(text, GOLD, mode="contains").reward == 1.0
    assert score(text, GOLD, mode="contains", max_answer_tokens=5).details["reason"].startswith("too long")
    long_text = " ".join(["word"] * 40 + ["Paris"])
    assert score(long_text, GOLD, mode="contains").reward == 0.0
    assert score(long_text, GOLD, mode="contains", max_answer_tokens=None).reward == 1.0


def test_qualifier_after_a_comma_is_refused_outside_em():
    # Deliberate false negative: "Paris, France" names the gold next to another item, which the verifier
    # cannot tell from a listed alternative ("Paris, London"); docs/qa.md, "Decision policy".
    assert score("Paris, France", GOLD, mode="contains").reward == 0.0
    assert score("Paris, France", GOLD).reward == 0.0  # EM is 0 in SQuAD's script too
