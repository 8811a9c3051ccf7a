"""L1 length-budget rewards (Aggarwal & Welleck, 2025, arXiv 2503.04697), the budget schedule, sampling,
and the ``length_budget`` pipeline transform: values computed by hand from the paper's Eq. 1 and Eq. 2."""

from __future__ import annotations

import math
import random

import pytest
import torch

from rewardlab.rewardmodels import shaping as S
from rewardlab.rewardmodels.shaping import functional as F
from rewardlab.rewardmodels.shaping.pipeline import LengthBudget, ShapingBatch

NAN = float("nan")


def close(a, b, tol=1e-5):
    return torch.allclose(
        torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32), atol=tol
    )


def reward(correct, lengths, budgets, **kw):
    return F.length_budget_reward(
        torch.tensor(correct), torch.tensor(lengths, dtype=torch.float32), torch.tensor(budgets), **kw
    )


# ---- constants -------------------------------------------------------------------------------------


def test_paper_constants():
    assert F.LENGTH_BUDGET_MODES == ("exact", "max")
    assert F.L1_ALPHA["exact"] == 0.0003  # paper Sec. 4
    assert F.L1_ALPHA["max"] == 0.001  # released code: (clip(-(n_y - n_gold) / 500, -1, 1) + 1) / 2
    assert F.L1_DELTA == 0.5  # paper Sec. 3, Eq. 2
    assert F.L1_BUDGET_RANGE == (100, 4000)  # paper Sec. 4


def test_prompt_templates():
    assert F.L1_PROMPT_TEMPLATES["exact"].format(budget=512) == "Think for 512 tokens."
    assert F.L1_PROMPT_TEMPLATES["max"].format(budget=1024) == "Think for maximum 1024 tokens."


# ---- L1-Exact: r = 1[correct] - alpha * |n_gold - n_y| -----------------------------------------------


def test_exact_correct_and_wrong():
    r = reward([True, True, False, True], [90, 500, 2000, 4100], [100.0, 500.0, 1000.0, 100.0])
    # 1 - 0.0003*10, 1 - 0, 0 - 0.0003*1000, 1 - 0.0003*4000
    assert close(r, [0.997, 1.0, -0.3, -0.2])


def test_exact_is_symmetric_around_the_budget():
    r = reward([True, True], [900, 1100], [1000.0, 1000.0])
    assert close(r, [0.97, 0.97])


def test_exact_custom_alpha():
    assert close(reward([True], [90], [100.0], alpha=0.01), [0.9])


# ---- L1-Max: r = 1[correct] * clip(alpha * (n_gold - n_y) + delta, 0, 1) ------------------------------


def test_max_between_and_at_the_clips():
    r = reward([True, True, True, True, True], [1000, 400, 800, 1200, 2000], [1000.0] * 5, mode="max")
    # 0.5 at the budget; 0.001*600+0.5 = 1.1 -> 1; 0.2+0.5; -0.2+0.5; -1+0.5 = -0.5 -> 0
    assert close(r, [0.5, 1.0, 0.7, 0.3, 0.0])


def test_max_wrong_answers_get_zero():
    r = reward([False, False, False], [10, 1000, 5000], [1000.0] * 3, mode="max")
    assert close(r, [0.0, 0.0, 0.0])


def test_max_custom_alpha_and_delta():
    assert close(reward([True], [90], [100.0], mode="max", alpha=0.01), [0.6])
    assert close(reward([True], [100], [100.0], mode="max", delta=0.8), [0.8])


def test_max_matches_released_code():
    """Eq. 2 with the default alpha equals ``get_delta_score_max`` (cmu-l3/l1, commit 9b888fb) times correct."""
    for n_y in range(0, 6001, 250):
        sc = max(-1.0, min(1.0, -(n_y - 2000) / 500))
        expected = max(0.0, (sc + 1) / 2)
        assert close(reward([True], [n_y], [2000.0], mode="max"), [expected])


def test_unknown_mode():
    with pytest.raises(ValueError, match="mode"):
        reward([True], [1], [1.0], mode="min")


def test_nan_budget_gives_nan():
    assert math.isnan(reward([True], [10], [NAN])[0].item())


# ---- schedule and sampling -------------------------------------------------------------------------


def test_budget_schedule_linear_then_clamped():
    kw = {"start": 4000.0, "end": 1000.0}
    assert F.budget_schedule(0, 100, **kw) == 4000.0
    assert F.budget_schedule(50, 100, **kw) == 2500.0
    assert F.budget_schedule(25, 100, **kw) == 3250.0
    assert F.budget_schedule(100, 100, **kw) == 1000.0
    assert F.budget_schedule(150, 100, **kw) == 1000.0
    assert F.budget_schedule(-5, 100, **kw) == 4000.0


def test_budget_schedule_needs_steps():
    with pytest.raises(ValueError, match="total_steps"):
        F.budget_schedule(0, 0, start=4000.0, end=1000.0)


def test_sample_budget_range_and_seed():
    draws = [F.sample_budget(random.Random(7)) for _ in range(3)]
    assert len(set(draws)) == 1  # same seed, same budget
    rng = random.Random(0)
    many = [F.sample_budget(rng) for _ in range(2000)]
    assert all(isinstance(b, int) and 100 <= b <= 4000 for b in many)
    assert min(many) < 300 and max(many) > 3800  # spans the paper's range
    assert F.sample_budget(random.Random(0), 256, 256) == 256


def test_sample_budget_with_schedule_and_bad_range():
    rng = random.Random(1)
    high = int(F.budget_schedule(100, 100, start=4000.0, end=1000.0))
    assert all(100 <= F.sample_budget(rng, 100, high) <= 1000 for _ in range(200))
    with pytest.raises(ValueError, match="low <= high"):
        F.sample_budget(rng, 500, 100)


# ---- pipeline transform ----------------------------------------------------------------------------


def batch(**kw):
    base = {
        "rewards": torch.tensor([1.0, 0.0, 1.0, 1.0]),
        "lengths": torch.tensor([1000.0, 400.0, 1200.0, 300.0]),
        "budgets": torch.tensor([1000.0, 1000.0, 1000.0, NAN]),
    }
    return ShapingBatch(**{**base, **kw})


def test_build_shaping_max_defaults_and_spec():
    t = S.build_shaping("length_budget:mode=max")
    assert isinstance(t, LengthBudget)
    assert (t.mode, t.alpha, t.delta) == ("max", 0.001, 0.5)
    assert S.build_shaping("length_budget").alpha == 0.0003
    assert S.build_shaping(t.spec()) == t


def test_transform_max_keeps_reward_without_budget():
    b = batch()
    out = S.build_shaping("length_budget:mode=max")(b)
    # correct from rewards >= 0.5: [T, F, T, T]; last sample has no budget -> reward 1 kept
    assert close(out.rewards, [0.5, 0.0, 0.3, 1.0])
    assert out.log["length_budget"] == {"mode": "max", "num_without_budget": 1.0}
    assert close(b.rewards, [1.0, 0.0, 1.0, 1.0])  # input unchanged


def test_pipeline_exact_with_explicit_correct():
    pipe = S.build_pipeline([{"name": "length_budget", "mode": "exact"}])
    out = pipe(batch(rewards=torch.zeros(4), correct=torch.tensor([True, False, True, False])))
    # 1 - 0; 0 - 0.0003*600; 1 - 0.0003*200; no budget -> 0 kept
    assert close(out.rewards, [1.0, -0.18, 0.94, 0.0])


def test_budgets_survive_earlier_transforms():
    out = S.build_pipeline(["clamp:0,1", "length_budget:mode=max,alpha=0.01"])(batch())
    assert close(out.rewards, [0.5, 0.0, 0.0, 1.0])  # 0.01 * -200 + 0.5 -> 0
    assert out.budgets is not None and close(out.budgets[:3], [1000.0] * 3)
    assert batch().replace(rewards=torch.zeros(4)).budgets is not None


def test_missing_budgets_or_lengths():
    with pytest.raises(ValueError, match="budgets"):
        S.build_shaping("length_budget")(batch(budgets=None))
    with pytest.raises(ValueError, match="lengths"):
        S.build_shaping("length_budget")(batch(lengths=None))


def test_unknown_mode_in_spec():
    with pytest.raises(ValueError, match="unknown mode"):
        S.build_shaping("length_budget:mode=min")
