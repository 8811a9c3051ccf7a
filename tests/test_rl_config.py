"""RL config tree: presets, YAML, --set overrides, documentation of every field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from rewardlab.config import check_fields, option
from rewardlab.config import field_docs as core_field_docs
from rewardlab.rl.config import (
    PRESETS,
    ConfigError,
    RLConfig,
    config_from_dict,
    dump_config,
    field_docs,
    load_config,
    preset_yaml,
)

CONFIG_DIR = Path(__file__).resolve().parent.parent / "rl" / "configs"


def test_defaults_and_every_field_documented():
    cfg = RLConfig()
    assert cfg.rollout.n == 8 and cfg.algorithm.adv_estimator == "grpo"
    docs = field_docs()
    assert len(docs) > 60
    missing = [name for name, doc, _ in docs if not doc]
    assert not missing, f"fields without a docstring: {missing}"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_load_and_match_shipped_yaml(name):
    cfg = load_config(preset=name)
    assert cfg.preset == name
    shipped = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())
    assert shipped == yaml.safe_load(preset_yaml(name))
    assert load_config(CONFIG_DIR / f"{name}.yaml") == cfg


def test_paper_defaults():
    grpo, dapo, dr = load_config(preset="grpo"), load_config(preset="dapo"), load_config(preset="dr_grpo")
    assert grpo.algorithm.kl_coef == 0.04 and grpo.algorithm.loss_agg_mode == "seq-mean-token-mean"
    assert (dapo.algorithm.clip_ratio_low, dapo.algorithm.clip_ratio_high) == (0.2, 0.28)
    assert (
        dapo.algorithm.dynamic_sampling and dapo.algorithm.kl_coef == 0 and dapo.reward.truncation == "mask"
    )
    assert dapo.algorithm.loss_agg_mode == "token-mean"
    assert dr.algorithm.adv_estimator == "dr_grpo" and dr.algorithm.loss_agg_mode == "seq-mean-token-sum-norm"
    ppo = load_config(preset="ppo")
    assert ppo.algorithm.adv_estimator == "gae" and ppo.train.epochs == 4


def test_overrides_types_and_precedence(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text('preset: dapo\nrollout:\n  n: 6\n  stop: ["\\n"]\ntrain:\n  learning_rate: 3.0e-6\n')
    cfg = load_config(
        path,
        overrides=[
            "algorithm.kl_coef=0.01",
            "rollout.n=4",
            "algorithm.clip_ratio_c=3",
            "reward.truncation=penalize",
            "train.adam_beta1=0.9",
            "train.adam_beta2=0.95",
            "algorithm.dynamic_sampling=false",
        ],
    )
    assert cfg.preset == "dapo" and cfg.algorithm.clip_ratio_high == 0.28  # from the preset
    assert cfg.train.learning_rate == 3e-6 and cfg.rollout.stop == ["\n"]  # from the file
    assert cfg.rollout.n == 4 and cfg.algorithm.kl_coef == 0.01  # overrides win
    assert cfg.algorithm.clip_ratio_c == 3.0 and isinstance(cfg.algorithm.clip_ratio_c, float)
    assert (cfg.train.adam_beta1, cfg.train.adam_beta2) == (0.9, 0.95)
    assert cfg.algorithm.dynamic_sampling is False
    assert (
        load_config(preset="grpo", overrides=["algorithm.clip_ratio_c=null"]).algorithm.clip_ratio_c is None
    )


@pytest.mark.parametrize(
    "override, message",
    [
        ("algorithm.kl_cof=0.1", "unknown key 'kl_cof'"),
        ("algo.kl_coef=0.1", "unknown config section"),
        ("rollout.n=many", "expected an integer"),
        ("algorithm.kl_coef", "not KEY=VALUE"),
    ],
)
def test_bad_overrides_are_user_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


def test_unknown_key_in_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  learning_rat: 1e-6\n")
    with pytest.raises(ConfigError, match="learning_rat"):
        load_config(path)
    with pytest.raises(ConfigError, match="unknown preset"):
        load_config(preset="nope")


def test_dump_roundtrip(tmp_path):
    cfg = load_config(preset="rloo", overrides=["rollout.n=3"])
    path = tmp_path / "dump.yaml"
    dump_config(cfg, path)
    assert load_config(path) == cfg


# ---- validation at load: one line, before any model loads ------------------------------------------------
@pytest.mark.parametrize(
    "override, message",
    [
        ("algorithm.adv_estimator=grpoo", "algorithm.adv_estimator: unknown value 'grpoo'"),
        ("algorithm.policy_loss=ppoo", "algorithm.policy_loss: unknown value 'ppoo'"),
        ("algorithm.loss_agg_mode=mean", "algorithm.loss_agg_mode: unknown value"),
        ("algorithm.kl_estimator=k4", "algorithm.kl_estimator: unknown value"),
        ("algorithm.kl_ctrl=pid", "algorithm.kl_ctrl: unknown value"),
        ("reward.truncation=maskk", "reward.truncation: unknown value 'maskk'"),
        ("reward.step_shaping=clamp", "reward.step_shaping: unknown value"),
        ("rollout.backend=sglang", "rollout.backend: unknown value"),
        ("train.lr_scheduler_type=step", "train.lr_scheduler_type: unknown value"),
        ("train.learning_rate=-1e-6", "train.learning_rate must be > 0"),
        ("rollout.n=0", "rollout.n must be at least 1"),
        ("rollout.top_p=0", r"rollout.top_p must be in \(0, 1\]"),
        ("reward.timeout=.inf", "reward.timeout must be a positive number"),
        ("algorithm.clip_ratio_c=1.0", "algorithm.clip_ratio_c must be > 1"),
        ("run.device=gpu0", "run.device: 'gpu0' is not a device"),
        ("reward.sources=[{name: mathh}]", "unknown reward source 'mathh'"),
        ("reward.sources=[{name: 'py:no_such_module_xyz:fn'}]", "cannot import 'no_such_module_xyz:fn'"),
        ("reward.process=prm", "unknown process scorer 'prm'"),
        ("reward.process='py:no_such_module_xyz:Scorer'", "cannot import"),
        ("reward.shaping=[{name: clip, lo: 0, hi: 1}]", "clamp"),
        ("reward.shaping=[{name: group_norm}]", "group"),
        ("reward.overlong_buffer=999", "must not exceed rollout.max_new_tokens"),
    ],
)
def test_bad_values_fail_when_the_config_loads(override, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(preset="grpo", overrides=[override])
    assert "\n" not in str(info.value)


def test_step_return_refuses_batch_scale():
    with pytest.raises(ConfigError, match="step_return scales by the group"):
        load_config(preset="grpo_prm", overrides=["algorithm.adv_scale=batch"])


def test_allowed_values_in_the_docs_come_from_the_registries():
    from rewardlab import core_algos as ca

    docs = {name: doc for name, doc, _ in field_docs()}
    for name in ca.ADVANTAGE_ESTIMATORS.names():
        assert f"``{name}``" in docs["algorithm.adv_estimator"]
    for name in ca.POLICY_LOSSES.names():
        assert f"``{name}``" in docs["algorithm.policy_loss"]
    assert "One of: ``mask``" in docs["reward.truncation"] or "``mask``" in docs["reward.truncation"]


def test_rl_train_refuses_a_bad_name_before_loading_a_model(tmp_path, capsys, monkeypatch):
    import transformers

    from rewardlab.cli import main
    from rewardlab.rl.trainer import RLTrainer

    loaded = []  # what a model load would go through: the trainer, and transformers' loader

    def trainer_built(self, *args, **kwargs):
        loaded.append("RLTrainer")
        raise AssertionError("a trainer was built")

    def model_loaded(*args, **kwargs):
        loaded.append("from_pretrained")
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(RLTrainer, "__init__", trainer_built)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", model_loaded)
    rc = main(
        ["rl", "train", "--preset", "grpo", "-o", str(tmp_path), "--set", "algorithm.adv_estimator=grpoo"]
    )
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "grpoo" in err
    assert loaded == []  # refused before any model was loaded (a check, not a stopwatch)
    assert not any(tmp_path.iterdir())


def test_docs_reference_table_is_generated_from_the_config():
    from rewardlab.rl.config import reference_table

    docs = (Path(__file__).resolve().parent.parent / "docs" / "rl.md").read_text()
    assert reference_table() in docs, (
        "regenerate docs/rl.md's table with rewardlab.rl.config.reference_table()"
    )


# ---- renamed fields: the shared training fields of rewardlab.training.config.BaseTrainingConfig --------------
OLD_AND_NEW = [
    ("train.lr=3e-6", "train.learning_rate=3e-6"),
    ("train.lr_schedule=cosine", "train.lr_scheduler_type=cosine"),
    ("train.steps=7", "train.max_steps=7"),
    ("train.micro_batch_size=4", "train.per_device_train_batch_size=4"),
    ("run.save_every=5", "train.save_steps=5"),
    ("run.keep_checkpoints=0", "train.save_total_limit=0"),
    ("run.eval_every=3", "train.eval_steps=3"),
    ("run.log_every=2", "train.logging_steps=2"),
    ("run.tensorboard=false", "train.report_to=none"),
    ("algorithm.prompt_filter=band", "algorithm.prompt_filter.mode=band"),
    ("algorithm.prompt_filter_low=0.3", "algorithm.prompt_filter.low=0.3"),
    ("algorithm.prompt_filter_high=0.7", "algorithm.prompt_filter.high=0.7"),
    ("algorithm.prompt_filter_window=3", "algorithm.prompt_filter.window=3"),
    ("algorithm.prompt_filter_max_draws=2", "algorithm.prompt_filter.max_draws=2"),
    ("algorithm.greso_p_easy=0.4", "algorithm.prompt_filter.p_easy=0.4"),
    ("algorithm.greso_p_hard=0.6", "algorithm.prompt_filter.p_hard=0.6"),
    ("algorithm.greso_target_zero_var=0.3", "algorithm.prompt_filter.target_zero_var=0.3"),
]


@pytest.mark.parametrize("old, new", OLD_AND_NEW)
def test_old_names_load_with_a_warning(tmp_path, old, new):
    old_key = old.partition("=")[0]
    with pytest.warns(FutureWarning, match=rf"{old_key} is deprecated: use {new.partition('=')[0]}"):
        via_set = load_config(preset="grpo", overrides=[old])
    assert via_set == load_config(preset="grpo", overrides=[new])
    section, _, key = old_key.partition(".")
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({section: {key: yaml.safe_load(old.partition("=")[2])}}))
    with pytest.warns(FutureWarning, match="is deprecated: use"):
        assert load_config(path) == load_config(overrides=[new])


def test_old_betas_and_attribute_names():
    with pytest.warns(FutureWarning, match="train.betas is deprecated: use train.adam_beta1/adam_beta2"):
        cfg = load_config(overrides=["train.betas=[0.9, 0.95]", "run.save_every=4", "run.tensorboard=false"])
    assert cfg == load_config(
        overrides=["train.adam_beta2=0.95", "train.save_steps=4", "train.report_to=none"]
    )
    assert (cfg.train.adam_beta1, cfg.train.adam_beta2) == (0.9, 0.95)
    with pytest.warns(FutureWarning, match="lr is deprecated: use learning_rate"):
        assert cfg.train.lr == cfg.train.learning_rate  # a plain rename still reads, with the warning
    path_both = {"train": {"lr": 1e-6, "learning_rate": 2e-6}}
    with (
        pytest.raises(ConfigError, match="train.lr and train.learning_rate both given"),
        pytest.warns(FutureWarning),
    ):
        config_from_dict(path_both)


def test_old_flat_prompt_filter_keys_load_into_the_section(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("algorithm:\n  prompt_filter: greso\n  greso_p_easy: 0.3\n  prompt_filter_max_draws: 2\n")
    with pytest.warns(FutureWarning) as warned:
        old = load_config(path)
    assert {str(w.message) for w in warned} == {
        "algorithm.prompt_filter is deprecated: use algorithm.prompt_filter.mode",
        "algorithm.greso_p_easy is deprecated: use algorithm.prompt_filter.p_easy",
        "algorithm.prompt_filter_max_draws is deprecated: use algorithm.prompt_filter.max_draws",
    }
    new = ["algorithm.prompt_filter.mode=greso", "algorithm.prompt_filter.p_easy=0.3"]
    assert old == load_config(overrides=[*new, "algorithm.prompt_filter.max_draws=2"])
    with pytest.warns(FutureWarning), pytest.raises(ConfigError, match="prompt_filter_low and .* both given"):
        config_from_dict({"algorithm": {"prompt_filter_low": 0.3, "prompt_filter": {"low": 0.4}}})


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.gradient_accumulation_steps=2", "train: gradient_accumulation_steps=2 is not supported"),
        ("train.warmup_ratio=0.1", "train: warmup_ratio=0.1 is not supported: use train.warmup_steps"),
        ("train.adam_epsilon=1e-6", "train: adam_epsilon=1e-06 is not supported"),
        ("train.report_to=comet", "report_to: unknown value 'comet' \\(known: tensorboard, wandb, trackio"),
        ("train.report_to=[wandb, comet]", "report_to: unknown value 'comet'"),
    ],
)
def test_training_fields_rl_cannot_honour_are_refused(override, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(overrides=[override])
    assert len(str(info.value).splitlines()) == 1
    assert "gradient_accumulation_steps" not in dump_config(RLConfig())  # not offered either


# ---- the core's option(): a field's bounds and allowed values, checked and documented from the field -------
@dataclasses.dataclass
class _Inner:
    k: int = option(2, ge=1)
    """How many."""


@dataclasses.dataclass
class _Toy:
    p: float = option(0.5, ge=0, le=1)
    """A share."""
    mode: str = option("a", choices=lambda: ["a", "b"])
    """The mode."""
    limit: int | None = option(None, ge=0, note="0 or null: all")
    """A limit."""
    inner: _Inner = dataclasses.field(default_factory=_Inner)
    """Nested."""


def test_an_option_is_checked_and_documented_from_the_field():
    check_fields(_Toy())
    with pytest.raises(ConfigError, match=r"^p must be in \[0, 1\], got 2$"):
        check_fields(_Toy(p=2))
    with pytest.raises(ConfigError, match=r"^p must be in \[0, 1\], got nan$"):
        check_fields(_Toy(p=float("nan")))
    with pytest.raises(ConfigError, match=r"^mode: unknown value 'c' \(known: a, b\)$"):
        check_fields(_Toy(mode="c"))
    with pytest.raises(ConfigError, match=r"^limit must be >= 0 \(0 or null: all\), got -1$"):
        check_fields(_Toy(limit=-1))
    with pytest.raises(ConfigError, match=r"^inner.k must be at least 1, got 0$"):
        check_fields(_Toy(inner=_Inner(0)))
    assert {name: doc for name, doc, _ in core_field_docs(_Toy)} == {
        "p": "A share. Must be in [0, 1].",
        "mode": "The mode. One of: ``a``, ``b``.",
        "limit": "A limit. Must be >= 0 (0 or null: all).",
        "inner.k": "How many. Must be at least 1.",
    }
