"""Data parallelism for every trainer: DDP or FSDP2 (``fully_shard``) behind the same few calls.

* :func:`wrap_model` -- DDP, or FSDP2 applied to each decoder layer (the classes a Hugging Face model names
  in ``_no_split_modules``) and then the root; a model with nothing to train is left alone under DDP;
* :func:`no_sync` -- gradient accumulation without communication (DDP's ``no_sync``, FSDP2's
  ``set_requires_gradient_sync(False)``);
* :func:`gathered` -- every parameter all-gathered once, for many forward passes without collectives
  (generation: ranks may then decode different numbers of tokens);
* :func:`full_state_dict` / :func:`load_weights` -- the whole model on rank 0 (CPU) for a Hugging Face
  checkpoint, and a checkpoint folder read on rank 0 and scattered back into the shards;
* :func:`optimizer_state_dict` / :func:`load_optimizer_state_dict` -- the optimiser state for exact resume
  (under FSDP gathered whole and keyed by parameter name, so a checkpoint does not depend on the world size).

Every function is a no-op or the plain call for an unwrapped model, so a trainer calls them unconditionally.
FSDP2 runs on CPU with gloo (checked with torch 2.13: tests/test_rl_fsdp.py) as well as on GPUs with NCCL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rewardlab.training.checkpoint import load_module_weights, load_pretrained_weights, read_weights

STRATEGIES = ("ddp", "fsdp")


def wrap_model(
    model: nn.Module,
    strategy: str,
    device: torch.device,
    *,
    mixed_precision: bool = False,
    cpu_offload: bool = False,
) -> nn.Module:
    """The module to run forward / backward with under ``strategy`` (an initialised process group).

    ``ddp``: a ``DistributedDataParallel`` wrapper (``model`` itself when it has nothing to train).
    ``fsdp``: ``model`` sharded in place (``fully_shard`` per decoder layer, then the root) and returned;
    ``mixed_precision`` computes in bf16 and reduces gradients in fp32, ``cpu_offload`` keeps the sharded
    parameters, gradients and optimiser state in CPU memory.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
    if strategy == "fsdp":
        return shard_model(model, device, mixed_precision=mixed_precision, cpu_offload=cpu_offload)
    if not any(p.requires_grad for p in model.parameters()):
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


def shard_model(
    model: nn.Module, device: torch.device, *, mixed_precision: bool = False, cpu_offload: bool = False
) -> nn.Module:
    """``fully_shard`` on every decoder layer, then on ``model`` (which keeps what is left: embeddings,
    final norm, head); the parameters become DTensors sharded over all ranks, on ``device``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    kwargs: dict[str, Any] = {
        "mesh": init_device_mesh(device.type, (torch.distributed.get_world_size(),)),
        "offload_policy": CPUOffloadPolicy(pin_memory=device.type == "cuda")
        if cpu_offload
        else OffloadPolicy(),
    }
    if mixed_precision:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in decoder_layers(model):
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The submodules to shard one by one: instances of the classes a Hugging Face model lists in
    ``_no_split_modules`` (e.g. ``Qwen2DecoderLayer``), found at any depth (a value model's body too)."""
    names: set[str] = set()
    for module in model.modules():
        names.update(getattr(module, "_no_split_modules", None) or ())
    return [m for m in model.modules() if m is not model and type(m).__name__ in names]


def is_sharded(model: Any) -> bool:
    """True for a module :func:`shard_model` (``fully_shard``) has wrapped."""
    if not torch.distributed.is_available():
        return False
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def unwrap(model: Any) -> Any:
    """The module inside a DDP wrapper (any other model as it is)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    return model.module if isinstance(model, DDP) else model


def no_sync(model: Any) -> Any:
    """A context in which backward accumulates gradients locally, without the all-reduce (DDP) or
    reduce-scatter (FSDP) that the next backward outside it does for all of them."""
    if is_sharded(model):
        return _fsdp_no_sync(model)
    return model.no_sync() if hasattr(model, "no_sync") else contextlib.nullcontext()


@contextlib.contextmanager
def _fsdp_no_sync(model: Any) -> Iterator[None]:
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


@contextlib.contextmanager
def gathered(model: Any) -> Iterator[None]:
    """Every FSDP parameter all-gathered on entry and kept through any number of forward passes (none of
    which communicates), resharded on exit. Generation needs it: ranks decode different numbers of tokens,
    and per-layer all-gathers in each forward would not line up. Costs the full model's memory while open."""
    if not is_sharded(model):
        yield
        return
    from torch.distributed.fsdp import FSDPModule

    modules = [m for m in model.modules() if isinstance(m, FSDPModule)]
    for m in modules:
        m.set_reshard_after_forward(False, recurse=False)
        m.unshard()
    try:
        yield
    finally:
        for m in modules:
            m.reshard()
            # fully_shard's default: the root stays gathered after forward (backward starts with it)
            m.set_reshard_after_forward(m is not model, recurse=False)


def _full_options(**kwargs: bool) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kwargs)


def full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The whole model's weights: under FSDP gathered to rank 0's CPU memory (a collective: every rank
    calls it; the others get ``{}``), otherwise the unwrapped module's ``state_dict()``."""
    if not is_sharded(model):
        return unwrap(model).state_dict()
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model, options=_full_options(cpu_offload=True))


def load_full_state_dict(model: Any, state_dict: dict[str, torch.Tensor]) -> None:
    """Loads a whole-model state dict in place; under FSDP rank 0's is scattered into every rank's shards
    (the others may pass ``{}``)."""
    if not is_sharded(model):
        unwrap(model).load_state_dict(state_dict)
        return
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    set_model_state_dict(model, state_dict, options=_full_options(broadcast_from_rank0=True))


def load_weights(model: Any, folder: str | Path) -> None:
    """Loads a checkpoint folder (``save_pretrained``'s, or a plain module's ``NAME_model.pt``) into
    ``model`` in place, so optimiser references stay valid; under FSDP only rank 0 reads it."""
    model = unwrap(model)
    if not is_sharded(model):
        loader = load_pretrained_weights if hasattr(model, "save_pretrained") else load_module_weights
        loader(model, folder)
        return
    load_full_state_dict(model, read_weights(model, folder) if torch.distributed.get_rank() == 0 else {})


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value (a collective), any other tensor as it is."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def optimizer_state_dict(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimiser's state for a checkpoint: ``optimizer.state_dict()``; under FSDP gathered whole to
    rank 0's CPU memory and keyed by parameter name (a collective: every rank calls it)."""
    if not is_sharded(model):
        return optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer, options=_full_options(cpu_offload=True))


def load_optimizer_state_dict(model: Any, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Restores :func:`optimizer_state_dict`'s output, whichever strategy wrote it (a state keyed by
    parameter position is renamed for FSDP, one keyed by name loads into an unsharded model too)."""
    by_name = any(isinstance(k, str) for k in state.get("state", {})) or any(
        isinstance(p, str) for g in state.get("param_groups", []) for p in g["params"]
    )
    if not is_sharded(model) and not by_name:
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

    if not by_name:
        state = _keyed_by_name(model, state)
    sharded = is_sharded(model)
    options = _full_options(broadcast_from_rank0=True) if sharded else _full_options()
    set_optimizer_state_dict(unwrap(model), optimizer, state, options=options)


def _keyed_by_name(model: Any, state: dict[str, Any]) -> dict[str, Any]:
    """``optimizer.state_dict()`` (parameters numbered in ``model.parameters()`` order among the trainable
    ones, as :func:`rewardlab.training.optim.build_optimizer` takes them) keyed by parameter name."""
    names = [n for n, p in unwrap(model).named_parameters() if p.requires_grad]
    return {
        "state": {names[i]: v for i, v in state["state"].items()},
        "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]],
    }


def _active() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def rank() -> int:
    """This process's rank (0 without a process group)."""
    return torch.distributed.get_rank() if _active() else 0


def barrier() -> None:
    """Waits for every rank (a no-op without a process group)."""
    if _active():
        torch.distributed.barrier()


def all_ranks_min(value: int, device: torch.device) -> int:
    """The smallest ``value`` over the ranks (``value`` itself without a process group); a collective."""
    if not _active():
        return value
    t = torch.tensor([value], dtype=torch.int64, device=device)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MIN)
    return int(t.item())


def gather_variable(values: torch.Tensor) -> torch.Tensor:
    """Every rank's 1-D ``values`` (lengths may differ), concatenated in rank order (``values`` itself without
    a process group); a collective."""
    if not _active():
        return values
    world = torch.distributed.get_world_size()
    size = torch.tensor([values.numel()], dtype=torch.int64, device=values.device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    torch.distributed.all_gather(sizes, size)
    longest = int(max(s.item() for s in sizes))
    padded = torch.zeros(longest, dtype=values.dtype, device=values.device)
    padded[: values.numel()] = values
    parts = [torch.empty_like(padded) for _ in range(world)]
    torch.distributed.all_gather(parts, padded)
    return torch.cat([part[: int(n.item())] for part, n in zip(parts, sizes, strict=True)])


def gather_objects(items: list[Any]) -> list[Any]:
    """Every rank's picklable ``items``, concatenated in rank order (``items`` itself without a process
    group); a collective."""
    if not _active():
        return items
    parts: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(parts, items)
    return [item for part in parts for item in part]
