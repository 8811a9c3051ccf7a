"""Every trainer's metrics: one JSON line per step or event, a console line, and the experiment trackers of
``report_to`` (TensorBoard, wandb, trackio, MLflow: :mod:`.trackers`).

RL, ORM, PRM and SFT training all log through :class:`MetricsLogger` into ``OUTPUT_DIR/metrics.jsonl``;
the RL trainer also logs sample completions through :class:`SampleLogger` into ``OUTPUT_DIR/rollouts.jsonl``.
RL names follow TRL's ``GRPOTrainer`` where the quantity is the same (``reward``, ``reward_std``,
``rewards/NAME/mean``, ``frac_reward_zero_std``, ``kl``, ``entropy``, ``clip_ratio/low_mean``,
``clip_ratio/high_mean``, ``completions/mean_length``, ``completions/clipped_ratio``, ``grad_norm``,
``learning_rate``, ``loss``), so runs can be compared across tools. ``docs/rl.md`` explains each one.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from rewardlab.config import to_tree
from rewardlab.errors import UserError
from rewardlab.training.config import report_to_names
from rewardlab.training.trackers import TRACKERS, Tracker, missing_package
from rewardlab.types import jsonable

# Keys printed on the console line, in order (everything goes to the JSONL file).
CONSOLE_KEYS = (
    ("loss", "loss"),
    ("reward", "reward"),
    ("reward_std", "std"),
    ("accuracy", "acc"),
    ("frac_reward_zero_std", "zero_std"),
    ("completions/mean_length", "len"),
    ("completions/clipped_ratio", "trunc"),
    ("env/tool_call_rate", "tools"),
    ("env/answered", "answered"),
    ("kl", "kl"),
    ("entropy", "ent"),
    ("grad_norm", "gnorm"),
    ("learning_rate", "lr"),
    ("eval/pass@1", "eval"),
    ("eval/truncated", "eval_trunc"),
    ("roc_auc", "auc"),
    ("ece", "ece"),
    ("step_f1", "step_f1"),
    ("processbench_f1", "pb_f1"),
    ("timing/step_s", "s"),
)

# Keys whose values differ between two runs of the same seeded config (wall-clock time); a resumed run is
# compared on everything else.
TIMING_PREFIXES = ("timing/", "tokens_per_s", "samples_per_s", "env/tool_seconds", "time")


def is_timing_key(key: str) -> bool:
    """True for wall-clock metrics (excluded when comparing a resumed run with an uninterrupted one)."""
    return key.startswith(TIMING_PREFIXES)


def open_step_log(path: Path, resume_step: int | None) -> TextIO:
    """``path`` (a JSONL file of rows with a ``step``) opened for appending: on resume without the rows of
    steps after ``resume_step`` (the interrupted run wrote them; the resumed run writes them again), on a
    fresh start (``None``) emptied, so that the file holds each step once."""
    if resume_step is not None and path.exists():
        kept = [row for row in read_metrics(path) if row.get("step", 0) <= resume_step]
        path.write_text("".join(json.dumps(row) + "\n" for row in kept))
    elif resume_step is None and path.exists():
        path.unlink()
    return path.open("a")


TRACKER_STATE = "trackers.json"
"""File in the run folder holding each tracker's run id, so that a resumed run continues the same run."""


def tracker_scalars(row: Mapping[str, Any]) -> dict[str, int | float]:
    """What the trackers get of a ``metrics.jsonl`` row: its finite numbers (no booleans, strings, lists),
    under the row's names, except that a row of another event than ``train`` (the reward models' ``eval``
    rows) puts ``EVENT/`` before each name that lacks it (``accuracy`` -> ``eval/accuracy``), so that
    held-out and training metrics of one step stay two series."""
    event = row.get("event")
    prefix = f"{event}/" if isinstance(event, str) and event not in ("", "train") else ""
    out: dict[str, int | float] = {}
    for key, value in row.items():
        if key in ("step", "event") or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value):
            continue
        out[key if not prefix or key.startswith(prefix) else prefix + key] = value
    return out


def config_dict(config: Any) -> dict[str, Any]:
    """A run config (a config dataclass, as ``config.yaml`` holds it, or a mapping) as plain JSON data."""
    if config is None:
        return {}
    tree = jsonable(to_tree(config))
    return tree if isinstance(tree, dict) else {"config": tree}


class MetricsLogger:
    """Writes each step's metrics to ``RUN_DIR/metrics.jsonl``, the console and the trackers of
    ``report_to``.

    Args:
        run_dir: The run folder (``None``: console only; a tracker other than tensorboard is then an error).
        console: Stream for the one-line summaries (``None``: silent).
        report_to: Tracker names (:data:`~rewardlab.training.trackers.TRACKERS`: ``tensorboard``, ``wandb``,
            ``trackio``, ``mlflow``), a single name, or ``none``; ``None``: as ``tensorboard`` says. A tracker
            whose package is missing is a :class:`~rewardlab.errors.UserError` naming it, except tensorboard
            (skipped silently).
        config: The run's config (a config dataclass or a mapping): each tracker's run config.
        tensorboard: The former switch (``report_to=None`` only): ``True`` (default) is
            ``["tensorboard"]``, ``False`` no tracker.
        resume_step: On resume, lines of steps after this one (from the interrupted run) are dropped so the
            file holds each step once, and the trackers continue their runs (``RUN_DIR/trackers.json``).
        log_every: Console line every this many steps (the file gets every step).
    """

    def __init__(
        self,
        run_dir: str | Path | None,
        *,
        console: TextIO | None = sys.stdout,
        report_to: str | Sequence[str] | None = None,
        config: Any = None,
        tensorboard: bool | None = None,
        resume_step: int | None = None,
        log_every: int = 1,
    ) -> None:
        self.console = console
        self.log_every = max(1, log_every)
        self._file: TextIO | None = None
        self._trackers: list[Tracker] = []
        self.trackers: list[str] = []  # the names of the trackers it writes to
        if report_to is None:
            names = [] if tensorboard is False else ["tensorboard"]
        elif tensorboard is not None:
            raise TypeError("MetricsLogger: give report_to or tensorboard, not both")
        else:
            names = report_to_names(report_to)
        classes = [TRACKERS.get(name) for name in names]
        problem = missing_package(names)
        if problem:
            raise UserError(problem)
        classes = [cls for cls in classes if cls.available()]
        if run_dir is None:
            needing = [cls.name for cls in classes if not cls.optional]
            if needing:
                raise UserError(f"report_to: {', '.join(needing)} needs an output folder (output_dir)")
            return
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        self._file = open_step_log(self.path, resume_step)
        if resume_step is None:  # a fresh start: new tracker runs, none of an earlier run's ids
            (self.run_dir / TRACKER_STATE).unlink(missing_ok=True)
        if classes:
            try:
                self._start_trackers(classes, config_dict(config), resume_step)
            except BaseException:
                self.close()
                raise

    def _start_trackers(
        self, classes: list[type[Tracker]], config: dict[str, Any], resume_step: int | None
    ) -> None:
        state_path = self.run_dir / TRACKER_STATE
        saved: dict[str, Any] = {}
        if resume_step is not None and state_path.is_file():
            try:
                saved = json.loads(state_path.read_text())
            except json.JSONDecodeError:
                saved = {}
        state = dict(saved)
        run_name = self.run_dir.resolve().name
        for cls in classes:
            tracker = cls()
            try:
                kept = tracker.start(
                    self.run_dir, run_name, config, resume_step=resume_step, saved=saved.get(cls.name)
                )
            except Exception:
                if cls.optional:  # tensorboard unusable: JSONL and console only, as before
                    continue
                raise
            self._trackers.append(tracker)
            self.trackers.append(cls.name)
            if kept:
                state[cls.name] = jsonable(kept)
        if state:
            state_path.write_text(json.dumps(state, indent=2) + "\n")

    def _write(self, row: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def event(self, name: str, **fields: Any) -> None:
        """Records a run event that belongs to no step (``start``, ``end``): JSONL and the console."""
        self._write({k: jsonable(v) for k, v in {"event": name, **fields}.items()})
        if self.console is not None:
            print(
                f"[{name}] " + json.dumps({k: jsonable(v) for k, v in fields.items()}),
                file=self.console,
                flush=True,
            )

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Records the metrics of ``step``: every value in the file, the finite numbers in the trackers
        (:func:`tracker_scalars`)."""
        row = {k: jsonable(v) for k, v in {"step": step, **metrics}.items()}
        self._write(row)
        scalars = tracker_scalars(row) if self._trackers else {}
        if scalars:
            for tracker in self._trackers:
                tracker.log(step, scalars)
        if self.console is not None and (step % self.log_every == 0 or "eval/pass@1" in metrics):
            print(format_line(step, metrics), file=self.console, flush=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        trackers, self._trackers = self._trackers, []
        for tracker in trackers:
            try:
                tracker.finish()
            except Exception as exc:  # one tracker failing to finish leaves the others to finish
                warnings.warn(f"report_to: {tracker.name} did not finish cleanly: {exc}", stacklevel=2)

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SampleLogger:
    """Writes logged samples (the RL trainer's ``rollouts.jsonl``: one JSON line per completion, each with
    its ``step``) for viewers; flushed after each step so a run in progress can be read.

    Args:
        path: The JSONL file (its folder is created).
        resume_step: As :class:`MetricsLogger`'s: on resume, rows of later steps are dropped; ``None`` starts
            the file anew.
    """

    def __init__(self, path: str | Path, *, resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = open_step_log(self.path, resume_step)

    def log(self, rows: Iterable[dict[str, Any]]) -> None:
        """Appends ``rows`` (made JSON-able) and flushes."""
        if self._file is None:
            return
        self._file.writelines(json.dumps({k: jsonable(v) for k, v in row.items()}) + "\n" for row in rows)
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> SampleLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def format_line(step: int, metrics: dict[str, Any]) -> str:
    """The console summary of one step."""
    parts = [f"step {step:>4}"]
    if metrics.get("event") not in (None, "train"):
        parts.append(str(metrics["event"]))  # e.g. "eval": the numbers after it are held-out metrics
    for key, label in CONSOLE_KEYS:
        value = metrics.get(key)
        if value is None or isinstance(value, bool):
            continue
        if key == "learning_rate":
            parts.append(f"{label} {value:.1e}")
        elif isinstance(value, float):
            parts.append(f"{label} {value:.3f}" if abs(value) < 100 else f"{label} {value:.0f}")
        else:
            parts.append(f"{label} {value}")
    warn = metrics.get("warning")
    if warn:
        parts.append(f"WARNING: {warn}")
    return " | ".join(parts)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` file (a run folder is accepted too)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            rows.append(json.loads(line))
    return rows
