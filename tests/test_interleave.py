"""The hf backend's interleaved multi-turn loop (rewardlab.generation.interleave): the same episodes as one
``generate`` call per turn, token for token when greedy, and samples from the policy's distribution."""

from __future__ import annotations

import pytest
import torch
from chatty_env import Chatty  # tests/chatty_env.py (pytest puts tests/ on the path)

from rewardlab.envs import EnvConfig, run_episodes
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.generation import interleave as il
from rewardlab.types import Record

CFG = EnvConfig(max_turns=4, max_tokens=60, observation_format="text", observation_template="[{output}]")
RECORDS = [Record(id=i, prompt=f"{i}+{i * 3}=" + "7" * (i % 3)) for i in range(7)]


class Unstopped(Chatty):
    """Chatty whose turns run to their token limit."""

    stop = ()


def _episodes(model, tokenizer, params, *, interleave: bool, batch_size: int = 64, env=Chatty, **kw):
    backend = get_backend("hf", model, tokenizer, batch_size=batch_size, interleave_turns=interleave, **kw)
    groups = run_episodes(
        backend, env(spread=6), RECORDS, [r.prompt for r in RECORDS], params, tokenizer, CFG
    )
    return [e for group in groups for e in group]


def _assert_same(got, want):
    assert max(len(e.state.model_turns) for e in want) >= 3  # later turns happened
    for g, w in zip(got, want, strict=True):
        assert (g.prompt_token_ids, g.token_ids, g.loss_mask) == (
            w.prompt_token_ids,
            w.token_ids,
            w.loss_mask,
        )
        assert g.state.turns == w.state.turns and g.state.end == w.state.end
        assert g.finish_reason == w.finish_reason
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)


@pytest.mark.parametrize("batch_size", [64, 4], ids=["all-rows", "rows-admitted-mid-run"])
@pytest.mark.parametrize("step_tokens", [8192, 8], ids=["wide-steps", "one-token-steps"])
def test_greedy_episodes_equal_one_generate_per_turn(batch_size, step_tokens, tiny_model, tiny_tokenizer):
    params = SamplingParams(n=3, temperature=0.0, max_new_tokens=9)
    want = _episodes(tiny_model, tiny_tokenizer, params, interleave=False)
    got = _episodes(
        tiny_model, tiny_tokenizer, params, interleave=True, batch_size=batch_size, step_tokens=step_tokens
    )
    _assert_same(got, want)


def test_the_cache_is_compacted_and_stays_exact(monkeypatch, tiny_model, tiny_tokenizer):
    """Rows leaving and padded steps leave masked columns; compaction moves each row's real ones together."""
    widths = []
    compact = il.TurnLoop._compact

    def spy(self):
        before = self.mask.shape[1]
        compact(self)
        widths.append((before, self.mask.shape[1]))

    monkeypatch.setattr(il.TurnLoop, "_compact", spy)
    params = SamplingParams(n=3, temperature=0.0, max_new_tokens=9)
    got = _episodes(tiny_model, tiny_tokenizer, params, interleave=True, batch_size=5)
    assert any(after < before for before, after in widths)
    monkeypatch.setattr(il.TurnLoop, "_compact", compact)
    _assert_same(got, _episodes(tiny_model, tiny_tokenizer, params, interleave=False))


def test_tokens_fed_past_a_turns_cut_are_masked_out(monkeypatch, tiny_model, tiny_tokenizer):
    """A turn cut shorter than what was sampled (here: every turn loses its last two tokens) continues from
    the kept tokens only, as one ``generate`` per turn does."""
    from rewardlab.generation.hf import HFBackend

    finish = HFBackend._finish_sample

    def shorter(self, tokens, prompt_ids, logprobs, params):
        gen = finish(self, tokens, prompt_ids, logprobs, params)
        keep = max(1, len(gen.token_ids) - 2)
        gen.token_ids, gen.logprobs = gen.token_ids[:keep], gen.logprobs[:keep]
        gen.text, gen.finish_reason = self._decode(gen.token_ids), "stop"  # a stop, so the episode goes on
        return gen

    end_turns, cuts = il.TurnLoop._end_turns, []

    def checked(self, ended):
        """Every row's unmasked cache columns are exactly its real tokens, after each cut."""
        cuts.extend(len(row.tokens) for row in ended)
        end_turns(self, ended)
        assert self.mask.sum(1).tolist() == [row.real for row in self.rows]

    monkeypatch.setattr(HFBackend, "_finish_sample", shorter)
    params = SamplingParams(n=2, temperature=0.0, max_new_tokens=7)
    want = _episodes(tiny_model, tiny_tokenizer, params, interleave=False, env=Unstopped)
    monkeypatch.setattr(il.TurnLoop, "_end_turns", checked)
    got = _episodes(tiny_model, tiny_tokenizer, params, interleave=True, batch_size=3, env=Unstopped)
    _assert_same(got, want)
    assert sum(n >= 3 for n in cuts) >= 10  # turns that had fed tokens past their cut


def test_sampled_tokens_carry_the_policys_log_probs(tiny_model, tiny_tokenizer):
    """Every token the loop sampled, in every turn, has the log-probability the policy gives it in the
    episode's full context (one teacher-forced forward pass), so each was drawn from the right distribution."""
    params = SamplingParams(n=4, temperature=0.7, max_new_tokens=9, seed=3)
    episodes = _episodes(tiny_model, tiny_tokenizer, params, interleave=True, batch_size=6)
    assert max(len(e.state.model_turns) for e in episodes) >= 3
    for e in episodes:
        ids = torch.tensor([e.prompt_token_ids + e.token_ids])
        with torch.no_grad():
            logits = tiny_model(ids).logits[0, len(e.prompt_token_ids) - 1 : -1].float() / params.temperature
        policy = torch.log_softmax(logits, -1).gather(-1, torch.tensor(e.token_ids)[:, None]).squeeze(-1)
        own = torch.tensor(e.loss_mask, dtype=torch.bool)
        assert torch.tensor(e.logprobs)[own] == pytest.approx(policy[own], abs=1e-4)


def test_top_k_sampling_follows_the_truncated_distribution(tiny_model, tiny_tokenizer):
    """The first token of 3,000 episodes of one prompt, top-k 4: its frequencies match the policy's four
    most likely tokens, renormalised (total variation under 0.04; about 0.015 is expected)."""
    params = SamplingParams(n=3000, temperature=1.0, top_k=4, max_new_tokens=1, seed=0)
    backend = get_backend("hf", tiny_model, tiny_tokenizer, batch_size=3000)
    firsts: list[int] = []

    def respond(ended):
        firsts.extend(gen.token_ids[0] for _, gen in ended)
        return [None] * len(ended)

    backend.interact(["12+3="], params, respond)
    ids = tiny_tokenizer("12+3=")["input_ids"]
    with torch.no_grad():
        logits = tiny_model(torch.tensor([ids])).logits[0, -1]
    top = torch.topk(logits, 4)
    want = dict(zip(top.indices.tolist(), torch.softmax(top.values, -1).tolist(), strict=True))
    counts = torch.bincount(torch.tensor(firsts), minlength=logits.shape[0]).float() / len(firsts)
    assert set(torch.nonzero(counts).squeeze(-1).tolist()) <= set(want)
    assert 0.5 * sum(abs(counts[t].item() - p) for t, p in want.items()) < 0.04


def test_switched_off_it_runs_one_generate_per_turn(monkeypatch, tiny_model, tiny_tokenizer):
    from rewardlab.generation.hf import HFBackend

    calls = []
    generate = HFBackend.generate
    monkeypatch.setattr(
        HFBackend, "generate", lambda self, p, s: calls.append(len(p)) or generate(self, p, s)
    )
    params = SamplingParams(n=2, temperature=0.0, max_new_tokens=9)
    _episodes(tiny_model, tiny_tokenizer, params, interleave=True)
    assert calls == []
    _episodes(tiny_model, tiny_tokenizer, params, interleave=False)
    assert len(calls) >= 3
