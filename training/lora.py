"""LoRA and QLoRA for any trainer's model (peft): the one adapter helper, the merged weights, checkpoints.

* :func:`add_lora` -- the one place a peft ``LoraConfig`` is built (the ORM's classifier, the RL policy);
  ``kbit=True`` first prepares a 4-bit model for training (QLoRA, Dettmers et al., 2023).
* :func:`merged_weights` -- ``(name, tensor)`` of the model with its adapters merged, ``W + scaling * B @ A``
  computed one adapted layer at a time (peft's ``get_delta_weight``) under the base model's names: peft's
  ``base_model.model.`` prefix and ``.base_layer`` removed, the ``lora_*`` tensors left out. Nothing is
  merged in place and no second model is built; it is what vLLM's ``load_weights`` receives and what the
  merged checkpoint holds.
* :func:`adapters_disabled` -- the base model's forward pass (the RL reference policy, without a copy).
* :class:`MergedModel` -- ``save_pretrained`` of the merged weights: a plain transformers folder.
* :func:`plain_copy` -- a copy of a module without its adapters (PPO's critic body).

peft is imported only by the functions that need it (it comes with the rl and rm extras).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rewardlab.extras import require

ADAPTER_DIR = "adapter"
"""The checkpoint folder of a LoRA model's adapter (next to the merged model's folder)."""


def is_peft_model(model: Any) -> bool:
    """True for a peft ``PeftModel`` (also inside a DDP wrapper)."""
    model = getattr(model, "module", model)
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def base_model(model: Any) -> Any:
    """The transformers model under a peft wrapper (adapters still injected), or ``model`` itself."""
    model = getattr(model, "module", model)
    return model.get_base_model() if is_peft_model(model) else model


def _targets(target_modules: str | list[str] | None) -> str | list[str]:
    """``None`` / ``all-linear`` -> peft's ``all-linear``; a single module name -> a one-element list (peft
    would read a plain string as a regular expression over full module paths)."""
    if target_modules is None or target_modules == "all-linear":
        return "all-linear"
    return [target_modules] if isinstance(target_modules, str) else list(target_modules)


def add_lora(
    model: Any,
    *,
    task_type: str = "CAUSAL_LM",
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.05,
    target_modules: str | list[str] | None = None,
    kbit: bool = False,
    gradient_checkpointing: bool = False,
) -> Any:
    """Wraps ``model`` in a peft LoRA adapter: the base weights are frozen, only the adapters train.

    ``target_modules``: ``None`` / ``all-linear`` (every linear layer but the output head) or module names.
    ``kbit``: the model was loaded in 4 or 8 bit (QLoRA): peft's ``prepare_model_for_kbit_training`` runs
    first. ``gradient_checkpointing``: the frozen embeddings' output is made to require a gradient, which
    checkpointed blocks need to pass one back to the adapters."""
    peft = require("peft", extra="rl", what="LoRA")
    LoraConfig, get_peft_model, prepare_model_for_kbit_training = (  # noqa: N806 - peft's class name
        peft.LoraConfig,
        peft.get_peft_model,
        peft.prepare_model_for_kbit_training,
    )
    if kbit:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=gradient_checkpointing)
    elif gradient_checkpointing:
        model.enable_input_require_grads()
    config = LoraConfig(
        task_type=task_type,
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=_targets(target_modules),
    )
    return get_peft_model(model, config)


def qlora_unavailable() -> str | None:
    """Why QLoRA (bitsandbytes 4-bit) cannot run here, or ``None`` when it can."""
    if not torch.cuda.is_available():
        return "needs a CUDA device (bitsandbytes' 4-bit kernels)"
    if importlib.util.find_spec("bitsandbytes") is None:
        return "needs bitsandbytes: pip install bitsandbytes"
    return None


def qlora_quantization_config(compute_dtype: torch.dtype = torch.bfloat16) -> Any:
    """QLoRA's quantisation (Dettmers et al., 2023): 4-bit NormalFloat with double quantisation, bf16
    compute."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=compute_dtype,
    )


@contextlib.contextmanager
def adapters_disabled(model: Any) -> Iterator[Any]:
    """For the ``with`` block, a peft model with its adapters switched off and in eval mode (restored
    after): the reference policy of LoRA training is the policy itself without them. Any other model is
    yielded unchanged."""
    if not is_peft_model(model):
        yield model
        return
    was_training = model.training
    model.eval()
    try:
        with model.disable_adapter():
            yield model
    finally:
        model.train(was_training)


# ----------------------------------------------------------------------------------------------------------
# Merged weights
# ----------------------------------------------------------------------------------------------------------
def _is_lora_layer(module: Any) -> bool:
    return hasattr(module, "base_layer") and hasattr(module, "get_delta_weight")


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _dequantized(module: Any) -> torch.Tensor:
    """The weight of ``module`` in floating point (a bitsandbytes 4/8-bit weight dequantised)."""
    if type(module.weight).__name__ in ("Params4bit", "Int8Params"):
        from peft.utils.integrations import dequantize_module_weight

        return dequantize_module_weight(module)
    return module.weight


def _own_tensors(prefix: str, module: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """The parameters and persistent buffers ``module`` holds itself, as its ``state_dict`` names them."""
    for name, param in module.named_parameters(recurse=False):
        value = _dequantized(module) if name == "weight" else param
        yield _join(prefix, name), value.detach()
    for name, buf in module.named_buffers(recurse=False):
        if name not in module._non_persistent_buffers_set:
            yield _join(prefix, name), buf.detach()


def _merged_layer(prefix: str, layer: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """One adapted layer's tensors under its base name: the weight plus every active adapter's delta."""
    base = layer.get_base_layer()
    for name, value in _own_tensors(prefix, base):
        if name == _join(prefix, "weight") and not layer.merged and not layer.disable_adapters:
            for adapter in layer.active_adapters:
                if adapter in layer.lora_A or adapter in getattr(layer, "lora_embedding_A", {}):
                    value = value + layer.get_delta_weight(adapter).to(value.dtype)
        yield name, value.detach()


def merged_weights(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of ``model`` as the plain transformers model ``merge_and_unload()`` would give,
    computed lazily, one adapted layer at a time; the model is not changed. A model without adapters
    yields its ``state_dict`` items."""
    root = base_model(model)
    if not is_peft_model(model):
        yield from ((name, t.detach()) for name, t in root.state_dict().items())
        return
    adapted: tuple[str, ...] = ()
    for name, module in root.named_modules():
        if adapted and name.startswith(adapted):
            continue  # inside a LoRA layer: its base layer and adapters were handled with it
        if _is_lora_layer(module):
            adapted += (f"{name}.",)
            yield from _merged_layer(name, module)
        else:
            yield from _own_tensors(name, module)


class MergedModel:
    """A peft model seen as its merged transformers model, for ``save_pretrained`` (the checkpoint's
    ``policy/`` folder, the vLLM engine's first load). The merged tensors are gathered on the CPU."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def save_pretrained(self, path: str | Path, **kwargs: Any) -> None:
        state = {name: t.to("cpu", copy=True).contiguous() for name, t in merged_weights(self.model)}
        base_model(self.model).save_pretrained(path, state_dict=state, **kwargs)
        config = Path(path) / "config.json"
        values = json.loads(config.read_text())
        if values.pop("quantization_config", None) is not None:  # QLoRA: the merged weights are not 4-bit
            config.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n")


def plain_model(model: Any) -> Any:
    """What to call ``save_pretrained`` on for a plain transformers folder: the merged view of a peft
    model, else the model."""
    model = getattr(model, "module", model)
    return MergedModel(model) if is_peft_model(model) else model


def checkpoint_models(name: str, model: Any) -> dict[str, Any]:
    """The checkpoint folders of a model: ``{name: model}``, or for a peft model ``{name: merged model,
    "adapter": the adapter}`` (``name/`` loads with ``from_pretrained``, ``adapter/`` is peft's layout)."""
    if not is_peft_model(model):
        return {name: model}
    return {name: MergedModel(model), ADAPTER_DIR: getattr(model, "module", model)}


def load_adapter_weights(model: Any, folder: str | Path) -> None:
    """Loads an adapter folder (peft's ``save_pretrained``) into ``model``'s adapter in place, so optimiser
    references to its parameters stay valid."""
    from peft.utils import load_peft_weights, set_peft_model_state_dict

    device = next(model.parameters()).device
    result = set_peft_model_state_dict(model, load_peft_weights(str(folder), device=str(device)))
    for kind in ("missing_keys", "unexpected_keys"):
        keys = [k for k in getattr(result, kind, []) if "lora_" in k]
        if keys:  # another adapter layout (target modules): resuming would silently train something else
            raise ValueError(f"{folder}: the adapter does not match this model ({kind}: {keys[:3]})")


def plain_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``module`` with every LoRA layer replaced by its base layer and every weight
    trainable (peft froze them): a copy of the base model, not of the adapters."""
    out = copy.deepcopy(module)
    layers = [(name, m) for name, m in out.named_modules() if _is_lora_layer(m)]
    if not layers:
        return out
    for name, layer in layers:
        parent_name, _, attr = name.rpartition(".")
        setattr(out.get_submodule(parent_name) if parent_name else out, attr, layer.get_base_layer())
    return out.requires_grad_(True)
