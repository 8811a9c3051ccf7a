"""``report_to``: the experiment trackers behind ``MetricsLogger`` (TensorBoard, wandb, trackio, MLflow).

Each tracker's metrics are read back from its own files (the TensorBoard events, the offline ``.wandb`` file,
trackio's SQLite store, MLflow's file store) and compared with ``metrics.jsonl``: the same names (after the
documented mapping), steps and values, and the run's config as the tracker's run config. A test is skipped
only when the tracker's package is missing.
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rewardlab.config import ConfigError, dump, load
from rewardlab.errors import UserError
from rewardlab.training.config import REPORT_TO, report_to_names
from rewardlab.training.metrics import MetricsLogger, config_dict, read_metrics, tracker_scalars
from rewardlab.training.trackers import TRACKERS, TensorBoardTracker, WandbTracker, mlflow_key

CONFIG = {
    "model": "tiny",
    "train": {"learning_rate": 1e-3, "betas": [0.9, 0.95], "report_to": ["mlflow"]},
    "notes": "x" * 7000,  # longer than MLflow's param value limit: truncated there
}

STEPS = [
    (0, {"eval/pass@1": 0.125}),
    (1, {"loss": 0.5, "reward": 1, "eval/pass@1": 0.25, "ok": True, "note": "a", "bad": math.nan, "v": [1]}),
    (2, {"event": "train", "loss": 0.25, "accuracy": 0.5, "learning_rate": 1e-4}),
    (2, {"event": "eval", "accuracy": 0.75, "loss": 0.375}),
    (3, {"loss": 0.125, "rewards/fmt@strict/mean": -0.5, "inf": math.inf}),
]


def _log_steps(run_dir: Path, report_to, steps=STEPS, **kw) -> MetricsLogger:
    with MetricsLogger(run_dir, console=None, report_to=report_to, config=CONFIG, **kw) as log:
        log.event("start", examples=3)
        for step, metrics in steps:
            log.log(step, metrics)
    return log


def _expected(run_dir: Path) -> dict[tuple[int, str], float]:
    """(step, tracker name) -> value, from metrics.jsonl."""
    out = {}
    for row in read_metrics(run_dir):
        if "step" in row:
            for name, value in tracker_scalars(row).items():
                out[(row["step"], name)] = value
    return out


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """wandb offline and trackio in tmp_path; MLflow's default store (RUN_DIR/mlruns); no project vars."""
    for var in ("WANDB_PROJECT", "WANDB_NAME", "WANDB_DIR", "WANDB_RUN_ID", "TRACKIO_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_ALLOW_FILE_STORE"):
        monkeypatch.setenv(var, "")  # recorded, so that what the tracker sets is undone after the test
        monkeypatch.delenv(var)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home" / var.lower()))
    return tmp_path


@pytest.fixture(scope="module")
def trackio_dir(tmp_path_factory):
    """trackio's store in a temporary folder: ``TRACKIO_DIR`` is read when trackio is imported."""
    store = tmp_path_factory.mktemp("trackio")
    old = os.environ.get("TRACKIO_DIR")
    os.environ["TRACKIO_DIR"] = str(store)
    pytest.importorskip("trackio")
    for name, module in list(sys.modules.items()):  # trackio imported earlier (another test): point it here
        if name.startswith("trackio") and isinstance(getattr(module, "TRACKIO_DIR", None), Path):
            module.TRACKIO_DIR = store
    yield store
    if old is None:
        os.environ.pop("TRACKIO_DIR", None)
    else:
        os.environ["TRACKIO_DIR"] = old


# ---- reading each tracker's own files ---------------------------------------------------------------------
def read_tensorboard(run_dir: Path) -> tuple[dict[tuple[int, str], float], dict]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    scalars = {(e.step, tag): e.value for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)}
    text = tensor_util.make_ndarray(acc.Tensors("config/text_summary")[0].tensor_proto).item().decode()
    config = yaml.safe_load("\n".join(line[4:] for line in text.splitlines()))
    return scalars, config


def wandb_records(path: Path) -> list:
    """The protobuf records of a ``.wandb`` file (wandb's LevelDB-style log: a 7-byte header, then 32 KiB
    blocks of chunks with a 7-byte header each: CRC32C, length, type full/first/middle/last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pos, pending = [], 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 or pos + 7 + length > len(data):  # the tail wandb's service is still writing
            break
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 2):
            pending = chunk
        elif kind in (3, 4):
            pending += chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def read_wandb(
    run_dir: Path, until: dict[tuple[int, str], float] | None = None
) -> tuple[dict[tuple[int, str], float], dict, list[str]]:
    """Metrics, config and run ids of every offline run file under ``RUN_DIR/wandb``. With ``until``, read
    again for up to 30 s until the metrics equal it: wandb's service process writes the file, and once in
    CI (2 loaded cores) a read right after ``finish()`` found none of the history records yet, once a record
    half written (:func:`wandb_records` stops before a chunk that is not all there)."""
    deadline = time.monotonic() + 30
    found = _read_wandb_files(run_dir)
    while until is not None and found[0] != until and time.monotonic() < deadline:
        time.sleep(0.2)
        found = _read_wandb_files(run_dir)
    return found


def _read_wandb_files(run_dir: Path) -> tuple[dict[tuple[int, str], float], dict, list[str]]:
    metrics, config, ids = {}, {}, []
    paths = sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"), key=lambda p: p.stat().st_mtime_ns)
    for path in paths:  # a resumed run's file last
        for record in wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                ids.append(record.run.run_id)
                for item in record.run.config.update:
                    config[item.key] = json.loads(item.value_json)
            elif kind == "config":
                for item in record.config.update:
                    config[item.key] = json.loads(item.value_json)
            elif kind == "history":
                for item in record.history.item:
                    key = item.key or ".".join(item.nested_key)
                    if not key.startswith("_"):
                        metrics[(record.history.step.num, key)] = json.loads(item.value_json)
    config.pop("_wandb", None)
    return metrics, config, ids


def read_trackio(run_id: str, project: str = "rewardlab") -> tuple[list[dict], dict]:
    from trackio.sqlite_storage import SQLiteStorage

    logs = SQLiteStorage.get_logs(project, run_id=run_id)
    config = SQLiteStorage.get_run_config(project, run_id=run_id) or {}
    return logs, {k: v for k, v in config.items() if not k.startswith("_")}


def trackio_metrics(logs: list[dict]) -> dict[tuple[int, str], float]:
    return {(row["step"], k): v for row in logs for k, v in row.items() if k not in ("step", "timestamp")}


def read_mlflow(state: dict) -> tuple[dict[tuple[int, str], float], dict, object]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=state["tracking_uri"])
    run = client.get_run(state["run_id"])
    metrics = {}
    for key in run.data.metrics:
        for m in client.get_metric_history(state["run_id"], key):
            metrics[(m.step, key)] = m.value
    return metrics, run.data.params, run


def _state(run_dir: Path) -> dict:
    return json.loads((run_dir / "trackers.json").read_text())


# ---- config: report_to ------------------------------------------------------------------------------------
def test_report_to_loads_as_a_list_of_names():
    from rewardlab.rewardmodels.orm.config import ORMTrainConfig
    from rewardlab.rl.config import load_config

    assert set(TRACKERS) == {"tensorboard", "wandb", "trackio", "mlflow"}
    assert REPORT_TO == ("tensorboard", "wandb", "trackio", "mlflow", "none")
    assert load_config().train.report_to == ["tensorboard"]  # the default: as before
    cases = {
        "train.report_to=[wandb,trackio]": ["wandb", "trackio"],
        "train.report_to=[wandb, mlflow, tensorboard]": ["wandb", "mlflow", "tensorboard"],
        "train.report_to=wandb": ["wandb"],
        "train.report_to=tensorboard": ["tensorboard"],
        "train.report_to=none": [],
        "train.report_to=[]": [],
        "train.report_to=[none]": [],
    }
    for override, names in cases.items():
        assert load_config(overrides=[override]).train.report_to == names, override
    assert report_to_names("wandb,trackio") == ["wandb", "trackio"]
    assert report_to_names(None) == [] and report_to_names(["WandB", "wandb"]) == ["wandb"]
    assert load(ORMTrainConfig, {"report_to": "mlflow"}).report_to == ["mlflow"]
    assert ORMTrainConfig(report_to="none").report_to == []
    cfg = ORMTrainConfig()
    cfg.report_to = "trackio"  # an attribute set later is read the same way
    assert cfg.report_to == ["trackio"]
    dumped = yaml.safe_load(dump(ORMTrainConfig(report_to=["wandb", "mlflow"])))
    assert dumped["report_to"] == ["wandb", "mlflow"]
    with pytest.raises(ConfigError) as info:
        load_config(overrides=["train.report_to=[wandb,comet]"])
    assert str(info.value).splitlines() == [
        "train: report_to: unknown value 'comet' (known: tensorboard, wandb, trackio, mlflow, none)"
    ]


def test_no_tracker_library_is_imported_unless_named(tmp_path):
    code = (
        "import sys; from rewardlab.training.metrics import MetricsLogger; import rewardlab.rl.config\n"
        f"MetricsLogger({str(tmp_path)!r}, console=None, report_to='none').log(1, {{'loss': 1.0}})\n"
        "print(sorted(m for m in ('wandb', 'trackio', 'mlflow', 'tensorboard') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_package_is_a_one_line_error_and_tensorboard_a_silent_skip(tmp_path, monkeypatch):
    monkeypatch.setattr(WandbTracker, "available", classmethod(lambda cls: False))
    with pytest.raises(UserError) as info:
        MetricsLogger(tmp_path / "run", console=None, report_to=["tensorboard", "wandb"])
    assert str(info.value) == (
        "report_to: wandb needs the wandb package (the trackers extra: pip install 'rewardlab[trackers]')"
    )
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # refused before anything starts
    monkeypatch.setattr(TensorBoardTracker, "available", classmethod(lambda cls: False))
    with MetricsLogger(tmp_path / "run", console=None, report_to="tensorboard") as log:
        log.log(1, {"loss": 1.0})
    assert log.trackers == [] and not (tmp_path / "run" / "tb").exists()
    with pytest.raises(UserError, match="report_to: mlflow needs an output folder"):
        MetricsLogger(None, console=None, report_to=["mlflow"])
    MetricsLogger(None, console=None).close()  # the default (tensorboard) without a folder: nothing
    with pytest.raises(TypeError, match="not both"):
        MetricsLogger(tmp_path, report_to="none", tensorboard=True)


def test_an_rl_config_naming_a_missing_tracker_is_refused_before_the_model_loads(monkeypatch):
    from rewardlab.rl.config import load_config, validate

    monkeypatch.setattr(WandbTracker, "available", classmethod(lambda cls: False))
    with pytest.raises(
        ConfigError,
        match=r"^train.report_to: wandb needs the wandb package \(the trackers extra: "
        r"pip install 'rewardlab\[trackers\]'\)$",
    ):
        validate(load_config(overrides=["train.report_to=[tensorboard,wandb]"]))


def test_tracker_scalars_and_mlflow_names():
    row = {"step": 2, "event": "eval", "accuracy": 0.75, "eval/loss": 0.3, "ok": True, "nan": math.nan}
    assert tracker_scalars(row) == {"eval/accuracy": 0.75, "eval/loss": 0.3}
    assert tracker_scalars({"step": 1, "event": "train", "loss": 1, "note": "x"}) == {"loss": 1}
    assert mlflow_key("eval/pass@1") == "eval/pass_at_1"
    assert mlflow_key("rewards/a=b (c)/mean") == "rewards/a_b _c_/mean"
    assert mlflow_key("/x//y/") == "x/y"


# ---- each tracker, read back from its own files -----------------------------------------------------------
def test_tensorboard_gets_the_jsonl_metrics_and_the_config(tmp_path):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    _log_steps(run, ["tensorboard"])
    scalars, config = read_tensorboard(run)
    expected = _expected(run)
    assert set(scalars) == set(expected)
    assert (2, "eval/accuracy") in scalars and (2, "accuracy") in scalars  # eval rows: eval/NAME
    for key, value in expected.items():
        assert scalars[key] == pytest.approx(value, rel=1e-6)  # float32 events
    assert config == config_dict(CONFIG)


def test_wandb_offline_run_holds_the_jsonl_metrics_and_the_config(offline):
    pytest.importorskip("wandb")
    run = offline / "run"
    _log_steps(run, ["wandb"])
    metrics, config, ids = read_wandb(run, until=_expected(run))
    assert metrics == _expected(run)
    assert config == config_dict(CONFIG)
    assert ids == [_state(run)["wandb"]["id"]] and _state(run)["wandb"]["project"] == "rewardlab"


def test_trackio_store_holds_the_jsonl_metrics_and_the_config(offline, trackio_dir):
    run = offline / "run"
    log = _log_steps(run, ["trackio"])
    assert log.trackers == ["trackio"]
    logs, config = read_trackio(_state(run)["trackio"]["id"])
    assert trackio_metrics(logs) == _expected(run)
    assert config == config_dict(CONFIG)
    assert (trackio_dir / "rewardlab.db").is_file()


def test_mlflow_run_holds_the_jsonl_metrics_and_the_config_as_params(offline):
    pytest.importorskip("mlflow")
    run = offline / "run"
    _log_steps(run, ["mlflow"])
    state = _state(run)["mlflow"]
    assert state["tracking_uri"] == (run / "mlruns").resolve().as_uri()
    metrics, params, info = read_mlflow(state)
    assert metrics == {(step, mlflow_key(name)): value for (step, name), value in _expected(run).items()}
    assert (0, "eval/pass_at_1") in metrics and (3, "rewards/fmt_at_strict/mean") in metrics
    assert info.info.run_name == "run" and info.info.status == "FINISHED"
    assert params["train.learning_rate"] == "0.001" and params["train.betas"] == "[0.9, 0.95]"
    assert params["train.report_to"] == '["mlflow"]' and params["model"] == "tiny"
    assert params["notes"] == "x" * len(params["notes"]) and 0 < len(params["notes"]) < 7000


# ---- several at once, and resume -----------------------------------------------------------------------------
def test_several_trackers_at_once_and_resume_continues_their_runs(offline, trackio_dir):
    for package in ("tensorboard", "wandb", "mlflow"):
        pytest.importorskip(package)
    run = offline / "run"
    names = ["tensorboard", "wandb", "trackio", "mlflow"]
    first = STEPS[:3]
    log = _log_steps(run, names, steps=first + [(3, {"loss": 9.0})])  # step 3: lost to the interruption
    assert log.trackers == names
    state = _state(run)
    # resumed from the checkpoint of step 2: step 3 again, then 4
    _log_steps(run, names, steps=[(3, {"loss": 0.125}), (4, {"loss": 0.0625})], resume_step=2)
    assert _state(run) == state  # the same runs continue
    expected = _expected(run)
    assert expected[(3, "loss")] == 0.125 and (4, "loss") in expected

    scalars, _ = read_tensorboard(run)  # the resumed writer purged the interrupted run's step 3
    assert set(scalars) == set(expected) and scalars[(3, "loss")] == 0.125

    metrics, _, ids = read_wandb(run, until=expected)  # an offline resume: a second file of the same run id
    assert ids == [state["wandb"]["id"]] * 2
    assert metrics == expected  # the later file's step 3 read last

    logs, _ = read_trackio(state["trackio"]["id"])
    assert {k: v for k, v in trackio_metrics(logs).items() if k != (3, "loss")} == {
        k: v for k, v in expected.items() if k != (3, "loss")
    }
    assert [row["loss"] for row in logs if row["step"] == 3] == [9.0, 0.125]  # both kept

    metrics, _, info = read_mlflow(state["mlflow"])
    assert info.info.status == "FINISHED"
    assert metrics[(4, "loss")] == 0.0625 and metrics[(1, "eval/pass_at_1")] == 0.25

    _log_steps(run, "tensorboard", steps=first)  # a fresh start in the folder: no earlier run ids kept
    assert not (run / "trackers.json").exists()


# ---- real training runs -------------------------------------------------------------------------------------
def test_orm_training_reports_to_mlflow_and_trackio(offline, trackio_dir, tiny_model_dir):
    pytest.importorskip("mlflow")
    from rewardlab.rewardmodels.orm import ORMTrainConfig, synthetic_preferences, train_orm

    out = offline / "orm-run"
    cfg = ORMTrainConfig(
        model=str(tiny_model_dir),
        output_dir=str(out),
        max_steps=2,
        logging_steps=1,
        per_device_train_batch_size=4,
        log_to_stdout=False,
        num_threads=1,
        report_to=["mlflow", "trackio"],
    )
    train_orm(cfg, train_rows=synthetic_preferences(8, seed=1), eval_rows=synthetic_preferences(4, seed=2))
    expected = _expected(out)
    assert {step for step, _ in expected} == {1, 2} and (2, "eval/accuracy") in expected
    state = _state(out)
    metrics, params, _ = read_mlflow(state["mlflow"])
    assert metrics == {(step, mlflow_key(name)): value for (step, name), value in expected.items()}
    assert params["max_steps"] == "2" and params["report_to"] == '["mlflow", "trackio"]'
    logs, config = read_trackio(state["trackio"]["id"])
    assert trackio_metrics(logs) == expected
    assert config == config_dict(cfg)


def test_sft_warm_start_logs_and_reports_to_mlflow(offline, tiny_model, tiny_tokenizer):
    pytest.importorskip("mlflow")
    from rewardlab.rl.sft import SFTConfig, sft

    pairs = [("1+1=", "2"), ("2+2=", "4"), ("3+3=", "6")]
    with pytest.raises(UserError, match="needs an output folder"):
        sft(tiny_model, tiny_tokenizer, pairs, SFTConfig(max_steps=1, report_to=["mlflow"]), log=None)
    out = offline / "sft"
    cfg = SFTConfig(
        max_steps=3, per_device_train_batch_size=2, warmup_steps=0, output_dir=str(out), report_to=["mlflow"]
    )
    losses = sft(tiny_model, tiny_tokenizer, pairs, cfg, log=None)
    rows = read_metrics(out)
    assert [r["step"] for r in rows] == [1, 2, 3] and [r["loss"] for r in rows] == losses
    assert set(rows[0]) == {"step", "loss", "learning_rate", "grad_norm"}
    metrics, params, _ = read_mlflow(_state(out)["mlflow"])
    assert metrics == {(step, mlflow_key(name)): value for (step, name), value in _expected(out).items()}
    assert params["max_steps"] == "3" and params["output_dir"] == str(out)


def test_rl_training_reports_to_tensorboard_and_wandb(offline, tiny_model, tiny_tokenizer):
    for package in ("tensorboard", "wandb"):
        pytest.importorskip(package)
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.types import Record

    out = offline / "rl-run"
    cfg = load_config(
        preset="grpo",
        overrides=[
            "train.max_steps=2",
            "train.prompts_per_step=2",
            "rollout.n=2",
            "rollout.max_new_tokens=4",
            "train.per_device_train_batch_size=4",
            "reward.sources=[]",
            "train.report_to=[tensorboard,wandb]",
            "run.log_completions=0",
            f"run.output_dir={out}",
        ],
    )
    prompts = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(4)]

    def digits(prompts, completions, references):
        return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]

    with RLTrainer(
        cfg,
        train_records=prompts,
        eval_records=[],
        reward_fns=[digits],
        console=None,
        model=tiny_model,
        tokenizer=tiny_tokenizer,
    ) as trainer:
        trainer.train()
    expected = _expected(out)
    assert {step for step, _ in expected} == {1, 2} and (1, "reward") in expected
    saved_config = yaml.safe_load((out / "config.yaml").read_text())
    metrics, config, _ = read_wandb(out, until=expected)
    assert metrics == expected and config == saved_config
    scalars, tb_config = read_tensorboard(out)
    assert set(scalars) == set(expected) and tb_config == saved_config
