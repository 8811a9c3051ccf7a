"""Where and in what precision a trainer runs: device, weight dtype, bf16 autocast, the process group."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
BF16_SETTINGS = ("auto", "true", "false")


def bf16_supported() -> bool:
    """True on a CUDA device with bfloat16 arithmetic."""
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def resolve_device(name: str | None = "auto") -> torch.device:
    """``auto`` / ``None``: the CUDA device when there is one (this process's ``LOCAL_RANK`` under torchrun),
    else the CPU; any other name as given."""
    if name and name != "auto":
        return torch.device(name)
    if not torch.cuda.is_available():
        return torch.device("cpu")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        return device
    return torch.device("cuda")


def resolve_dtype(name: str | None) -> torch.dtype | None:
    """``float32`` / ``bfloat16`` / ``float16``; ``auto``: bf16 where the hardware has it, else fp32;
    ``None``: the checkpoint's own dtype (returns ``None``)."""
    if name is None:
        return None
    if name == "auto":
        return torch.bfloat16 if bf16_supported() else torch.float32
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r} (known: auto, {', '.join(DTYPES)})")
    return DTYPES[name]


def use_bf16(setting: str | bool) -> bool:
    """Autocast switch from a config value: ``true`` / ``false`` / ``auto`` (on where bf16 is supported)."""
    if isinstance(setting, bool):
        return setting
    return setting == "true" or (setting == "auto" and bf16_supported())


def autocast(device: torch.device, enabled: bool) -> Any:
    """``torch.autocast`` to bfloat16 when ``enabled``, else a no-op context."""
    if enabled:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def init_distributed() -> bool:
    """Joins the process group ``torchrun`` describes (``RANK``/``WORLD_SIZE``); True when one is active."""
    if not torch.distributed.is_available():
        return False
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ
    if launched and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return torch.distributed.is_initialized()


def set_threads(num_threads: int | None) -> None:
    """``torch.set_num_threads`` when a positive count is given (0 / ``None``: torch's default)."""
    if num_threads:
        torch.set_num_threads(num_threads)
