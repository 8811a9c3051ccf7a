"""Parity with TRL's GRPOTrainer: the same advantages, loss values and gradients, through TRL's own code.

A real ``trl.GRPOTrainer`` is built around the tiny Qwen2 model. TRL generates a batch and computes the
group-normalised advantages in its ``_generate_and_score_completions`` (with a reward function returning
fixed rewards, ``None`` included), and computes the loss in its ``_compute_loss`` (its own forward pass,
log-probs, clipping, KL and normalisation). rewardlab computes the same quantities from the same batch with
``rewardlab.core_algos`` and its own forward pass; values and parameter gradients must agree within 1e-5.

TRL loss_type -> rewardlab aggregation: ``grpo`` -> ``seq-mean-token-mean``; ``bnpo`` -> ``token-mean``;
``dr_grpo`` -> ``seq-mean-token-sum-norm`` with ``max_len = max_completion_length``; ``dapo`` ->
``token-mean`` with ``global_num_tokens`` = the generation batch's token count (``num_items_in_batch``).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

trl = pytest.importorskip("trl", reason="trl (dev extra) is not installed")
pytest.importorskip("datasets")

from rewardlab import core_algos as ca  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning"),
    pytest.mark.usefixtures("one_torch_thread"),
]

G = 4
MAX_COMPLETION = 7
PROMPTS = ["12+7=", "3*4=", "8-5=", "9+9="]
REWARDS = [1.0, 0.0, 0.5, 0.25, None, 0.75, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.3, None, None, 0.9]

LOSS_TYPES = {
    "grpo": dict(loss_agg_mode="seq-mean-token-mean"),
    "bnpo": dict(loss_agg_mode="token-mean"),
    "dr_grpo": dict(loss_agg_mode="seq-mean-token-sum-norm", max_len=MAX_COMPLETION),
    "dapo": {"loss_agg_mode": "token-mean", "global": True},
}


def _reward_fn(completions, **kwargs):
    return list(REWARDS[: len(completions)])


def _make_trainer(model, tokenizer, tmp_path, **overrides):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    cfg = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=len(REWARDS),
        num_generations=G,
        max_completion_length=MAX_COMPLETION,
        report_to=[],
        use_cpu=True,
        bf16=False,
        beta=0.0,
        save_strategy="no",
        seed=0,
    )
    cfg.update(overrides)
    ds = Dataset.from_list([{"prompt": p} for p in PROMPTS])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[_reward_fn],
        args=GRPOConfig(**cfg),
        train_dataset=ds,
        processing_class=tokenizer,
    )
    trainer.current_gradient_accumulation_steps = 1
    return trainer


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer

    torch.manual_seed(0)
    tokenizer = load_tiny_tokenizer()
    model = build_tiny_model().float()
    tmp = tmp_path_factory.mktemp("trl")
    trainer = _make_trainer(model, tokenizer, tmp)
    inputs = [{"prompt": p} for p in PROMPTS for _ in range(G)]
    torch.manual_seed(1)
    batch = trainer._generate_and_score_completions(inputs)
    return model, tokenizer, tmp, batch


def _our_logps(model, batch):
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attn = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    T = batch["completion_ids"].shape[1]
    logits = model(input_ids=ids, attention_mask=attn).logits[:, -T - 1 : -1]
    return ca.logprobs_from_logits(logits, batch["completion_ids"]), ca.entropy_from_logits(logits)


def _grads(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def _trl_loss_and_grads(trainer, model, inputs):
    """TRL's loss on ``inputs`` and the gradient it leaves (the model's gradients zeroed after)."""
    model.zero_grad()
    loss = trainer._compute_loss(model, inputs)
    loss.backward()
    grads = _grads(model).clone()
    model.zero_grad()
    return loss, grads


# ------------------------------------------------------------------------------------------------- advantages


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_match_trl(setup, tmp_path, scale):
    model, tokenizer, _, batch = setup
    if scale != "group":
        trainer = _make_trainer(model, tokenizer, tmp_path, scale_rewards=scale)
        torch.manual_seed(1)
        batch = trainer._generate_and_score_completions([{"prompt": p} for p in PROMPTS for _ in range(G)])
    rewards, valid, n_missing = ca.optional_rewards(REWARDS)
    assert n_missing == 3
    ours = ca.group_normalized_advantages(rewards, G, scale=scale, eps=1e-4, valid=valid)
    theirs = batch["advantages"]
    # TRL divides a zero-std group's zero residual by 1e-4 and gets exactly 0 too for these rewards.
    assert torch.allclose(ours, theirs, atol=1e-5), (ours, theirs)


def test_frac_zero_std_matches_trl_definition(setup):
    rewards, valid, _ = ca.optional_rewards(REWARDS)
    # group 3 (0.5 x 4) is the only zero-std group; TRL logs the per-sample mean, which is the same fraction
    assert ca.frac_zero_std_groups(rewards, G, valid=valid) == 0.25


# ------------------------------------------------------------------------------------------------- losses


def _inputs_with_old_logps(model, batch, seed=2, scale=0.3):
    """Old log-probs off the current ones so that ratios leave [1 - eps, 1 + eps] and clipping matters."""
    with torch.no_grad():
        logps, _ = _our_logps(model, batch)
    g = torch.Generator().manual_seed(seed)
    old = logps + scale * torch.randn(logps.shape, generator=g)
    inputs = dict(batch)
    inputs["old_per_token_logps"] = old
    return inputs


@pytest.mark.parametrize("loss_type", list(LOSS_TYPES))
@pytest.mark.parametrize("beta,kl_corrected", [(0.0, False), (0.04, True), (0.04, False)])
def test_loss_and_gradient_match_trl(setup, tmp_path, loss_type, beta, kl_corrected):
    model, tokenizer, _, batch = setup
    eps_high = 0.28 if loss_type == "dapo" else 0.2
    trainer = _make_trainer(
        model, tokenizer, tmp_path, loss_type=loss_type, epsilon=0.2, epsilon_high=eps_high
    )
    # beta is set after construction: TRL would load a reference model by hub name; _compute_loss only needs
    # the coefficient and the reference log-probs in the inputs.
    trainer.beta = beta
    trainer.args.use_bias_correction_kl = kl_corrected
    inputs = _inputs_with_old_logps(model, batch)
    if beta:
        g = torch.Generator().manual_seed(3)
        inputs["ref_per_token_logps"] = inputs["old_per_token_logps"] + 0.2 * torch.randn(
            inputs["old_per_token_logps"].shape, generator=g
        )
    model.train()
    model.zero_grad()
    loss_trl = trainer._compute_loss(model, inputs)
    loss_trl.backward()
    grad_trl = _grads(model).clone()
    clip_trl = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("clip_ratio/")}

    model.zero_grad()
    logps, _ = _our_logps(model, inputs)
    mask = inputs["completion_mask"]
    opts = dict(LOSS_TYPES[loss_type])
    use_global = opts.pop("global", False)
    num_tokens, _ = ca.batch_counts(mask)
    out = ca.ppo_policy_loss(
        logps,
        inputs["old_per_token_logps"],
        inputs["advantages"],
        mask,
        clip_ratio_low=0.2,
        clip_ratio_high=eps_high,
        global_num_tokens=num_tokens if use_global else None,
        **opts,
    )
    loss = out.loss
    if beta:
        kl = ca.kl_loss_term(
            logps,
            inputs["ref_per_token_logps"],
            kind="k3",
            old_log_prob=inputs["old_per_token_logps"],
            ratio_corrected=kl_corrected,
        )
        loss = loss + beta * ca.agg_loss(
            kl * mask, mask, opts["loss_agg_mode"], max_len=opts.get("max_len"), global_num_tokens=num_tokens
        )
    loss.backward()
    grad_ours = _grads(model)

    assert abs(loss.item() - loss_trl.item()) < 1e-5, (loss.item(), loss_trl.item())
    assert grad_ours.abs().max() > 1e-4  # a real gradient, not two zeros
    assert torch.allclose(grad_ours, grad_trl, atol=1e-5, rtol=1e-4), (grad_ours - grad_trl).abs().max()
    for key in ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"):
        assert math.isclose(out.stats[key], clip_trl[key], abs_tol=1e-6), key
    assert out.stats["clip_ratio/region_mean"] > 0  # the perturbation does exercise the clip


def test_gspo_sequence_ratio_matches_trl(setup, tmp_path):
    model, tokenizer, _, batch = setup
    trainer = _make_trainer(
        model, tokenizer, tmp_path, loss_type="grpo", importance_sampling_level="sequence", epsilon=3e-2
    )
    inputs = _inputs_with_old_logps(model, batch, scale=0.05)
    model.zero_grad()
    loss_trl = trainer._compute_loss(model, inputs)
    loss_trl.backward()
    grad_trl = _grads(model).clone()
    model.zero_grad()
    logps, _ = _our_logps(model, inputs)
    out = ca.compute_policy_loss(
        "gspo",
        logps,
        inputs["old_per_token_logps"],
        inputs["advantages"],
        inputs["completion_mask"],
        clip_ratio_low=3e-2,
        clip_ratio_high=3e-2,
    )
    out.loss.backward()
    assert abs(out.loss.item() - loss_trl.item()) < 1e-5
    assert torch.allclose(_grads(model), grad_trl, atol=1e-5, rtol=1e-4)


def test_entropy_matches_trl(setup, tmp_path):
    model, tokenizer, _, batch = setup
    trainer = _make_trainer(model, tokenizer, tmp_path)
    inputs = dict(batch)
    with torch.no_grad():
        trainer._compute_loss(model, inputs)
        _, ent = _our_logps(model, inputs)
    ours = ca.masked_mean(ent, inputs["completion_mask"]).item()
    assert math.isclose(ours, trainer._metrics["train"]["entropy"][-1], abs_tol=1e-5)


def test_accumulated_trl_grpo_equals_ours_with_global_counts(setup, tmp_path):
    """TRL's ``grpo`` divides each micro-batch's sequence mean by the accumulation steps; with equal-size
    micro-batches that is our seq-mean-token-mean with ``global_num_seqs``: both give the full-batch gradient."""
    model, tokenizer, _, batch = setup
    trainer = _make_trainer(model, tokenizer, tmp_path, loss_type="grpo")
    trainer.current_gradient_accumulation_steps = 2
    inputs = _inputs_with_old_logps(model, batch)
    B = inputs["completion_ids"].shape[0]
    model.zero_grad()
    for half in (slice(0, B // 2), slice(B // 2, B)):
        micro = {k: (v[half] if torch.is_tensor(v) and v.dim() > 0 else v) for k, v in inputs.items()}
        trainer._compute_loss(model, micro).backward()
    grad_trl = _grads(model).clone()
    model.zero_grad()
    for half in (slice(0, B // 2), slice(B // 2, B)):
        micro = {k: (v[half] if torch.is_tensor(v) and v.dim() > 0 else v) for k, v in inputs.items()}
        logps, _ = _our_logps(model, micro)
        ca.ppo_policy_loss(
            logps,
            micro["old_per_token_logps"],
            micro["advantages"],
            micro["completion_mask"],
            loss_agg_mode="seq-mean-token-mean",
            global_num_seqs=B,
        ).loss.backward()
    assert torch.allclose(_grads(model), grad_trl, atol=1e-5, rtol=1e-4)


def test_model_untouched_by_parity_harness(setup):
    # The fixtures share one model; no test may step an optimizer on it.
    model, *_ = setup
    ref = copy.deepcopy(model)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), ref.parameters(), strict=True))


def test_cispo_matches_trl(setup, tmp_path):
    model, tokenizer, _, batch = setup
    trainer = _make_trainer(model, tokenizer, tmp_path, loss_type="cispo", epsilon_high=1.2)
    inputs = _inputs_with_old_logps(model, batch)
    loss_trl, grad_trl = _trl_loss_and_grads(trainer, model, inputs)
    logps, _ = _our_logps(model, inputs)
    mask = inputs["completion_mask"]
    out = ca.compute_policy_loss(
        "cispo",
        logps,
        inputs["old_per_token_logps"],
        inputs["advantages"],
        mask,
        clip_ratio_max=1.2,
        global_num_tokens=ca.batch_counts(mask)[0],
    )
    out.loss.backward()
    assert abs(out.loss.item() - loss_trl.item()) < 1e-5
    assert torch.allclose(_grads(model), grad_trl, atol=1e-5, rtol=1e-4)
    assert out.stats["cispo_clip_ratio"] > 0
    assert math.isclose(
        out.stats["cispo_clip_ratio"], trainer._metrics["train"]["cispo_clip_ratio"][-1], abs_tol=1e-6
    )


def test_trl_two_sided_delta_is_our_dual_clip(setup, tmp_path):
    model, tokenizer, _, batch = setup
    trainer = _make_trainer(model, tokenizer, tmp_path, loss_type="bnpo", delta=1.3)
    inputs = _inputs_with_old_logps(model, batch, scale=0.5)
    model.zero_grad()
    loss_trl = trainer._compute_loss(model, inputs)
    loss_trl.backward()
    grad_trl = _grads(model).clone()
    model.zero_grad()
    logps, _ = _our_logps(model, inputs)
    out = ca.ppo_policy_loss(
        logps,
        inputs["old_per_token_logps"],
        inputs["advantages"],
        inputs["completion_mask"],
        clip_ratio_c=1.3,
        loss_agg_mode="token-mean",
    )
    out.loss.backward()
    assert out.stats["clip_ratio/dual_mean"] > 0
    assert abs(out.loss.item() - loss_trl.item()) < 1e-5
    assert torch.allclose(_grads(model), grad_trl, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------- high-entropy tokens (80/20)


@pytest.mark.parametrize("quantile", [0.2, 0.5, 0.9])
def test_high_entropy_mask_matches_trl(setup, tmp_path, quantile):
    model, tokenizer, _, _ = setup
    trainer = _make_trainer(model, tokenizer, tmp_path, top_entropy_quantile=quantile)
    g = torch.Generator().manual_seed(5)
    entropies = torch.rand(6, 40, generator=g) * 3
    entropies[:, :5] = 1.5  # ties at the threshold
    mask = (torch.rand(6, 40, generator=g) > 0.3).float()
    theirs = trainer.get_high_entropy_mask(entropies, mask, 1 - quantile)
    ours = ca.high_entropy_mask(entropies, mask, quantile)
    assert torch.equal(ours, theirs)
    assert 0 < ours.sum() < mask.sum()


def test_top_entropy_quantile_loss_matches_trl(setup, tmp_path):
    """TRL multiplies the per-token policy loss by the mask and keeps the normaliser: ours, with the mask as
    the token weights, gives the same loss and gradient."""
    model, tokenizer, _, batch = setup
    trainer = _make_trainer(model, tokenizer, tmp_path, loss_type="grpo", top_entropy_quantile=0.2)
    inputs = _inputs_with_old_logps(model, batch)
    model.train()
    loss_trl, grad_trl = _trl_loss_and_grads(trainer, model, inputs)
    logps, ent = _our_logps(model, inputs)
    mask = inputs["completion_mask"]
    forking = ca.high_entropy_mask(ent, mask, 0.2)
    out = ca.ppo_policy_loss(
        logps,
        inputs["old_per_token_logps"],
        inputs["advantages"],
        mask,
        is_weights=forking.float(),
        **LOSS_TYPES["grpo"],
    )
    out.loss.backward()
    assert abs(out.loss.item() - loss_trl.item()) < 1e-6
    assert torch.allclose(_grads(model), grad_trl, atol=1e-6, rtol=1e-5)
    assert 0.15 < forking.sum() / mask.sum() < 0.3
