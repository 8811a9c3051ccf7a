"""Loading an outcome reward model: ``AutoModelForSequenceClassification`` with one output, any base model.

A causal LM checkpoint (or any base model) gets a freshly initialised one-output ``score`` head; a saved
reward model loads as is; a folder holding a peft adapter (``adapter_config.json``) loads its base model,
applies the adapter and merges it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def resolve_dtype(dtype: str | Any | None):
    import torch

    if dtype is None or dtype == "auto":
        return None if dtype is None else "auto"
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in names:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(names)}, auto)")
    return names[dtype]


def load_tokenizer(path: str, tokenizer_path: str | None = None):
    """The tokenizer of a model folder (or ``tokenizer_path``), with a pad token (EOS when it has none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path or path)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer of {path} has neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _adapter_base(path: str) -> str | None:
    cfg = Path(path) / "adapter_config.json"
    if cfg.is_file():
        return json.loads(cfg.read_text()).get("base_model_name_or_path")
    return None


def load_reward_model(
    path: str,
    *,
    tokenizer: Any | None = None,
    dtype: str | Any | None = "float32",
    device: str | None = None,
    base_model: str | None = None,
):
    """``(model, tokenizer)``: a one-output sequence classifier from any model path or hub name.

    ``model.config.pad_token_id`` is set to the tokenizer's, which the classifier needs to find each
    sequence's last token. ``base_model`` overrides the base of a peft adapter folder.
    """
    from transformers import AutoModelForSequenceClassification

    tokenizer = tokenizer or load_tokenizer(path)
    torch_dtype = resolve_dtype(dtype)
    kwargs = {"num_labels": 1}
    if torch_dtype is not None:
        kwargs["dtype"] = torch_dtype
    adapter_base = base_model or _adapter_base(path)
    if adapter_base is not None:
        from peft import PeftModel

        model = AutoModelForSequenceClassification.from_pretrained(adapter_base, **kwargs)
        model.config.pad_token_id = tokenizer.pad_token_id
        model = PeftModel.from_pretrained(model, path).merge_and_unload()
    else:
        model = AutoModelForSequenceClassification.from_pretrained(path, **kwargs)
    if model.config.num_labels != 1:
        raise ValueError(f"{path}: a reward model needs one output, this one has {model.config.num_labels}")
    model.config.pad_token_id = tokenizer.pad_token_id
    if device:
        model.to(device)
    model.eval()
    return model, tokenizer


def disable_dropout(model) -> None:
    """Sets every dropout probability to 0 (TRL's ``disable_dropout``): reward differences of a pair must
    come from the texts, not from two different dropout masks."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def add_lora(model, *, r: int = 16, alpha: int = 32, dropout: float = 0.05, target_modules: Any = None):
    """Wraps ``model`` in a peft LoRA adapter for sequence classification (the ``score`` head stays
    fully trainable: peft's ``SEQ_CLS`` task saves it as a module to save). Defaults are TRL's; the adapter
    itself is :func:`rewardlab.training.lora.add_lora`'s, which the RL policy shares."""
    # lazy: pulls in torch
    from rewardlab.training.lora import add_lora as add_adapter

    return add_adapter(
        model, task_type="SEQ_CLS", r=r, alpha=alpha, dropout=dropout, target_modules=target_modules
    )
