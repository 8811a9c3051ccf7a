"""The supervised warm start and the arithmetic demo data."""

from __future__ import annotations

import torch

from rewardlab.data import arithmetic
from rewardlab.rl.sft import SFTConfig, collate, encode_pairs, sft


def test_heldout_is_fixed_and_disjoint_from_training():
    dist = {"min_value": 10, "ops": "+", "carry": False}
    held = arithmetic.heldout(**dist)
    assert held == arithmetic.heldout(**dist) and len(held) == 200
    assert len({r["prompt"] for r in held}) == 200
    train = arithmetic.generate(5000, seed=0, **dist)
    assert not {r["prompt"] for r in held} & {r["prompt"] for r in train}
    for row in train[:200]:
        a, b = (int(x) for x in row["prompt"].rstrip("=").split("+"))
        assert a % 10 + b % 10 <= 9 and a // 10 + b // 10 <= 9  # carry-free
        assert row["completion"] == f"\\boxed{{{a + b}}}" and row["reference"] == str(a + b)
    assert arithmetic.heldout() == arithmetic.load_heldout()  # the shipped default set


def test_subtraction_never_negative():
    for row in arithmetic.generate(300, seed=3, ops="-"):
        assert int(row["reference"]) >= 0


def test_collate_masks_prompt_and_padding(tiny_tokenizer):
    data = encode_pairs(tiny_tokenizer, [("1+2=", "\\boxed{3}"), ("10+20=", "\\boxed{30}")])
    ids, mask, labels = collate(data, tiny_tokenizer.pad_token_id)
    p0, c0, trained = data[0]
    assert all(trained)
    assert labels[0, : len(p0)].eq(-100).all() and labels[0, len(p0) : len(p0) + len(c0)].tolist() == c0
    assert c0[-1] == tiny_tokenizer.eos_token_id
    assert mask[0].sum() == len(p0) + len(c0) and labels[0, len(p0) + len(c0) :].eq(-100).all()


def test_collate_masks_untrained_segments(tiny_tokenizer):
    """A multi-turn demonstration: the tool's output is context (in input_ids) but never a label."""
    segments = [("<calculator>2*3</calculator>", True), ("<output>6</output>", False), ("\\boxed{6}", True)]
    data = encode_pairs(tiny_tokenizer, [("2*3=", segments)])
    ids, _, labels = collate(data, tiny_tokenizer.pad_token_id)
    p, c, trained = data[0]
    call = len(tiny_tokenizer("<calculator>2*3</calculator>", add_special_tokens=False)["input_ids"])
    out = len(tiny_tokenizer("<output>6</output>", add_special_tokens=False)["input_ids"])
    assert trained == [True] * call + [False] * out + [True] * (len(c) - call - out)
    start = len(p) + call
    assert tiny_tokenizer.decode(ids[0, start : start + out]) == "<output>6</output>"
    assert labels[0, start : start + out].eq(-100).all()
    assert (
        labels[0, len(p) : start].tolist() == c[:call]
        and labels[0, start + out : len(p) + len(c)].ne(-100).all()
    )


def test_sft_learns_the_format(tiny_model, tiny_tokenizer):
    torch.manual_seed(0)
    pairs = [(r["prompt"], r["completion"]) for r in arithmetic.generate(256, seed=0)]
    losses = sft(
        tiny_model,
        tiny_tokenizer,
        pairs,
        SFTConfig(max_steps=60, per_device_train_batch_size=16, learning_rate=3e-3),
        log=None,
    )
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:5]) / 5
    from rewardlab.generation import SamplingParams, get_backend

    out = get_backend("hf", tiny_model, tiny_tokenizer).generate(
        ["12+30="], SamplingParams(temperature=0, max_new_tokens=12)
    )
    assert out[0][0].text.startswith("\\boxed{")
