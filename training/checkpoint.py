"""Checkpoints of every trainer (RL, ORM, PRM): one layout, exact resume, the newest N kept.

Layout of ``OUTPUT_DIR/checkpoints/step-N/``:

* one folder per model, named by the trainer (``policy/`` and ``value/`` for RL, ``model/`` for reward
  models), written by the model's own ``save_pretrained`` (so it loads with ``from_pretrained``, and in
  vLLM, directly; a peft model writes its adapter) or, for a plain ``nn.Module``, as ``NAME_model.pt``.
  The RL policy with LoRA is two folders (:func:`rewardlab.training.lora.checkpoint_models`): ``policy/``
  holds the merged model (a plain transformers folder) and ``adapter/`` peft's adapter, which resume loads;
* ``trainer_state.pt`` -- optimiser(s), scheduler(s), every RNG state (python, numpy, torch, CUDA), the step,
  the data position and whatever else the trainer needs to continue exactly;
* ``config.yaml`` -- the run's config.

``OUTPUT_DIR/checkpoints/latest`` names the newest complete checkpoint. A checkpoint is written under a
temporary name and renamed, and ``latest`` is written last, so an interrupted save is never resumed from.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .lora import is_peft_model, load_adapter_weights

CHECKPOINTS = "checkpoints"
LATEST = "latest"
STATE_FILE = "trainer_state.pt"
CONFIG_FILE = "config.yaml"


def rng_state() -> dict[str, Any]:
    """The state of every random generator a training loop uses."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
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


def _save_model(
    model: Any, path: Path, tokenizer: Any | None, state_dict: dict[str, torch.Tensor] | None = None
) -> None:
    if hasattr(model, "save_pretrained"):
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # one "Writing model shards" bar per checkpoint is noise in a log
        try:
            model.save_pretrained(path, **({"state_dict": state_dict} if state_dict is not None else {}))
        finally:
            if bars:
                hf_logging.enable_progress_bar()
    else:
        path.mkdir(parents=True, exist_ok=True)
        torch.save(state_dict if state_dict is not None else model.state_dict(), _module_file(path))
    if tokenizer is not None:
        tokenizer.save_pretrained(path)


def _module_file(folder: Path) -> Path:
    return folder / f"{folder.name}_model.pt"


def step_of(path: Path) -> int:
    """The step of a ``step-N`` checkpoint folder."""
    return int(path.name.split("-", 1)[1])


class CheckpointManager:
    """Saves and finds the checkpoints of one output folder.

    Args:
        output_dir: The run's output folder (checkpoints go to ``output_dir/checkpoints``).
        keep: How many of the newest checkpoints to keep (``None`` or 0: all).
    """

    def __init__(self, output_dir: str | Path, keep: int | None = 2) -> None:
        self.root = Path(output_dir) / CHECKPOINTS
        self.keep = keep

    def path(self, step: int) -> Path:
        return self.root / f"step-{step}"

    def save(
        self,
        step: int,
        *,
        models: Mapping[str, Any],
        state: dict[str, Any],
        tokenizer: Any | None = None,
        config_yaml: str | None = None,
        state_dicts: Mapping[str, dict[str, torch.Tensor]] | None = None,
    ) -> Path:
        """Writes ``step-{step}`` (the tokenizer goes into the first model's folder) and points ``latest``
        at it; older checkpoints beyond ``keep`` are deleted. ``state_dicts`` (by model name) are written
        instead of the models' own (a sharded model's weights gathered by
        :func:`rewardlab.training.parallel.full_state_dict`)."""
        final, tmp = self.path(step), self.root / f".step-{step}.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        for i, (name, model) in enumerate(models.items()):
            _save_model(model, tmp / name, tokenizer if i == 0 else None, (state_dicts or {}).get(name))
        torch.save({**state, "rng": rng_state(), "step": step}, tmp / STATE_FILE)
        if config_yaml is not None:
            (tmp / CONFIG_FILE).write_text(config_yaml)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        (self.root / LATEST).write_text(final.name)
        self._prune()
        return final

    def _prune(self) -> None:
        if not self.keep:
            return
        done = sorted((p for p in self.root.glob("step-*") if (p / STATE_FILE).is_file()), key=step_of)
        for path in done[: -self.keep]:
            shutil.rmtree(path, ignore_errors=True)

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or ``None``."""
        marker = self.root / LATEST
        if not marker.exists():
            return None
        path = self.root / marker.read_text().strip()
        return path if (path / STATE_FILE).exists() else None

    def resolve(self, spec: str | bool | Path | None) -> Path | None:
        """The checkpoint a ``resume`` setting names: ``True`` / ``"latest"`` -> :meth:`latest`, a path ->
        that folder, ``None`` / ``False`` -> no resume. Raises ``FileNotFoundError`` when there is none."""
        if spec is None or spec is False or spec == "":
            return None
        path = self.latest() if spec is True or spec == "latest" else Path(str(spec))
        if path is None or not (path / STATE_FILE).is_file():
            where = self.root if path is None else path
            raise FileNotFoundError(f"no checkpoint to resume from in {where}")
        return path


def load_state(checkpoint: str | Path) -> dict[str, Any]:
    """A checkpoint's ``trainer_state.pt``, after restoring the RNG states it holds."""
    state = torch.load(Path(checkpoint) / STATE_FILE, map_location="cpu", weights_only=False)
    set_rng_state(state["rng"])
    return state


def load_module_weights(module: torch.nn.Module, folder: str | Path) -> None:
    """Loads a plain module's ``NAME_model.pt`` (written by :meth:`CheckpointManager.save`) into ``module``."""
    module.load_state_dict(torch.load(_module_file(Path(folder)), weights_only=True))


def load_pretrained_weights(model: Any, folder: str | Path) -> None:
    """Loads a ``save_pretrained`` folder's weights into an existing model object, in place (so optimiser
    references to its parameters stay valid); a peft model loads its adapter from an adapter folder."""

    if is_peft_model(model):
        load_adapter_weights(model, folder)
        return
    saved = type(model).from_pretrained(folder, dtype=model.dtype)
    model.load_state_dict(saved.state_dict())


def read_weights(model: Any, folder: str | Path) -> dict[str, torch.Tensor]:
    """The whole-model state dict a checkpoint folder holds for ``model``: its ``save_pretrained`` folder
    (loaded with the model's class and dtype, the class before any ``fully_shard``) or ``NAME_model.pt``."""
    if not hasattr(model, "save_pretrained"):
        return torch.load(_module_file(Path(folder)), weights_only=True)
    return _unsharded_class(model).from_pretrained(folder, dtype=model.dtype).state_dict()


def _unsharded_class(model: Any) -> type:
    """``type(model)``, or for a model ``fully_shard`` wrapped (class ``FSDP<Name>``) the class it wrapped."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch build without torch.distributed
        return type(model)
    return next(c for c in type(model).__mro__ if not issubclass(c, FSDPModule))
