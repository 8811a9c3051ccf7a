"""open-r1's shaping rewards (repetition penalty, cosine length scaling) against open-r1's own code.

The reference functions below are transcribed from github.com/huggingface/open-r1, commit
1416fa0cf21595d2083b399a2a0bbddd7f6e9563, ``src/open_r1/rewards.py`` (``get_repetition_penalty_reward``
with ``language="en"``, and ``get_cosine_scaled_reward``, whose math-verify parsing is kept as written).
rewardlab's formulas live in ``rewardmodels/shaping/functional.py``; they are reached here through the
function, the shaping transform (``--shape``) and the reward source (``--verifier`` / ``reward.sources``).
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from rewardlab.rewardmodels import shaping as S
from rewardlab.rewardmodels.shaping import functional as F
from rewardlab.types import Record, Result
from rewardlab.verifiers import get_verifier

# --------------------------------------------------------------------------- open-r1, transcribed


def open_r1_repetition_penalty_reward(ngram_size: int, max_penalty: float):
    if max_penalty > 0:
        raise ValueError(f"max_penalty {max_penalty} should not be positive")

    def zipngram(text: str, ngram_size: int):
        words = text.lower().split()
        return zip(*[words[i:] for i in range(ngram_size)], strict=False), words

    def repetition_penalty_reward(completions, **kwargs) -> float:
        contents = [completion[0]["content"] for completion in completions]
        rewards = []
        for completion in contents:
            if completion == "":
                rewards.append(0.0)
                continue
            ngrams = set()
            total = 0
            ngram_array, words = zipngram(completion, ngram_size)
            if len(words) < ngram_size:
                rewards.append(0.0)
                continue
            for ng in ngram_array:
                ngrams.add(ng)
                total += 1
            scaling = 1 - len(ngrams) / total
            reward = scaling * max_penalty
            rewards.append(reward)
        return rewards

    return repetition_penalty_reward


def open_r1_cosine_value(
    is_correct, gen_len, min_value_wrong, max_value_wrong, min_value_correct, max_value_correct, max_len
):
    """The body of open-r1's ``cosine_scaled_reward`` loop after ``verify``."""
    progress = gen_len / max_len
    cosine = math.cos(progress * math.pi)
    if is_correct:
        min_value = min_value_correct
        max_value = max_value_correct
    else:
        min_value = max_value_wrong
        max_value = min_value_wrong
    reward = min_value + 0.5 * (max_value - min_value) * (1.0 + cosine)
    return float(reward)


def open_r1_cosine_scaled_reward(
    min_value_wrong=-1.0, max_value_wrong=-0.5, min_value_correct=0.5, max_value_correct=1.0, max_len=1000
):
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse, verify

    def cosine_scaled_reward(completions, solution, **kwargs):
        contents = [completion[0]["content"] for completion in completions]
        rewards = []
        for content, sol in zip(contents, solution, strict=False):
            gold_parsed = parse(
                sol, extraction_mode="first_match", extraction_config=[LatexExtractionConfig()]
            )
            if len(gold_parsed) == 0:
                rewards.append(1.0)
                continue
            answer_parsed = parse(
                content,
                extraction_config=[
                    LatexExtractionConfig(
                        normalization_config=NormalizationConfig(
                            nits=False,
                            malformed_operators=False,
                            basic_latex=True,
                            equations=True,
                            boxed=True,
                            units=True,
                        ),
                        boxed_match_priority=0,
                        try_extract_without_anchor=False,
                    )
                ],
                extraction_mode="first_match",
            )
            is_correct = verify(answer_parsed, gold_parsed)
            rewards.append(
                open_r1_cosine_value(
                    is_correct,
                    len(content),
                    min_value_wrong,
                    max_value_wrong,
                    min_value_correct,
                    max_value_correct,
                    max_len,
                )
            )
        return rewards

    return cosine_scaled_reward


# --------------------------------------------------------------------------- the grids


def texts() -> list[str]:
    """Repetitive, varied, short, empty, mixed case and whitespace, non-Latin and long texts."""
    rng = random.Random(0)
    vocab = ["the", "The", "cat", "sat", "on", "mat", "x", "=", "2", "so", "wait", "答案", "是"]
    out = ["", "one", "one two", "a a a", "A a A a", "the cat sat " * 20, "\tline\nbreaks\u00a0and  tabs \n"]
    out += ["wait, " * 50 + "the answer is 4", "答案是 4 答案是 4 答案是 4"]
    for n in (3, 10, 50, 400):
        out += [" ".join(rng.choice(vocab) for _ in range(n)) for _ in range(5)]
    return out


@pytest.mark.parametrize("ngram_size", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("max_penalty", [-1.0, -0.5, -0.05, 0.0])
def test_repetition_penalty_equals_open_r1(ngram_size, max_penalty):
    reference = open_r1_repetition_penalty_reward(ngram_size, max_penalty)
    batch = texts()
    expected = reference([[{"content": t}] for t in batch])
    ours = [F.ngram_repetition_penalty(F.repetition_tokens(t), ngram_size, max_penalty) for t in batch]
    assert all(abs(a - b) <= 1e-9 for a, b in zip(ours, expected, strict=True))
    source = get_verifier("repetition_penalty", ngram_size=ngram_size, max_penalty=max_penalty)
    rewards = [r.reward for r in source.score_batch([Record(completion=t) for t in batch])]
    assert all(abs(a - b) <= 1e-9 for a, b in zip(rewards, expected, strict=True))
    # the transform adds it to the reward (float32 batch)
    shaping = S.build_pipeline(f"repetition_penalty:ngram_size={ngram_size},max_penalty={max_penalty}")
    out = shaping(S.ShapingBatch(rewards=torch.ones(len(batch)), texts=batch))
    assert torch.allclose(out.rewards.double(), 1 + torch.tensor(expected, dtype=torch.float64), atol=1e-6)


def test_repetition_penalty_refuses_what_open_r1_refuses():
    with pytest.raises(ValueError, match="positive"):
        F.ngram_repetition_penalty(["a"], 1, 0.5)
    with pytest.raises(ValueError, match="max_penalty"):
        get_verifier("repetition_penalty", max_penalty=1)
    with pytest.raises(ValueError, match="unit"):
        S.build_shaping("repetition_penalty:unit=jieba")
    with pytest.raises(ValueError, match="texts"):
        S.build_pipeline("repetition_penalty")(S.ShapingBatch(rewards=torch.ones(2)))


def test_repetition_units_for_unspaced_scripts():
    """``words`` sees one token in unspaced Chinese; ``chars`` and ``mixed`` see its repetition."""
    text = "答案是四答案是四答案是四"
    assert F.ngram_repetition_penalty(F.repetition_tokens(text, "words"), 3, -1.0) == 0.0
    for unit in ("chars", "mixed"):
        assert F.ngram_repetition_penalty(F.repetition_tokens(text, unit), 3, -1.0) < -0.5
    assert F.repetition_tokens("Wait 答案 is 4", "mixed") == ["wait", "答", "案", "is", "4"]


BOUNDS = [
    (-1.0, -0.5, 0.5, 1.0, 1000),  # open-r1's defaults
    (-10.0, 0.0, 1.0, 2.0, 4096),  # Yeo et al.'s values
    (-0.3, 0.2, 0.1, 0.9, 7),
]
LENGTHS = [0, 1, 3, 7, 250, 500, 999, 1000, 1001, 1500, 2000, 4095, 4096, 5000, 12345]


@pytest.mark.parametrize("bounds", BOUNDS)
def test_cosine_length_equals_open_r1(bounds):
    min_w, max_w, min_c, max_c, max_len = bounds
    grid = list(itertools.product(LENGTHS, [True, False]))
    expected = [open_r1_cosine_value(c, n, min_w, max_w, min_c, max_c, max_len) for n, c in grid]
    ours = F.cosine_length_reward(
        [n for n, _ in grid],
        [c for _, c in grid],
        max_len,
        min_value_wrong=min_w,
        max_value_wrong=max_w,
        min_value_correct=min_c,
        max_value_correct=max_c,
    )
    assert ours.dtype == torch.float64
    assert max(abs(a - b) for a, b in zip(ours.tolist(), expected, strict=True)) <= 1e-9
    spec = (
        f"cosine_length:max_len={max_len},min_value_wrong={min_w},max_value_wrong={max_w},"
        f"min_value_correct={min_c},max_value_correct={max_c}"
    )
    batch = S.ShapingBatch(
        rewards=torch.zeros(len(grid)),
        lengths=torch.tensor([float(n) for n, _ in grid]),
        correct=torch.tensor([c for _, c in grid]),
    )
    shaped = S.build_pipeline(spec)(batch).rewards
    assert torch.allclose(shaped.double(), torch.tensor(expected, dtype=torch.float64), atol=1e-6)


def test_cosine_length_default_is_open_r1s():
    shaping = S.build_shaping("cosine_length")
    assert (shaping.max_len, shaping.min_value_wrong, shaping.max_value_wrong) == (1000, -1.0, -0.5)
    assert (shaping.min_value_correct, shaping.max_value_correct, shaping.exceed) == (0.5, 1.0, None)


def test_cosine_length_source_equals_open_r1_on_completions():
    """The source scores correctness with the math verifier, length in characters: open-r1's whole reward
    function (math-verify parsing included) on completions where both read the same answer."""
    rows = [
        ("So the answer is $\\boxed{4}$.", "$4$"),
        ("Let me think. " * 30 + "Thus $\\boxed{\\frac{1}{2}}$", "$\\frac{1}{2}$"),
        ("I get $\\boxed{5}$", "$4$"),
        ("hmm " * 400 + "$\\boxed{7}$", "$7$"),
        ("hmm " * 400 + "$\\boxed{8}$", "$7$"),
        ("x " * 2000 + "$\\boxed{3}$", "$3$"),
    ]
    reference = open_r1_cosine_scaled_reward()
    expected = reference([[{"content": c}] for c, _ in rows], [s for _, s in rows])
    source = get_verifier("cosine_length")
    results = source.score_batch([Record(completion=c, reference=s) for c, s in rows])
    assert [r.error for r in results] == [None] * len(rows)
    assert max(abs(r.reward - e) for r, e in zip(results, expected, strict=True)) <= 1e-9
    assert [r.details["correct"] for r in results] == [True, True, False, True, False, True]
    assert results[0].details["length"] == len(rows[0][0]) and results[0].details["unit"] == "chars"


def test_cosine_length_source_settings_and_errors(tiny_tokenizer):
    source = get_verifier("cosine_length", max_len=10, exceed=-10.0)
    long = source.score(Record(completion="x" * 11 + " \\boxed{1}", reference="1"))
    assert long.reward == -10.0
    broken = source.score(Record(completion="\\boxed{1}", reference=None))
    assert broken.error and broken.reward == 0.0  # the correctness verifier's error row, passed on
    with pytest.raises(ValueError, match="unknown cosine_length option"):
        get_verifier("cosine_length", max_length=10)
    with pytest.raises(ValueError, match="max_len"):
        get_verifier("cosine_length", max_len=0)
    tokens = get_verifier("cosine_length", tokenizer=tiny_tokenizer.name_or_path)
    result = tokens.score(Record(completion="the answer is \\boxed{1}", reference="1"))
    assert result.details["unit"] == "tokens"
    assert result.details["length"] == len(
        tiny_tokenizer("the answer is \\boxed{1}", add_special_tokens=False)["input_ids"]
    )
    missing = get_verifier("cosine_length", tokenizer="/nonexistent/tokenizer")
    failed = missing.score(Record(completion="\\boxed{1}", reference="1"))
    assert failed.error and failed.error.startswith("verifier error")


def test_sources_in_a_combined_rl_reward():
    """As open-r1 lists them: accuracy plus a repetition penalty, one weighted sum."""
    from rewardlab.verifiers.combine import CombinedSource

    combined = CombinedSource(
        {"math": get_verifier("math"), "repetition": get_verifier("repetition_penalty")},
        {"math": 1.0, "repetition": 1.0},
    )
    [result] = combined.score_batch([Record(completion="the the the the \\boxed{2}", reference="2")])
    assert isinstance(result, Result) and result.reward == pytest.approx(1.0 - 1 / 3)


def test_shape_results_carries_texts():
    records = [Record(completion="a b c a b c a b c", prompt="p"), Record(completion="a b c d", prompt="p")]
    results = [Result(reward=1.0), Result(reward=1.0)]
    shaped = S.shape_results(records, results, ["repetition_penalty:ngram_size=3"])
    assert shaped[0].reward == pytest.approx(1.0 - 4 / 7) and shaped[1].reward == pytest.approx(1.0)


def test_rl_reward_pipeline_takes_both_forms():
    """In an RL run: ``repetition_penalty`` as a reward source beside ``math``, and as a sample shaping
    transform reading the completion texts; the run's config check accepts the source names."""
    from rewardlab.generation.base import Generation
    from rewardlab.rl.config import RLConfig, load_config, validate
    from rewardlab.rl.rewards import RewardPipeline

    cfg = RLConfig()
    cfg.reward.sources = []
    cfg.reward.shaping = [{"name": "repetition_penalty", "ngram_size": 2, "max_penalty": -0.5}]
    completions = ["x x x x \\boxed{4}", "so \\boxed{4}"]
    records = [
        Record(id=i, prompt="p", completion=c, reference="4", metadata={"group": 0})
        for i, c in enumerate(completions)
    ]
    gens = [Generation(c, [1] * len(c), [1], None, "stop") for c in completions]
    sources = [get_verifier("math"), get_verifier("repetition_penalty", ngram_size=2, max_penalty=-0.5)]
    batch = RewardPipeline.from_config(cfg, sources).score(records, gens)
    # "x x x x \boxed{4}": 4 bigrams, 2 distinct -> -0.25 from the source and -0.25 from the transform
    assert batch.rewards.tolist() == pytest.approx([1.0 - 0.25 - 0.25, 1.0])

    yaml_sources = (
        "reward.sources=[{name: math}, {name: repetition_penalty, kwargs: {ngram_size: 3}},"
        " {name: cosine_length, kwargs: {max_len: 2000}}]"
    )
    loaded = validate(load_config(overrides=[yaml_sources]))
    assert [s.name for s in loaded.reward.sources] == ["math", "repetition_penalty", "cosine_length"]
