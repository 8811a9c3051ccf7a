"""Reward-shaping transforms: hand-computed values for every function, parsing, pipelines, results."""

from __future__ import annotations

import math

import pytest
import torch

from rewardlab.rewardmodels import shaping as S
from rewardlab.rewardmodels.shaping import functional as F
from rewardlab.types import Record, Result


def close(a, b, tol=1e-5):
    return torch.allclose(
        torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32), atol=tol
    )


# ---- elementwise -----------------------------------------------------------------------------------


def test_clip_scale_binarize():
    r = torch.tensor([-2.0, -0.5, 0.5, 3.0])
    assert close(F.clamp(r, -1, 1), [-1.0, -0.5, 0.5, 1.0])
    assert close(F.clamp(r, None, 1), [-2.0, -0.5, 0.5, 1.0])
    assert close(F.scale_shift(r, 2.0, 1.0), [-3.0, 0.0, 2.0, 7.0])
    assert close(F.binarize(r, 0.5), [0.0, 0.0, 1.0, 1.0])
    assert close(F.binarize(r, 0.0, -1.0, 1.0), [-1.0, -1.0, 1.0, 1.0])


def test_weighted_sum():
    comps = {"correctness": torch.tensor([1.0, 0.0]), "format": torch.tensor([1.0, 1.0])}
    assert close(F.weighted_sum(comps, {"correctness": 0.9, "format": 0.1}), [1.0, 0.1])
    with pytest.raises(KeyError):
        F.weighted_sum(comps, {"missing": 1.0})


# ---- groups ----------------------------------------------------------------------------------------


def test_group_normalize_grpo_and_dr_grpo():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 7.0])
    g = torch.tensor([0, 0, 0, 1, 1, 2])  # sizes 3, 2, 1 (ragged; a singleton)
    # group 0: mean 1/3, unbiased std sqrt(((2/3)^2 + 2(1/3)^2)/2) = sqrt(1/3)
    s0 = math.sqrt(1 / 3)
    expected = [(2 / 3) / (s0 + 1e-4), (-1 / 3) / (s0 + 1e-4), (-1 / 3) / (s0 + 1e-4), 0.0, 0.0, 7.0]
    assert close(F.group_normalize(r, g), expected, 1e-4)
    assert close(F.group_normalize(r, g, scale_by_std=False), [2 / 3, -1 / 3, -1 / 3, 0.0, 0.0, 7.0])


def test_group_normalize_matches_trl_formula():
    torch.manual_seed(0)
    r = torch.rand(12)
    # TRL GRPO: contiguous groups of num_generations, (r - mean) / (std + 1e-4)
    view = r.view(3, 4)
    ref = (view - view.mean(1, keepdim=True)) / (view.std(1, keepdim=True) + 1e-4)
    got = F.group_normalize(r, torch.arange(3).repeat_interleave(4))
    assert close(got, ref.flatten(), 1e-5)


def test_group_ids_need_not_be_contiguous():
    r = torch.tensor([1.0, 5.0, 3.0, 7.0])
    g = torch.tensor([9, 4, 9, 4])
    assert close(F.group_normalize(r, g, scale_by_std=False), [-1.0, -1.0, 1.0, 1.0])


def test_running_whiten_moments():
    count, mean, m2 = F.update_moments(0, 0.0, 0.0, torch.tensor([1.0, 3.0]))
    assert (count, mean, m2) == (2, 2.0, 2.0)
    count, mean, m2 = F.update_moments(count, mean, m2, torch.tensor([5.0]))
    # all seen: 1, 3, 5 -> mean 3, M2 = 4 + 0 + 4 = 8
    assert count == 3 and mean == pytest.approx(3.0) and m2 == pytest.approx(8.0)
    assert close(F.whiten(torch.tensor([3.0, 5.0]), 3.0, 4.0, eps=0.0), [0.0, 1.0])

    w = S.build_shaping("whiten:eps=0")
    out1 = w(S.ShapingBatch(rewards=torch.tensor([1.0, 3.0])))  # mean 2, var 1
    assert close(out1.rewards, [-1.0, 1.0])
    out2 = w(S.ShapingBatch(rewards=torch.tensor([5.0])))  # mean 3, var 8/3
    assert close(out2.rewards, [2.0 / math.sqrt(8 / 3)])


# ---- length ----------------------------------------------------------------------------------------


def test_kimi_length_penalty():
    lengths = torch.tensor([10.0, 20.0, 30.0, 30.0, 10.0, 5.0, 5.0])
    correct = torch.tensor([True, True, True, False, False, True, False])
    group = torch.tensor([0, 0, 0, 0, 0, 1, 1])
    # group 0: min 10, max 30 -> lambda = 0.5 - (len-10)/20 = 0.5, 0, -0.5, -0.5, 0.5
    # wrong: min(0, lambda) -> -0.5 and 0.  group 1: equal lengths -> 0
    expected = [0.5, 0.0, -0.5, -0.5, 0.0, 0.0, 0.0]
    assert close(F.kimi_length_penalty(lengths, correct, group), expected)
    t = S.build_shaping("length_penalty:weight=0.5")
    b = S.ShapingBatch(rewards=correct.float(), lengths=lengths, group=group)
    assert close(t(b).rewards, [1.25, 1.0, 0.75, -0.25, 0.0, 1.0, 0.0])


def test_dapo_overlong_penalty_and_mask():
    # L_max = 100, L_cache = 20: 0 up to 80, then (80 - len)/20, -1 past 100
    lengths = torch.tensor([50, 80, 85, 90, 100, 101])
    assert close(F.dapo_overlong_penalty(lengths, 100, 20), [0.0, 0.0, -0.25, -0.5, -1.0, -1.0])
    assert close(F.overlong_mask(torch.tensor([False, True])), [1.0, 0.0])
    with pytest.raises(ValueError):
        F.dapo_overlong_penalty(lengths, 10, 20)
    pipe = S.build_pipeline(["overlong_penalty:100,20", "overlong_filter"])
    b = S.ShapingBatch(
        rewards=torch.ones(3),
        lengths=torch.tensor([10, 90, 120]),
        truncated=torch.tensor([False, False, True]),
    )
    out = pipe(b)
    assert close(out.rewards, [1.0, 0.5, 0.0])
    assert close(out.loss_mask, [1.0, 1.0, 0.0])


def test_cosine_length_reward():
    lengths = torch.tensor([0.0, 50.0, 100.0, 0.0, 50.0, 100.0, 150.0])
    correct = torch.tensor([True, True, True, False, False, False, True])
    # Yeo et al.'s values: correct 2 at 0, 1.5 at T/2, 1 at T; wrong -10 at 0, -5 at T/2, 0 at T; beyond T: -10
    yeo = dict(max_value_correct=2, min_value_correct=1, min_value_wrong=-10, max_value_wrong=0, exceed=-10)
    expected = [2.0, 1.5, 1.0, -10.0, -5.0, 0.0, -10.0]
    assert close(F.cosine_length_reward(lengths, correct, 100, **yeo), expected)
    r = F.cosine_length_reward(torch.tensor([10.0, 60.0, 10.0, 60.0]), torch.tensor([1, 1, 0, 0]).bool(), 100)
    assert r[0] > r[1] and r[3] > r[2]  # correct short > correct long, wrong long > wrong short
    # the former argument names still build the transform, with a warning
    with pytest.warns(FutureWarning) as warned:
        old = S.build_shaping("cosine_length:max_len=100,correct_at_zero=2,correct_at_max=1,exceed=-10")
    assert [str(w.message).split()[-1] for w in warned] == ["'max_value_correct'", "'min_value_correct'"]
    assert (old.max_value_correct, old.min_value_correct, old.exceed) == (2, 1, -10)


# ---- steps -----------------------------------------------------------------------------------------


def steps():
    return F.pad_steps([[0.9, 0.8, 0.7], [0.6], []])


def test_pad_unpad_roundtrip():
    r, m = steps()
    assert r.shape == (3, 3) and m.tolist() == [[True] * 3, [True, False, False], [False] * 3]
    rows = F.unpad_steps(r, m)
    assert [len(x) for x in rows] == [3, 1, 0] and rows[0] == pytest.approx([0.9, 0.8, 0.7])


def test_gao_clip():
    r, m = steps()
    assert close(F.gao_clip(r, m), torch.zeros(3, 3))  # all positive -> 0 with eta = 0
    expected = [[-0.0, -0.05, -0.15], [-0.25, 0, 0], [0, 0, 0]]
    assert close(F.gao_clip(r, m, eta=0.85), expected)


def test_gao_delta_telescopes_to_first_step():
    r, m = steps()
    d = F.gao_delta(r, m)
    assert close(d, [[0.1, 0.1, 0.7], [0.6, 0, 0], [0, 0, 0]])
    assert close(d.sum(1), [0.9, 0.6, 0.0])
    # return from step t is r_t
    assert close(F.step_returns(d, m), torch.where(m, r, torch.zeros_like(r)))


def test_gao_clip_delta():
    r, m = steps()
    # clip with eta 0.85: c = [0.0, -0.05, -0.15] ; delta: [0.05, 0.1, -0.15]
    assert close(F.gao_clip_delta(r, m, 0.85), [[0.05, 0.1, -0.15], [-0.25, 0, 0], [0, 0, 0]])


def test_progress_delta_telescopes_to_last_step():
    r, m = steps()
    d = F.progress_delta(r, m)
    assert close(d, [[0.9, -0.1, -0.1], [0.6, 0, 0], [0, 0, 0]])
    assert close(d.sum(1), [0.7, 0.6, 0.0])


def test_min_form():
    r, m = F.pad_steps([[0.5, 0.9, 0.2, 0.8], [0.3, 0.4]])
    assert close(F.min_form_returns(r, m), [[0.2, 0.2, 0.2, 0.8], [0.3, 0.4, 0, 0]])
    mf = F.min_form(r, m)
    assert close(mf, [[0.0, 0.0, -0.6, 0.8], [-0.1, 0.4, 0, 0]])
    assert close(F.step_returns(mf, m), F.min_form_returns(r, m))


def test_step_returns_gamma():
    r, m = F.pad_steps([[1.0, 2.0, 4.0]])
    assert close(F.step_returns(r, m, gamma=0.5), [[1 + 1 + 1, 2 + 2, 4]])


def test_success_plus_steps():
    r, m = F.pad_steps([[-0.1, -0.2], [0.0]])
    out = F.success_plus_steps(torch.tensor([1.0, 0.0]), r, m, success_weight=1.0, step_weight=0.5)
    assert close(out, [[-0.05, 0.9], [0.0, 0.0]])


def test_padding_hacking_bounded_by_clip_and_delta():
    """Padding a correct solution with k repeated correct-looking steps: raw sum grows, shaped does not."""
    base = [0.9, 0.8, 0.95]
    for k in (1, 3, 10):
        padded = base[:-1] + [0.8] * k + base[-1:]
        r, m = F.pad_steps([base, padded])
        assert r[1][m[1]].sum() > r[0][m[0]].sum()
        for mode in ("clip", "delta", "clip+delta", "min_form"):
            shaped = S.shape_step_rewards(mode, r, m)
            ret = shaped.sum(1)
            assert ret[1] <= ret[0] + 1e-6, (mode, k)


def test_step_shaping_requires_2d():
    with pytest.raises(ValueError):
        F.gao_delta(torch.ones(3), torch.ones(3, dtype=torch.bool))


# ---- parsing and pipelines -----------------------------------------------------------------------


def test_parse_spec():
    assert S.parse_spec("clip:-1,1") == ("clip", [-1, 1], {})
    assert S.parse_spec("clip:lo=-1,hi=1.5") == ("clip", [], {"lo": -1, "hi": 1.5})
    assert S.parse_spec("group_norm:scale_by_std=false") == ("group_norm", [], {"scale_by_std": False})
    assert S.parse_spec("delta") == ("delta", [], {})
    with pytest.raises(ValueError):
        S.parse_spec("clip:lo=1,2")


def test_build_from_cli_strings_and_yaml():
    import yaml

    spec = yaml.safe_load(
        """
        shape:
          - clamp:-1,1
          - {name: scale, scale: 2}
          - {binarize: {threshold: 0.0, low: -1}}
        """
    )["shape"]
    pipe = S.build_pipeline(spec)
    assert [t.name for t in pipe.transforms] == ["clamp", "scale", "binarize"]
    out = pipe(S.ShapingBatch(rewards=torch.tensor([-5.0, 0.25, 5.0])))
    assert close(out.rewards, [-1.0, 1.0, 1.0])
    assert S.build_shaping("clamp:-1,1").spec() == "clamp:lo=-1,hi=1,target=reward"


def test_unknown_names_and_arguments():
    from rewardlab.registry import UnknownNameError

    with pytest.raises(UnknownNameError):
        S.build_shaping("nope")
    with pytest.raises(ValueError):
        S.build_shaping("clamp:bogus=1")
    with pytest.raises(ValueError):
        S.build_shaping("clamp:1,2,reward,4")
    with pytest.raises(ValueError):
        S.step_shaping("bogus")


def test_clip_targets_steps_and_components():
    r, m = F.pad_steps([[2.0, -3.0], [0.5]])
    b = S.ShapingBatch(
        rewards=torch.zeros(2), step_rewards=r, step_mask=m, components={"fmt": torch.tensor([3.0, -3.0])}
    )
    out = S.build_shaping("clamp:-1,1,steps")(b)
    assert close(out.step_rewards, [[1.0, -1.0], [0.5, 0.0]])
    assert close(out.rewards, [0.0, 0.5])
    out = S.build_shaping("clamp:-1,1,fmt")(b)
    assert close(out.components["fmt"], [1.0, -1.0])
    assert close(b.components["fmt"], [3.0, -3.0])  # input unchanged


def test_weighted_sum_transform_and_step_modes():
    b = S.ShapingBatch(
        rewards=torch.tensor([0.0, 1.0]),
        components={"correctness": torch.tensor([1.0, 0.0]), "format": torch.tensor([1.0, 1.0])},
    )
    out = S.build_shaping("weighted_sum:correctness=0.9,format=0.1")(b)
    assert close(out.rewards, [1.0, 0.1])
    assert S.STEP_SHAPINGS["clip"] == "step_clip"
    r, m = F.pad_steps([[0.9, 0.8]])
    assert close(S.shape_step_rewards("none", r, m), r)
    assert close(S.shape_step_rewards("progress_delta", [[0.9, 0.8]]), [[0.9, -0.1]])


def test_success_plus_steps_pipeline():
    r, m = F.pad_steps([[0.9, 0.8], [0.2]])
    b = S.ShapingBatch(rewards=torch.tensor([1.0, 0.0]), step_rewards=r, step_mask=m)
    out = S.build_pipeline(["clip+delta:eta=0.5", "success_plus_steps"])(b)
    # clip(eta .5) -> [0, 0] and [-0.3]; delta keeps them; the outcome (1, 0) lands on the last step
    assert close(out.step_rewards, [[0.0, 1.0], [-0.3, 0.0]])
    assert close(out.rewards, [1.0, -0.3])
    b.components["success"] = torch.tensor([0.0, 1.0])
    out = S.build_pipeline(["step_clip:0.5", "success_plus_steps:2.0,1.0,success"])(b)
    assert close(out.step_rewards, [[0.0, 0.0], [1.7, 0.0]])


# ---- results ---------------------------------------------------------------------------------------


def test_shape_results_groups_by_prompt_and_keeps_raw():
    records = [
        Record(id=0, prompt="a", completion="xx"),
        Record(id=1, prompt="a", completion="xxxx"),
        Record(id=2, prompt="b", completion="x", metadata={"finish_reason": "length"}),
        Record(id=3, prompt="b", completion="xxx"),
    ]
    results = [Result(1.0), Result(0.0), Result(1.0), Result(0.0, error="timeout")]
    shaped = S.shape_results(records, results, ["group_norm:scale_by_std=false", "overlong_filter"])
    assert [r.reward for r in shaped] == pytest.approx([0.5, -0.5, 0.5, -0.5])
    assert shaped[0].details["shaping"]["raw_reward"] == 1.0
    assert shaped[2].details["shaping"]["loss_mask"] == 0.0
    assert shaped[3].error == "timeout"
    assert results[0].reward == 1.0  # inputs untouched
    assert S.shape_results(records, results, None) == results


def test_shape_results_lengths_and_steps():
    records = [
        Record(prompt="p", completion="a" * 10),
        Record(prompt="p", completion="a" * 30, metadata={"num_tokens": 20}),
    ]
    results = [Result(1.0), Result(1.0)]
    shaped = S.shape_results(records, results, "length_penalty")
    assert [r.reward for r in shaped] == pytest.approx([1.5, 0.5])
    results = [Result(0.8, details={"step_rewards": [0.9, 0.8]}), Result(0.5, details={"step_scores": [0.5]})]
    shaped = S.shape_results(records, results, ["delta"])
    assert shaped[0].details["shaping"]["step_rewards"] == pytest.approx([0.1, 0.8])
    assert [r.reward for r in shaped] == pytest.approx([0.9, 0.5])
    with pytest.raises(ValueError):
        S.shape_results(records, [Result(1.0), Result(1.0)], ["delta"])


class _Const:
    def __init__(self, name, values, error=None):
        self.name, self.values, self.error = name, values, error

    def score_batch(self, records):
        return [Result(v, {"v": v}, self.error) for v in self.values[: len(records)]]


def test_weighted_sum_source_names_parts():
    src = S.WeightedSumSource(
        {"correctness": _Const("math", [1.0, 0.0]), "format": _Const("fmt", [1.0, 1.0], error=None)},
        {"correctness": 0.9, "format": 0.1},
    )
    out = src.score_batch([Record(), Record()])
    assert [r.reward for r in out] == pytest.approx([1.0, 0.1])
    assert out[1].details["components"]["correctness"] == {
        "reward": 0.0,
        "weight": 0.9,
        "error": None,
        "details": {"v": 0.0},
    }
    assert src.name == "0.9*correctness+0.1*format"
    # components feed a later weighted_sum transform with other weights
    shaped = S.shape_results([Record(), Record()], out, "weighted_sum:correctness=1,format=-1")
    assert [r.reward for r in shaped] == pytest.approx([0.0, -1.0])
    bad = S.WeightedSumSource({"a": _Const("a", [1.0], error="timeout")})
    assert bad.score_batch([Record()])[0].error == "a: timeout"
    with pytest.raises(ValueError):
        S.WeightedSumSource({"a": _Const("a", [1.0])}, {"b": 1.0})


def test_empty_batches():
    empty = torch.zeros(0)
    assert F.group_normalize(empty, torch.zeros(0, dtype=torch.long)).numel() == 0
    assert F.kimi_length_penalty(empty, empty.bool(), torch.zeros(0, dtype=torch.long)).numel() == 0
    r, m = F.pad_steps([])
    assert F.gao_clip_delta(r, m).shape == (0, 1)
    assert S.shape_results([], [], ["group_norm"]) == []


def test_step_transforms_random_ragged_batches():
    """Invariants on random ragged batches: telescoping sums, row independence, padding independence."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        counts = torch.randint(0, 7, (5,), generator=gen).tolist()
        rows = [torch.randn(n, generator=gen).tolist() for n in counts]
        r, m = F.pad_steps(rows)
        wide_r = torch.cat([r, torch.full((r.shape[0], 3), 9.0)], dim=1)  # garbage in padding
        wide_m = torch.cat([m, torch.zeros(r.shape[0], 3, dtype=torch.bool)], dim=1)
        first = torch.tensor([row[0] if row else 0.0 for row in rows])
        last = torch.tensor([row[-1] if row else 0.0 for row in rows])
        fns = {
            "delta": F.gao_delta,
            "clip": lambda a, b: F.gao_clip(a, b, 0.3),
            "clip+delta": lambda a, b: F.gao_clip_delta(a, b, 0.3),
            "progress": F.progress_delta,
            "min_form": F.min_form,
        }
        for name, fn in fns.items():
            out = fn(r, m)
            assert close(fn(wide_r, wide_m)[:, : r.shape[1]], out), name
            assert (out[~m] == 0).all(), name
            for i, row in enumerate(rows):  # each row alone gives the same values
                if row:
                    alone = fn(*F.pad_steps([row]))
                    assert close(alone[0], out[i, : len(row)]), name
        assert close(F.step_returns(F.gao_delta(r, m), m), torch.where(m, r, torch.zeros_like(r)))
        assert close(
            F.gao_clip_delta(r, m, 0.3).sum(1),
            torch.where(torch.tensor(counts) > 0, (first - 0.3).clamp(max=0), 0.0),
        )
        assert close(F.progress_delta(r, m).sum(1), last)
        assert close(F.step_returns(F.min_form(r, m), m), F.min_form_returns(r, m))
        assert (F.gao_clip(r, m, 0.3) <= 0).all()
