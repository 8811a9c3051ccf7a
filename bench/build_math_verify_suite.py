"""Builds ``tests/data/math_verify_suite.jsonl``: the (gold, prediction, expected) cases of Math-Verify's tests.

Math-Verify (https://github.com/huggingface/Math-Verify, Apache License 2.0) checks its own parser and grader with
parametrised pytest tables. This script reads the test files from a checkout or a bare git clone of that
repository, collects every parametrised case of the test functions listed in ``FILES`` plus the
``compare_strings`` call of ``test_all.py::test_precision``, and records for each case the configuration the
test passes to math-verify (extraction targets, float rounding, strict, set-relation comparison), so that the
bench can score each case with math-verify exactly as its test does and with rewardlab's defaults.

How it works: each test module is executed with its helpers replaced by recorders (``compare_strings``, or
``parse``/``verify`` for the tests that call them directly); calling a test function with one parameter set
then records the arguments it would have passed, instead of running math-verify. Nothing of Math-Verify's
code is kept: only the data of its test tables.

    python bench/build_math_verify_suite.py [--repo /work/.mirror/huggingface+Math-Verify/repo] [--rev HEAD]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import types
from pathlib import Path

from rewardlab.runtime import StandInModules

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "math_verify_suite.jsonl"
FILES = [
    "tests/test_all.py",
    "tests/test_boxed.py",
    "tests/test_strict.py",
    "tests/test_numina_cases.py",
    "tests/test_open_thoughts.py",
    "tests/test_yujianll.py",
]
# The defaults of the tests' helper ``compare_strings(gold, pred, match_types, precision, strict, allow_set...)``.
HELPER_DEFAULTS = {
    "match_types": ["latex", "expr"],
    "precision": 6,
    "strict": True,
    "allow_set_relation_comp": False,
}


# Unparametrised tests with one ``compare_strings(...) == 1``: test_precision asserts on sympy first (those
# asserts are about math-verify's internals and are not cases), then compares one pair of strings.
UNPARAMETRISED = {"tests/test_all.py::test_precision": 1}


class _Recorded(Exception):
    """Raised by a recorder: carries the arguments the test would have passed to math-verify."""

    def __init__(self, call: dict):
        super().__init__("recorded")
        self.call = call


def _compare_strings_recorder(
    gold, pred, match_types=None, precision=None, strict=None, allow_set_relation_comp=None
):
    given = {
        "match_types": match_types,
        "precision": precision,
        "strict": strict,
        "allow_set_relation_comp": allow_set_relation_comp,
    }
    config = {k: (HELPER_DEFAULTS[k] if v is None else v) for k, v in given.items()}
    raise _Recorded({"gold": gold, "prediction": pred, "call": "compare_strings", **config})


class _Parsed(str):
    """What the ``parse`` recorder returns: the text it was given."""


def _verify_recorder(gold, pred, **kwargs):
    raise _Recorded({"gold": str(gold), "prediction": str(pred), "call": "verify(parse, parse)", **kwargs})


def _source(repo: str, rev: str, path: str) -> str:
    repo_path = Path(repo)
    if (repo_path / path).exists():
        return (repo_path / path).read_text()
    return subprocess.run(
        ["git", "-C", repo, "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def _param_sets(function) -> list[tuple[list[str], tuple]]:
    """The (argument names, values) of every parameter set of a ``@pytest.mark.parametrize``d function."""
    out = []
    for mark in getattr(function, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        for value in values:
            value = getattr(value, "values", value)  # pytest.param(...)
            out.append((names, value if len(names) > 1 else (value,)))
    return out


def collect(repo: str, rev: str) -> tuple[list[dict], str]:
    commit = subprocess.run(
        ["git", "-C", repo, "rev-parse", rev], check=True, capture_output=True, text=True
    ).stdout.strip()
    # ``from tests.test_all import compare_strings`` in the other files resolves to the recorder.
    package = types.ModuleType("tests")
    helper = types.ModuleType("tests.test_all")
    helper.compare_strings = _compare_strings_recorder
    rows: list[dict] = []
    with StandInModules({"tests": package, "tests.test_all": helper}):
        for path in FILES:
            namespace: dict = {"__name__": f"mv_{Path(path).stem}"}
            exec(compile(_source(repo, rev, path), path, "exec"), namespace)
            namespace["compare_strings"] = _compare_strings_recorder
            namespace["parse"] = _Parsed
            namespace["verify"] = _verify_recorder
            for name, function in list(namespace.items()):
                if not (name.startswith("test_") and callable(function)):
                    continue
                sets = _param_sets(function)
                if not sets:
                    sets = [([], ())]  # an unparametrised test: record its compare_strings calls
                for index, (names, values) in enumerate(sets):
                    kwargs = dict(zip(names, values, strict=True))
                    test_id = f"{path}::{name}" + (f"[{index}]" if names else "")
                    try:
                        function(**kwargs)
                    except _Recorded as recorded:
                        call = recorded.call
                    else:
                        continue  # no call to math-verify's parse/verify (e.g. sympy-level asserts only)
                    expected = kwargs.get("expected", kwargs.get("result", UNPARAMETRISED.get(test_id)))
                    rows.append({"test": test_id, "expected": int(expected), **call})
    return rows, commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default="/work/.mirror/huggingface+Math-Verify/repo")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows, commit = collect(args.repo, args.rev)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    by_file: dict[str, int] = {}
    for row in rows:
        by_file[row["test"].split("::")[0]] = by_file.get(row["test"].split("::")[0], 0) + 1
    print(f"{len(rows)} cases from {commit[:12]}: {by_file} -> {args.out}")


if __name__ == "__main__":
    main()
