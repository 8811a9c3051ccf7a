"""Shared fixtures: the tiny tokenizer and model, and a temporary run folder."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from rewardlab.data.tiny import load_tiny_tokenizer

    return load_tiny_tokenizer()


@pytest.fixture()
def tiny_model():
    from rewardlab.data.tiny import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny Qwen2 model and the tokenizer saved in Hugging Face format (loads with from_pretrained)."""
    from rewardlab.data.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module: tiny models are 10-40x slower with 2 threads fighting over 2 loaded
    cores than with one."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (a process group's or a Ray head's)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory, tiny_tokenizer):
    """A tiny reward model saved with its head (a causal LM folder would get a fresh random head per load)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from rewardlab.data.tiny import tiny_model_config

    path = tmp_path_factory.mktemp("rm")
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(tiny_model_config(num_labels=1)).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return str(path)
