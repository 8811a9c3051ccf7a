"""The hf rollout backend: output shape, log-probs equal to a forward pass, stop strings, seeds, order."""

from __future__ import annotations

import pytest
import torch

from rewardlab.generation import Generation, SamplingParams, get_backend


@pytest.fixture()
def backend(tiny_model, tiny_tokenizer):
    return get_backend("hf", tiny_model, tiny_tokenizer, batch_size=5)


def _forward_logprobs(model, gen: Generation, temperature: float = 1.0) -> torch.Tensor:
    ids = torch.tensor([gen.prompt_token_ids + gen.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(gen.prompt_token_ids) - 1 : -1] / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(gen.token_ids)[:, None]).squeeze(-1)


def test_shape_and_fields(backend, tiny_tokenizer):
    prompts = ["1+1=", "what is 12*3? ", "x"]
    out = backend.generate(prompts, SamplingParams(n=3, max_new_tokens=12, seed=1))
    assert len(out) == 3 and all(len(group) == 3 for group in out)
    for prompt, group in zip(prompts, out, strict=False):
        for gen in group:
            assert gen.prompt_token_ids == tiny_tokenizer(prompt)["input_ids"]
            assert 1 <= len(gen.token_ids) <= 12
            assert len(gen.logprobs) == len(gen.token_ids)
            assert gen.finish_reason in ("stop", "length")
            if gen.finish_reason == "length":
                assert len(gen.token_ids) == 12
            assert gen.text == tiny_tokenizer.decode(gen.token_ids, skip_special_tokens=True)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_match_forward_pass(backend, tiny_model, temperature):
    # Batched, left-padded generation must report what an unpadded forward pass of the same model gives,
    # under the temperature-scaled distribution the trainer uses.
    out = backend.generate(
        ["a", "longer prompt here", "mid size"],
        SamplingParams(n=2, max_new_tokens=10, temperature=temperature, top_k=20, seed=3),
    )
    for group in out:
        for gen in group:
            ref = _forward_logprobs(tiny_model, gen, temperature)
            assert torch.allclose(ref, torch.tensor(gen.logprobs), atol=1e-4)


def test_seed_reproducible_and_global_rng_untouched(backend):
    params = SamplingParams(n=2, max_new_tokens=8, seed=7)
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    a = backend.generate(["abc", "de"], params)
    after = torch.rand(1)
    b = backend.generate(["abc", "de"], params)
    assert [[g.token_ids for g in grp] for grp in a] == [[g.token_ids for g in grp] for grp in b]
    assert torch.equal(before, after)


def test_stop_strings_cut_text_and_tokens(backend, tiny_tokenizer):
    stops = ["1", "5", "9", "Q", "z"]  # characters no special-token string contains
    out = backend.generate(["zz"], SamplingParams(n=6, max_new_tokens=40, stop=stops, seed=0))
    for gen in out[0]:
        assert not any(s in gen.text for s in stops)
        if gen.finish_reason == "stop" and tiny_tokenizer.eos_token_id not in gen.token_ids:
            full = tiny_tokenizer.decode(gen.token_ids, skip_special_tokens=True)
            prefix = tiny_tokenizer.decode(gen.token_ids[:-1], skip_special_tokens=True)
            assert any(s in full for s in stops) and not any(s in prefix for s in stops)
    kept = backend.generate(
        ["zz"], SamplingParams(n=6, max_new_tokens=40, stop=stops, seed=0, include_stop_str_in_output=True)
    )
    for a, b in zip(out[0], kept[0], strict=False):
        assert b.text.startswith(a.text)


def test_greedy_is_deterministic_and_order_kept(backend):
    prompts = ["short", "a much longer prompt than the others", "mid"]
    params = SamplingParams(n=2, temperature=0.0, max_new_tokens=6)
    together = backend.generate(prompts, params)
    alone = [backend.generate([p], params)[0] for p in prompts]
    for group, single in zip(together, alone, strict=False):
        assert group[0].token_ids == group[1].token_ids
        assert group[0].token_ids == single[0].token_ids


def test_training_mode_restored(backend, tiny_model):
    tiny_model.train()
    backend.generate(["x"], SamplingParams(max_new_tokens=2))
    assert tiny_model.training


def test_update_weights_from_other_object(tiny_tokenizer):
    from rewardlab.data.tiny import build_tiny_model

    a, b = build_tiny_model(seed=0), build_tiny_model(seed=1)
    backend = get_backend("hf", a, tiny_tokenizer)
    backend.update_weights(b)
    assert all(
        torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=False)
    )


def test_identical_prompts_sample_independently(tiny_model, tiny_tokenizer):
    """A seeded call samples identical prompts independently (multi-turn episodes share contexts), and
    reproducibly."""
    backend = get_backend("hf", tiny_model, tiny_tokenizer)
    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=8, seed=5)
    out = [g[0].token_ids for g in backend.generate(["12+30="] * 6, params)]
    assert len({tuple(ids) for ids in out}) > 1
    assert out == [g[0].token_ids for g in backend.generate(["12+30="] * 6, params)]
