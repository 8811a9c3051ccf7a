"""Rubrics as rewards (RaR; Gunjal et al., 2025, arXiv 2507.17746): the rubric formats :func:`parse_rubric`
reads (every accepted form, every refusal) and RaR's two reward formulas against hand-computed cases and
against a transcription of HealthBench's rubric score, the normalisation RaR's negative weights follow.

The judge's side (prompts, one backend call per batch, the cache, budgets) is tests/test_judge_source.py."""

from __future__ import annotations

import json
import math
import random

import pytest

from rewardlab.rewardmodels.judge.rubric import (
    CATEGORY_WEIGHTS,
    Criterion,
    criterion_details,
    explicit_reward,
    implicit_reward,
    parse_rubric,
    rubric_text,
)


def healthbench_score(points: list[float], met: list[bool]) -> float | None:
    """HealthBench's per-example rubric score, transcribed from openai/simple-evals ``healthbench_eval.py``
    (commit 9e2fafd, ``calculate_score``): the points of the met items over the total of the positive points
    (a met negative item, an undesirable behaviour, subtracts its points); ``None`` without positive points.
    HealthBench clips the mean over examples to [0, 1] (``_compute_clipped_stats``)."""
    total_possible_points = sum(p for p in points if p > 0)
    if total_possible_points == 0:
        return None
    achieved_points = sum(p for p, m in zip(points, met, strict=True) if m)
    return achieved_points / total_possible_points


# RaR's released rows (ScaleAI/RaR-Medicine, column "rubric"), shaped as the paper's medical example (p. 12).
RAR_ROW = [
    {
        "title": "Bicarbonate Calculation",
        "description": "Essential Criteria: Applies the formula.",
        "weight": 5,
    },
    {"title": "Safe Dosing", "description": "Essential Criteria: States about 150 mEq.", "weight": 5},
    {"title": "Step-by-Step", "description": "Important Criteria: Shows each step.", "weight": 3},
    {"title": "Base Deficit", "description": "Optional Criteria: Interprets the base deficit.", "weight": 2},
    {
        "title": "Overcorrection",
        "description": "Pitfall Criteria: Does not mention overcorrection.",
        "weight": -1,
    },
]


# ---- parsing ---------------------------------------------------------------------------------------------------
def test_rar_released_rows_parse_to_category_weight_and_bare_text():
    criteria = parse_rubric(RAR_ROW)
    assert [c.category for c in criteria] == ["essential", "essential", "important", "optional", "pitfall"]
    assert [c.weight for c in criteria] == [5.0, 5.0, 3.0, 2.0, -1.0]
    assert criteria[0].text == "Applies the formula."  # the prefix is the category, not the criterion
    assert criteria[4].text == "Does not mention overcorrection." and criteria[4].is_pitfall
    assert parse_rubric(json.dumps(RAR_ROW)) == criteria  # the list as JSON text
    assert parse_rubric({"rubric": RAR_ROW}) == criteria  # a whole row's {"rubric": [...]}


def test_every_accepted_form():
    rubric = [
        {"criterion": "States X", "weight": 2.5},
        {"criterion": "Fails to state Y", "points": -3, "tags": ["axis:accuracy"]},  # HealthBench's row
        {"criterion": "Mentions Z", "category": "Important"},  # category only: RaR's weight
        {"criterion": "Avoids W", "category": "pitfall"},  # RaR-Explicit's +0.9
        {"criterion": "Gives the final answer", "weight": 1, "gate": True},
        "Is concise",  # a bare string: weight 1
        "Essential Criteria: Identifies (B).",  # a bare string with RaR's prefix: its category's weight
        {"description": "optional criterion: Cites a source.", "title": "t"},  # prefix is case-insensitive
    ]
    got = parse_rubric(rubric)
    assert got == [
        Criterion("States X", 2.5),
        Criterion("Fails to state Y", -3.0, "pitfall"),  # a negative weight is a pitfall's
        Criterion("Mentions Z", 0.7, "important"),
        Criterion("Avoids W", 0.9, "pitfall"),
        Criterion("Gives the final answer", 1.0, "", gate=True),
        Criterion("Is concise", 1.0),
        Criterion("Identifies (B).", 1.0, "essential"),
        Criterion("Cites a source.", 0.3, "optional"),
    ]
    assert CATEGORY_WEIGHTS == {"essential": 1.0, "important": 0.7, "optional": 0.3, "pitfall": 0.9}


BAD_RUBRICS = [
    ({"criteria": []}, "a rubric is a list of criteria, got dict"),
    (42, "a rubric is a list of criteria, got int"),
    ([], "the rubric has no criteria"),
    ("[{'criterion': 1}", "the rubric is a string but not JSON"),
    ("not a rubric", "the rubric is a string but not JSON"),
    ([{"criterion": "A", "weight": 1}, 7], "rubric item 1: expected an object or a string, got int"),
    ([{"weight": 1}], "rubric item 0: no criterion text"),
    ([{"criterion": "   ", "weight": 1}], "rubric item 0: no criterion text"),
    (["Essential Criteria:   "], "rubric item 0: the criterion is only a category prefix"),
    ([{"criterion": "A", "weight": "five"}], "rubric item 0: weight must be a finite number, got 'five'"),
    ([{"criterion": "A", "weight": True}], "rubric item 0: weight must be a finite number, got True"),
    ([{"criterion": "A", "weight": float("nan")}], "rubric item 0: weight must be a finite number"),
    ([{"criterion": "A", "weight": 0}], "rubric item 0: weight 0 counts for nothing"),
    ([{"criterion": "A", "category": "critical"}], "rubric item 0: unknown category 'critical'"),
    (
        [{"criterion": "A", "weight": 1}, {"description": "Essential Criteria: B", "category": "optional"}],
        "rubric item 1: category 'optional' but the text says Essential Criteria",
    ),
    (
        [{"criterion": "A", "weight": 1}, {"criterion": "B", "weight": -2, "category": "essential"}],
        "rubric item 1: a negative weight is a pitfall's, not an essential criterion's",
    ),
    ([{"criterion": "A", "weight": 1, "gate": "yes"}], "rubric item 0: gate must be true or false"),
    ([{"criterion": "A", "weight": -1}], "the rubric has no criterion with a positive weight"),
]


@pytest.mark.parametrize(("value", "reason"), BAD_RUBRICS)
def test_bad_rubrics_are_one_line_errors_naming_the_item(value, reason):
    with pytest.raises(ValueError) as err:
        parse_rubric(value)
    assert reason in str(err.value) and "\n" not in str(err.value)


# ---- RaR-Explicit ----------------------------------------------------------------------------------------------
def test_explicit_with_a_pitfall_by_hand():
    criteria = parse_rubric(RAR_ROW)
    # met: formula yes, dose no, steps yes, base deficit yes, the pitfall made (no mention of overcorrection):
    # (5 + 0 + 3 + 2 - 1) / (5 + 5 + 3 + 2) = 9/15; the pitfall avoided: 10/15. Eq. 1 taken literally would
    # divide by 14 (the pitfall's -1 in the denominator too): the positive weights are the denominator.
    assert explicit_reward(criteria, [True, False, True, True, True]) == pytest.approx(9 / 15)
    assert explicit_reward(criteria, [True, False, True, True, False]) == pytest.approx(10 / 15)
    assert explicit_reward(criteria, [True] * 4 + [False]) == 1.0


def test_explicit_equals_eq1_without_negative_weights_and_clips():
    criteria = parse_rubric([{"criterion": "A", "weight": 4}, {"criterion": "B", "weight": 1}])
    assert explicit_reward(criteria, [False, True]) == pytest.approx(1 / 5)  # sum w c / sum w
    # pitfalls outweighing what was earned: below 0 before the clip
    heavy = parse_rubric([{"criterion": "A", "weight": 1}, {"criterion": "P", "weight": -2}, "Q"])
    assert explicit_reward(heavy, [False, True, False]) == 0.0  # (0 - 2 + 0) / 2 -> clipped
    assert explicit_reward(heavy, [True, True, True]) == pytest.approx(0.0)  # (1 - 2 + 1) / 2
    assert explicit_reward(heavy, [True, False, True]) == 1.0


def test_explicit_with_rars_category_weights_by_hand():
    criteria = parse_rubric(
        [
            {"criterion": "E", "category": "essential"},
            {"criterion": "I", "category": "important"},
            {"criterion": "O", "category": "optional"},
            {"criterion": "P", "category": "pitfall"},
        ]
    )
    # RaR-Explicit: every weight positive, the pitfall's 0.9 earned when it is avoided (verdict: not made).
    assert explicit_reward(criteria, [True, False, True, False]) == pytest.approx((1 + 0.3 + 0.9) / 2.9)
    assert explicit_reward(criteria, [True, False, True, True]) == pytest.approx((1 + 0.3) / 2.9)


def test_gates():
    criteria = parse_rubric(
        [
            {"criterion": "Final answer", "weight": 1, "gate": True},
            {"criterion": "Explains", "weight": 3},
            {"criterion": "Unsafe advice", "weight": -1, "gate": True},
        ]
    )
    assert explicit_reward(criteria, [True, True, False]) == 1.0
    assert explicit_reward(criteria, [False, True, False]) == 0.0  # the gate unmet
    assert explicit_reward(criteria, [True, True, True]) == 0.0  # the pitfall gate: the mistake made
    # soft verdicts with the voted yes/no for the gates: the gates read the votes, the sum the probabilities
    assert explicit_reward(criteria, [0.6, 0.5, 0.3], [True, True, False]) == pytest.approx(
        (0.6 + 1.5 - 0.3) / 4
    )
    assert explicit_reward(criteria, [0.6, 0.5, 0.3], [False, True, False]) == 0.0
    # without votes, a gate reads its probability as yes above one half
    assert explicit_reward(criteria, [0.5, 1.0, 0.0]) == 0.0


def test_soft_verdicts_by_hand():
    criteria = parse_rubric(
        [
            {"criterion": "A", "weight": 4},
            {"criterion": "B", "weight": 1},
            {"criterion": "P", "weight": -2},
            {"criterion": "Q", "weight": 1, "category": "pitfall"},
        ]
    )
    # P(yes) 0.9, 0.5; P(made) 0.25 for both pitfalls: (3.6 + 0.5 - 0.5 + 0.75) / 6
    assert explicit_reward(criteria, [0.9, 0.5, 0.25, 0.25]) == pytest.approx(4.35 / 6)


def test_explicit_matches_healthbench_on_random_rubrics():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 9)
        points = [rng.choice([-10, -5, -2, -1, 1, 2, 3, 5, 7, 10]) for _ in range(n)]
        if not any(p > 0 for p in points):
            points[0] = 5
        met = [rng.random() < 0.5 for _ in range(n)]
        criteria = parse_rubric([{"criterion": f"c{i}", "points": p} for i, p in enumerate(points)])
        expected = min(1.0, max(0.0, healthbench_score(points, met)))
        assert explicit_reward(criteria, met) == pytest.approx(expected)


def test_explicit_refuses_bad_verdicts():
    criteria = parse_rubric(["A", "B"])
    with pytest.raises(ValueError, match="2 criteria"):
        explicit_reward(criteria, [True])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        explicit_reward(criteria, [1.2, 0.0])
    with pytest.raises(ValueError, match="positive weight"):
        explicit_reward([Criterion("P", -1.0, "pitfall")], [True])


# ---- RaR-Implicit ----------------------------------------------------------------------------------------------
def test_implicit_normalises_the_likert_score():
    assert implicit_reward(7) == pytest.approx(6 / 9)
    assert implicit_reward(1) == 0.0 and implicit_reward(10) == 1.0
    assert implicit_reward(2.5, (0, 5)) == 0.5
    for bad in (0, 11, math.nan):
        with pytest.raises(ValueError, match="outside"):
            implicit_reward(bad)
    with pytest.raises(ValueError, match="empty scale"):
        implicit_reward(3, (5, 5))


def test_rubric_text_and_details_shape():
    criteria = parse_rubric(RAR_ROW[:1] + RAR_ROW[4:] + [{"criterion": "Answer", "weight": 1, "gate": True}])
    assert rubric_text(criteria).splitlines() == [
        "1. (essential, weight 5) Applies the formula.",
        "2. (pitfall, weight -1, a mistake to avoid) Does not mention overcorrection.",
        "3. (criterion, weight 1, required) Answer",
    ]
    entry = criterion_details(criteria[1], met=True, probability=0.8, verdict_text="x" * 900)
    assert entry == {
        "criterion": "Does not mention overcorrection.",
        "weight": -1.0,
        "category": "pitfall",
        "gate": False,
        "met": True,
        "probability": 0.8,
        "verdict_text": "x" * 500,
    }
