"""Implicit process reward models (PRIME, Cui et al., 2025): a causal LM trained as an outcome reward model
whose reward ``beta * log(pi_phi(y) / pi_ref(y))`` splits into a process reward per token.

Python::

    from rewardlab.rewardmodels.implicit_prm import ImplicitPRM, ImplicitPRMTrainConfig, train_implicit_prm

    train_implicit_prm(ImplicitPRMTrainConfig(model="runs/sft", train_file="outcomes.jsonl", output_dir="iprm"))
    prm = ImplicitPRM.from_pretrained("iprm")       # the trained model and its frozen reference
    prm.token_rewards(input_ids, attention_mask, response_mask)

In RL, ``reward.process: implicit_prm:PATH`` (or ``implicit_prm``: from the policy's own weights) with
``algorithm.adv_estimator: prime`` trains it online (:class:`OnlineImplicitPRM`). See docs/rl.md, "PRIME".
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy exports: ``rewardlab rm --help`` imports the config without paying for torch / transformers.
_EXPORTS = {
    "DEFAULT_BETA": "config",
    "ImplicitPRMTrainConfig": "config",
    "OutcomeExample": "data",
    "collate": "data",
    "encode_rows": "data",
    "row_label": "data",
    "CONFIG_FILE": "model",
    "ImplicitPRM": "model",
    "ImplicitPRMConfig": "model",
    "response_logprobs": "model",
    "OnlineImplicitPRM": "online",
    "evaluate_implicit_prm": "train",
    "train_implicit_prm": "train",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
