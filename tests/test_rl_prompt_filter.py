"""Unit tests of rewardlab.rl.prompt_filter: the pure rules by hand, the filter's modes, state round trip."""

from __future__ import annotations

import json
import math

import pytest

from rewardlab.rl import prompt_filter as pf

EASY = ([1.0, 1.0, 1.0, 1.0], [True, True, True, True])
HARD = ([0.0, 0.0, 0.0, 0.0], [False, False, False, False])
HALF = ([1.0, 0.0, 1.0, 0.0], [True, False, True, False])


def observe(f: pf.PromptFilter, groups: dict[str, tuple[list[float], list[bool]]]) -> None:
    ids = list(groups)
    f.observe(ids, [groups[i][0] for i in ids], [groups[i][1] for i in ids])


def frozen_greso(**kw) -> pf.PromptFilter:
    """GRESO with adaptation off, so keep probabilities stay at their initial values."""
    return pf.PromptFilter(mode="greso", adjust_step=0.0, **kw)


# ---------------------------------------------------------------------------------------------- pure rules


def test_band_keep_by_hand():
    assert pf.band_keep(None, 0.2, 0.8)  # never seen: no estimate, kept
    assert not pf.band_keep(0.0, 0.2, 0.8)
    assert not pf.band_keep(1.0, 0.2, 0.8)
    assert pf.band_keep(0.5, 0.2, 0.8)
    assert pf.band_keep(0.2, 0.2, 0.8) and pf.band_keep(0.8, 0.2, 0.8)  # edges are inside
    assert pf.band_keep(1 / 5, 0.2, 0.8)  # k/G on the edge stays in
    assert not pf.band_keep(0.125, 0.2, 0.8)  # 1 of 8 correct


def test_greso_keep_probability_is_p_to_the_streak():
    assert pf.greso_keep_probability(0, 0.5) == 1.0
    assert pf.greso_keep_probability(1, 0.5) == 0.5
    assert pf.greso_keep_probability(3, 0.5) == 0.125
    assert math.isclose(pf.greso_keep_probability(2, 0.3), 0.09)
    assert pf.greso_keep_probability(10, 0.5) == 0.01  # 0.5**10 = 0.00098 < floor 0.01
    assert pf.greso_keep_probability(10, 0.5, min_keep=0.0) == 0.5**10
    with pytest.raises(ValueError):
        pf.greso_keep_probability(-1, 0.5)


def test_adapt_explore_probability_by_hand():
    # share >= target: skip more (p down); share < target: skip less (p up)
    assert math.isclose(pf.adapt_explore_probability(0.5, 0.30, 0.25, 0.01, 0.05, 0.95), 0.49)
    assert math.isclose(pf.adapt_explore_probability(0.5, 0.25, 0.25, 0.01, 0.05, 0.95), 0.49)
    assert math.isclose(pf.adapt_explore_probability(0.5, 0.10, 0.25, 0.01, 0.05, 0.95), 0.51)
    assert pf.adapt_explore_probability(0.055, 1.0, 0.25, 0.01, 0.05, 0.95) == 0.05
    assert pf.adapt_explore_probability(0.05, 1.0, 0.25, 0.01, 0.05, 0.95) == 0.05
    assert pf.adapt_explore_probability(0.945, 0.0, 0.25, 0.01, 0.05, 0.95) == 0.95


def test_classify_group():
    assert pf.classify_group(*EASY) == "easy"
    assert pf.classify_group(*HARD) == "hard"
    assert pf.classify_group(*HALF) == "mixed"
    assert pf.classify_group([0.5, 0.5], [True, True]) == "easy"  # equal non-binary rewards: zero variance
    assert pf.classify_group([1.0, 0.9], [True, True]) == "mixed"  # all correct, but a signal remains
    assert pf.classify_group([0.0, 0.0], [True, False]) == "hard"
    with pytest.raises(ValueError):
        pf.classify_group([], [])


# -------------------------------------------------------------------------------------------------- band


def test_band_unseen_kept_extremes_dropped_middle_kept():
    f = pf.PromptFilter(mode="band")
    assert f.select(["a", "b", "c"]) == [True, True, True]
    observe(f, {"a": HARD, "b": EASY, "c": HALF})
    assert f.pass_rate("a") == 0.0 and f.pass_rate("b") == 1.0 and f.pass_rate("c") == 0.5
    assert f.select(["a", "b", "c", "new"]) == [False, False, True, True]


def test_band_window_one_follows_latest_group():
    f = pf.PromptFilter(mode="band", window=1)
    observe(f, {"a": HARD})
    assert f.select(["a"]) == [False]
    observe(f, {"a": HALF})
    assert f.pass_rate("a") == 0.5 and f.select(["a"]) == [True]


def test_band_window_two_averages_last_two_groups():
    f = pf.PromptFilter(mode="band", window=2)
    observe(f, {"a": HARD})  # (0)        -> 0.0
    assert f.select(["a"]) == [False]
    observe(f, {"a": HALF})  # (0, .5)    -> 0.25
    assert f.pass_rate("a") == 0.25 and f.select(["a"]) == [True]
    observe(f, {"a": EASY})  # (.5, 1)    -> 0.75, the 0 has left the window
    assert f.pass_rate("a") == 0.75 and f.select(["a"]) == [True]
    observe(f, {"a": EASY})  # (1, 1)     -> 1.0
    assert f.pass_rate("a") == 1.0 and f.select(["a"]) == [False]


def test_band_explore_re_checks_out_of_band_prompts():
    f = pf.PromptFilter(mode="band", band_explore=0.25)
    observe(f, {"a": HARD})
    n = 20_000
    frac = sum(f.select(["a"] * n)) / n
    assert abs(frac - 0.25) < 4 * math.sqrt(0.25 * 0.75 / n)


# ------------------------------------------------------------------------------------------------- greso


@pytest.mark.parametrize(
    ("group", "streak", "kw", "p"), [(EASY, 2, {"p_easy": 0.5}, 0.25), (HARD, 3, {"p_hard": 0.6}, 0.216)]
)
def test_greso_keep_frequency_is_p_to_the_z(group, streak, kw, p):
    f = frozen_greso(seed=123, **kw)
    for _ in range(streak):
        observe(f, {"a": group})
    assert math.isclose(f.keep_probability("a"), p)
    n = 20_000
    frac = sum(f.select(["a"] * n)) / n
    assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / n)  # 4 sigma: ~0.012 for p = 0.25


def test_greso_easy_uses_p_easy_and_hard_uses_p_hard():
    f = frozen_greso(p_easy=0.3, p_hard=0.7)
    observe(f, {"e": EASY, "h": HARD, "m": HALF})
    observe(f, {"e": EASY, "h": HARD, "m": HALF})
    assert math.isclose(f.keep_probability("e"), 0.3**2)
    assert math.isclose(f.keep_probability("h"), 0.7**2)
    assert f.keep_probability("m") == 1.0


def test_greso_non_zero_variance_group_resets_streak():
    f = frozen_greso(p_easy=0.5)
    for _ in range(3):
        observe(f, {"a": EASY})
    assert f.keep_probability("a") == 0.125
    observe(f, {"a": HALF})
    assert f.keep_probability("a") == 1.0
    assert all(f.select(["a"] * 100))
    observe(f, {"a": EASY})  # a new run starts at 1
    assert f.keep_probability("a") == 0.5


def test_greso_change_of_kind_starts_new_run():
    f = frozen_greso(p_easy=0.5, p_hard=0.4)
    observe(f, {"a": EASY})
    observe(f, {"a": EASY})
    observe(f, {"a": HARD})
    assert math.isclose(f.keep_probability("a"), 0.4)


def test_greso_adaptation_direction_and_bounds():
    f = pf.PromptFilter(mode="greso")  # target 0.25 -> easy 1/12, hard 1/6
    observe(f, {"a": EASY, "b": EASY})
    assert (f.p_easy, f.p_hard) == (0.5, 0.5)  # first sight of every prompt: no adaptation
    observe(f, {"a": EASY, "b": EASY})  # easy share 1 >= 1/12, hard share 0 < 1/6
    assert math.isclose(f.p_easy, 0.49) and math.isclose(f.p_hard, 0.51)
    for _ in range(100):
        observe(f, {"a": EASY, "b": EASY})
    assert f.p_easy == pf.DEFAULT_P_MIN and f.p_hard == pf.DEFAULT_P_MAX
    for _ in range(100):
        observe(f, {"a": HARD, "b": HALF})  # hard share 1/2 >= 1/6, easy share 0 < 1/12
    assert f.p_easy == pf.DEFAULT_P_MAX and f.p_hard == pf.DEFAULT_P_MIN


def test_band_mode_does_not_adapt():
    f = pf.PromptFilter(mode="band")
    for _ in range(5):
        observe(f, {"a": EASY})
    assert (f.p_easy, f.p_hard) == (0.5, 0.5)


# ------------------------------------------------------------------------------------ state, none, metrics


def test_state_dict_round_trip_gives_identical_decisions():
    ids = [f"p{i}" for i in range(40)]
    groups = [EASY, HARD, HALF, EASY]
    f = pf.PromptFilter(mode="greso", seed=7)
    for step in range(4):
        observe(f, {pid: groups[(i + step) % 4] if i % 3 else EASY for i, pid in enumerate(ids)})
        f.select(ids)
    state = json.loads(json.dumps(f.state_dict()))
    g = pf.PromptFilter(mode="greso", seed=999)
    g.load_state_dict(state)
    assert g.state_dict() == f.state_dict()
    for _ in range(5):
        assert f.select(ids) == g.select(ids)
    assert f.metrics() == g.metrics()


def test_mode_none_keeps_everything():
    f = pf.PromptFilter(mode="none")
    for _ in range(5):
        observe(f, {"a": EASY, "b": HARD})
    assert f.select(["a", "b", "c"] * 100) == [True] * 300
    m = f.metrics()
    assert m["prompt_filter/skipped"] == 0.0 and m["prompt_filter/known_prompts"] == 2.0


def test_metrics_count_since_last_call():
    f = pf.PromptFilter(mode="band")
    observe(f, {"a": HARD, "b": HALF, "c": EASY})
    f.select(["a", "b", "c", "d"])
    m = f.metrics()
    assert m["prompt_filter/considered"] == 4.0 and m["prompt_filter/skipped"] == 2.0
    assert m["prompt_filter/skipped_frac"] == 0.5
    assert math.isclose(m["prompt_filter/easy_share"], 1 / 3) and math.isclose(
        m["prompt_filter/hard_share"], 1 / 3
    )
    m = f.metrics()
    assert m["prompt_filter/skipped"] == 0.0 and m["prompt_filter/skipped_frac"] == 0.0


def test_invalid_arguments_raise():
    with pytest.raises(ValueError):
        pf.PromptFilter(mode="sometimes")
    with pytest.raises(ValueError):
        pf.PromptFilter(mode="band", low=0.9, high=0.1)
    with pytest.raises(ValueError):
        pf.PromptFilter(mode="band", window=0)
    f = pf.PromptFilter(mode="band")
    with pytest.raises(ValueError):
        f.observe(["a", "b"], [[1.0]], [[True]])
    with pytest.raises(ValueError):
        f.observe(["a"], [[1.0, 0.0]], [[True]])
