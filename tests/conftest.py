"""Shared fixtures (the tiny tokenizer and model, a temporary run folder) and the skip policy.

Skip policy: a test may skip only where this machine cannot have what it needs, and its reason then starts
with ``MACHINE_CANNOT`` (no GPU, not root, no fork). Every other skip (a package, a toolchain or a browser
that could be installed) is a failure on CI (``REWARDLAB_CI=1``, set by ``.ci/run``) and a line in the
summary elsewhere. The summary counts skips by reason; ``REWARDLAB_SKIP_LOG`` names a file the counts are
appended to (``.ci/run`` prints the total of its runs at the end).
"""

from __future__ import annotations

import collections
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


MACHINE_CANNOT = "this machine cannot have it: "
_SESSION: list[pytest.Session] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION[:] = [session]


def _skip_reasons(terminalreporter) -> collections.Counter:
    reasons = collections.Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    return reasons


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    reasons = _skip_reasons(terminalreporter)
    if not reasons:
        return
    terminalreporter.section("skips by reason")
    for reason, count in reasons.most_common():
        terminalreporter.line(f"{count:5d}  {reason}")
    if os.environ.get("REWARDLAB_SKIP_LOG"):
        with open(os.environ["REWARDLAB_SKIP_LOG"], "a", encoding="utf-8") as log:
            log.writelines(f"{count}\t{reason}\n" for reason, count in reasons.items())
    avoidable = sum(n for reason, n in reasons.items() if not reason.startswith(MACHINE_CANNOT))
    if avoidable and os.environ.get("REWARDLAB_CI") == "1":
        terminalreporter.line(
            f"[ci] {avoidable} skipped where this machine can have the part: install it (CI fails)", red=True
        )
        _SESSION[0].exitstatus = pytest.ExitCode.TESTS_FAILED
