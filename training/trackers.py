"""Experiment trackers: where :class:`~rewardlab.training.metrics.MetricsLogger` sends each step's scalars
besides ``metrics.jsonl`` and the console (a config's ``report_to``, as transformers'
``TrainingArguments.report_to``).

One class per tracker behind one interface (:class:`Tracker`: ``start``, ``log``, ``finish``), each driving
its own library, imported only when the tracker is named (``rewardlab --help`` imports none of them):

* ``tensorboard`` -- ``torch.utils.tensorboard.SummaryWriter``: events in ``RUN_DIR/tb``, the config as the
  text ``config`` (its YAML); skipped silently when tensorboard is not installed;
* ``wandb`` -- ``wandb.init(project, name, dir=RUN_DIR, config)``: ``RUN_DIR/wandb`` (``WANDB_DIR`` wins);
* ``trackio`` -- ``trackio.init(project, name, config)``: trackio's own store (``TRACKIO_DIR``, by default
  ``$HF_HOME/trackio``), one SQLite file per project;
* ``mlflow`` -- an ``MlflowClient`` run: ``MLFLOW_TRACKING_URI``, else the file store ``RUN_DIR/mlruns``; the
  flattened config as the run's params.

Project: ``rewardlab`` unless ``WANDB_PROJECT`` / ``TRACKIO_PROJECT`` / ``MLFLOW_EXPERIMENT_NAME`` says
otherwise; run name: the run folder's name (``WANDB_NAME`` wins for wandb). docs/rl.md, "Experiment
trackers", has the details (resume, name mapping).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from rewardlab.extras import install_hint
from rewardlab.registry import Registry

PROJECT = "rewardlab"
"""The project (wandb, trackio) or experiment (MLflow) of a run when the tracker's variable is unset."""


class Tracker:
    """One experiment tracker. ``start`` opens the run, ``log`` records one step's finite scalars (already
    filtered: the names and steps of ``metrics.jsonl``), ``finish`` closes it.

    A subclass names the module it imports (``module``) and the pip package that provides it (``package``);
    an ``optional`` tracker is skipped silently when the module is missing, any other is a one-line error.
    """

    name: ClassVar[str] = ""
    module: ClassVar[str] = ""
    package: ClassVar[str] = ""
    optional: ClassVar[bool] = False

    @classmethod
    def available(cls) -> bool:
        """Whether the tracker's library is installed (without importing it)."""
        try:
            return importlib.util.find_spec(cls.module) is not None
        except (ImportError, ValueError):
            return False

    def start(
        self,
        run_dir: Path,
        run_name: str,
        config: dict[str, Any],
        *,
        resume_step: int | None = None,
        saved: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Opens the run. ``resume_step`` (a resumed run: the checkpoint's step) and ``saved`` (what this
        method returned when the run first started, from ``RUN_DIR/trackers.json``) continue it; returns
        what a later resume needs (a run id), ``{}`` when nothing."""
        raise NotImplementedError

    def log(self, step: int, metrics: dict[str, float]) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        raise NotImplementedError


TRACKERS: Registry[type[Tracker]] = Registry("tracker")
"""``report_to`` name -> :class:`Tracker` class."""


def missing_package(names: list[str]) -> str | None:
    """The one-line problem of the first named tracker whose library is not installed (tensorboard, which
    is optional, never is one); ``None`` when all are. Checked without importing anything, so a run config
    can be refused before its model loads."""
    for name in names:
        cls = TRACKERS.get(name)
        if not cls.optional and not cls.available():
            hint = install_hint("trackers")
            return f"report_to: {cls.name} needs the {cls.package} package (the trackers extra: {hint})"
    return None


def _project(variable: str) -> str:
    return os.environ.get(variable) or PROJECT


def config_yaml(config: Mapping[str, Any]) -> str:
    """The run config as YAML (what ``config.yaml`` holds)."""
    import yaml

    return yaml.safe_dump(json.loads(json.dumps(dict(config), default=str)), sort_keys=False)


@TRACKERS.register("tensorboard")
class TensorBoardTracker(Tracker):
    """TensorBoard events in ``RUN_DIR/tb``; a resumed run purges the interrupted run's later steps
    (``purge_step``). The config is the text summary ``config`` (its YAML, as a Markdown code block)."""

    name = "tensorboard"
    module = "tensorboard"
    package = "tensorboard"
    optional = True

    def start(self, run_dir, run_name, config, *, resume_step=None, saved=None):
        from torch.utils.tensorboard import SummaryWriter

        purge = None if resume_step is None else resume_step + 1
        self.writer = SummaryWriter(str(Path(run_dir) / "tb"), purge_step=purge)
        if resume_step is None and config:
            text = "\n".join("    " + line for line in config_yaml(config).splitlines())
            self.writer.add_text("config", text, global_step=0)
        return {}

    def log(self, step, metrics):
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)

    def finish(self):
        self.writer.close()


@TRACKERS.register("wandb")
class WandbTracker(Tracker):
    """A Weights & Biases run (``wandb.init``; ``WANDB_MODE=offline`` writes only ``RUN_DIR/wandb``). Its id
    is kept in ``RUN_DIR/trackers.json``; a resumed run continues it (``resume="allow"``)."""

    name = "wandb"
    module = "wandb"
    package = "wandb"

    def start(self, run_dir, run_name, config, *, resume_step=None, saved=None):
        import wandb

        run_id = (saved or {}).get("id") if resume_step is not None else None
        self.run = wandb.init(
            project=_project("WANDB_PROJECT"),
            name=os.environ.get("WANDB_NAME") or run_name,
            dir=None if os.environ.get("WANDB_DIR") else str(run_dir),
            id=run_id,
            config=config,
            resume="allow" if run_id else None,
            allow_val_change=True if run_id else None,
            reinit="create_new",
        )
        return {"id": self.run.id, "project": self.run.project}

    def log(self, step, metrics):
        self.run.log(metrics, step=step)

    def finish(self):
        self.run.finish()


@TRACKERS.register("trackio")
class TrackioTracker(Tracker):
    """A trackio run in trackio's own store (``TRACKIO_DIR``, by default ``$HF_HOME/trackio``; a Space
    with ``TRACKIO_SPACE_ID``). A resumed run continues the latest run of the same name (``resume="allow"``).
    trackio itself renames its reserved keys (``time``, ``step``, ``run``, ``project``, ``timestamp``,
    ``metrics``) to ``__KEY``."""

    name = "trackio"
    module = "trackio"
    package = "trackio"

    def start(self, run_dir, run_name, config, *, resume_step=None, saved=None):
        import trackio

        self.run = trackio.init(
            project=_project("TRACKIO_PROJECT"),
            name=run_name,
            config=config,
            resume="allow" if resume_step is not None else "never",
            embed=False,
        )
        return {"id": self.run.id, "project": self.run.project}

    def log(self, step, metrics):
        self.run.log(metrics, step=step)

    def finish(self):
        import trackio

        current = getattr(getattr(trackio, "context_vars", None), "current_run", None)
        if current is not None and current.get() is self.run:
            trackio.finish()  # also clears trackio's current run
        else:
            self.run.finish()


_MLFLOW_BAD = re.compile(r"[^\w./\- :]")


def mlflow_key(name: str) -> str:
    """``name`` as an MLflow metric or param key: MLflow takes letters, digits, ``_ - . / :`` and spaces,
    so ``@`` becomes ``_at_`` (``eval/pass@1`` -> ``eval/pass_at_1``) and any other character ``_``;
    slashes that would make a path (leading, trailing, doubled) are dropped."""
    key = _MLFLOW_BAD.sub("_", name.replace("@", "_at_"))
    key = re.sub(r"/{2,}", "/", key).strip("/")
    return key[:250] or "_"


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as ``a.b.c`` keys (lists and other values stay leaves)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


@TRACKERS.register("mlflow")
class MLflowTracker(Tracker):
    """An MLflow run through ``MlflowClient`` (no global active run is touched): tracking URI
    ``MLFLOW_TRACKING_URI``, else the file store ``RUN_DIR/mlruns`` (with ``MLFLOW_ALLOW_FILE_STORE=true``
    set by default, which MLflow 3 asks for); experiment ``MLFLOW_EXPERIMENT_NAME`` or ``rewardlab``. The
    flattened config is the run's params (values longer than MLflow's limit truncated); keys go through
    :func:`mlflow_key`. The run id is kept in ``RUN_DIR/trackers.json``; a resumed run continues it."""

    name = "mlflow"
    module = "mlflow"
    package = "mlflow"

    def start(self, run_dir, run_name, config, *, resume_step=None, saved=None):
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = (Path(run_dir) / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        self.run_id = None
        saved = saved or {}
        if resume_step is not None and saved.get("run_id") and saved.get("tracking_uri") == uri:
            try:
                self.client.update_run(saved["run_id"], status="RUNNING")
                self.run_id = saved["run_id"]
            except Exception:  # the stored run is gone: a new one
                self.run_id = None
        if self.run_id is None:
            name = _project("MLFLOW_EXPERIMENT_NAME")
            experiment = self.client.get_experiment_by_name(name)
            experiment_id = (
                experiment.experiment_id if experiment is not None else self.client.create_experiment(name)
            )
            self.run_id = self.client.create_run(experiment_id, run_name=run_name).info.run_id
            self._log_params(config)
        return {"run_id": self.run_id, "tracking_uri": uri}

    def _log_params(self, config: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        try:
            from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH as limit
        except ImportError:
            limit = 500
        params = {}
        for key, value in flatten(config).items():
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            params[mlflow_key(key)] = text[:limit]
        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow's batch limit for params
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log(self, step, metrics):
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(mlflow_key(k), float(v), now, step) for k, v in metrics.items()]
        for i in range(0, len(items), 1000):  # MLflow's batch limit for metrics
            self.client.log_batch(self.run_id, metrics=items[i : i + 1000])

    def finish(self):
        self.client.set_terminated(self.run_id, status="FINISHED")


__all__ = [
    "PROJECT",
    "TRACKERS",
    "MLflowTracker",
    "TensorBoardTracker",
    "Tracker",
    "TrackioTracker",
    "WandbTracker",
    "config_yaml",
    "flatten",
    "mlflow_key",
]
