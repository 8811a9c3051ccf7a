"""Checkpoints of an RL run: the policy in Hugging Face format plus everything needed to resume exactly.

Layout of ``RUN_DIR/checkpoints/step-N/``:

* ``policy/`` -- ``save_pretrained`` of the policy and its tokenizer: loads with
  ``AutoModelForCausalLM.from_pretrained`` (and in vLLM) directly, no conversion step.
* ``value/`` -- PPO's value model (``value_model.pt``: backbone + head state dict), when there is one.
* ``trainer_state.pt`` -- optimiser(s), LR scheduler(s), RNG states (python, numpy, torch, CUDA), the data
  position, the step, and the KL controller.
* ``config.yaml`` -- the run's config.

``RUN_DIR/checkpoints/latest`` is a text file naming the newest complete checkpoint; it is written last, so
an interrupted save never becomes the resume point.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

LATEST = "latest"


def rng_state() -> dict[str, Any]:
    """The state of every random generator the loop uses."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restores :func:`rng_state`'s output."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    policy: Any,
    tokenizer: Any,
    trainer_state: dict[str, Any],
    value_model: Any | None = None,
    config_yaml: str | None = None,
    keep: int = 2,
) -> Path:
    """Writes ``checkpoints/step-{step}`` and points ``latest`` at it; keeps the newest ``keep`` ones."""
    root = Path(run_dir) / "checkpoints"
    final = root / f"step-{step}"
    tmp = root / f".step-{step}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one "Writing model shards" bar per checkpoint is noise in a run log
    try:
        policy.save_pretrained(tmp / "policy", safe_serialization=True)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp / "policy")
    if value_model is not None:
        (tmp / "value").mkdir()
        torch.save(value_model.state_dict(), tmp / "value" / "value_model.pt")
    torch.save({**trainer_state, "rng": rng_state(), "step": step}, tmp / "trainer_state.pt")
    if config_yaml is not None:
        (tmp / "config.yaml").write_text(config_yaml)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    (root / LATEST).write_text(final.name)
    if keep > 0:
        old = sorted((p for p in root.glob("step-*") if p.is_dir()), key=lambda p: int(p.name.split("-")[1]))
        for path in old[:-keep]:
            shutil.rmtree(path, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or ``None``."""
    root = Path(run_dir) / "checkpoints"
    marker = root / LATEST
    if not marker.exists():
        return None
    path = root / marker.read_text().strip()
    return path if (path / "trainer_state.pt").exists() else None


def load_trainer_state(checkpoint: str | Path) -> dict[str, Any]:
    """The ``trainer_state.pt`` of a checkpoint (RNG states are restored by the caller)."""
    return torch.load(Path(checkpoint) / "trainer_state.pt", map_location="cpu", weights_only=False)


def load_policy_weights(policy: Any, checkpoint: str | Path) -> None:
    """Loads the saved policy's weights into an existing model object (keeps optimiser references valid)."""
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(Path(checkpoint) / "policy", dtype=policy.dtype)
    policy.load_state_dict(saved.state_dict())
