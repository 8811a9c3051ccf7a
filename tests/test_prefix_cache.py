"""The hf backend's prefix cache in multi-turn rollouts: later turns prefill only the new tokens, and the
episodes are the same token for token as when every turn prefills its whole context."""

from __future__ import annotations

import contextlib

import pytest
import torch
from chatty_env import Chatty  # tests/chatty_env.py (pytest puts tests/ on the path)

from rewardlab.envs import EnvConfig, run_episodes
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.generation.prefix_cache import PrefixStore
from rewardlab.types import Record


def _episodes(model, tokenizer, params, cached: bool, batch_size: int = 64):
    backend = get_backend("hf", model, tokenizer, batch_size=batch_size, interleave_turns=False)
    if not cached:
        backend.prefix_cache = contextlib.nullcontext  # every turn prefills its whole context, as before
    prefilled = []

    def count(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and ids.shape[1] > 1:  # a prefill: count the positions it runs
            prefilled.append(ids.numel())

    hook = model.register_forward_pre_hook(count, with_kwargs=True)
    cfg = EnvConfig(max_turns=4, max_tokens=120, observation_format="text", observation_template="[{output}]")
    records = [Record(id=i, prompt=f"{i}+{i * 3}=") for i in range(5)]
    try:
        episodes = run_episodes(
            backend, Chatty(), records, [r.prompt for r in records], params, tokenizer, cfg
        )
    finally:
        hook.remove()
    return [e for group in episodes for e in group], prefilled


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(n=3, temperature=0.0, max_new_tokens=9),
        SamplingParams(n=3, temperature=1.0, max_new_tokens=9, seed=5, logprobs=True),
    ],
    ids=["greedy", "sampled"],
)
def test_episodes_equal_token_for_token_with_and_without_the_prefix_cache(params, tiny_model, tiny_tokenizer):
    torch.manual_seed(0)
    with_cache, cached_prefill = _episodes(tiny_model, tiny_tokenizer, params, cached=True, batch_size=4)
    without, full_prefill = _episodes(tiny_model, tiny_tokenizer, params, cached=False, batch_size=4)
    assert max(len(e.state.model_turns) for e in without) >= 3  # later turns happened
    for a, b in zip(with_cache, without, strict=True):
        assert a.token_ids == b.token_ids and a.loss_mask == b.loss_mask
        assert a.state.turns == b.state.turns
        if params.logprobs:
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    # Later turns ran the observation (and the turn's last token) only, not the whole context again.
    assert sum(cached_prefill) < 0.6 * sum(full_prefill)


def test_store_finds_the_longest_stored_prefix_once():
    store = PrefixStore(max_bytes=1 << 20)
    kv = [(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3))]
    store.put([5, 6, 7, 8], kv)
    store.put([5, 6], [(k[:, :2], v[:, :2]) for k, v in kv])
    assert store.take([9, 6, 7, 8, 1]).entry is None
    found = store.take([5, 6, 7, 8, 1, 2])
    assert found.length == 4 and found.entry.tokens == (5, 6, 7, 8)
    assert store.take([5, 6, 7, 8, 1, 2]).length == 2  # taken once; the shorter one is next
    store.put([5, 6, 7], [(k[:, :3], v[:, :3]) for k, v in kv])
    assert store.take([5, 6, 7]).length == 2  # the prompt's last token always runs
    assert store.nbytes == 0 and len(store) == 0


def test_store_keeps_no_more_than_its_budget():
    store = PrefixStore(max_bytes=100)
    store.put([1, 2, 3], [(torch.zeros(1, 3, 4), torch.zeros(1, 3, 4))])  # 96 bytes
    store.put([4, 5, 6], [(torch.zeros(1, 3, 4), torch.zeros(1, 3, 4))])
    assert len(store) == 1 and store.nbytes == 96
