"""PRIME's implicit PRM (rewardmodels/implicit_prm/, the RL wiring of ``reward.process: implicit_prm``).

Every expected value comes from plain forward passes of the two models, one unpadded sequence at a time
(``_plain_token_rewards``), or from the definitions written out here (the cross-entropy, PRIME's
``batch_norm``), not from the code under test; the advantage is compared with
:func:`rewardlab.core_algos.prime.prime_advantages` on the inputs the run logged.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest
import torch

from rewardlab.cli import main
from rewardlab.core_algos.prime import prime_advantages
from rewardlab.data.tiny import build_tiny_model
from rewardlab.rewardmodels.implicit_prm import (
    CONFIG_FILE,
    ImplicitPRM,
    ImplicitPRMTrainConfig,
    OnlineImplicitPRM,
    collate,
    encode_rows,
    row_label,
    train_implicit_prm,
)
from rewardlab.rl.config import ConfigError, load_config
from rewardlab.rl.trainer import RLTrainer
from rewardlab.rl.update import PolicyUpdate
from rewardlab.types import Record

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROWS = [
    {"prompt": "1+1=", "completion": "2", "label": 1},
    {"prompt": "12+13=", "completion": "25 ok", "label": 0},
    {"prompt": "7-3=", "completion": "four", "label": 1},
]


def _plain_logprobs(model, ids: list[int], start: int) -> torch.Tensor:
    """log p(ids[t] | ids[:t]) for t >= start, from one forward pass over the unpadded sequence."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits[:-1], dim=-1)
    targets = torch.tensor(ids[1:])
    return logp[torch.arange(len(ids) - 1), targets][start - 1 :]


def _plain_token_rewards(model, reference, beta, prompt_ids, completion_ids) -> torch.Tensor:
    """beta * (log pi_phi - log pi_ref) of each completion token, the sequence alone (no padding)."""
    ids = list(prompt_ids) + list(completion_ids)
    start = len(prompt_ids)
    return beta * (_plain_logprobs(model, ids, start) - _plain_logprobs(reference, ids, start))


def _perturbed(model, seed: int, scale: float = 0.05):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * scale)
    return model


# ---- the model ---------------------------------------------------------------------------------------------
def test_token_rewards_are_beta_times_the_log_ratio_of_two_plain_forward_passes(tiny_tokenizer):
    policy, reference = build_tiny_model(seed=0), build_tiny_model(seed=1)
    prm = ImplicitPRM(policy, reference, beta=0.3)
    examples, dropped = encode_rows(ROWS, tiny_tokenizer)
    assert dropped == 0
    batch = collate(examples, tiny_tokenizer.pad_token_id)
    got = prm.token_rewards(batch["input_ids"], batch["attention_mask"], batch["response_mask"]).detach()
    assert got.shape == batch["response_mask"].shape
    for i, ex in enumerate(examples):
        expected = _plain_token_rewards(policy, reference, 0.3, ex.prompt_ids, ex.completion_ids)
        n = len(ex.completion_ids)
        assert torch.allclose(got[i, :n], expected, atol=1e-5), i
        assert torch.all(got[i, n:] == 0)  # padding carries no reward
        assert expected.abs().max() > 1e-3  # two different models: the check is not vacuous
    logits = prm.outcome_logits(batch["input_ids"], batch["attention_mask"], batch["response_mask"])
    assert torch.allclose(logits.detach(), got.sum(-1), atol=1e-6)


def test_a_fresh_prm_gives_exactly_zero_rewards(tiny_tokenizer, tiny_model_dir):
    batch = collate(encode_rows(ROWS, tiny_tokenizer)[0], tiny_tokenizer.pad_token_id)
    args = (batch["input_ids"], batch["attention_mask"], batch["response_mask"])
    for prm in (ImplicitPRM.from_model(build_tiny_model()), ImplicitPRM.from_pretrained(tiny_model_dir)):
        rewards = prm.token_rewards(*args)
        assert torch.equal(rewards, torch.zeros_like(rewards))
        loss, _ = prm.loss(*args, batch["labels"])
        assert loss.item() == pytest.approx(torch.log(torch.tensor(2.0)).item(), abs=1e-7)  # BCE at p = 1/2


def test_save_and_load_give_identical_rewards(tmp_path, tiny_tokenizer, tiny_model_dir):
    batch = collate(encode_rows(ROWS, tiny_tokenizer)[0], tiny_tokenizer.pad_token_id)
    args = (batch["input_ids"], batch["attention_mask"], batch["response_mask"])
    # A PRM copied from a model in memory: the reference is written into the folder.
    in_memory = ImplicitPRM.from_model(build_tiny_model(), beta=0.2, tokenizer=tiny_tokenizer)
    _perturbed(in_memory.model, seed=3)
    # A PRM started from a folder: the saved config names that folder as the reference.
    from_path = ImplicitPRM.from_pretrained(tiny_model_dir, beta=0.1)
    _perturbed(from_path.model, seed=4)
    for name, prm in (("memory", in_memory), ("path", from_path)):
        before = prm.token_rewards(*args).detach()
        assert before.abs().max() > 1e-4
        prm.save_pretrained(tmp_path / name)
        saved = json.loads((tmp_path / name / CONFIG_FILE).read_text())
        loaded = ImplicitPRM.from_pretrained(str(tmp_path / name))
        assert loaded.beta == prm.beta and saved["beta"] == prm.beta
        assert torch.equal(loaded.token_rewards(*args).detach(), before), name
    assert json.loads((tmp_path / "memory" / CONFIG_FILE).read_text())["reference"] == "reference"
    assert json.loads((tmp_path / "path" / CONFIG_FILE).read_text())["reference"] == str(
        Path(tiny_model_dir).resolve()
    )


def test_row_labels_and_the_batch_layout(tiny_tokenizer):
    assert row_label({"label": 1}) == 1.0 and row_label({"label": 0.25}) == 0.25
    assert row_label({"reward": 0.7}) == 1.0 and row_label({"reward": 0.0}) == 0.0
    assert row_label({"reward": -1.0}) == 0.0  # PRIME's binarisation: correct when the score is > 0
    with pytest.raises(ValueError, match=r"label must lie in \[0, 1\]"):
        row_label({"label": 2})
    with pytest.raises(ValueError, match="label"):
        row_label({"prompt": "x", "completion": "y"})
    examples, _ = encode_rows(ROWS, tiny_tokenizer)
    eos = tiny_tokenizer.eos_token_id
    assert examples[0].completion_ids == tiny_tokenizer("2", add_special_tokens=False)["input_ids"] + [eos]
    batch = collate(examples, tiny_tokenizer.pad_token_id)
    widths = [len(e.prompt_ids) for e in examples]
    for i, e in enumerate(examples):  # prompts end where the responses start: the last T columns
        T = batch["response_mask"].shape[1]
        row = batch["input_ids"][i].tolist()
        start = len(row) - T
        assert row[start - len(e.prompt_ids) : start] == e.prompt_ids
        assert row[start : start + len(e.completion_ids)] == e.completion_ids
        assert batch["attention_mask"][i].sum() == len(e.prompt_ids) + len(e.completion_ids)
    assert batch["input_ids"].shape[1] == max(widths) + batch["response_mask"].shape[1]


# ---- training from outcome labels ---------------------------------------------------------------------------
def marker_rows(count: int, seed: int) -> list[dict]:
    """Balanced rows: digits after an addition prompt, label 1 exactly when the completion holds a ``#``."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(3, 6)))
        label = i % 2
        if label:
            at = rng.randint(0, len(digits))
            digits = digits[:at] + "#" + digits[at:]
        rows.append(
            {"prompt": f"{rng.randint(0, 99)}+{rng.randint(0, 99)}=", "completion": digits, "label": label}
        )
    return rows


def test_training_on_outcome_labels_beats_chance_on_held_out_rows(tmp_path, tiny_model_dir):
    held_out = marker_rows(48, seed=2)
    config = ImplicitPRMTrainConfig(
        model=tiny_model_dir,
        output_dir=str(tmp_path / "iprm"),
        learning_rate=1e-3,
        max_steps=20,
        per_device_train_batch_size=16,
        gradient_accumulation_steps=1,
        report_to="none",
        log_to_stdout=False,
    )
    assert config.beta == 0.05  # PRIME's beta_train, kept
    summary = train_implicit_prm(
        config, train_rows=marker_rows(96, seed=1), eval_rows=held_out, progress=False
    )
    # Untrained, every logit is 0 (sigmoid 1/2): accuracy is the base rate 0.5 on these balanced rows. 36 of
    # 48 right by chance has probability < 1e-3.
    assert summary["eval"]["n"] == 48
    assert summary["eval"]["accuracy"] >= 0.75 and summary["eval"]["roc_auc"] >= 0.85, summary["eval"]
    saved = json.loads((tmp_path / "iprm" / CONFIG_FILE).read_text())
    assert saved == {"beta": 0.05, "reference": str(Path(tiny_model_dir).resolve())}  # the frozen start


def test_rm_train_cli_trains_an_implicit_prm(tmp_path, tiny_model_dir, capsys):
    train = tmp_path / "rows.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in marker_rows(24, seed=5)))
    out = tmp_path / "out"
    rc = main(
        [
            "rm", "train", "--type", "implicit_prm", "--model", tiny_model_dir, "--train-file", str(train),
            "--output-dir", str(out), "--max-steps", "2", "--per-device-train-batch-size", "4",
            "--gradient-accumulation-steps", "1", "--eval-fraction", "0.25", "--beta", "0.1",
            "--learning-rate", "1e-3", "--report-to", "none", "--no-progress",
        ]
    )  # fmt: skip
    assert rc == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["event"] == "summary" and summary["steps"] == 2
    assert {"accuracy", "roc_auc", "ece"} <= set(summary["eval"]) and summary["eval"]["n"] == 6
    saved = json.loads((out / CONFIG_FILE).read_text())
    assert saved["beta"] == 0.1
    assert ImplicitPRM.from_pretrained(str(out)).beta == 0.1
    # an option of another trainer is refused in one line
    rc = main(["rm", "train", "--type", "implicit_prm", "--model", tiny_model_dir, "--train-file", str(train),
               "--head", "lm"])  # fmt: skip
    assert rc == 2 and "not an option of rm train --type implicit_prm: --head" in capsys.readouterr().err


# ---- RL ------------------------------------------------------------------------------------------------------
PROMPTS = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(12)]


def has_digit(prompts, completions, references):
    """0/1 outcome: the completion holds a digit (about half of a random tiny model's 8-token samples)."""
    return [1.0 if any(ch.isdigit() for ch in c) else 0.0 for c in completions]


def _rl_cfg(tmp_path, *overrides):
    base = [
        "train.max_steps=1",
        "train.prompts_per_step=3",
        "rollout.n=4",
        "rollout.max_new_tokens=8",
        "train.learning_rate=1e-3",
        "train.per_device_train_batch_size=6",
        "reward.sources=[]",
        "reward.truncation=none",
        "reward.implicit_prm_lr=1e-3",
        "reward.implicit_prm_minibatches=1",
        "algorithm.dynamic_sampling=false",
        "train.report_to=none",
        "run.log_completions=0",
        f"run.output_dir={tmp_path / 'run'}",
    ]
    return load_config(preset="prime", overrides=base + list(overrides))


class _Recorder:
    """Wraps the online PRM's step and the update's advantage stage to keep what they saw."""

    def __init__(self, monkeypatch):
        self.calls: list[dict] = []
        self.advantages: list[dict] = []
        score, advantages = OnlineImplicitPRM.score_and_update, PolicyUpdate.advantages
        recorder = self

        def recorded_score(prm_self, input_ids, attention_mask, response_mask, labels, in_loss):
            before = copy.deepcopy(prm_self.prm.model)
            rewards, stats = score(prm_self, input_ids, attention_mask, response_mask, labels, in_loss)
            recorder.calls.append(
                dict(
                    before=before,
                    after=copy.deepcopy(prm_self.prm.model),
                    reference=prm_self.prm.reference,
                    beta=prm_self.prm.beta,
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    response_mask=response_mask,
                    labels=labels,
                    in_loss=in_loss,
                    rewards=rewards,
                    stats=stats,
                )
            )
            return rewards, stats

        def recorded_advantages(update_self, u, r, process=None):
            advantages(update_self, u, r, process)
            recorder.advantages.append(
                dict(
                    process=process,
                    mask=u.mask.clone(),
                    outcome=r.rewards.clone(),
                    valid=r.valid & r.keep,
                    advantages=u.advantages.clone(),
                )  # fmt: skip
            )

        monkeypatch.setattr(OnlineImplicitPRM, "score_and_update", recorded_score)
        monkeypatch.setattr(PolicyUpdate, "advantages", recorded_advantages)


def _plain_rewards_of(call: dict, model) -> torch.Tensor:
    """Each sample's token rewards under ``model`` and the reference, from plain unpadded passes."""
    out = torch.zeros(call["response_mask"].shape)
    T = call["response_mask"].shape[1]
    for i in range(call["input_ids"].shape[0]):
        ids = call["input_ids"][i][call["attention_mask"][i].bool()].tolist()
        n = int(call["response_mask"][i].sum())
        prompt, completion = ids[: len(ids) - n], ids[len(ids) - n :]
        out[i, :n] = _plain_token_rewards(model, call["reference"], call["beta"], prompt, completion)
    assert out.shape[1] == T
    return out


def _bce(rewards: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean of -y log s(x) - (1 - y) log(1 - s(x)), x the summed token rewards: PRIME's ce loss."""
    p = torch.sigmoid(rewards.sum(-1).double())
    y = labels.double()
    return float((-(y * p.log() + (1 - y) * (1 - p).log())).mean())


def test_rl_step_scores_with_the_prm_before_its_update_and_then_trains_it(tmp_path, monkeypatch):
    rec = _Recorder(monkeypatch)
    cfg = _rl_cfg(
        tmp_path, "train.max_steps=2", "algorithm.prime_rm_coef=2", "algorithm.prime_outcome_coef=3"
    )
    with RLTrainer(cfg, train_records=PROMPTS, eval_records=[], reward_fns=(has_digit,), console=None) as tr:
        last = tr.train()
        trained_policy = tr.policy.state_dict()
    assert len(rec.calls) == 2 and len(rec.advantages) == 2
    # The reference is the policy's initial weights, frozen, while the policy itself moved on.
    start = build_tiny_model(seed=0).state_dict()
    reference = rec.calls[1]["reference"].state_dict()
    assert all(torch.equal(reference[k], start[k]) for k in start)
    assert any(not torch.equal(trained_policy[k], start[k]) for k in start)
    # Step 1 starts from the policy's own weights: every reward is exactly 0. Step 2's PRM has learnt once.
    assert torch.equal(rec.calls[0]["rewards"], torch.zeros_like(rec.calls[0]["rewards"]))
    call, adv = rec.calls[1], rec.advantages[1]
    labels, rows = call["labels"], call["in_loss"].bool()
    assert 0 < labels[rows].sum() < rows.sum()  # both outcomes occur: the loss has something to learn
    assert torch.equal(labels, (adv["outcome"] > 0).float())  # PRIME's binarised outcome
    # The rewards handed to the advantages are the PRM's before this step's update (PRIME's update: after).
    expected = _plain_rewards_of(call, call["before"])
    assert expected.abs().max() > 1e-4
    assert torch.allclose(call["rewards"], expected, atol=1e-5)
    assert not torch.allclose(_plain_rewards_of(call, call["after"]), expected, atol=1e-5)
    # The update moved the weights and lowered the loss on this step's labels.
    changed = [
        not torch.equal(a, b)
        for a, b in zip(call["before"].parameters(), call["after"].parameters(), strict=True)
    ]
    assert any(changed)
    loss_before = _bce(expected[rows], labels[rows])
    loss_after = _bce(_plain_rewards_of(call, call["after"])[rows], labels[rows])
    assert loss_after < loss_before
    assert last["prime/rm_loss"] == pytest.approx(loss_before, abs=1e-5)
    predicted = expected[rows].sum(-1) > 0
    assert last["prime/rm_acc"] == pytest.approx(float((predicted == (labels[rows] > 0.5)).float().mean()))
    mask = call["response_mask"][rows]
    assert last["prime/token_reward_mean"] == pytest.approx(
        float(expected[rows].sum() / mask.sum()), abs=1e-6
    )
    # Process rewards: PRIME's batch_norm of the token rewards, then PRIME's advantage.
    m = adv["mask"]
    raw = call["rewards"] * m
    to_go = raw.flip(-1).cumsum(-1).flip(-1)
    process = raw / (to_go.abs().max() + 1e-6)
    assert process.abs().max() > 0.1  # normalised: the largest return is 1
    assert torch.allclose(adv["process"], process, atol=1e-6)
    want, _ = prime_advantages(
        process, adv["outcome"], m, 4, rm_coef=2.0, outcome_coef=3.0, valid=adv["valid"]
    )
    assert torch.allclose(adv["advantages"], want, atol=1e-5)
    assert adv["advantages"].abs().sum() > 0


def test_a_fixed_prm_only_scores(tmp_path, monkeypatch):
    rec = _Recorder(monkeypatch)
    cfg = _rl_cfg(tmp_path, "reward.implicit_prm_update=false")
    with RLTrainer(cfg, train_records=PROMPTS, eval_records=[], reward_fns=(has_digit,), console=None) as tr:
        last = tr.train()
        assert tr.reward_pipeline.implicit_prm.optimizer is None
    call = rec.calls[0]
    for a, b in zip(call["before"].parameters(), call["after"].parameters(), strict=True):
        assert torch.equal(a, b)
    # from the policy's initial weights and never trained: every reward is exactly 0
    assert torch.equal(call["rewards"], torch.zeros_like(call["rewards"]))
    assert "prime/rm_grad_norm" not in last and last["prime/rm_loss"] == pytest.approx(0.6931472, abs=1e-6)


def _prm_state(run_dir, step):
    prm = ImplicitPRM.from_pretrained(str(run_dir / "checkpoints" / f"step-{step}" / "implicit_prm"))
    state = torch.load(run_dir / "checkpoints" / f"step-{step}" / "trainer_state.pt", weights_only=False)
    return prm.model.state_dict(), state["implicit_prm"]["optimizer"]


def test_checkpoint_and_resume_give_identical_prm_weights(tmp_path):
    common = ["train.max_steps=3", "train.save_total_limit=0", "reward.implicit_prm_minibatches=2"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    kw = dict(train_records=PROMPTS, eval_records=[], reward_fns=(has_digit,), console=None)
    with RLTrainer(_rl_cfg(tmp_path, *common, f"run.output_dir={straight}"), **kw) as tr:
        tr.train()
    cfg = _rl_cfg(tmp_path, *common, f"run.output_dir={resumed}")
    with RLTrainer(cfg, **kw) as tr:
        tr.train(steps=2)
    torch.manual_seed(12345)  # disturb the global RNG: resume must restore it
    with RLTrainer(cfg, **kw) as tr:
        tr.train(resume=True)
    weights_a, opt_a = _prm_state(straight, 3)
    weights_b, opt_b = _prm_state(resumed, 3)
    start = build_tiny_model(seed=0).state_dict()  # the policy's initial weights: where the PRM started
    assert any(not torch.equal(weights_a[k], start[k]) for k in start)
    for key in weights_a:
        assert torch.equal(weights_a[key], weights_b[key]), key
    assert opt_a["state"].keys() == opt_b["state"].keys() and len(opt_a["state"]) > 0
    for key, value in opt_a["state"].items():
        assert torch.equal(value["exp_avg"], opt_b["state"][key]["exp_avg"])
        assert float(value["step"]) == float(opt_b["state"][key]["step"]) == 6  # 2 PRM steps per RL step


def test_prm_path_still_feeds_the_step_return_path(tmp_path, tiny_model_dir):
    """``prm:PATH`` (the step scorer with Clip / Delta shaping, ``grpo_prm``) is untouched by the implicit PRM."""
    from rewardlab.rewardmodels.prm import ProcessRewardModel
    from rewardlab.rl.rewards import load_process_scorer

    cfg = load_config(
        preset="grpo_prm", overrides=[f"reward.process='prm:{tiny_model_dir}'", "reward.sources=[]"]
    )
    assert isinstance(load_process_scorer(cfg), ProcessRewardModel)
    cfg = load_config(
        preset="grpo_prm",
        overrides=[
            f"reward.process='prm:{tiny_model_dir}'",
            "reward.sources=[]",
            "train.max_steps=1",
            "train.prompts_per_step=2",
            "rollout.n=2",
            "rollout.max_new_tokens=8",
            "train.report_to=none",
            "run.log_completions=0",
            f"run.output_dir={tmp_path / 'prm-run'}",
        ],
    )
    with RLTrainer(cfg, train_records=PROMPTS, eval_records=[], reward_fns=(has_digit,), console=None) as tr:
        assert tr.reward_pipeline.implicit_prm is None
        last = tr.train()
    assert "steps/mean_count" in last and not any(k.startswith("prime/") for k in last)


def test_an_implicit_prm_must_read_the_policys_vocabulary(tmp_path):
    from rewardlab.data.tiny import save_tiny_model
    from rewardlab.rl.rewards import load_process_scorer

    other = save_tiny_model(tmp_path / "other", vocab_size=150)
    cfg = load_config(preset="prime", overrides=[f"reward.process='implicit_prm:{other}'"])
    with pytest.raises(ValueError, match=r"vocabulary \(150 tokens\) is not the policy's \(103\)"):
        load_process_scorer(cfg, policy=build_tiny_model())


# ---- config checks -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "preset,overrides,message",
    [
        (
            "grpo",
            ["algorithm.adv_estimator=prime"],
            "algorithm.adv_estimator: prime needs PRIME's implicit PRM",
        ),
        ("prime", ["algorithm.adv_estimator=grpo"], "read by algorithm.adv_estimator: prime, not grpo"),
        ("prime", ["rollout.n=1"], "leave-one-out baseline needs rollout.n >= 2"),
        ("prime", ["reward.process='implicit_prm:'"], "unknown process scorer 'implicit_prm:'"),
        ("prime", ["env.name=tools"], "process rewards are not supported with multi-turn environments"),
        ("prime", ["reward.implicit_prm_beta=0"], "reward.implicit_prm_beta must be > 0"),
        ("prime", ["reward.implicit_prm_granularity=step"], "reward.implicit_prm_granularity: unknown value"),
    ],
)
def test_config_checks_refuse_in_one_line(preset, overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(preset=preset, overrides=overrides)
    assert "\n" not in str(info.value)


def test_the_prime_preset_is_primes_setup():
    cfg = load_config(preset="prime")
    assert cfg.reward.process == "implicit_prm" and cfg.algorithm.adv_estimator == "prime"
    assert (cfg.reward.implicit_prm_beta, cfg.reward.implicit_prm_lr, cfg.reward.implicit_prm_grad_clip) == (
        0.05,
        1e-6,
        10.0,
    )
    assert (cfg.algorithm.prime_rm_coef, cfg.algorithm.prime_outcome_coef, cfg.rollout.n) == (5.0, 5.0, 4)
    assert load_config(preset="prime", overrides=["reward.process='implicit_prm:/some/prm'"])


def test_rm_commands_refuse_an_implicit_prm_folder(tmp_path):
    """An implicit PRM is not an outcome or step reward model: rm score / rm eval / rm: say where it goes."""
    from rewardlab.errors import UserError
    from rewardlab.rewardmodels.sources import IMPLICIT_PRM_CONFIG_FILE, model_kind

    (tmp_path / IMPLICIT_PRM_CONFIG_FILE).write_text("{}")
    for kind in ("auto", "orm", "prm"):
        with pytest.raises(UserError, match="reward.process: implicit_prm:"):
            model_kind(str(tmp_path), kind)
    assert model_kind(str(tmp_path / "missing")) == "orm"
