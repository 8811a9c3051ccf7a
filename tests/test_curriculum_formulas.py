"""Curricula (issue 50, rl/curriculum.py) against their authors' code, on recorded reward sequences.

AdaRFT, DUMP, SEC and GHPO published code: tests/curriculum_reference.py transcribes their update rules and
each test drives it and our class side by side, step by step, on seeded sequences of group rewards (40 steps,
8-16 groups, binary, graded and continuous rewards, four sources and five levels, some absent for ten steps),
comparing the state every step. VCRL (no code) is checked on the paper's equations with hand-computed
examples; R^3 (only data released) on its prefix rule. Last, every curriculum's state resumes exactly.

Where we differ from the authors on purpose, the test asserts our documented behaviour and says why:
* advantages: ours are computed from the group's rewards (GRPO, unbiased std, eps 1e-6) whatever the run's
  estimator, as DUMP's and SEC's code read them under GRPO; a group of one gets 0 (verl: its raw reward);
* AdaRFT: the mean of the task rewards, never a KL-penalised one (the authors' under ``use_kl_in_reward``);
  the batch is drawn with the target of the last update (the authors' 8-worker loader may prefetch with an
  older one); ties in distance go in index order (theirs: numpy's unstable quicksort);
* DUMP: the validation-time pushes ("advantages = rewards", one mean per source) are left out;
* GHPO: our group is all-wrong when no sample is correct (``GroupOutcome.correct``), theirs when every
  column-0 accuracy is <= 0: the same where correct means accuracy > 0.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random

import curriculum_reference as ref  # tests/curriculum_reference.py (pytest puts tests/ on the path)
import numpy as np
import pytest

from rewardlab.rl import curriculum as cur
from rewardlab.rl.config import CurriculumConfig
from rewardlab.rl.curriculum import GroupOutcome, PoolItem

RTOL = 1e-9
# Absolute slack for |A| values that are mathematically 0 (a reward equal to its group's mean): Python's
# and numpy's sums round differently, so one side has ~1e-16 where the other has 0. The smallest nonzero |A|
# in these sequences is 2e-6, so the slack hides nothing else. (An all-equal group of non-dyadic rewards,
# eight 0.2s, would differ by 2.8e-11: the mean of equal floats is off by an ulp in Python's order.)
ATOL = 1e-12

SOURCES = ("algebra", "geometry", "logic", "puzzles")
LEVELS = (1, 2, 3, 4, 5)
KINDS = ("binary", "graded", "continuous")
STEPS = 40
ABSENT = range(10, 20)  # steps where "puzzles" and level 5 are not drawn: arms left out of a batch


def recorded(seed: int, kind: str, group_size: int = 8, steps: int = STEPS):
    """A recorded run: per step, a list of groups ``(source, level, rewards)``."""
    rng = np.random.default_rng(seed)
    run = []
    for step in range(steps):
        groups = []
        for _ in range(int(rng.integers(8, 17))):
            sources = SOURCES[:3] if step in ABSENT else SOURCES
            levels = LEVELS[:4] if step in ABSENT else LEVELS
            source = sources[int(rng.integers(len(sources)))]
            level = levels[int(rng.integers(len(levels)))]
            p = 1.05 - 0.15 * level + 0.3 * math.sin(step / 3) - 0.05 * SOURCES.index(source)
            p = min(max(p, 0.02), 0.98)
            if kind == "binary":
                rewards = (rng.random(group_size) < p).astype(float)
            elif kind == "graded":  # R^3's 0 / 0.2 (answer, wrong) / 1, and partial credit
                rewards = rng.choice(
                    [0.0, 0.2, 0.5, 1.0], size=group_size, p=[(1 - p) / 2, (1 - p) / 2, p / 2, p / 2]
                )
            else:
                rewards = np.clip(rng.normal(p, 0.3, size=group_size), 0.0, 1.0)
            groups.append((source, level, [float(r) for r in rewards]))
        run.append(groups)
    return run


def verl_batch(groups, step: int, seed: int = 0, length: int = 6):
    """The verl side of one step: ``token_level_rewards`` (the reward on each response's last token), the
    response mask (1-6 tokens), the group uids, and each response's data source and level."""
    rng = np.random.default_rng([seed, step])
    rows = [(g, s, lvl, r) for g, (s, lvl, rewards) in enumerate(groups) for r in rewards]
    tlr = np.zeros((len(rows), length))
    mask = np.zeros((len(rows), length))
    for i, (_, _, _, r) in enumerate(rows):
        n = int(rng.integers(1, length + 1))
        mask[i, :n] = 1
        tlr[i, n - 1] = r
    index = np.array([f"{step}-{g}" for g, _, _, _ in rows], dtype=object)
    return tlr, mask, index, [s for _, s, _, _ in rows], [lvl for _, _, lvl, _ in rows]


def outcomes(groups):
    return [
        GroupOutcome(f"{s}-{lvl}", list(rewards), [r > 0 for r in rewards], difficulty=float(lvl), source=s)
        for s, lvl, rewards in groups
    ]


def settings(**changes) -> CurriculumConfig:
    return dataclasses.replace(CurriculumConfig(), **changes)


def close(ours, theirs):
    np.testing.assert_allclose(
        np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float), rtol=RTOL, atol=ATOL
    )


# Each (source, level) three times: the arms are the pool's, every arm present.
ARM_POOL = [
    PoolItem(f"{s}-{lvl}-{k}", difficulty=float(lvl), source=s)
    for s in SOURCES
    for lvl in LEVELS
    for k in range(3)
]


def test_recorded_sequences_exercise_the_rules():
    """The sequences have what the comparisons need: undrawn arms, all-equal groups, non-binary rewards."""
    run = recorded(0, "graded")
    assert {s for s, _, _ in run[12]} <= set(SOURCES[:3]) and {s for s, _, _ in run[30]} == set(SOURCES)
    assert any(len(set(r)) == 1 for groups in recorded(0, "binary") for _, _, r in groups)
    assert {0.2, 0.5} <= {x for groups in run for _, _, r in groups for x in r}
    assert all(8 <= len(groups) <= 16 for groups in run)


# ------------------------------------------------------------------------------------------------ advantages


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("group_size", [2, 5, 8, 16])
def test_group_abs_advantages_are_verls_grpo(kind, group_size):
    """|A| per response as DUMP and SEC read it: verl's GRPO score, averaged over the response's tokens."""
    for step, groups in enumerate(recorded(1, kind, group_size, steps=8)):
        tlr, mask, index, _, _ = verl_batch(groups, step)
        adv, _ = ref.compute_grpo_outcome_advantage(tlr, mask, index)
        theirs = np.abs(ref.masked_mean(adv, mask, axis=-1))
        ours = [a for _, _, rewards in groups for a in cur.group_abs_advantages(rewards)]
        close(ours, theirs)


def test_group_of_one_differs_from_verl_on_purpose():
    """verl gives a group of one mean 0 and std 1, i.e. its raw reward as advantage; ours is 0 (no baseline,
    no signal), as our trainer's GRPO (``degenerate="zero"``)."""
    tlr = np.array([[0.0, 0.7]])
    adv, _ = ref.compute_grpo_outcome_advantage(tlr, np.ones_like(tlr), np.array(["a"], dtype=object))
    assert adv[0, 0] == pytest.approx(0.7 / (1 + 1e-6))
    assert cur.group_abs_advantages([0.7]) == [0.0]


# ------------------------------------------------------------------------------------------------ AdaRFT


def adarft_pool(seed: int, n: int = 400, integer: bool = False):
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 11, size=n).astype(float) * 10 if integer else rng.uniform(0, 100, size=n)
    d[0], d[1] = 0.0, 100.0  # the data spans the authors' 0-100, so our data-derived defaults are theirs
    return [PoolItem(f"p{i}", difficulty=float(x)) for i, x in enumerate(d)]


ADARFT_CASES = {
    # the authors' yaml (beta 0.5, alpha 2, eta 50, d 0-100, T0 0) from our defaults on 0-100 data
    "defaults": ({}, {}),
    "explicit": (
        {
            "adarft_eta": 20.0,
            "adarft_alpha": 3.0,
            "adarft_beta": 0.45,
            "d_min": 10.0,
            "d_max": 90.0,
            "adarft_initial": 30.0,
        },
        {"eta": 20.0, "alpha": 3.0, "beta": 0.45, "d_min": 10.0, "d_max": 90.0, "T0": 30.0},
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", list(ADARFT_CASES))
def test_adarft_target_and_batch_match_authors(kind, case):
    ours_kw, theirs_kw = ADARFT_CASES[case]
    pool = adarft_pool(2)
    ours = cur.build_curriculum("adarft", pool, settings(name="adarft", **ours_kw), seed=0)
    update_kw = {k: v for k, v in theirs_kw.items() if k != "T0"}
    sampler = ref.AdaRFTSampler(
        [p.difficulty for p in pool], batch_size=64, target_difficulty=theirs_kw.get("T0", 0)
    )
    targets = []
    for step, groups in enumerate(recorded(3, kind)):
        assert ours.draw(64, None) == [int(i) for i in sampler._select_closest_to_target()]
        tlr, *_ = verl_batch(groups, step)
        ref.adarft_update(sampler, tlr, **update_kw)
        ours.observe(outcomes(groups))
        close([ours.target], [sampler.target_difficulty])
        targets.append(ours.target)
    # the target moved inside the bounds (and may have reached them: compared too)
    assert len({t for t in targets if ours.d_min < t < ours.d_max}) > 10


def test_adarft_select_with_ties():
    """Integer difficulties: many prompts at the same distance. Ours is the stable argsort (index order);
    the authors' default quicksort may order ties otherwise, so the allowed difference is which of the
    equally distant prompts are taken: the multiset of distances is the same."""
    pool = adarft_pool(4, integer=True)
    d = np.array([p.difficulty for p in pool])
    sampler = ref.AdaRFTSampler(d, batch_size=50)
    for target in [0.0, 15.0, 20.0, 33.3, 45.0, 50.0, 95.0, 100.0]:
        sampler.update_target_difficulty(target)
        theirs = [int(i) for i in sampler._select_closest_to_target()]
        ours = cur.adarft_select(d.tolist(), target, 50)
        assert ours == np.argsort(np.abs(d - target), kind="stable")[:50].tolist()
        assert sorted(np.abs(d[ours] - target)) == sorted(np.abs(d[theirs] - target))


def test_adarft_shard_selects_within_the_rank():
    pool = adarft_pool(5)
    for rank in range(3):
        ours = cur.build_curriculum(
            "adarft", pool, settings(name="adarft", adarft_initial=40.0), seed=0, rank=rank, world=3
        )
        shard = list(range(rank, len(pool), 3))
        sampler = ref.AdaRFTSampler(
            [pool[i].difficulty for i in shard], batch_size=16, target_difficulty=40.0
        )
        assert ours.draw(16, None) == [shard[int(i)] for i in sampler._select_closest_to_target()]


def test_adarft_reward_is_the_task_reward():
    """With ``use_kl_in_reward`` the authors' R_avg is the KL-penalised reward (ray_trainer.py L940-963);
    ours is always the mean task reward of the observed groups, i.e. theirs with the KL term off."""
    groups = recorded(6, "binary", steps=1)[0]
    tlr, mask, *_ = verl_batch(groups, 0)
    kl_penalised = tlr - 0.05 * mask  # a per-token KL penalty of 0.05 on every response token
    plain, kl = ref.AdaRFTSampler([0.0, 100.0], 1, 50.0), ref.AdaRFTSampler([0.0, 100.0], 1, 50.0)
    ref.adarft_update(plain, tlr)
    ref.adarft_update(kl, kl_penalised)
    ours = cur.build_curriculum(
        "adarft", adarft_pool(0), settings(name="adarft", adarft_initial=50.0), seed=0
    )
    ours.observe(outcomes(groups))
    close([ours.target], [plain.target_difficulty])
    assert abs(kl.target_difficulty - plain.target_difficulty) > 1e-3


# ------------------------------------------------------------------------------------------------ DUMP


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("window", [300, 37])
def test_dump_matches_authors(kind, window):
    """Per source: the window of |A| (the authors' abs after windowing is the abs of the window), the mean,
    the count of samples, the UCB scores and the softmax weights, after every training step."""
    assert (
        CurriculumConfig.dump_window,
        CurriculumConfig.dump_temperature,
        CurriculumConfig.dump_exploration,
    ) == (300, 0.1, 1.0)
    ours = cur.build_curriculum(
        "dump", ARM_POOL, settings(name="dump", arms="source", dump_window=window), seed=0
    )
    theirs = ref.DUMPSampler(
        {s: [i for i, p in enumerate(ARM_POOL) if p.source == s] for s in SOURCES}, window
    )
    estimators = theirs.curriculum_controller.estimators
    close(ours.probabilities(), [theirs._weights[s] for s in ours.labels])  # uniform before any update
    for step, groups in enumerate(recorded(7, kind)):
        tlr, mask, index, sources, _ = verl_batch(groups, step)
        adv, _ = ref.compute_grpo_outcome_advantage(tlr, mask, index)
        ref.dump_train_update(theirs, sources, tlr, adv, mask)
        ours.observe(outcomes(groups))
        for s in ours.labels:
            assert ours.counts.get(s, 0) == estimators[s].n_samples
            assert len(ours.windows.get(s, [])) == len(estimators[s].recent_advantages) <= window
            close(ours.windows.get(s, []), np.abs(estimators[s].recent_advantages))
            close([cur._mean(ours.windows.get(s, []))], [estimators[s].mu])
        close(ours.scores(), [theirs.curriculum_controller.last_scores[s] for s in ours.labels])
        close(ours.probabilities(), [theirs._weights[s] for s in ours.labels])
    assert min(len(w) for w in ours.windows.values()) == window  # the windows filled and slid


def test_dump_leaves_out_validation_pushes():
    """The authors also push, at each validation, one value per source with "advantages = rewards" (a mean
    token reward). Ours never sees validation, so it matches their training pushes alone and not the run
    with validation pushes."""
    run = recorded(8, "binary", steps=12)
    ours = cur.build_curriculum("dump", ARM_POOL, settings(name="dump"), seed=0)
    train_only = ref.DUMPSampler({s: [0] for s in SOURCES})
    with_val = ref.DUMPSampler({s: [0] for s in SOURCES})
    for step, groups in enumerate(run):
        tlr, mask, index, sources, _ = verl_batch(groups, step)
        adv, _ = ref.compute_grpo_outcome_advantage(tlr, mask, index)
        for sampler in (train_only, with_val):
            ref.dump_train_update(sampler, sources, tlr, adv, mask)
        if step % 10 == 9:  # test_freq=10
            ref.dump_validation_update(with_val, sources, tlr, mask)
        ours.observe(outcomes(groups))
    close(ours.probabilities(), [train_only._weights[s] for s in ours.labels])
    assert not np.allclose(
        ours.probabilities(), [with_val._weights[s] for s in ours.labels], rtol=1e-6, atol=0
    )


# ------------------------------------------------------------------------------------------------ SEC

# (lr, temperature): the yaml's defaults and the README's paper runs
SEC_RUNS = {"yaml": (0.1, 1.0), "math": (0.5, 0.4), "puzzle_2d": (0.5, 0.2)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("arms", ["difficulty", "source"])
@pytest.mark.parametrize("run", list(SEC_RUNS))
def test_sec_matches_authors(kind, arms, run):
    """Q after every step, arms left out of a batch included (the authors' r = 0: Q decays), and the
    Boltzmann probabilities (ours subtracts the max, theirs does not: equal up to rounding)."""
    lr, temperature = SEC_RUNS[run]
    ours = cur.build_curriculum(
        "sec", ARM_POOL, settings(name="sec", arms=arms, sec_lr=lr, sec_temperature=temperature), seed=0
    )
    dataset = [{"extra_info": {"difficulty": int(p.difficulty), "source": p.source}} for p in ARM_POOL]
    theirs = ref.JointBandit(dataset, temperature=temperature, lr=lr, feature=[arms])
    order = [theirs.group_to_arm[label] for label in ours.labels]  # our labels are their group keys
    close(ours.probabilities(), theirs.get_probs()[order])
    undrawn = 0
    for step, groups in enumerate(recorded(9, kind)):
        tlr, mask, index, sources, levels = verl_batch(groups, step)
        adv, _ = ref.compute_grpo_outcome_advantage(tlr, mask, index)
        data_info = [{"difficulty": lvl, "source": s} for s, lvl in zip(sources, levels, strict=True)]
        theirs.update(data_info=data_info, adv=adv, response_mask=mask)
        ours.observe(outcomes(groups))
        undrawn += len({str(lvl) if arms == "difficulty" else s for s, lvl, _ in groups}) < len(ours.labels)
        close(ours.q, theirs.q_values[order])
        close(ours.probabilities(), theirs.get_probs()[order])
    assert undrawn >= len(ABSENT)


def test_sec_update_rule_by_hand():
    """``Q <- (1 - lr) Q + lr r`` with r = 0 for an arm not drawn."""
    assert cur.sec_update([0.4, 1.0, 0.0], [0.8, None, 0.2], 0.5) == pytest.approx([0.6, 0.5, 0.1])
    assert cur.boltzmann([0.0, math.log(3) * 0.4], 0.4) == pytest.approx([0.25, 0.75])


# ------------------------------------------------------------------------------------------------ VCRL


def vcrl_closed_form(k: int, g: int) -> float:
    """The paper's p for k correct of G: ``k (G - k) / (G (G - 1))`` over ``G / (4 (G - 1))`` (even G) or
    ``(G + 1) / (4 G)`` (odd G)."""
    var = k * (g - k) / (g * (g - 1))
    return var / (g / (4 * (g - 1)) if g % 2 == 0 else (g + 1) / (4 * g))


@pytest.mark.parametrize(
    ("g", "k", "p"),
    [
        (8, 4, 1.0),
        (8, 2, 0.75),  # (12/56) / (8/28)
        (8, 0, 0.0),
        (8, 8, 0.0),
        (7, 1, 0.5),  # (6/42) / (8/28)
        (7, 3, 1.0),  # (12/42) / (8/28): the odd maximum at k = (G - 1) / 2
        (5, 1, 2 / 3),  # (4/20) / (6/20)
        (2, 1, 1.0),
    ],
)
def test_vcrl_hand_computed(g, k, p):
    assert cur.vcrl_score([1.0] * k + [0.0] * (g - k)) == pytest.approx(p, rel=1e-12)


def test_vcrl_closed_form_for_every_group():
    for g in range(2, 17):
        for k in range(g + 1):
            rewards = [1.0] * k + [0.0] * (g - k)
            random.Random(g * 100 + k).shuffle(rewards)
            assert cur.vcrl_score(rewards) == pytest.approx(vcrl_closed_form(k, g), rel=RTOL, abs=1e-15)
        assert max(cur.vcrl_score([1.0] * k + [0.0] * (g - k)) for k in range(g + 1)) == pytest.approx(1.0)
    assert cur.vcrl_score([1.0]) == 0.0


# ------------------------------------------------------------------------------------------------ R^3

SOLUTION = "step one\n\nstep two\nstep three\n  \nstep four\n#### 42\n"  # 5 steps; blank lines are not steps


def reverse(schedule: str = "staged", stages: int = 4, solution: str = SOLUTION):
    s = settings(name="reverse", reverse_schedule=schedule, reverse_stages=stages, reverse_advance_reward=0.5)
    return cur.build_curriculum("reverse", [PoolItem("q", solution=solution)], s, seed=0)


def test_reverse_prefix_rule_by_hand():
    """``k = round(f (L - 1))``, ``f = 1 - stage / stages``; L = 5: k = 4, 3, 2, 1, 0; never all 5 steps."""
    steps = cur.solution_steps(SOLUTION)
    assert steps == ["step one", "step two", "step three", "step four", "#### 42"]
    r = reverse()
    seen = []
    for stage in range(5):
        r.stage = stage
        seen.append(r.prefix(0))
    assert seen == ["".join(s + "\n" for s in steps[:k]) for k in (4, 3, 2, 1, 0)]
    # L = 4, 4 stages: round(3), round(2.25), round(1.5) = 2 (half to even), round(0.75), 0
    four = "a\nb\nc\nd"
    r = reverse(solution=four)
    ks = []
    for stage in range(5):
        r.stage = stage
        ks.append(r.prefix(0).count("\n"))
    assert ks == [3, 2, 2, 1, 0]
    assert reverse(solution="only line").prefix(0) == ""  # L = 1: no prefix at any stage


def test_reverse_stage_advances_on_the_mean_reward():
    r = reverse(stages=2)
    r.observe([GroupOutcome("q", [1.0, 0.0, 0.0], [True, False, False])])  # mean 1/3 < 0.5
    assert r.stage == 0
    r.observe([GroupOutcome("q", [1.0, 0.0], [True, False]), GroupOutcome("q", [1.0, 0.0], [True, False])])
    assert r.stage == 1  # mean 0.5 reaches it
    r.observe([GroupOutcome("q", [1.0], [True])])
    r.observe([GroupOutcome("q", [1.0], [True])])
    assert r.stage == 2 and r.prefix(0) == ""  # the last stage: the bare prompt, and it stays there
    m = reverse("mixed")
    m.observe([GroupOutcome("q", [1.0], [True])])
    assert m.stage == 0


def test_reverse_mixed_draws_every_prefix_but_the_full_one():
    """The authors' released data: every prefix length 0 .. L - 1 of an L-step solution, never L."""
    r = reverse("mixed")
    lengths = []
    for _ in range(400):
        r.draw(1, Stream(1))
        lengths.append(r.prefix(0).count("\n"))
    assert set(lengths) == {0, 1, 2, 3, 4}
    assert min(lengths.count(k) for k in range(5)) > 40  # about uniform (80 each)


# ------------------------------------------------------------------------------------------------ GHPO

GHPO_SOLUTIONS = [
    "We have $x^2 = 4$, so $x = \\pm 2$. The answer is $\\boxed{2}$.",
    "ab",  # 2 chars: round(0.5) = 0, round(1.0) = 1, round(1.5) = 2
    "abcdef",  # round(1.5) = 2, round(3.0) = 3, round(4.5) = 4: half to even in both codes
    "abcdefg",  # round(1.75) = 2 (int() would give 1), round(3.5) = 4, round(5.25) = 5
    "Soit ∫₀¹ x² dx = ⅓ ; donc l'aire vaut 1/3 — réponse : $\\frac{1}{3}$. 答案是三分之一。",
    "line one\nline two\nline three\n",
]


@pytest.mark.parametrize("solution", GHPO_SOLUTIONS)
def test_ghpo_hint_prompt_matches_authors(solution):
    inputs = [
        {
            "solution": "2",
            "solution_hint": solution,
            "prompt": [
                {"content": "Reason step by step.", "role": "system"},
                {"content": "Solve: x^2 = 4.", "role": "user"},
            ],
        }
    ]
    assert ref.hint_prompt == cur.HINT_INTRO
    assert CurriculumConfig().hint_fractions == [0.25, 0.5, 0.75]  # the ratios the authors' code writes out
    for fraction in CurriculumConfig().hint_fractions:
        theirs = ref.inputs_hint(inputs, fraction)[0]["prompt"]
        ours = cur.hinted_prompt(inputs[0]["prompt"], cur.cut_solution(solution, fraction))
        assert ours == theirs
        assert (
            cur.hinted_prompt("Solve: x^2 = 4.", cur.cut_solution(solution, fraction)) == theirs[1]["content"]
        )
        assert inputs[0]["prompt"][1]["content"] == "Solve: x^2 = 4."  # the input is left alone


def test_ghpo_cut_rounds_half_to_even():
    assert [
        len(cur.cut_solution("x" * n, f))
        for n, f in [(2, 0.25), (6, 0.25), (6, 0.75), (10, 0.25), (14, 0.25), (7, 0.25)]
    ] == [0, 2, 4, 2, 4, 2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ghpo_all_wrong_and_cascade_match_authors(seed):
    """The all-wrong test (every accuracy <= 0) is ours (no sample correct) with correct = accuracy > 0,
    and our GuidedHints' metrics on the final groups are those of the authors' three-stage cascade."""
    g = 8
    rng = np.random.default_rng(seed)
    n_groups = 16
    # the hint each group needs to be solvable (1.0: none is enough), every case present
    need = np.concatenate(
        [[0.0, 0.25, 0.5, 0.75, 1.0], rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], n_groups - 5)]
    )
    by_ratio = {
        r: ((rng.random(n_groups * g) < 0.4) & (r >= need).repeat(g)).astype(float)
        for r in (0, 0.25, 0.5, 0.75)
    }
    by_ratio[0][:g] = 1.0  # one group solved outright
    is_all_wrong, _, redo_num = ref.all_wrong(by_ratio[0], g)
    groups0 = [by_ratio[0][i * g : (i + 1) * g] for i in range(n_groups)]
    assert [bool(w) for w in is_all_wrong[::g]] == [not any(a > 0 for a in acc) for acc in groups0]
    assert redo_num == sum(not any(a > 0 for a in acc) for acc in groups0) >= 3

    final, used = ref.cascade(by_ratio, g)
    ours = cur.build_curriculum(
        "guided_hints", [PoolItem("q", solution="s")], settings(name="guided_hints"), seed=0
    )
    level = [0.0] * n_groups  # the documented rule, with our fractions in order
    for fraction in ours.hint_fractions:
        for i in range(n_groups):
            acc = by_ratio[level[i]][i * g : (i + 1) * g]
            if not any(a > 0 for a in acc):
                level[i] = fraction
    assert level == used
    assert set(used) == {0.0, 0.25, 0.5, 0.75}  # every stage of the cascade was reached
    outs = [
        GroupOutcome(
            f"q{i}",
            list(final[i * g : (i + 1) * g]),
            [a > 0 for a in final[i * g : (i + 1) * g]],
            hint_fraction=used[i],
        )
        for i in range(n_groups)
    ]
    ours.observe(outs)
    hinted = [i for i in range(n_groups) if used[i] > 0]
    metrics = ours.metrics([0])
    assert metrics["curriculum/hint_groups"] == len(hinted)
    assert metrics["curriculum/hint_fraction"] == pytest.approx(np.mean([used[i] for i in hinted]))
    solved = [ref.all_wrong(final[i * g : (i + 1) * g], g)[0][0] != 1 for i in hinted]
    assert metrics["curriculum/hint_solved"] == pytest.approx(np.mean(solved))
    assert 0 < np.mean(solved) < 1


def test_ghpo_nan_reward_is_not_all_wrong_for_the_authors():
    """A difference to know of: NaN (a reward function's None) makes the authors' group not all-wrong
    (``nan <= 0`` is False), so it gets no hint; ours decides on ``GroupOutcome.correct`` alone, so what a
    missing reward does is what the sampler marks as correct for it."""
    acc = np.array([0.0, np.nan, 0.0, 0.0])
    assert ref.all_wrong(acc, 4)[2] == 0


# ------------------------------------------------------------------------------------------------ resume


class Stream:
    """The epoch order as the trainer's: a seeded permutation per epoch; ``pos`` is its state."""

    def __init__(self, n: int, seed: int = 11, pos: int = 0):
        self.n, self.seed, self.pos = n, seed, pos

    def next_indices(self, k: int) -> list[int]:
        out = []
        for _ in range(k):
            epoch, i = divmod(self.pos, self.n)
            order = list(range(self.n))
            random.Random(f"{self.seed}/{epoch}").shuffle(order)
            out.append(order[i])
            self.pos += 1
        return out


RESUME_POOL = [
    PoolItem(
        f"p{i}",
        difficulty=float(1 + i % 5),
        source=SOURCES[i % 4],
        solution="".join(f"step {j}\n" for j in range(1 + i % 6)),
    )
    for i in range(60)
]
RESUME_CASES = {
    "none": {},
    "adarft": {},
    "dump": {"dump_window": 20},
    "sec": {"arms": "difficulty"},
    "vcrl": {"vcrl_bank_size": 12},
    "reverse": {"reverse_stages": 12, "reverse_advance_reward": 0.45},
    "reverse_mixed": {"reverse_schedule": "mixed"},
    "guided_hints": {},
}


def step_outcomes(curriculum, drawn: list[int], step: int) -> list[GroupOutcome]:
    outs = []
    for i in drawn:
        rng = random.Random(f"{step}/{i}")
        item = RESUME_POOL[i]
        rewards = [float(rng.random() < 1.05 - 0.2 * item.difficulty) for _ in range(6)]
        hint = rng.choice([0.0, *curriculum.hint_fractions]) if curriculum.hint_fractions else 0.0
        outs.append(
            GroupOutcome(
                item.prompt_id, rewards, [r > 0 for r in rewards], item.difficulty, item.source, hint
            )
        )
    return outs


def play(curriculum, stream, steps: range):
    trace = []
    for step in steps:
        drawn = curriculum.draw(8, stream)
        prefixes = [curriculum.prefix(i) for i in drawn]
        curriculum.observe(step_outcomes(curriculum, drawn, step))
        state = json.dumps(curriculum.state_dict(), sort_keys=True)
        trace.append((drawn, prefixes, curriculum.metrics(drawn), state, stream.pos))
    return trace


@pytest.mark.parametrize("case", list(RESUME_CASES))
def test_state_resumes_exactly(case):
    name = "reverse" if case.startswith("reverse") else case
    s = settings(name=name, **RESUME_CASES[case])
    first = cur.build_curriculum(name, RESUME_POOL, s, seed=3)
    stream = Stream(len(RESUME_POOL))
    play(first, stream, range(7))
    saved, pos = json.dumps(first.state_dict()), stream.pos
    rest = play(first, stream, range(7, 15))

    resumed = cur.build_curriculum(name, RESUME_POOL, s, seed=3)
    resumed.load_state_dict(json.loads(saved))
    assert json.dumps(resumed.state_dict()) == saved
    assert play(resumed, Stream(len(RESUME_POOL), pos=pos), range(7, 15)) == rest
    # what is resumed is not trivial: the method's own state (beyond the draw count) moved before the save
    # and goes on moving after it (none and guided_hints keep only the draw count)
    own = [{k: v for k, v in json.loads(state).items() if k != "draws"} for *_, state, _ in rest]
    fresh = cur.build_curriculum(name, RESUME_POOL, s, seed=3).state_dict()
    if case not in ("none", "guided_hints", "reverse_mixed"):
        assert {k: v for k, v in json.loads(saved).items() if k != "draws"} != {
            k: v for k, v in fresh.items() if k != "draws"
        }
        assert len({json.dumps(o, sort_keys=True) for o in own}) > 1
    assert json.loads(saved)["draws"] == 7 != fresh["draws"]


def test_state_of_another_curriculum_is_refused():
    state = cur.build_curriculum("sec", ARM_POOL, settings(name="sec"), seed=0).state_dict()
    with pytest.raises(ValueError, match="curriculum is 'sec'"):
        cur.build_curriculum("dump", ARM_POOL, settings(name="dump"), seed=0).load_state_dict(state)
