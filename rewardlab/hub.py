"""Where a model or dataset name points (a local path or the Hugging Face hub), checked before loading.

transformers and datasets answer a missing name with a long traceback that ends in a message about repo
ids or connections; the commands call :func:`check_model` first and get one line that says what is wrong:
not a local folder, and either the hub cannot be asked (offline mode, unreachable) or it has no such model.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

MODEL_FILES = ("config.json", "adapter_config.json", "rewardlab_prm.json")
"""Files a local model folder holds at least one of (transformers, a PEFT adapter, a rewardlab PRM)."""


class ModelNotFoundError(FileNotFoundError):
    """A model name that is neither a local model folder nor a model the hub has (one line)."""


def looks_local(name: str) -> bool:
    """A name that can only be a local path (``./x``, ``/x``, ``~/x``, ``a/b/c``), never a hub id."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name


def hub_problem(*, datasets_offline: bool = False, timeout: float = 3.0) -> str | None:
    """Why the hub cannot be asked (offline mode, or unreachable), or ``None`` when it can.

    ``datasets_offline``: also honour ``datasets``' own offline switch (``HF_DATASETS_OFFLINE``)."""
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "the hub is off (HF_HUB_OFFLINE is set)"
    if datasets_offline:
        import datasets.config

        if datasets.config.HF_HUB_OFFLINE:
            return "the hub is off (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set)"
    endpoint = urlparse(constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return f"the hub ({host}) is not reachable"
    return None


def _valid_hub_id(name: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _cached(name: str) -> bool:
    """Whether the hub model ``name`` is in the local hub cache (loadable offline)."""
    from huggingface_hub import try_to_load_from_cache

    return any(isinstance(try_to_load_from_cache(name, f), str) for f in MODEL_FILES[:2])


def check_model(name: str, *, what: str = "model") -> None:
    """Returns when ``name`` can be loaded as a model: a ``tiny:`` config, a local model folder, a cached
    or existing hub model. Else raises :class:`ModelNotFoundError` with one line saying why.

    A hub name is only looked up when the hub answers; an answer other than "no such repository" (a gated
    model, a server error) is left to the loader to report."""
    if name.startswith("tiny:"):
        return
    path = Path(name).expanduser()
    if path.is_dir():
        if not any((path / f).is_file() for f in MODEL_FILES):
            raise ModelNotFoundError(
                f"{what} not found: {name} is a folder with no model in it (no config.json)"
            )
        return
    if path.exists():
        raise ModelNotFoundError(f"{what} not found: {name} is a file, not a model folder")
    if looks_local(name) or not _valid_hub_id(name):
        raise ModelNotFoundError(f"{what} not found: {name} is not a local folder")
    if _cached(name):
        return
    problem = hub_problem()
    if problem:
        raise ModelNotFoundError(f"{what} not found: {name} is not a local folder, and {problem}")
    from huggingface_hub import model_info
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        model_info(name, timeout=10)
    except GatedRepoError:
        return
    except RepositoryNotFoundError:
        raise ModelNotFoundError(
            f"{what} not found: {name} is neither a local folder nor a model on the hub"
        ) from None
    except Exception:  # noqa: BLE001 - anything else (network, 5xx): the loader says it in full
        return


__all__ = ["MODEL_FILES", "ModelNotFoundError", "check_model", "hub_problem", "looks_local"]


def load_tokenizer(path: str) -> Any:
    """``AutoTokenizer.from_pretrained(path)``, except for a tokenizer saved as a plain ``tokenizers``
    backend (``tokenizer_class`` ``TokenizersBackend`` or ``PreTrainedTokenizerFast``, as the shipped tiny
    one is): that loads as itself. Beside a model's ``config.json``, transformers 5 would build the model
    type's class instead (``Qwen2Tokenizer``), whose own pre-tokenizer drops the character-level
    vocabulary's spaces, so a saved checkpoint would read "a b" as "ab"."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config = Path(path) / "tokenizer_config.json"
    if config.is_file():
        try:
            saved_class = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class")
        except ValueError:
            saved_class = None
        if saved_class in ("TokenizersBackend", "PreTrainedTokenizerFast"):
            return PreTrainedTokenizerFast.from_pretrained(path)
    return AutoTokenizer.from_pretrained(path)
