"""Rollout (generation) backends behind one interface.

>>> from rewardlab.generation import SamplingParams, get_backend
>>> backend = get_backend("hf", model, tokenizer)                      # doctest: +SKIP
>>> groups = backend.generate(["1+1="], SamplingParams(n=4, max_new_tokens=8))  # doctest: +SKIP
>>> groups[0][0].text, groups[0][0].finish_reason                     # doctest: +SKIP

* ``hf``: transformers ``generate`` (batched, left padding, stop strings, n samples, log-probs); the CPU
  default, and what the tests use.
* ``vllm``: a vLLM engine colocated with the trainer; the policy's weights are pushed into it after each
  update; optionally asleep (its memory freed) during the update.
* ``vllm-server``: a separate ``vllm serve`` process, reached over HTTP; weights synced through a shared
  folder or NCCL.
"""

from __future__ import annotations

from typing import Any

from rewardlab.generation.base import (
    FinishReason,
    Generation,
    OnFinished,
    RolloutBackend,
    SamplingParams,
    generate_reporting,
)
from rewardlab.registry import Registry

BACKENDS: Registry[type[RolloutBackend]] = Registry("rollout backend")
BACKENDS.register("hf", "rewardlab.generation.hf:HFBackend")
BACKENDS.register("vllm", "rewardlab.generation.vllm:VLLMBackend")
BACKENDS.register("vllm-server", "rewardlab.generation.vllm_server:VLLMServerBackend")


def get_backend(name: str, model: Any, tokenizer: Any = None, **kwargs: Any) -> RolloutBackend:
    """Builds the rollout backend ``name`` (``"hf"`` or ``"vllm"``) for ``model`` and ``tokenizer``.

    ``model`` is a loaded ``PreTrainedModel`` or (vllm) a local path / hub name; extra keyword arguments
    go to the backend's constructor.
    """
    return BACKENDS.get(name)(model, tokenizer, **kwargs)


__all__ = [
    "BACKENDS",
    "FinishReason",
    "Generation",
    "OnFinished",
    "RolloutBackend",
    "SamplingParams",
    "generate_reporting",
    "get_backend",
]
