"""The QA verifier against the references: SQuAD v1.1's official evaluation script and verl's Search-R1 reward.

Data: NQ-open dev (3,610 questions, CC BY-SA 3.0) and, per question, ten predictions that are **generated, not
model outputs**: ``bench/build_qa_data.py`` (seed 0) perturbs the gold aliases (case, articles, punctuation,
Unicode spaces and punctuation, "I think X", a truncated alias, another question's alias, "X or Y" with a
wrong Y; tests/data/qa/README.md). Every count below was measured on those 36,100 generated predictions: it
says how the verifier treats these perturbations, not how often it would disagree with the references on a
model's answers.

Required: SQuAD's EM and F1 figures on every prediction, to the bit. Verdicts may differ from SQuAD's or
verl's only in the classes of ``DIFFERENCES``: each class is a predicate on the input (the answer and the
gold aliases, computed here without the verifier's output), has a hand-checked example from the data
(``EXAMPLES``), and a bound per comparison (``BOUNDS``: the measured count plus max(2, 5%)). A difference
in no class, one where the verifier scores above the reference, or a class over its bound fails.
"""

from __future__ import annotations

import gzip
import json
import re
import string
import unicodedata
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from rewardlab.types import Record
from rewardlab.verifiers.qa import QAVerifier

DATA = Path(__file__).parent / "data" / "qa" / "nq_open_dev_predictions.jsonl.gz"


# ---------------------------------------------------------------------------------------------------------
# Reference 1, transcribed: SQuAD v1.1's official evaluation script, evaluate-v1.1.py, functions
# normalize_answer, f1_score, exact_match_score, metric_max_over_ground_truths, as vendored verbatim in
# https://github.com/seominjoon/denspi/blob/51915f65b9e5345cbd3dee8af2dc02eeb1cb43dd/evaluate-v1.1.py
# (the same functions: huggingface/evaluate, metrics/squad/compute_score.py at b6e7c3b0ed02444f1b3f4f1eb48a39f27af321ec).
def squad_normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""

    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_f1_score(prediction, ground_truth):
    prediction_tokens = squad_normalize_answer(prediction).split()
    ground_truth_tokens = squad_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def squad_exact_match_score(prediction, ground_truth):
    return squad_normalize_answer(prediction) == squad_normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


# ---------------------------------------------------------------------------------------------------------
# Reference 2, transcribed: verl's Search-R1 reward, verl/utils/reward_score/search_r1_like_qa_em.py at
# https://github.com/volcengine/verl/blob/b178a3cd56f58b2d502255daba591e92833930a7/verl/utils/reward_score/search_r1_like_qa_em.py
# (Apache-2.0; adapted there from PeterGriffinJin/Search-R1's qa_em.py). compute_score's 1-in-64 debug
# print (random.randint) is left out: it does not change the score.
def verl_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def em_check(prediction, golden_answers):
    if isinstance(golden_answers, str):
        golden_answers = [golden_answers]
    normalized_prediction = verl_normalize_answer(prediction)
    score = 0
    for golden_answer in golden_answers:
        golden_answer = verl_normalize_answer(golden_answer)
        if golden_answer == normalized_prediction:
            score = 1
            break
    return score


def subem_check(prediction, golden_answers):
    if isinstance(golden_answers, str):
        golden_answers = [golden_answers]
    normalized_prediction = verl_normalize_answer(prediction)
    score = 0
    for golden_answer in golden_answers:
        golden_answer = verl_normalize_answer(golden_answer)
        if golden_answer in normalized_prediction:
            score = 1
            break
    return score


def extract_solution(solution_str):
    """Extract the equation from the solution string."""
    answer_pattern = r"<answer>(.*?)</answer>"
    match = re.finditer(answer_pattern, solution_str, re.DOTALL)
    matches = list(match)
    if len(matches) < 1:
        return None
    # If there are 2 or more matches, return the last one
    return matches[-1].group(1).strip()


def count_answer_tags(text):
    opening_tags = text.count("<answer>")
    closing_tags = text.count("</answer>")
    return opening_tags, closing_tags


def compute_score(solution_str, ground_truth, method="strict", format_score=0.0, score=1.0):
    answer = extract_solution(solution_str=solution_str)
    open_count, close_count = count_answer_tags(solution_str)
    if answer is None:
        return 0
    else:
        if em_check(answer, ground_truth["target"]):
            if open_count > 10 or close_count > 10:  # prevent output a lot of </answer>
                score = score / 4
                return score
            return score
        else:
            return format_score


def compute_score_subem(solution_str, ground_truth, method="strict", format_score=0.0, score=1.0):
    answer = extract_solution(solution_str=solution_str)
    if answer is None:
        return 0
    else:
        if subem_check(answer, ground_truth["target"]):
            return score
        else:
            return format_score


# ---------------------------------------------------------------------------------------------------------
# Agreement on NQ-open (shared with bench/score_qa.py).
SEARCH_R1 = "<think>I should answer from what I know.</think>\n<answer> {} </answer>"
COMPARISONS = ("squad_em", "squad_f1", "verl_em", "verl_subem")


def load_rows() -> list[dict]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@lru_cache(maxsize=1)
def _rows() -> tuple[dict, ...]:
    return tuple(load_rows())


def nonempty_golds(golds: list[str]) -> list[str]:
    return [g for g in golds if verl_normalize_answer(g)]


# -- the classes of differences: predicates on (comparison, answer, golds), never on the verifier's output ---
# ``answer`` is what both sides read (the prediction, stripped). Every class describes the reference scoring
# above 0 and the verifier scoring 0; a difference the other way has no class.
SEPARATOR = re.compile(r"[,;/]| (?:or|and) ", re.IGNORECASE)
HEDGE_PHRASES = ("i think",)  # the hedge phrase of the generated data ("I think X")


def _tokens(text: str) -> list[str]:
    return squad_normalize_answer(text).split()


def _occurs(tokens: list[str], sub: list[str]) -> bool:
    """``sub`` occurs contiguously in ``tokens`` (an empty ``sub`` nowhere)."""
    n = len(sub)
    return n > 0 and any(tokens[i : i + n] == sub for i in range(len(tokens) - n + 1))


def _names_gold(text: str, golds: list[str]) -> bool:
    return any(_occurs(_tokens(text), _tokens(g)) for g in golds)


def _without_unicode_punctuation(text: str) -> str:
    """``text`` without its non-ASCII punctuation (curly quotes, dashes, ellipsis: Unicode category P)."""
    return "".join(ch for ch in text if ch.isascii() or not unicodedata.category(ch).startswith("P"))


def _fragment_of_gold(part: str, golds: list[str]) -> bool:
    """``part`` is empty or a run of tokens of some gold alias (Unicode punctuation left out on both)."""
    tokens = _tokens(_without_unicode_punctuation(part))
    return not tokens or any(_occurs(_tokens(_without_unicode_punctuation(g)), tokens) for g in golds)


def _cuts(answer: str) -> list[list[str]]:
    """``answer`` cut in two at each separator, and cut at all of them."""
    seps = [m.span() for m in SEPARATOR.finditer(answer)]
    edges = [0, *(x for span in seps for x in span), len(answer)]
    return [[answer[:s], answer[e:]] for s, e in seps] + [
        [answer[edges[i] : edges[i + 1]] for i in range(0, len(edges), 2)]
    ]


def empty_gold_alias(comparison: str, answer: str, golds: list[str]) -> bool:
    """The reference's 1 comes only through an alias that normalises to "" (equal to an empty answer, a
    substring of every answer): over the other aliases the reference gives 0."""
    usable = nonempty_golds(golds)
    if comparison in ("squad_em", "verl_em"):
        return not em_check(answer, usable) if usable else True
    if comparison == "verl_subem":
        return not subem_check(answer, usable) if usable else True
    return False  # F1 of "" against "" is 0 in SQuAD's script: no difference to explain


def hedge_phrase(comparison: str, answer: str, golds: list[str]) -> bool:
    """The normalised answer says a hedge phrase ("i think") that no gold alias says."""
    padded = f" {squad_normalize_answer(answer)} "
    return comparison in ("squad_f1", "verl_subem") and any(
        f" {h} " in padded and not any(h in squad_normalize_answer(g) for g in golds) for h in HEDGE_PHRASES
    )


def list_with_another_candidate(comparison: str, answer: str, golds: list[str]) -> bool:
    """Cut at a separator (",", ";", "/", " or ", " and "), one part names a gold alias (its tokens occur)
    and another names none and is no run of a gold alias's tokens: a second candidate."""

    def other(part: str) -> bool:
        return not _names_gold(part, golds) and not _fragment_of_gold(part, golds)

    return comparison in ("squad_f1", "verl_subem") and any(
        any(_names_gold(p, golds) for p in parts) and any(other(p) for p in parts) for parts in _cuts(answer)
    )


def list_of_gold_fragments(comparison: str, answer: str, golds: list[str]) -> bool:
    """The answer names a gold alias and has a separator, and every part between separators is a run of a
    gold alias's tokens: a truncated alias that contains a separator ("11, 2004" of "June 11, 2004")."""
    parts = _cuts(answer)[-1]
    return (
        comparison in ("squad_f1", "verl_subem")
        and len(parts) > 1
        and _names_gold(answer, golds)
        and all(_fragment_of_gold(p, golds) for p in parts)
    )


def gold_glued_to_unicode_punctuation(comparison: str, answer: str, golds: list[str]) -> bool:
    """No gold alias's tokens occur in the answer, but they do once non-ASCII punctuation is taken out of
    both (SQuAD's normalisation removes ASCII punctuation only: "“1994”" is one token)."""
    stripped = [_without_unicode_punctuation(g) for g in golds]
    return (
        comparison == "verl_subem"
        and not _names_gold(answer, golds)
        and _names_gold(_without_unicode_punctuation(answer), stripped)
    )


def gold_inside_longer_token(comparison: str, answer: str, golds: list[str]) -> bool:
    """A gold alias's normalised text is a substring of the normalised answer, but its tokens occur in the
    answer only glued to more letters or digits ("florida" in "floridas", "3" in "33"), even without
    Unicode punctuation."""
    stripped = [_without_unicode_punctuation(g) for g in golds]
    return (
        comparison == "verl_subem"
        and not _names_gold(_without_unicode_punctuation(answer), stripped)
        and any(squad_normalize_answer(g) in squad_normalize_answer(answer) for g in nonempty_golds(golds))
    )


# In this order: a difference is counted in the first class whose predicate holds.
DIFFERENCES = {
    f.__name__: f
    for f in (
        empty_gold_alias,
        hedge_phrase,
        list_with_another_candidate,
        list_of_gold_fragments,
        gold_glued_to_unicode_punctuation,
        gold_inside_longer_token,
    )
}

# Hand-checked, one or more per class, each a row of the data: (comparison, question id, prediction kind,
# prediction, golds, the reference's score, ours, why the difference is right or accepted).
EXAMPLES = {
    "empty_gold_alias": [
        (
            "squad_em",
            1150,
            "partial",
            "A",
            ["A+", "AB+"],
            1.0,
            0.0,
            'blood type "A" is neither A+ nor AB+; SQuAD matches because "A" (an article) and "A+" both '
            "normalise to nothing. Right: an alias that normalises to nothing cannot be checked",
        ),
        (
            "verl_subem",
            2720,
            "wrong_entity",
            "Manley",
            ["a rotationally symmetric saltire", "the symbol ×", "*"],
            1.0,
            0.0,
            'verl: "*" normalises to "", a substring of every answer. Right: "Manley" is wrong',
        ),
    ],
    "hedge_phrase": [
        (
            "squad_f1",
            1205,
            "extra_words",
            "I think Taylor Michel Momsen",
            ["Taylor Michel Momsen"],
            0.75,
            0.0,
            "the answer hedges; the verifier refuses hedge words that no alias has (docs/qa.md). Accepted: "
            "SQuAD's F1 pays the overlap",
        ),
    ],
    "list_with_another_candidate": [
        (
            "verl_subem",
            2632,
            "hedge",
            "Matt Monro, The New Colossus",
            ["Matt Monro"],
            1.0,
            0.0,
            "two candidates, one wrong: containment pays any list that includes the gold. Right",
        ),
    ],
    "list_of_gold_fragments": [
        (
            "squad_f1",
            174,
            "partial",
            "11, 2004",
            ["June\u00a011,\u00a02004", "2004"],
            0.8,
            0.0,
            'a truncated date: its comma reads as a list separator and "11" as a second candidate. Accepted '
            "(a false negative): the answer is incomplete, SQuAD gives it partial F1",
        ),
    ],
    "gold_glued_to_unicode_punctuation": [
        (
            "verl_subem",
            266,
            "unicode_punctuation",
            "\u201c1994\u201d",
            ["1994"],
            1.0,
            0.0,
            'SQuAD\'s normalisation keeps curly quotes, so "“1994”" is one token, not "1994"; verl\'s character '
            "substring finds it. Accepted (a false negative; SQuAD's own EM and F1 are 0 too); "
            'normalization="unicode" accepts it',
        ),
    ],
    "gold_inside_longer_token": [
        ("verl_subem", 2015, "partial", "33", ["3"], 1.0, 0.0, '"3" is a character substring of "33". Right'),
        (
            "verl_subem",
            3354,
            "punctuation",
            "Florida's",
            ["Florida"],
            1.0,
            0.0,
            'SQuAD\'s normalisation drops the apostrophe: "floridas" is not the token "florida". Accepted (a '
            "false negative; SQuAD's own EM and F1 are 0 too)",
        ),
    ],
}

# The most differences allowed per (selection, comparison, class): measured count + max(2, ceil(5%)).
# Counts measured on the generated predictions (see the docstring).
BOUNDS = {
    "every-8th-question": {
        ("squad_em", "empty_gold_alias"): 20,  # measured 18: questions 290, 363, 1150, 2720
        ("verl_em", "empty_gold_alias"): 20,  # measured 18
        ("squad_f1", "hedge_phrase"): 63,  # measured 60
        ("squad_f1", "list_with_another_candidate"): 475,  # measured 452
        ("squad_f1", "list_of_gold_fragments"): 3,  # measured 1
        ("verl_subem", "empty_gold_alias"): 34,  # measured 32
        ("verl_subem", "hedge_phrase"): 63,  # measured 60
        ("verl_subem", "list_with_another_candidate"): 475,  # measured 452
        ("verl_subem", "list_of_gold_fragments"): 3,  # measured 1
        ("verl_subem", "gold_glued_to_unicode_punctuation"): 457,  # measured 435
        ("verl_subem", "gold_inside_longer_token"): 60,  # measured 57
    },
    "all-3610-questions": {
        ("squad_em", "empty_gold_alias"): 20,  # measured 18
        ("verl_em", "empty_gold_alias"): 20,  # measured 18
        ("squad_f1", "hedge_phrase"): 475,  # measured 452
        ("squad_f1", "list_with_another_candidate"): 3785,  # measured 3604
        ("squad_f1", "list_of_gold_fragments"): 16,  # measured 14
        ("verl_subem", "empty_gold_alias"): 34,  # measured 32
        ("verl_subem", "hedge_phrase"): 475,  # measured 452
        ("verl_subem", "list_with_another_candidate"): 3785,  # measured 3604
        ("verl_subem", "list_of_gold_fragments"): 16,  # measured 14
        ("verl_subem", "gold_glued_to_unicode_punctuation"): 3628,  # measured 3455
        ("verl_subem", "gold_inside_longer_token"): 479,  # measured 456
    },
}
UNCLASSIFIED = "UNCLASSIFIED"


def classify(comparison: str, answer: str, golds: list[str], theirs: float, ours: float) -> str:
    """The class of a difference (the first predicate that holds), or ``UNCLASSIFIED: ...``."""
    if ours == 0.0 and theirs > 0.0:
        for name, predicate in DIFFERENCES.items():
            if predicate(comparison, answer, golds):
                return name
    return f"{UNCLASSIFIED}: qa {ours} vs reference {theirs} on {answer!r}, golds {golds}"


def reference_scores(prediction: str, golds: list[str]) -> dict[str, tuple[str, float]]:
    """Per comparison, what the verifier reads (the bare prediction or the Search-R1 completion) and the
    reference's score."""
    solution, target = SEARCH_R1.format(prediction), {"target": golds}
    return {
        "squad_em": (
            prediction,
            float(metric_max_over_ground_truths(squad_exact_match_score, prediction, golds)),
        ),
        "squad_f1": (prediction, float(metric_max_over_ground_truths(squad_f1_score, prediction, golds))),
        "verl_em": (solution, float(compute_score(solution, target))),
        "verl_subem": (solution, float(compute_score_subem(solution, target))),
    }


def agreement(rows, *, limit: int | None = None) -> dict[str, Counter]:
    """Per comparison, Counter of ``agree`` and of each class of difference (``UNCLASSIFIED: ...`` keys for
    a difference in no class)."""
    verifiers = {"squad_em": QAVerifier(), "verl_em": QAVerifier()}
    verifiers["squad_f1"], verifiers["verl_subem"] = QAVerifier(mode="f1"), QAVerifier(mode="contains")
    tables: dict[str, Counter] = {k: Counter() for k in COMPARISONS}
    for row in rows[:limit]:
        golds = row["answers"]
        for prediction in row["predictions"].values():
            for name, (completion, theirs) in reference_scores(prediction, golds).items():
                ours = verifiers[name].score(Record(completion=completion, reference=golds)).reward
                if ours == theirs:
                    tables[name]["agree"] += 1
                else:
                    tables[name][classify(name, prediction.strip(), golds, theirs, ours)] += 1
    return tables


# ---------------------------------------------------------------------------------------------------------
def test_transcribed_references_behave_as_documented():
    # str.split() splits on U+00A0 (and every Unicode space): the reference's tokens, and ours.
    assert squad_normalize_answer("New\u00a0York") == "new york"
    assert squad_exact_match_score("A+", "---")  # both normalise to ""
    assert subem_check("any answer at all", ["A+"]) == 1  # "" occurs in every string
    assert extract_solution("<answer>London</answer><answer>Paris</answer>") == "Paris"


# The default suite checks every 8th question (and the four with punctuation-only golds); the slow run all.
SUBSET = pytest.param(8, id="every-8th-question")
FULL = pytest.param(1, id="all-3610-questions", marks=pytest.mark.slow)


def _selected(step: int) -> list[dict]:
    return [row for row in _rows() if row["id"] % step == 0 or row["id"] in (290, 363, 1150, 2720)]


@pytest.mark.parametrize("step", [SUBSET, FULL])
def test_squad_figures_on_every_nq_open_prediction(step):
    verifier = QAVerifier(mode="f1")
    rows = _selected(step)
    checked = 0
    for row in rows:
        golds = row["answers"]
        for prediction in row["predictions"].values():
            em = metric_max_over_ground_truths(squad_exact_match_score, prediction, golds)
            f1 = metric_max_over_ground_truths(squad_f1_score, prediction, golds)
            result = verifier.score(Record(completion=prediction, reference=golds))
            if result.error and result.error.startswith("invalid reference"):
                continue  # a gold of punctuation only: class empty_gold_alias
            d = result.details
            assert d["extracted"] == prediction.strip(), (prediction, d)
            assert (d["em"], d["f1"]) == (float(em), f1), (prediction, golds, d)  # identical, not close
            assert d["normalized"] == squad_normalize_answer(prediction)
            checked += 1
    assert checked == 10 * len(rows) - 20  # all but questions 290 and 363 (every alias normalises to "")


@pytest.mark.parametrize("step", [SUBSET, FULL])
def test_verdicts_differ_from_squad_and_verl_only_in_bounded_classes(step, request):
    tables = agreement(_selected(step))
    unclassified = {name: [k for k in t if k.startswith(UNCLASSIFIED)] for name, t in tables.items()}
    assert not any(unclassified.values()), unclassified
    bounds = BOUNDS[request.node.callspec.id]
    counted = {(name, cls): n for name, t in tables.items() for cls, n in t.items() if cls != "agree"}
    over = {key: (n, bounds.get(key, 0)) for key, n in counted.items() if n > bounds.get(key, 0)}
    assert not over, f"(comparison, class): (count, bound) over the bound: {over}"


def test_every_class_has_a_bound_and_a_hand_checked_example():
    assert set(EXAMPLES) == set(DIFFERENCES)
    for bounds in BOUNDS.values():
        assert {cls for _, cls in bounds} == set(DIFFERENCES)


@pytest.mark.parametrize(
    "klass, example",
    [(k, e) for k, examples in EXAMPLES.items() for e in examples],
    ids=lambda v: str(v)[:40],
)
def test_hand_checked_example_of_each_class(klass, example):
    comparison, qid, kind, prediction, golds, theirs, ours, _why = example
    row = _rows()[qid]
    assert (row["id"], row["answers"], row["predictions"][kind]) == (qid, golds, prediction)
    completion, reference = reference_scores(prediction, golds)[comparison]
    assert reference == pytest.approx(theirs, abs=1e-9)
    verifier = QAVerifier(mode={"squad_f1": "f1", "verl_subem": "contains"}.get(comparison, "em"))
    assert verifier.score(Record(completion=completion, reference=golds)).reward == ours
    assert classify(comparison, prediction.strip(), golds, reference, ours) == klass


def test_unicode_normalisation_accepts_the_glued_punctuation_class():
    # the accepted difference of gold_glued_to_unicode_punctuation has its documented remedy
    verifier = QAVerifier(mode="contains", normalization="unicode")
    assert verifier.score(Record(completion="\u201c1994\u201d", reference=["1994"])).reward == 1.0


@pytest.mark.parametrize(
    "solution, golds, verl, ours, why",
    [
        # verl reads the last block; two different blocks are a hedge here
        ("<answer>London</answer><answer>Paris</answer>", ["Paris"], 1.0, 0.0, "ambiguous"),
        # verl gives 1/4 past 10 answer tags; the same answer repeated is one answer here
        ("<answer>Paris</answer>" * 11, ["Paris"], 0.25, 1.0, None),
        # verl reads an <answer> inside the reasoning; here only the response after </think> is read
        ("<think><answer>Paris</answer></think>", ["Paris"], 1.0, 0.0, "response is empty"),
        # a retrieved document's <answer> is not the model's
        ("<information><answer>Paris</answer></information>", ["Paris"], 1.0, 0.0, None),
    ],
)
def test_designed_differences_from_verl_em(solution, golds, verl, ours, why):
    assert compute_score(solution, {"target": golds}) == verl
    result = QAVerifier().score(Record(completion=solution, reference={"target": golds}))
    assert result.reward == ours
    if why:
        assert why in result.details["reason"]


@pytest.mark.parametrize(
    "answer, golds",
    [
        ("Paris or London", ["Paris"]),  # a hedge verl's subem accepts
        ("a party", ["art"]),  # subem is a character substring
        ("O-", ["A+", "AB+"]),  # NQ-open dev question 1150: "A+" normalises to "", which is in every answer
        ("not Paris", ["Paris"]),
        (" ".join(["w"] * 30 + ["Paris"]), ["Paris"]),
    ],
)
def test_designed_differences_from_verl_subem(answer, golds):
    solution = SEARCH_R1.format(answer)
    assert compute_score_subem(solution, {"target": golds}) == 1.0
    assert QAVerifier(mode="contains").score(Record(completion=solution, reference=golds)).reward == 0.0


def test_sample_file_is_in_record_shape():
    path = Path(__file__).parents[1] / "data" / "qa" / "nq_open_sample.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 200 and all(set(r) == {"id", "prompt", "reference"} for r in rows)
    verifier = QAVerifier()
    for row in rows:
        record = Record.from_dict({**row, "completion": f"<answer>{row['reference'][0]}</answer>"})
        result = verifier.score(record)
        assert result.reward == 1.0 or result.error.startswith("invalid reference"), (row, result)
