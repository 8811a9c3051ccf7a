"""Reward transforms in one place (issue 13): each transform's one implementation gives both former call
sites' numbers, the ambiguous ``clip`` is refused, one combined-source type keeps the ``None`` contract,
and the RL reward pipeline runs its stages in order on a hand-built batch."""

from __future__ import annotations

import math

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.generation import Generation
from rewardlab.rewardmodels import shaping as S
from rewardlab.rewardmodels.prm.model import StepScores
from rewardlab.rewardmodels.shaping import functional as F
from rewardlab.rl.config import RLConfig
from rewardlab.rl.rewards import RewardBatch, RewardPipeline, RewardSources
from rewardlab.types import Record, Result
from rewardlab.verifiers.combine import CombinedSource
from rewardlab.verifiers.format import CombinedVerifier


def close(a, b, tol=1e-6):
    return torch.allclose(
        torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=tol
    )


# ---- one implementation, both callers' numbers ----------------------------------------------------------


def test_overlong_penalty_with_and_without_factor():
    # shaping's call (no factor): L_max 100, L_cache 20 -> 0 up to 80, (80 - len) / 20, -1 past 100
    lengths = torch.tensor([50, 80, 85, 90, 100, 101])
    assert close(F.dapo_overlong_penalty(lengths, 100, 20), [0.0, 0.0, -0.25, -0.5, -1.0, -1.0])
    # the RL loop's call (reward.overlong_penalty_factor): L_max 10, L_cache 4, factor 0.5
    pen = F.dapo_overlong_penalty(torch.tensor([5, 6, 8, 10, 11]), 10, 4, 0.5)
    assert close(pen, [0.0, 0.0, -0.25, -0.5, -0.5])
    # the transform's weight is that factor
    batch = S.ShapingBatch(rewards=torch.ones(5), lengths=torch.tensor([5, 6, 8, 10, 11]))
    assert torch.equal(S.build_shaping("overlong_penalty:10,4,0.5")(batch).rewards, 1.0 + pen)
    with pytest.raises(ValueError):
        S.build_shaping("overlong_penalty:10,20")


def test_truncation_mask_is_overlong_filtering():
    truncated = torch.tensor([False, True, True, False])
    rewards = torch.tensor([1.0, 0.5, 0.0, 0.2])
    _, keep, stats = F.truncation_handling(rewards, truncated, "mask")
    assert torch.equal(keep.float(), F.overlong_mask(truncated))
    assert stats == {"num_truncated": 2.0, "completions/clipped_ratio": 0.5}
    batch = S.ShapingBatch(rewards=rewards, truncated=truncated)
    filtered = S.build_shaping("overlong_filter")(batch)
    masked = S.build_shaping("truncation:mask")(batch)
    assert torch.equal(filtered.loss_mask, masked.loss_mask)
    assert torch.equal(masked.rewards, rewards)
    penalised = S.build_shaping({"truncation": {"mode": "penalize", "penalty": -1.0}})(batch)
    assert close(penalised.rewards, [1.0, -1.0, -1.0, 0.2]) and penalised.loss_mask is None
    with pytest.raises(ValueError):
        F.truncation_handling(rewards, truncated, "drop")


def test_group_normalize_shaping_and_grpo_numbers():
    # GRPO's advantages (eps 1e-6, verl): contiguous groups of 4; a degenerate group gets exactly 0, and
    # an invalid sample is left out of its group's statistics.
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.1, 0.1, 0.1, 0.1, 2.0, 0.0, 5.0, 1.0])
    valid = torch.tensor([True] * 10 + [False, True])
    adv = ca.group_normalized_advantages(r, 4, eps=1e-6, valid=valid)
    g0 = r[:4]
    g2 = torch.tensor([2.0, 0.0, 1.0])  # the valid members of group 2
    assert close(adv[:4], (g0 - g0.mean()) / (g0.std() + 1e-6))
    assert torch.equal(adv[4:8], torch.zeros(4))
    assert close(adv[[8, 9, 11]], (g2 - g2.mean()) / (g2.std() + 1e-6)) and adv[10] == 0
    same = F.group_normalize(r, group_size=4, eps=1e-6, valid=valid, degenerate="zero", dtype=None)
    assert torch.equal(adv, same)
    # shaping's group_norm (eps 1e-4, TRL): ids, ragged groups, a lone sample keeps its raw reward
    ids = torch.tensor([3, 3, 3, 8, 8, 1])
    x = torch.tensor([1.0, 0.0, 0.0, 2.0, 4.0, 7.0])
    s0 = math.sqrt(1 / 3)
    expected = [(2 / 3) / (s0 + 1e-4), (-1 / 3) / (s0 + 1e-4), (-1 / 3) / (s0 + 1e-4), -0.7071, 0.7071, 7.0]
    assert close(F.group_normalize(x, ids), expected, 1e-4)
    assert torch.equal(
        S.build_shaping("group_norm")(S.ShapingBatch(rewards=x, group=ids)).rewards, F.group_normalize(x, ids)
    )
    # the same lone sample under GRPO's policy: 0
    assert F.group_normalize(x, ids, degenerate="zero")[5] == 0


def test_group_stats_ids_equal_contiguous():
    r = torch.tensor([0.3, 1.0, 0.2, 0.9, 0.5, 0.5])
    by_size = F.group_stats(r, group_size=2)
    by_ids = F.group_stats(r, torch.tensor([0, 0, 1, 1, 2, 2]))
    for name in ("mean", "std", "count", "degenerate"):
        assert torch.equal(getattr(by_size, name), getattr(by_ids, name)), name
    assert by_size.degenerate.tolist() == [False, False, True]


def test_discounted_returns_one_function_for_tokens_and_steps():
    assert ca.discounted_returns is F.discounted_returns
    r = torch.tensor([[1.0, 2.0, 3.0, 9.0]])
    tokens = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    assert close(F.discounted_returns(r, tokens, gamma=0.5), [[1 + 1 + 0.75, 2 + 1.5, 3.0, 0.0]])
    steps, mask = F.pad_steps([[1.0, 2.0, 3.0], [4.0]])
    assert close(F.step_returns(steps, mask, gamma=0.5), [[2.75, 3.5, 3.0], [4.0, 0.0, 0.0]])
    assert close(F.step_returns(steps, mask), [[6.0, 5.0, 3.0], [4.0, 0.0, 0.0]])


def test_success_plus_steps_on_steps_and_tokens():
    # per step (shaping's layout): the outcome lands on the last real step
    steps, mask = F.pad_steps([[-0.1, -0.2], [0.0]])
    out = F.success_plus_steps(torch.tensor([1.0, 0.0]), steps, mask, success_weight=1.0, step_weight=0.5)
    assert close(out, [[-0.05, 0.9], [0.0, 0.0]])
    # per token (the RL loop's layout): on the last response token, nothing for an empty response
    step_tok = torch.tensor([[0.0, 1.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    rmask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.float32)
    out = F.success_plus_steps(
        torch.tensor([1.0, 0.0, 1.0]), step_tok, rmask, success_weight=2.0, step_weight=0.5
    )
    assert out.tolist() == [[0, 0.5, 2.0, 0], [1.0, 0, 0, 0], [0, 0, 0, 0]]


# ---- names that cannot be confused ----------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["clip:-1,1", {"clip": {"lo": -1}}, {"name": "clip", "hi": 1}])
def test_ambiguous_clip_is_refused_with_the_new_names(spec):
    with pytest.raises(ValueError) as err:
        S.build_shaping(spec)
    assert "'clamp'" in str(err.value) and "'step_clip'" in str(err.value)
    with pytest.raises(ValueError, match="clamp"):
        S.build_pipeline([spec])
    with pytest.raises(ValueError, match="clamp"):
        S.conflicts_with_estimator([spec], "grpo")


def test_clamp_and_gao_clip_are_different_transforms():
    steps, mask = F.pad_steps([[0.9, 0.2]])
    batch = S.ShapingBatch(rewards=torch.zeros(1), step_rewards=steps, step_mask=mask)
    assert close(S.build_shaping("clamp:0.3,0.5,steps")(batch).step_rewards, [[0.5, 0.3]])
    assert close(S.build_shaping("step_clip:0.5")(batch).step_rewards, [[0.0, -0.3]])
    # the RL loop's process-reward mode "clip" is Gao's Clip
    assert close(S.shape_step_rewards("clip", steps, mask, eta=0.5), [[0.0, -0.3]])


# ---- normalising twice ----------------------------------------------------------------------------------


def test_group_norm_conflicts_with_group_baseline_estimators():
    for estimator in ("grpo", "dr_grpo", "rloo", "step_return", "reinforce_pp_baseline"):
        reason = S.conflicts_with_estimator([{"name": "group_norm"}], estimator)
        assert reason is not None and "group_norm" in reason and estimator in reason
        assert "\n" not in reason
    assert S.conflicts_with_estimator(["group_norm:scale_by_std=false"], "reinforce_pp") is None
    assert S.conflicts_with_estimator(["clamp:-1,1", {"whiten": {}}], "grpo") is None
    assert S.conflicts_with_estimator([S.build_shaping("group_norm")], "rloo") is not None
    assert S.conflicts_with_estimator(None, "grpo") is None


# ---- one combined-source type ---------------------------------------------------------------------------


class _Fixed:
    def __init__(self, name, results):
        self.name, self.results = name, results

    def score_batch(self, records):
        return self.results[: len(records)]


class _Broken:
    name = "broken"

    def score_batch(self, records):
        raise RuntimeError("down")


def test_combined_source_missing_and_error_contract():
    a = _Fixed("a", [Result(1.0, {"correct": True}), Result(None), Result(0.5), Result(float("nan"))])
    b = _Fixed("b", [Result(2.0), Result(1.0), Result(None, error="timeout"), Result(1.0)])
    src = CombinedSource([a, b], [1.0, 0.5])
    out = src.score_batch([Record()] * 4)
    # None / NaN without an error: missing, so the sum is missing; an error is reward 0 with the error kept
    assert [r.reward for r in out] == [2.0, None, 0.5, None]
    assert out[2].error == "b: timeout" and out[2].details["rewards"] == {"a": 0.5, "b": 0.0}
    assert out[0].details["components"]["a"]["weight"] == 1.0
    assert src.name == "1*a+0.5*b"
    # the RL view of the same: validity from None, per-source values, the first source's verdict, counts
    scored = RewardSources([(a, 1.0), (b, 0.5)]).score([Record()] * 4)
    assert scored.rewards == [2.0, None, 0.5, None]
    assert scored.per_source == {"a": [1.0, None, 0.5, None], "b": [2.0, 1.0, 0.0, 1.0]}
    assert scored.correct == [True, False, True, False]
    assert dict(scored.errors) == {"timeout": 1} and scored.num_errors == 1
    rewards, valid, missing = ca.optional_rewards(scored.rewards)
    assert valid.tolist() == [True, False, True, False] and missing == 2


def test_combined_source_modes_and_broken_part():
    gate = CombinedSource(
        [_Fixed("fmt", [Result(1.0), Result(0.0)]), _Fixed("ok", [Result(1.0)] * 2)], mode="gate"
    )
    assert [r.reward for r in gate.score_batch([Record()] * 2)] == [1.0, 0.0]
    missing = CombinedSource([_Fixed("fmt", [Result(None)]), _Fixed("ok", [Result(1.0)])], mode="gate")
    assert missing.score_batch([Record()])[0].reward is None
    broken = CombinedSource({"x": _Broken(), "y": _Fixed("y", [Result(1.0)])})
    res = broken.score_batch([Record()])[0]
    assert res.reward == 1.0 and res.error.startswith("x: source error")
    assert CombinedVerifier is CombinedSource and S.WeightedSumSource is CombinedSource
    with pytest.raises(ValueError):
        CombinedSource([_Fixed("a", [])], mode="max")


# ---- the pipeline's stages, in order, on a hand-built batch ---------------------------------------------


class _CharTokenizer:
    """One token per character (token id = code point), so step ends map to tokens by hand."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


class _StepTable:
    """A process scorer with fixed step scores and character ends per completion."""

    def __init__(self, table):
        self.table = table

    def score_steps_detailed(self, records):
        return [
            StepScores(scores=s, steps=[""] * len(s), step_ends=e)
            for s, e in (self.table[r.completion_text] for r in records)
        ]


TEXTS = ["ab", "abcde", "abcdef", "xyz"]
OUTCOME = {"ab": 1.0, "abcde": 0.0, "abcdef": 1.0, "xyz": None}


def _outcome(prompts, completions, references):
    return [OUTCOME[c] for c in completions]


def _batch(pipe):
    records = [
        Record(id=i, prompt="p", completion=t, metadata={"group": i // 2}) for i, t in enumerate(TEXTS)
    ]
    gens = [Generation(t, [ord(c) for c in t], [1], None, "length" if len(t) == 6 else "stop") for t in TEXTS]
    return pipe.score(records, gens), gens


def _cfg(truncation="mask"):
    cfg = RLConfig()
    cfg.rollout.max_new_tokens = 6
    cfg.reward.sources = []
    cfg.reward.shaping = [{"name": "scale", "scale": 2.0, "shift": 0.5}]
    cfg.reward.truncation = truncation
    cfg.reward.overlong_buffer = 2  # DAPO ramp from 4 tokens: (4 - len) / 2, times the factor
    cfg.reward.overlong_penalty_factor = 0.5
    cfg.reward.step_shaping = "clip+delta"
    cfg.reward.step_eta = 0.5
    cfg.reward.success_weight = 2.0
    cfg.reward.step_weight = 0.5
    return cfg


def test_sample_stages_in_order():
    batch, _ = _batch(RewardPipeline.from_config(_cfg("mask"), [_outcome]))
    # scale (2r + 0.5), then truncation (mask: "abcdef" leaves the loss), then the overlong penalty
    # (len 5: -0.5 * 0.5, len 6: -1 * 0.5), then invalid samples (no reward) to 0
    assert close(batch.rewards, [2.5, 0.25, 2.0, 0.0])
    assert batch.valid.tolist() == [True, True, True, False]
    assert batch.keep.tolist() == [True, True, False, True]
    assert batch.stats() == {
        "completions/clipped_ratio": 0.25,
        "completions/num_truncated": 1,
        "completions/masked_truncated": 1,
        "overlong_penalty/mean": pytest.approx(-0.1875),
        "overlong_penalty/frac": 0.5,
    }
    # penalize replaces the truncated sample's shaped reward before the overlong penalty is added
    penalised, _ = _batch(RewardPipeline.from_config(_cfg("penalize"), [_outcome]))
    assert close(penalised.rewards, [2.5, 0.25, -1.5, 0.0]) and penalised.keep.all()


def test_token_stage_outcome_and_process_rewards():
    table = {
        "ab": ([0.9, 0.2], [1, 2]),
        "abcde": ([0.5], [5]),
        "abcdef": ([0.8, 0.8], [3, 6]),
        "xyz": ([], []),
    }
    cfg = _cfg("mask")
    plain = RewardPipeline.from_config(cfg, [_outcome])
    batch, gens = _batch(plain)
    response = torch.tensor([[1.0] * len(t) + [0.0] * (6 - len(t)) for t in TEXTS])
    loss = response * (batch.keep & batch.valid).float()[:, None]
    ids = [g.token_ids for g in gens]
    tokens, stats = plain.token_rewards(batch, response, loss, ids)
    # outcome only: on the last response token of every sample (the loss mask is applied later)
    assert stats == {}
    assert close(
        tokens, [[0, 2.5, 0, 0, 0, 0], [0, 0, 0, 0, 0.25, 0], [0, 0, 0, 0, 0, 2.0], [0, 0, 0, 0, 0, 0]]
    )
    with_steps = RewardPipeline.from_config(cfg, [_outcome], _StepTable(table), tokenizer=_CharTokenizer())
    tokens, stats = with_steps.token_rewards(batch, response, loss, ids)
    # clip (eta 0.5): "ab" -> (0, -0.3), delta -> (0.3, -0.3) on tokens 0 and 1, times step_weight 0.5;
    # success_weight 2 x the shaped outcome on the last token; samples out of the loss get nothing
    expected = [[0.15, -0.15 + 5.0, 0, 0, 0, 0], [0, 0, 0, 0, 0.5, 0], [0] * 6, [0] * 6]
    assert close(tokens, expected)
    assert stats["steps/mean_count"] == pytest.approx(5 / 4)


def test_reward_batch_select_and_concat_keep_samples_aligned():
    batch, _ = _batch(RewardPipeline.from_config(_cfg("mask"), [_outcome]))
    both = RewardBatch.concat([batch.select([2, 3]), batch.select([0, 1])])
    assert close(both.rewards, [2.0, 0.0, 2.5, 0.25])
    assert [r.completion_text for r in both.records] == ["abcdef", "xyz", "ab", "abcde"]
    assert both.scored.rewards == [1.0, None, 1.0, 0.0]
    assert both.stats()["completions/num_truncated"] == 1
