"""Log-probs and entropies from the last hidden states, the LM head applied a chunk of tokens at a time
(``token_logprobs_from_hidden``), against the full-logits path: the same values and the same gradients."""

from __future__ import annotations

import pytest
import torch

from rewardlab import core_algos as ca


def _full(hidden, head, labels, temperature):
    logits = head(hidden)
    return (
        ca.logprobs_from_logits(logits, labels, temperature=temperature),
        ca.entropy_from_logits(logits, temperature=temperature),
    )


def _grads(fn, hidden, head, labels, temperature, weights):
    hidden = hidden.detach().clone().requires_grad_(True)
    head.zero_grad()
    logp, ent = fn(hidden, head, labels, temperature)
    ((logp * weights).sum() + (ent * weights.flip(-1)).sum()).backward()
    return logp.detach(), ent.detach(), hidden.grad, [p.grad.clone() for p in head.parameters()]


def _chunked(chunk):
    def fn(hidden, head, labels, temperature):
        return ca.token_logprobs_from_hidden(
            hidden, head, labels, temperature, chunk_tokens=chunk, entropy=True
        )

    return fn


@pytest.mark.parametrize("chunk", [1, 5, 7, 64])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("bias", [False, True])
def test_equal_values_and_gradients_to_the_full_logits(chunk, temperature, bias):
    torch.manual_seed(0)
    batch, length, width, vocab = 3, 6, 16, 97
    head = torch.nn.Linear(width, vocab, bias=bias)
    hidden = torch.randn(batch, length, width)
    labels = torch.randint(0, vocab, (batch, length))
    weights = torch.randn(batch, length)
    want = _grads(_full, hidden, head, labels, temperature, weights)
    got = _grads(_chunked(chunk), hidden, head, labels, temperature, weights)
    for a, b in zip(got[:3], want[:3], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    for a, b in zip(got[3], want[3], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_tied_embeddings_get_both_gradients():
    # A tied LM head is the embedding matrix: its gradient sums the head's and the embedding's.
    torch.manual_seed(1)
    emb = torch.nn.Embedding(50, 8)
    head = torch.nn.Linear(8, 50, bias=False)
    head.weight = emb.weight
    ids = torch.randint(0, 50, (2, 5))
    labels = torch.randint(0, 50, (2, 5))
    grads = []
    for fn in (_full, _chunked(3)):
        emb.zero_grad()
        hidden = torch.tanh(emb(ids))
        logp, _ = fn(hidden, head, labels, 1.0)
        logp.sum().backward()
        grads.append(emb.weight.grad.clone())
    torch.testing.assert_close(grads[1], grads[0], atol=1e-6, rtol=1e-5)


def test_a_lora_head_is_applied():
    peft = pytest.importorskip("peft")

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm_head = torch.nn.Linear(8, 40, bias=False)

        def forward(self, x):
            return self.lm_head(x)

    torch.manual_seed(2)
    config = peft.LoraConfig(r=2, lora_alpha=4, target_modules=["lm_head"], init_lora_weights=False)
    model = peft.get_peft_model(Tiny(), config)
    head = model.base_model.model.lm_head
    hidden = torch.randn(2, 4, 8)
    labels = torch.randint(0, 40, (2, 4))
    want, _ = _full(hidden, head, labels, 1.0)
    got, _ = ca.token_logprobs_from_hidden(hidden, head, labels, chunk_tokens=3)
    plain, _ = ca.token_logprobs_from_hidden(hidden, head.base_layer, labels, chunk_tokens=3)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    assert not torch.allclose(plain, want)  # the adapter changes the log-probs, and it was applied


def test_no_grad_and_empty_inputs():
    head = torch.nn.Linear(4, 11)
    hidden, labels = torch.randn(2, 3, 4), torch.randint(0, 11, (2, 3))
    with torch.no_grad():
        logp, ent = ca.token_logprobs_from_hidden(hidden, head, labels, chunk_tokens=2)
        torch.testing.assert_close(logp, _full(hidden, head, labels, 1.0)[0])
    assert ent is None and logp.grad_fn is None
    empty, _ = ca.token_logprobs_from_hidden(torch.randn(2, 0, 4), head, torch.zeros(2, 0, dtype=torch.long))
    assert empty.shape == (2, 0)


def test_bf16_hidden_states_are_read_in_float32():
    head = torch.nn.Linear(4, 11).to(torch.bfloat16)
    hidden, labels = torch.randn(2, 3, 4).to(torch.bfloat16), torch.randint(0, 11, (2, 3))
    logp, _ = ca.token_logprobs_from_hidden(hidden, head, labels, chunk_tokens=2)
    assert logp.dtype == torch.float32
    torch.testing.assert_close(logp, _full(hidden, head, labels, 1.0)[0])


# ----------------------------------------------------------------------------------------------------------
# In the RL update (train.logprob_chunk_tokens)
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("padding_free", [False, True])
def test_one_update_from_hidden_equals_full_logits(padding_free, tiny_tokenizer, monkeypatch, tmp_path):
    import copy

    from test_rl_packing import _gens, _update  # tests/ is on the path

    import rewardlab.rl.update as update_mod
    from rewardlab.data.tiny import build_tiny_model

    real_step = update_mod.optimizer_step
    grads: list[torch.Tensor] = []

    def spy(params, *args, **kw):
        params = list(params)
        grads.extend(p.grad.detach().clone() for p in params)
        return real_step(params, *args, **kw)

    monkeypatch.setattr(update_mod, "optimizer_step", spy)
    gens, model = _gens(tiny_tokenizer, seed=2), build_tiny_model(seed=0, vocab_size=1024)
    overrides = ["algorithm.kl_coef=0.04", "algorithm.entropy_coef=0.01", "rollout.temperature=0.8"]
    runs = []
    for chunk in (0, 7):
        grads.clear()
        m, weights = _update(
            copy.deepcopy(model), tiny_tokenizer, gens, "grpo",
            [*overrides, f"train.logprob_chunk_tokens={chunk}"], padding_free, tmp_path / str(chunk),
        )  # fmt: skip
        runs.append((m, weights, list(grads)))
    (m0, w0, g0), (m1, w1, g1) = runs
    for key in ("loss", "policy_loss", "kl", "entropy", "grad_norm"):
        assert m1[key] == pytest.approx(m0[key], abs=1e-5), key
    assert len(g0) == len(g1) > 0
    assert max((a - b).abs().max().item() for a, b in zip(g0, g1, strict=True)) < 1e-5
    assert max((a - b).abs().max().item() for a, b in zip(w0, w1, strict=True)) < 1e-5


def test_a_model_whose_logits_are_not_its_heads_output_keeps_the_full_logits(tiny_tokenizer):
    from test_rl_packing import _gens  # tests/ is on the path

    from rewardlab.data.tiny import build_tiny_model
    from rewardlab.rl.batch import build_tensors
    from rewardlab.rl.config import load_config
    from rewardlab.rl.forward import ForwardPasses

    class SoftCapped(torch.nn.Module):  # Gemma 2's final soft-capping, on any model
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def get_output_embeddings(self):
            return self.inner.get_output_embeddings()

        def forward(self, **kw):
            out = self.inner(**kw)
            out.logits = torch.tanh(out.logits / 0.5) * 0.5
            return out

    batch = build_tensors(_gens(tiny_tokenizer), pad_id=tiny_tokenizer.pad_token_id)
    model = SoftCapped(build_tiny_model(seed=0, vocab_size=1024).eval())
    rows = torch.arange(batch["input_ids"].shape[0])
    results = []
    for chunk in (0, 5):
        cfg = load_config(preset="grpo", overrides=[f"train.logprob_chunk_tokens={chunk}"])
        passes = ForwardPasses(cfg, torch.device("cpu"), use_bf16=False)
        with torch.no_grad():
            results.append(passes.logprobs(model, batch, rows)[0])
        if chunk:
            assert id(model) in passes._full_logits_models
    torch.testing.assert_close(results[1], results[0])


@pytest.mark.parametrize("chunk", [1, 4, 64])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_self_certainty_from_hidden_equals_the_full_logits(chunk, temperature):
    torch.manual_seed(3)
    head = torch.nn.Linear(8, 41)
    hidden, mask = torch.randn(3, 5, 8), (torch.rand(3, 5) > 0.3).float()
    want = ca.self_certainty(head(hidden) / temperature, mask)
    got = ca.self_certainty_from_hidden(hidden, head, mask, temperature, chunk_tokens=chunk)
    torch.testing.assert_close(got, want)
    assert got.grad_fn is None


def test_the_self_certainty_pass_reads_the_hidden_states(tiny_tokenizer):
    from test_rl_packing import _gens  # tests/ is on the path

    from rewardlab.data.tiny import build_tiny_model
    from rewardlab.rl.batch import build_tensors
    from rewardlab.rl.config import load_config
    from rewardlab.rl.forward import ForwardPasses

    batch = build_tensors(_gens(tiny_tokenizer), pad_id=tiny_tokenizer.pad_token_id)
    model = build_tiny_model(seed=0, vocab_size=1024).eval()
    scores = []
    for chunk in (0, 5):
        cfg = load_config(
            preset="grpo", overrides=[f"train.logprob_chunk_tokens={chunk}", "rollout.temperature=0.7"]
        )
        scores.append(ForwardPasses(cfg, torch.device("cpu"), use_bf16=False).self_certainty(model, batch))
    assert scores[1] == pytest.approx(scores[0], abs=1e-5)


def test_a_model_whose_vocabulary_is_not_much_larger_than_its_hidden_size_keeps_the_full_logits():
    # The tiny demo model (103 tokens, hidden size 128): chunking would save nothing, and the demo's
    # figures stay those of the full logits bit for bit.
    from rewardlab.data.tiny import build_tiny_model
    from rewardlab.rl.config import load_config
    from rewardlab.rl.forward import ForwardPasses

    cfg = load_config(preset="grpo")
    passes = ForwardPasses(cfg, torch.device("cpu"), use_bf16=False)
    assert cfg.train.logprob_chunk_tokens > 0
    assert not passes._chunks(build_tiny_model())
    assert passes._chunks(build_tiny_model(vocab_size=1024))
