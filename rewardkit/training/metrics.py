"""Every trainer's metrics: one JSON line per step or event, a console line, TensorBoard when installed.

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
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from rewardkit.types import jsonable

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


class MetricsLogger:
    """Writes each step's metrics to ``RUN_DIR/metrics.jsonl``, the console and TensorBoard.

    Args:
        run_dir: The run folder (``None``: console only).
        console: Stream for the one-line summaries (``None``: silent).
        tensorboard: Also write TensorBoard events (skipped silently when tensorboard is missing).
        resume_step: On resume, lines of steps after this one (from the interrupted run) are dropped so the
            file holds each step once.
        log_every: Console line every this many steps (the file gets every step).
    """

    def __init__(
        self,
        run_dir: str | Path | None,
        *,
        console: TextIO | None = sys.stdout,
        tensorboard: bool = True,
        resume_step: int | None = None,
        log_every: int = 1,
    ) -> None:
        self.console = console
        self.log_every = max(1, log_every)
        self._file: TextIO | None = None
        self._tb = None
        if run_dir is None:
            return
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        self._file = open_step_log(self.path, resume_step)
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.run_dir / "tb"))
            except Exception:  # tensorboard not installed: JSONL and console only
                self._tb = None

    def _write(self, row: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps({k: jsonable(v) for k, v in row.items()}) + "\n")
        self._file.flush()

    def event(self, name: str, **fields: Any) -> None:
        """Records a run event that belongs to no step (``start``, ``end``): JSONL and the console."""
        self._write({"event": name, **fields})
        if self.console is not None:
            print(
                f"[{name}] " + json.dumps({k: jsonable(v) for k, v in fields.items()}),
                file=self.console,
                flush=True,
            )

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Records the metrics of ``step``."""
        self._write({"step": step, **metrics})
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
        if self.console is not None and (step % self.log_every == 0 or "eval/pass@1" in metrics):
            print(format_line(step, metrics), file=self.console, flush=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._tb is not None:
            self._tb.close()

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
