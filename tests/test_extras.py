"""The extras: pyproject.toml's lists agree with each other and with ``rewardlab.extras``, and a missing one is a
one-line error naming it (the light install itself: tests/test_install.py, slow)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import tomllib

from rewardlab.cli import main
from rewardlab.errors import UserError
from rewardlab.extras import EXTRAS, MissingExtraError, require, require_installed

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
HEAVY = {
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "accelerate",
    "scikit-learn",
    "vllm",
    "peft",
    "ray",
}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_core_brings_nothing_heavy():
    assert not _names(PROJECT["dependencies"]) & HEAVY


def test_all_is_every_extra_but_vllm_and_dev_and_each_extra_is_documented():
    extras = PROJECT["optional-dependencies"]
    assert set(extras) - {"all", "dev"} == set(EXTRAS)
    every = set().union(*(extras[name] for name in EXTRAS if name != "vllm"))
    assert set(extras["all"]) == every
    assert set(extras["vllm"]) - set(extras["all"]) == {
        next(r for r in extras["vllm"] if r.startswith("vllm"))
    }
    assert set(extras["rl"]) <= set(extras["rm"])  # a reward model trains as the policy does, plus metrics


def test_require_returns_the_first_module_or_names_the_extra(monkeypatch):
    assert require("json", "re", extra="data", what="x") is sys.modules["json"]
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if not installed
    with pytest.raises(MissingExtraError) as info:
        require("json", "datasets", extra="data", what="reading parquet files")
    assert str(info.value) == (
        "reading parquet files needs the data extra (no module named 'datasets'): pip install 'rewardlab[data]'"
    )
    assert isinstance(info.value, UserError) and isinstance(info.value, ImportError)
    with pytest.raises(ValueError, match="unknown extra"):
        require("json", extra="nope", what="x")


def test_require_installed_does_not_import():
    name = "rewardlab_never_installed_module"
    with pytest.raises(MissingExtraError, match=rf"^x needs the rl extra \(no module named '{name}'\)"):
        require_installed(name, extra="rl", what="x")
    with pytest.raises(MissingExtraError, match="no module named 'rewardlab_never.sub'"):
        require_installed("rewardlab_never.sub", extra="rl", what="x")
    sys.modules.pop("colorsys", None)
    require_installed("colorsys", extra="rl", what="x")
    assert "colorsys" not in sys.modules


def test_a_missing_extra_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    table = tmp_path / "table.parquet"
    table.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "datasets", None)
    assert main(["score", str(table), "-o", str(tmp_path / "out.jsonl"), "--verifier", "math"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "rewardlab score: error: reading parquet files needs the data extra (no module named 'datasets'): "
        "pip install 'rewardlab[data]'\n"
    )
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["rl", "train", "--preset", "grpo"]) == 2
    assert capsys.readouterr().err == (
        "rewardlab rl: error: rewardlab rl train needs the rl extra (no module named 'torch'): "
        "pip install 'rewardlab[rl]'\n"
    )


def test_jsonl_is_read_without_datasets(tmp_path, monkeypatch):
    from rewardlab.data.loaders import load_records, read_rows

    monkeypatch.setitem(sys.modules, "datasets", None)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"completion": "a", "reference": "b"}\n')
    assert [r.completion for r in load_records(rows)] == ["a"]
    assert read_rows(rows) == [{"completion": "a", "reference": "b"}]
    csv = tmp_path / "rows.csv"
    csv.write_text("completion,reference\na,b\n")
    with pytest.raises(MissingExtraError, match=r"^reading CSV files needs the data extra"):
        read_rows(csv)
