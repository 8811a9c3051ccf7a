"""The models of an RL run: loading the policy (hub, local folder, ``tiny:``, QLoRA's 4-bit base), PPO's
critic, and setting them up for training (device, LoRA, the reference, data-parallel wrapping), plus the
rollout backend that samples from the policy."""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rewardlab.core_algos.estimators import estimator_traits
from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer, save_tiny_model
from rewardlab.generation import get_backend
from rewardlab.hub import check_model, load_tokenizer
from rewardlab.rl.config import RLConfig
from rewardlab.training import device as dev
from rewardlab.training import lora, parallel
from rewardlab.training.device import resolve_dtype

__all__ = [
    "Models",
    "ValueModel",
    "build_backend",
    "frozen_copy",
    "load_policy",
    "needs_critic",
    "setup_models",
]


def load_policy(
    path: str,
    *,
    tokenizer_path: str | None = None,
    dtype: str = "float32",
    seed: int = 0,
    load_in_4bit: bool = False,
):
    """``(model, tokenizer)`` for a hub name / local folder, or ``tiny:NAME`` (a shipped tiny config);
    ``load_in_4bit``: QLoRA's 4-bit NF4 base on this process's CUDA device."""
    from transformers import AutoModelForCausalLM

    if load_in_4bit:
        model, tokenizer = _load_4bit(path, tokenizer_path, dtype, seed)
    elif path.startswith("tiny:"):
        model = build_tiny_model(_tiny_name(path), seed=seed)
        tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path else load_tiny_tokenizer()
    else:
        check_model(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=resolve_dtype(dtype))
        tokenizer = load_tokenizer(tokenizer_path or path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if dtype != "float32" and path.startswith("tiny:") and not load_in_4bit:
        model = model.to(resolve_dtype(dtype))
    return model, tokenizer


def _tiny_name(path: str) -> str:
    """The shipped config a ``tiny:NAME`` path names (``tiny:`` alone: ``qwen2-tiny``)."""
    return path.split(":", 1)[1] or "qwen2-tiny"


def _load_4bit(path: str, tokenizer_path: str | None, dtype: str, seed: int) -> tuple[Any, Any]:
    """QLoRA's frozen base: bitsandbytes quantises while loading, so a ``tiny:`` model is saved first."""
    from transformers import AutoModelForCausalLM

    if path.startswith("tiny:"):
        path = save_tiny_model(tempfile.mkdtemp(prefix="rewardlab-tiny-"), _tiny_name(path), seed=seed)
    model = AutoModelForCausalLM.from_pretrained(
        path,
        dtype=resolve_dtype(dtype),
        quantization_config=lora.qlora_quantization_config(),
        device_map={"": torch.cuda.current_device()},
    )
    return model, load_tokenizer(tokenizer_path or path)


class ValueModel(nn.Module):
    """PPO's critic: a copy of the policy's transformer body with a scalar head (zero-initialised)."""

    def __init__(self, policy: Any) -> None:
        super().__init__()
        body = policy.get_decoder() if hasattr(policy, "get_decoder") else policy.model
        self.body = lora.plain_copy(body)  # a LoRA policy's base body: adapters left out, every weight trains
        hidden = policy.config.hidden_size
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(
        self, input_ids, attention_mask, position_ids, response_len: int | torch.Tensor
    ) -> torch.Tensor:
        """Values of the states before each response token: an int ``T`` reads the padded rows' last ``T``;
        a tensor reads a packed row at those positions (``PackedBatch.logit_index``)."""
        # No KV cache: with one, transformers would not read a packed row's position ids as sequence bounds.
        out = self.body(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        )
        h = out.last_hidden_state
        hidden = h[:, response_len] if torch.is_tensor(response_len) else h[:, -(response_len + 1) : -1]
        # a copy, not a view: FSDP2 registers its pre-backward hook on the output, which an in-place op on a
        # view would drop
        return self.head(hidden.float()).squeeze(-1).clone()


def needs_critic(cfg: RLConfig) -> bool:
    """Whether the run trains PPO's value model (the GAE estimator reads its values)."""
    return estimator_traits(cfg.algorithm.adv_estimator).needs_critic


def frozen_copy(model: Any) -> Any:
    """A copy of ``model`` in eval mode with no trainable weight (the KL reference, the rollout thread's)."""
    frozen = copy.deepcopy(model).eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    return frozen


@dataclass
class Models:
    """A run's models as the trainer's stages use them."""

    policy: Any
    """The policy (a peft model with LoRA), unwrapped: generation, checkpoints and weight pushes read it."""
    train_model: Any
    """The policy as the update runs it: DDP / FSDP-wrapped under torchrun, else the policy itself."""
    ref: Any | None
    """The KL reference (``None`` without a KL term; the policy itself with LoRA, adapters off)."""
    value: Any | None
    """PPO's critic (wrapped like the policy under torchrun)."""
    tokenizer: Any
    lora: bool
    """Only the adapters train."""
    use_bf16: bool
    """Forward passes run under bf16 autocast."""


def setup_models(
    cfg: RLConfig, model: Any | None, tokenizer: Any | None, device: torch.device, dist: bool
) -> Models:
    """The policy (loaded unless given), the reference (only with a KL term) and PPO's critic, wrapped
    for data parallelism under torchrun (``train.strategy``)."""
    if model is None:
        model, tok = load_policy(
            cfg.model.path,
            tokenizer_path=cfg.model.tokenizer,
            dtype=cfg.model.dtype,
            seed=cfg.model.seed,
            load_in_4bit=cfg.model.lora.load_in_4bit,
        )
        tokenizer = tokenizer or tok
    if tokenizer is None:
        raise ValueError("a tokenizer is needed when a model object is passed")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    fsdp = dist and cfg.train.strategy == "fsdp"
    policy = model if getattr(model, "is_quantized", False) else _to_device(model, device, fsdp)
    policy = _with_lora(cfg, policy)
    is_lora = lora.is_peft_model(policy)
    if cfg.model.gradient_checkpointing:
        policy.gradient_checkpointing_enable()
    use_bf16 = dev.use_bf16(cfg.train.bf16)
    ref = None
    if cfg.algorithm.kl_coef > 0 and is_lora:
        ref = policy  # the reference is the base model: the same object, adapters off, no copy
    elif cfg.algorithm.kl_coef > 0:
        ref = frozen_copy(policy)
    value = _to_device(ValueModel(policy), device, fsdp) if needs_critic(cfg) else None
    models = Models(policy, policy, ref, value, tokenizer, is_lora, use_bf16)
    if dist:
        _wrap_models(cfg, models, device)
    return models


def _to_device(model: Any, device: torch.device, fsdp: bool) -> Any:
    """``model`` on the device; under FSDP left where it is (sharding moves each layer there as it shards
    it, so the whole model never sits on the device unsharded)."""
    return model if fsdp else model.to(device)


def _with_lora(cfg: RLConfig, policy: Any) -> Any:
    """``policy`` with LoRA adapters (``model.lora.enabled``), unless it already has them."""
    lc = cfg.model.lora
    if not lc.enabled or lora.is_peft_model(policy):
        return policy
    return lora.add_lora(
        policy,
        r=lc.r,
        alpha=lc.alpha,
        dropout=lc.dropout,
        target_modules=lc.target_modules,
        kbit=lc.load_in_4bit,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
    )


def _wrap_models(cfg: RLConfig, models: Models, device: torch.device) -> None:
    """DDP (policy and critic) or FSDP2 (policy, critic and a reference of its own), ``train.strategy``."""
    tc = cfg.train
    opts = {"mixed_precision": dev.use_bf16(tc.fsdp_mixed_precision), "cpu_offload": tc.fsdp_cpu_offload}
    models.train_model = parallel.wrap_model(models.policy, tc.strategy, device, **opts)
    if models.value is not None:
        models.value = parallel.wrap_model(models.value, tc.strategy, device, **opts)
    if models.ref is not None and models.ref is not models.policy:
        models.ref = parallel.wrap_model(models.ref, tc.strategy, device, **opts)  # ddp: left as it is


def build_backend(cfg: RLConfig, policy: Any, tokenizer: Any) -> Any:
    """The rollout backend ``rollout.backend`` names, sampling from ``policy``."""
    rc = cfg.rollout
    kw: dict[str, Any] = {}
    if rc.backend == "hf":
        kw.update(batch_size=rc.batch_size, interleave_turns=rc.interleave_turns)
    elif rc.backend == "vllm":
        kw.update(
            gpu_memory_utilization=rc.vllm_gpu_memory_utilization,
            sleep_level=rc.vllm_sleep_level,
            lora_mode=rc.vllm_lora,
            **rc.vllm_kwargs,
        )
    elif rc.backend == "vllm-server":
        kw.update(
            url=rc.vllm_server_url,
            sync=rc.vllm_server_sync,
            sync_dir=rc.vllm_server_sync_dir or str(Path(cfg.run.output_dir) / "vllm-sync"),
            nccl_address=rc.vllm_server_nccl_address,
            nccl_port=rc.vllm_server_nccl_port,
            timeout=rc.vllm_server_timeout,
        )
    return get_backend(rc.backend, policy, tokenizer, **kw)
