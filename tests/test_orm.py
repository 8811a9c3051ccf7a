"""Outcome reward model: losses (against TRL), metrics, data formatting, dynamic batching, training,
resume, gradient accumulation, LoRA, the reward-source interface, and loading any AutoModel path."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from rewardlab.rewardmodels.orm import (
    ORMTrainConfig,
    RewardModel,
    RewardModelSource,
    bradley_terry_loss,
    build_text,
    evaluate_reward_model,
    expected_calibration_error,
    fixed_batches,
    length_sorted_batches,
    load_reward_model,
    pairwise_metrics,
    pointwise_bce_loss,
    pointwise_metrics,
    synthetic_preferences,
    tokenize_rows,
    train_orm,
)
from rewardlab.types import Record

# ---- losses ----------------------------------------------------------------------------------------


def test_bradley_terry_hand_values():
    c, r = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])
    expected = (-math.log(1 / (1 + math.exp(-1))) + math.log(2)) / 2
    assert bradley_terry_loss(c, r).item() == pytest.approx(expected, rel=1e-6)
    m = torch.tensor([1.0, -1.0])
    expected = (math.log(2) - math.log(1 / (1 + math.exp(-1)))) / 2
    assert bradley_terry_loss(c, r, m).item() == pytest.approx(expected, rel=1e-6)
    centred = bradley_terry_loss(c, r, None, 0.01).item()
    assert centred == pytest.approx(bradley_terry_loss(c, r).item() + 0.01 * (1 + 0) / 2, rel=1e-6)


def test_pointwise_bce_hand_values():
    loss = pointwise_bce_loss(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 0.0]))
    expected = (math.log(2) + math.log(1 + math.exp(2))) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)


@pytest.fixture(scope="module")
def trl_trainer(tiny_model_dir, tmp_path_factory):
    trl = pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=1)
    model.config.pad_token_id = tok.pad_token_id
    data = Dataset.from_list([{"chosen": "ab", "rejected": "cd"}] * 2)
    args = trl.RewardConfig(
        output_dir=str(tmp_path_factory.mktemp("trl")),
        center_rewards_coefficient=0.01,
        report_to=[],
        use_cpu=True,
    )
    return trl.RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tok)


@pytest.mark.parametrize("with_margin", [False, True])
def test_bradley_terry_matches_trl_reward_trainer(trl_trainer, with_margin):
    """Our loss equals TRL RewardTrainer.compute_loss on the same rewards (margin and centering on)."""
    torch.manual_seed(0)
    chosen, rejected = torch.randn(5), torch.randn(5)
    logits = torch.cat([chosen, rejected]).unsqueeze(-1)
    stub = lambda **kw: SimpleNamespace(logits=logits)  # noqa: E731 - a model that returns fixed rewards
    inputs = {
        "input_ids": torch.ones(10, 3, dtype=torch.long),
        "attention_mask": torch.ones(10, 3, dtype=torch.long),
    }
    margin = None
    if with_margin:
        margin = torch.rand(5)
        inputs["margin"] = margin
    ref = trl_trainer.compute_loss(stub, inputs)
    ours = bradley_terry_loss(chosen, rejected, margin, trl_trainer.args.center_rewards_coefficient)
    assert ours.item() == pytest.approx(ref.item(), rel=1e-6)


# ---- metrics ---------------------------------------------------------------------------------------


def test_ece_hand_values():
    # bin [0.2,0.3): p=.25 y=0 ; bin [0.8,0.9): p=.8,.8 y=1,0 -> |0-.25|*1/3 + |.5-.8|*2/3
    ece = expected_calibration_error([0.25, 0.8, 0.8], [0, 1, 0], n_bins=10)
    assert ece == pytest.approx(0.25 / 3 + 0.3 * 2 / 3)
    assert expected_calibration_error([1.0, 0.0], [1, 0]) == pytest.approx(0.0)


def test_pairwise_metrics_hand_values():
    m = pairwise_metrics([2.0, 1.0, 0.0], [0.0, 1.0, 1.0])
    assert m["accuracy"] == pytest.approx(1 / 3)  # a tie is a miss, as RewardBench counts
    # pooled: positives 2,1,0 ; negatives 0,1,1 -> AUC = P(pos > neg) + 0.5 P(tie) over 9 pairs
    # 2 beats all 3; 1 ties two 1s and beats 0; 0 ties 0, loses to two 1s -> (3 + 1 + 1 + 0.5) / 9
    assert m["roc_auc"] == pytest.approx((3 + 1 + 1 + 0.5) / 9)
    assert m["mean_margin"] == pytest.approx(1 / 3)
    assert 0 <= m["ece"] <= 1


def test_pointwise_metrics_and_subsets():
    from rewardlab.rewardmodels.orm.evaluate import by_subset

    m = pointwise_metrics([2.0, -1.0, 0.5, -3.0], [1, 0, 0, 0])
    assert m["accuracy"] == pytest.approx(0.75)
    assert m["roc_auc"] == pytest.approx(1.0)
    out = by_subset("pairwise", [1.0, 0.0, 3.0], [0.0, 1.0, 2.0], ["a", "a", "b"])
    assert out["subsets"]["a"]["accuracy"] == pytest.approx(0.5)
    assert out["subsets"]["b"]["accuracy"] == 1.0 and out["subsets"]["b"]["roc_auc"] == 1.0
    assert pointwise_metrics([1.0], [1])["roc_auc"] is None


def test_rewardbench_sections():
    from rewardlab.rewardmodels.orm.evaluate import by_subset, rewardbench_sections

    sec = rewardbench_sections(
        {"alpacaeval-easy": 1.0, "mt-bench-easy": 0.0, "math-prm": 0.5, "hep-go": 1.0, "x": 0.0}
    )
    assert sec["Chat"] == pytest.approx(100 / 128)
    assert sec["Reasoning"] == pytest.approx((0.5 * 984 + 164) / (984 + 164))
    assert sec["score"] == pytest.approx((sec["Chat"] + sec["Reasoning"]) / 2)
    assert rewardbench_sections({"mine": 1.0}) == {}
    out = by_subset("pairwise", [1.0, 0.0], [0.0, 1.0], ["donotanswer", "refusals-dangerous"])
    assert out["sections"]["Safety"] == pytest.approx(136 / 236)


# ---- data ------------------------------------------------------------------------------------------


def test_build_text_plain_and_chat(tiny_tokenizer):
    text, templated = build_text(tiny_tokenizer, "Q: ", "abc")
    assert text == "Q: abc" + tiny_tokenizer.eos_token and not templated
    from rewardlab.data.tiny import load_tiny_tokenizer

    chat = load_tiny_tokenizer(with_chat_template=True)
    text, templated = build_text(chat, "hi", "yo")
    assert templated and text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert build_text(chat, None, conv)[0] == text
    assert build_text(chat, "hi", "yo", use_chat_template=False)[0] == "hiyo" + chat.eos_token
    with pytest.raises(ValueError):
        build_text(tiny_tokenizer, "hi", "yo", use_chat_template=True)


def test_tokenize_rows_drops_too_long_and_keeps_margin(tiny_tokenizer):
    rows = [
        {"prompt": "p", "chosen": "a", "rejected": "b", "margin": 0.5, "subset": "s"},
        {"prompt": "p", "chosen": "a" * 50, "rejected": "b"},
    ]
    ex, dropped = tokenize_rows(rows, tiny_tokenizer, max_length=10)
    assert dropped == 1 and len(ex) == 1
    assert ex[0]["margin"] == 0.5 and ex[0]["subset"] == "s"
    assert ex[0]["chosen_ids"][-1] == tiny_tokenizer.eos_token_id


# ---- dynamic batching and scoring ------------------------------------------------------------------


def test_length_sorted_batches_budget_and_cover():
    lengths = [5, 50, 7, 30, 12, 3, 100, 8]
    batches = length_sorted_batches(lengths, max_tokens=60)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= 60
    assert batches[0] == [6]  # longest first, alone (over budget)
    assert all(len(b) <= 2 for b in length_sorted_batches(lengths, 10_000, max_batch_size=2))
    assert fixed_batches(5, 2) == [[0, 1], [2, 3], [4]]


def test_dynamic_and_fixed_batches_give_same_scores(tiny_model_dir):
    rm = RewardModel(tiny_model_dir, max_tokens=64)
    texts = ["a" * n for n in (3, 40, 7, 22, 1, 15)]
    ids = [rm.encode_pair("", t) for t in texts]
    dyn = rm.score_ids(ids)
    fixed = rm.score_ids(ids, batches=fixed_batches(len(ids), 4))
    single = [rm.score_ids([x])[0] for x in ids]
    assert dyn == pytest.approx(fixed, abs=1e-4) and dyn == pytest.approx(single, abs=1e-4)


def test_reward_model_source_interface(tiny_model_dir):
    from rewardlab.verifiers.base import RewardSource

    src = RewardModelSource(tiny_model_dir, normalize="sigmoid")
    assert isinstance(src, RewardSource) and src.name.startswith("rm:")
    recs = [
        Record(prompt="Q: ", completion="abc"),
        Record(prompt=[{"role": "user", "content": "x"}], completion="y"),
    ]
    out = src.score_batch(recs)
    assert len(out) == 2 and all(r.error is None and 0 <= r.reward <= 1 for r in out)
    assert out[0].details["prob"] == pytest.approx(out[0].reward)
    assert src.score(recs[0]).reward == pytest.approx(out[0].reward, abs=1e-5)


@pytest.mark.parametrize("config_name", ["qwen2-tiny", "llama-tiny"])
def test_load_any_automodel_path(tmp_path, config_name):
    from transformers import AutoModelForSequenceClassification

    from rewardlab.data.tiny import save_tiny_model

    path = save_tiny_model(tmp_path / config_name, name=config_name)
    model, tok = load_reward_model(path)
    assert model.config.num_labels == 1 and model.config.pad_token_id == tok.pad_token_id
    model.save_pretrained(tmp_path / "rm")
    tok.save_pretrained(tmp_path / "rm")
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path / "rm")
    assert again.config.num_labels == 1
    scores = RewardModel(str(tmp_path / "rm")).score(["a", "b"], ["c", "dd"])
    assert len(scores) == 2 and all(math.isfinite(s) for s in scores)


# ---- training --------------------------------------------------------------------------------------


def _config(tmp_path, base, **kw):
    defaults = dict(
        model=base,
        output_dir=str(tmp_path / "out"),
        learning_rate=1e-3,
        per_device_train_batch_size=16,
        logging_steps=10,
        warmup_ratio=0.1,
        log_to_stdout=False,
        num_threads=1,
    )
    defaults.update(kw)
    return ORMTrainConfig(**defaults)


def test_orm_learns_synthetic_preferences(tmp_path, tiny_model_dir):
    """Held-out pairwise accuracy >= 0.9 after 30 steps (~10 s on 2 cores), eval during training, per-subset
    metrics, and the saved model works through AutoModelForSequenceClassification and the source."""
    events = []
    cfg = _config(tmp_path, tiny_model_dir, max_steps=30, eval_steps=15)
    summary = train_orm(
        cfg,
        train_rows=synthetic_preferences(480, seed=1),
        eval_rows=synthetic_preferences(200, seed=2),
        callback=events.append,
    )
    assert summary["eval"]["accuracy"] >= 0.9, summary["eval"]
    assert summary["eval"]["roc_auc"] >= 0.9
    assert set(summary["eval"]["subsets"]) == {"short", "long"}
    assert [e["step"] for e in events if e["event"] == "eval"] == [15, 30]
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "end"
    metrics, rows = evaluate_reward_model(str(tmp_path / "out"), synthetic_preferences(100, seed=3))
    assert metrics["accuracy"] >= 0.9 and len(rows) == 100
    src = RewardModelSource(str(tmp_path / "out"))
    good, bad = synthetic_preferences(1, seed=4)[0]["chosen"], synthetic_preferences(1, seed=4)[0]["rejected"]
    r = src.score_batch([Record(prompt="Q1: ", completion=good), Record(prompt="Q1: ", completion=bad)])
    assert r[0].reward > r[1].reward


def test_orm_pointwise_bce(tmp_path, tiny_model_dir):
    cfg = _config(tmp_path, tiny_model_dir, max_steps=30)
    summary = train_orm(
        cfg,
        train_rows=synthetic_preferences(480, seed=1, kind="pointwise"),
        eval_rows=synthetic_preferences(200, seed=2, kind="pointwise"),
    )
    assert summary["kind"] == "pointwise"
    assert summary["eval"]["accuracy"] >= 0.85 and summary["eval"]["roc_auc"] >= 0.9


def _params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_gradient_accumulation_equals_large_batch(tmp_path, tiny_model_dir):
    rows = synthetic_preferences(8, seed=5)
    a = train_orm(
        _config(tmp_path / "a", tiny_model_dir, max_steps=1, per_device_train_batch_size=8), train_rows=rows
    )
    b = train_orm(
        _config(
            tmp_path / "b",
            tiny_model_dir,
            max_steps=1,
            per_device_train_batch_size=3,
            gradient_accumulation_steps=3,
        ),
        train_rows=rows,
    )
    pa, pb = _params(a["model"]), _params(b["model"])
    for k in pa:
        assert torch.allclose(pa[k], pb[k], atol=1e-6), k


def test_checkpoint_resume_is_exact(tmp_path, tiny_model_dir):
    rows = synthetic_preferences(40, seed=6)
    kw = dict(
        max_steps=6,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        save_steps=2,
        save_total_limit=2,
    )
    full = train_orm(_config(tmp_path / "full", tiny_model_dir, **kw), train_rows=rows)
    part = train_orm(_config(tmp_path / "part", tiny_model_dir, **kw), train_rows=rows, stop_after_steps=4)
    assert part["stopped_early"] and part["steps"] == 4
    ckpts = sorted(p.name for p in (tmp_path / "part" / "out" / "checkpoints").glob("step-*"))
    assert ckpts == ["step-2", "step-4"]
    resumed = train_orm(
        _config(tmp_path / "part", tiny_model_dir, resume_from_checkpoint=True, **kw), train_rows=rows
    )
    assert resumed["steps"] == 6
    pf, pr = _params(full["model"]), _params(resumed["model"])
    for k in pf:
        assert torch.allclose(pf[k], pr[k], atol=1e-6), k


def test_lora_training_saves_merged_model(tmp_path, tiny_model_dir):
    pytest.importorskip("peft")
    from transformers import AutoModelForSequenceClassification

    cfg = _config(tmp_path, tiny_model_dir, max_steps=4, use_lora=True, lora_r=4, save_steps=4)
    summary = train_orm(cfg, train_rows=synthetic_preferences(64, seed=7))
    assert summary["steps"] == 4
    out = tmp_path / "out"
    assert not (out / "adapter_config.json").exists()
    assert (out / "checkpoints" / "step-4" / "model" / "adapter_config.json").exists()
    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert not any("lora" in k for k in model.state_dict())
    # an adapter folder loads too (base + adapter, merged)
    merged, _ = load_reward_model(str(out / "checkpoints" / "step-4" / "model"))
    ids = torch.tensor([[5, 6, 7]])
    assert torch.allclose(merged(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-4)


def test_bf16_autocast_and_gradient_checkpointing_train(tmp_path, tiny_model_dir):
    cfg = _config(
        tmp_path,
        tiny_model_dir,
        max_steps=2,
        per_device_train_batch_size=4,
        bf16=True,
        gradient_checkpointing=True,
    )
    summary = train_orm(
        cfg, train_rows=synthetic_preferences(8, seed=8), eval_rows=synthetic_preferences(4, seed=9)
    )
    assert summary["steps"] == 2 and summary["eval"]["n"] == 4
    assert next(summary["model"].parameters()).dtype == torch.float32
    model = summary["model"]
    assert getattr(model, "is_activation_checkpointing", None) or model.is_gradient_checkpointing
