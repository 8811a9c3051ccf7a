"""The shared training layer: schedules, checkpoints (layout, keep-last-N, exact resume of the PRM), the
metrics logger and the config convention every trainer uses."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rewardlab.config import ConfigError, attribute_docs, load
from rewardlab.training import CheckpointManager, MetricsLogger, build_scheduler, read_metrics
from rewardlab.training.optim import lr_multiplier


# ---- schedules: the formulas the trainers used before they shared one builder ----------------------------
def _rl_lambda(step, schedule, warmup, total):
    if warmup and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return {"linear": 1.0 - progress, "cosine": 0.5 * (1 + math.cos(math.pi * progress))}.get(schedule, 1.0)


def _sft_lambda(step, warmup, horizon, min_ratio):
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, horizon - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def _prm_lambda(step, warmup, total):
    if warmup and step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
@pytest.mark.parametrize("warmup", [0, 3])
def test_schedules_equal_the_former_rl_formulas(schedule, warmup):
    for step in range(25):
        ours = lr_multiplier(step, schedule=schedule, warmup_steps=warmup, total_steps=20)
        assert ours == pytest.approx(_rl_lambda(step, schedule, warmup, 20), abs=1e-12)


def test_schedules_equal_the_former_sft_and_prm_formulas():
    for step in range(40):
        sft = lr_multiplier(step, schedule="cosine", warmup_steps=5, total_steps=30, min_lr_ratio=0.1)
        assert sft == pytest.approx(_sft_lambda(step, 5, 30, 0.1), abs=1e-12)
    for step in range(20):
        prm = lr_multiplier(step, schedule="linear", warmup_steps=2, total_steps=20)
        assert prm == pytest.approx(_prm_lambda(step, 2, 20), abs=1e-12)


def test_transformers_library_is_get_scheduler():
    from transformers import get_scheduler

    def lrs(sched, opt):
        out = []
        for _ in range(10):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return out

    opt_a = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    opt_b = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    ours = build_scheduler(opt_a, "linear", warmup_steps=2, total_steps=10, library="transformers")
    ref = get_scheduler("linear", opt_b, num_warmup_steps=2, num_training_steps=10)
    assert lrs(ours, opt_a) == lrs(ref, opt_b)
    with pytest.raises(ValueError, match="unknown schedule"):
        lr_multiplier(0, schedule="cosinee", warmup_steps=0, total_steps=1)


# ---- checkpoints ---------------------------------------------------------------------------------------------
def test_checkpoint_layout_keep_last_and_latest(tmp_path):
    manager = CheckpointManager(tmp_path, keep=2)
    module = torch.nn.Linear(2, 1)
    for step in (1, 2, 3):
        manager.save(step, models={"value": module}, state={"x": step}, config_yaml="a: 1\n")
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step-2", "step-3"]
    assert manager.latest() == root / "step-3"
    assert (root / "step-3" / "value" / "value_model.pt").is_file()
    assert (root / "step-3" / "config.yaml").read_text() == "a: 1\n"
    # An interrupted save (a temporary folder, no marker update) is never the resume point.
    (root / ".step-4.tmp").mkdir()
    assert manager.resolve(True) == root / "step-3"
    assert manager.resolve(None) is None
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        CheckpointManager(tmp_path / "empty").resolve("latest")
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        manager.resolve(str(root / "step-1"))


def test_metrics_logger_events_and_resume(tmp_path, capsys):
    import sys

    with MetricsLogger(tmp_path, console=sys.stdout, tensorboard=False) as log:
        log.event("start", examples=3)
        log.log(1, {"event": "train", "loss": 0.5})
        log.log(2, {"event": "eval", "accuracy": 0.75})
    out = capsys.readouterr().out
    assert "[start]" in out and "step    2 | eval | acc 0.750" in out
    with MetricsLogger(tmp_path, console=None, tensorboard=False, resume_step=1) as log:
        log.log(2, {"loss": 0.25})
    rows = read_metrics(tmp_path)
    assert [r.get("event") for r in rows] == ["start", "train", None]
    assert [r.get("step") for r in rows] == [None, 1, 2]


# ---- config convention ------------------------------------------------------------------------------------
def test_flat_configs_load_yaml_and_overrides(tmp_path):
    from rewardlab.rewardmodels.orm.config import ORMTrainConfig
    from rewardlab.rewardmodels.prm.train import PRMTrainConfig
    from rewardlab.rl.sft import SFTConfig

    for cls in (ORMTrainConfig, PRMTrainConfig, SFTConfig):
        docs = attribute_docs(cls)
        assert set(docs) == set(cls.__dataclass_fields__), cls
        assert all(docs.values()), cls
    cfg = load(ORMTrainConfig, {"learning_rate": "5e-5", "save_steps": 2}, overrides=["max_steps=7"])
    assert cfg.learning_rate == 5e-5 and cfg.save_steps == 2 and cfg.max_steps == 7
    assert load(ORMTrainConfig, {"resume_from_checkpoint": True}).resume_from_checkpoint is True
    with pytest.raises(ConfigError, match="unknown key 'lr'"):
        load(ORMTrainConfig, overrides=["lr=1"])
    with pytest.raises(ConfigError, match="expected an integer"):
        load(PRMTrainConfig, {"per_device_train_batch_size": "eight"})


def test_rm_train_set_overrides_and_bad_keys(tmp_path, tiny_model_dir, capsys):
    import json

    from rewardlab.cli import main
    from rewardlab.rewardmodels.orm import synthetic_preferences

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in synthetic_preferences(16, seed=1)))
    args = ["rm", "train", "--model", str(tiny_model_dir), "--train-file", str(data), "--num-threads", "1"]
    out = tmp_path / "rm"
    rc = main([*args, "--output-dir", str(out), "--set", "max_steps=2", "--set", "save_steps=1"])
    assert rc == 0
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*")) == ["step-1", "step-2"]
    assert "max_steps: 2" in (out / "checkpoints" / "step-2" / "config.yaml").read_text()
    capsys.readouterr()
    assert main([*args, "--output-dir", str(out), "--set", "learning_rat=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown key 'learning_rat'" in err


# ---- exact resume of PRM training ----------------------------------------------------------------------
def test_prm_training_resumes_exactly(tmp_path, tiny_model_dir):
    from rewardlab.rewardmodels.prm.synthetic import make_arithmetic_examples
    from rewardlab.rewardmodels.prm.train import PRMTrainConfig, train_prm

    examples = make_arithmetic_examples(20, seed=3)
    torch.set_num_threads(1)

    def config(out, **kw):
        # 20 examples in micro-batches of 4: 5 per epoch; 3 epochs = 15 steps; the interruption at step 7
        # falls inside the second epoch.
        return PRMTrainConfig(
            model=str(tiny_model_dir), output_dir=str(out), per_device_train_batch_size=4, epochs=3, learning_rate=3e-3,
            warmup_ratio=0.2, save_steps=3, save_total_limit=2, device="cpu", **kw,
        )  # fmt: skip

    full = train_prm(config(tmp_path / "full"), train_examples=examples, eval_examples=examples[:4])
    part = train_prm(config(tmp_path / "part"), train_examples=examples, stop_after_steps=7)
    assert len(part.history) == 7
    ckpts = sorted(p.name for p in (tmp_path / "part" / "checkpoints").glob("step-*"))
    assert ckpts == ["step-6", "step-7"]
    torch.manual_seed(999)  # disturb the global RNG: the checkpoint's must win
    resumed = train_prm(
        config(tmp_path / "part", resume_from_checkpoint=True),
        train_examples=examples,
        eval_examples=examples[:4],
    )
    assert [h["step"] for h in resumed.history] == list(range(1, 16))
    for a, b in zip(full.history, resumed.history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-6) and a["lr"] == pytest.approx(b["lr"])
    full_params, resumed_params = full.prm.model.state_dict(), resumed.prm.model.state_dict()
    for key, value in full_params.items():
        assert torch.allclose(value, resumed_params[key], atol=1e-6), key
    steps = [r["step"] for r in read_metrics(tmp_path / "part") if "loss" in r]
    assert steps == list(range(1, 16))


# ---- one base training config: renamed fields still load, unsupported ones are refused ----------------------
def test_every_trainer_config_shares_the_base_fields():
    from rewardlab.rewardmodels.orm.config import ORMTrainConfig
    from rewardlab.rewardmodels.prm.config import PRMTrainConfig
    from rewardlab.rl.config import TrainConfig
    from rewardlab.rl.sft import SFTConfig
    from rewardlab.training.config import BaseTrainingConfig

    base = {f.name for f in dataclasses.fields(BaseTrainingConfig)}
    assert {
        "learning_rate",
        "per_device_train_batch_size",
        "logging_steps",
        "save_steps",
        "report_to",
    } <= base
    for cls in (ORMTrainConfig, PRMTrainConfig, SFTConfig, TrainConfig):
        assert issubclass(cls, BaseTrainingConfig) and base <= set(cls.__dataclass_fields__), cls
    # each keeps its own defaults
    assert (ORMTrainConfig().learning_rate, PRMTrainConfig().learning_rate) == (1e-4, 2e-5)
    assert (SFTConfig().learning_rate, TrainConfig().learning_rate) == (3e-3, 1e-6)


@pytest.mark.parametrize(
    "cls_path, old, new",
    [
        (
            "rewardlab.rl.sft:SFTConfig",
            {"steps": 5, "batch_size": 4, "lr": 1e-3, "schedule": "constant", "log_every": 0},
            {
                "max_steps": 5,
                "per_device_train_batch_size": 4,
                "learning_rate": 1e-3,
                "lr_scheduler_type": "constant",
                "logging_steps": 0,
            },
        ),
        (
            "rewardlab.rewardmodels.prm.config:PRMTrainConfig",
            {"batch_size": 4, "grad_accum": 2, "eval_every": 3, "log_every": 1, "tensorboard": False},
            {
                "per_device_train_batch_size": 4,
                "gradient_accumulation_steps": 2,
                "eval_steps": 3,
                "logging_steps": 1,
                "report_to": "none",
            },
        ),
        ("rewardlab.rewardmodels.orm.config:ORMTrainConfig", {"tensorboard": False}, {"report_to": "none"}),
    ],
)
def test_old_names_load_with_a_warning(cls_path, old, new):
    from rewardlab.registry import lazy

    cls = lazy(cls_path)
    expected = cls(**new)
    for (name, value), (new_name, new_value) in zip(old.items(), new.items(), strict=True):  # YAML / mapping
        with pytest.warns(FutureWarning, match=rf"{name} is deprecated: use {new_name}"):
            assert load(cls, {name: value}) == load(cls, {new_name: new_value})
    with pytest.warns(FutureWarning, match="is deprecated: use"):
        assert load(cls, old) == expected
    with pytest.warns(FutureWarning, match="is deprecated: use"):  # --set
        assert load(cls, overrides=[f"{k}={str(v).lower()}" for k, v in old.items()]) == expected
    with pytest.warns(FutureWarning, match="is deprecated: use"):  # keyword arguments
        assert cls(**old) == expected
    first = next(iter(old))
    with pytest.raises(ConfigError, match="both given"), pytest.warns(FutureWarning):
        load(cls, {first: old[first], **new})


def test_old_attribute_names_read_and_write_the_new_field():
    from rewardlab.rl.sft import SFTConfig

    cfg = SFTConfig()
    with pytest.warns(FutureWarning, match="lr is deprecated: use learning_rate"):
        cfg.lr = 0.5
    assert cfg.learning_rate == 0.5
    with pytest.warns(FutureWarning, match="batch_size is deprecated"):
        assert cfg.batch_size == cfg.per_device_train_batch_size


@pytest.mark.parametrize(
    "cls_path, values, message",
    [
        ("rewardlab.rl.sft:SFTConfig", {"save_steps": 5}, "save_steps=5 is not supported"),
        (
            "rewardlab.rl.sft:SFTConfig",
            {"report_to": ["tensorboard", "comet"]},
            "report_to: unknown value 'comet' \\(known: tensorboard, wandb, trackio, mlflow, none\\)",
        ),
        ("rewardlab.rl.sft:SFTConfig", {"gradient_accumulation_steps": 2}, "not supported"),
        (
            "rewardlab.rewardmodels.orm.config:ORMTrainConfig",
            {"report_to": "comet"},
            "report_to: unknown value 'comet'",
        ),
        (
            "rewardlab.rewardmodels.prm.config:PRMTrainConfig",
            {"warmup_steps": 2, "warmup_ratio": 0.1},
            "both set",
        ),
    ],
)
def test_fields_a_trainer_cannot_honour_are_refused(cls_path, values, message):
    from rewardlab.registry import lazy

    cls = lazy(cls_path)
    with pytest.raises(ConfigError, match=message) as info:
        load(cls, values)
    assert len(str(info.value).splitlines()) == 1
    with pytest.raises(ValueError, match=message):
        cls(**values)


def test_rm_train_old_flags_still_parse(tmp_path, capsys):
    from rewardlab.cli import main

    args = ["rm", "train", "--type", "prm", "--model", str(tmp_path / "none"), "--train-file", "x.jsonl"]
    with pytest.warns(FutureWarning, match="batch_size is deprecated: use per_device_train_batch_size"):
        assert main([*args, "--batch-size", "4"]) == 2  # the missing model stops it after the config loaded
    assert "model" in capsys.readouterr().err
    assert (
        main(["rm", "train", "--type", "orm", "--model", "m", "--train-file", "x", "--grad-accum", "2"]) == 2
    )
    assert "not an option of" in capsys.readouterr().err
