"""The code verifier in C, C++, Java, JavaScript, TypeScript, Go and Rust: both test styles, the language
from the record or the fence, compile once, compile errors and missing toolchains as error rows, early exits
as failures, and HumanEval-X (THUDM/CodeGeeX's released problems) as outside data.

Outside data: the default suite runs the first problems of each HumanEval-X language, of MultiPL-E's
TypeScript problems and of our C problems (``tests/data/code/README.md``); the full sets (164 problems in
each HumanEval-X language, canonical and a broken variant each: about 1,700 compile-and-runs) are slow tests.
The reference verdict is the benchmark's own: its canonical solution passes, a broken variant (an early
return of the zero value, ``tests/humanevalx_variants.py``) fails; every exception is listed by class
below, with the reason, and bounded.
"""

from __future__ import annotations

import gzip
import json
import os

import pytest
from humanevalx_variants import broken_solution  # tests/humanevalx_variants.py
from time_bounds import ROOM_S  # tests/time_bounds.py

from rewardlab.types import Record
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.code.languages import LANGUAGES, find_language

CODE_DATA = os.path.join(os.path.dirname(__file__), "data", "code")
HUMANEVAL_X = ("cpp", "java", "js", "go", "rust")
SUM = {
    "c": '#include <stdio.h>\nint main(){long a,b; scanf("%ld %ld",&a,&b); printf("%ld\\n",a+b); return 0;}',
    "cpp": "#include <bits/stdc++.h>\nint main(){long a,b; std::cin>>a>>b; std::cout<<a+b<<std::endl;}",
    "java": "import java.util.*;\npublic class Sum { public static void main(String[] x) {"
    " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }",
    "js": "const v = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\nconsole.log(v[0] + v[1]);",
    "ts": "declare var require: any;\nconst v: number[] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
    "console.log(v[0] + v[1]);",
    "go": 'package main\nimport "fmt"\nfunc main() { var a, b int64; fmt.Scan(&a, &b); fmt.Println(a + b) }',
    "rust": "use std::io::Read;\nfn main() { let mut s = String::new(); std::io::stdin().read_to_string(&mut s).unwrap();"
    ' let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect(); println!("{}", v[0] + v[1]); }',
}
"""A stdin/stdout program per language: the sum of two integers."""
SUM_CASES = {"inputs": ["1 2\n", "40 2\n", "-5 5\n"], "outputs": ["3\n", "42\n", "0\n"]}


@pytest.fixture(scope="module")
def verifier():
    v = get_verifier("code", timeout=ROOM_S, parallelism=2)
    yield v
    v.close()


def fenced(language: str, code: str) -> str:
    return f"Here it is:\n```{language}\n{code}\n```\n"


def humaneval_x(language: str) -> list[dict]:
    with gzip.open(os.path.join(CODE_DATA, "humaneval_x", f"humaneval_{language}.jsonl.gz"), "rt") as f:
        return [json.loads(line) for line in f]


def jsonl(name: str) -> list[dict]:
    with open(os.path.join(CODE_DATA, name)) as f:
        return [json.loads(line) for line in f]


def problem_records(rows: list[dict], solution: str = "canonical") -> list[Record]:
    """Records of benchmark rows as they are published, completed by the canonical (ours for C and
    TypeScript) or the broken solution."""
    records = []
    for row in rows:
        language = find_language(row.get("language") or row["task_id"].split("/")[0])
        assert language is not None
        if solution == "canonical":
            completion = row.get("canonical_solution", row.get("solution"))
        else:
            completion = broken_solution(language.name, row)
        reference = {k: v for k, v in row.items() if k not in ("canonical_solution", "solution")}
        records.append(Record(prompt=row["prompt"], completion=completion, reference=reference))
    return records


# ------------------------------------------------------------------------------------------ stdin/stdout


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_stdio_program_in_each_language(verifier, language):
    right = Record(completion=fenced(language, SUM[language]), reference=SUM_CASES)
    wrong_code = (
        SUM[language]
        .replace("a + b", "a - b")
        .replace("a+b", "a-b")
        .replace("() + s", "() - s")
        .replace("v[0] + v[1]", "v[0] - v[1]")
    )
    assert wrong_code != SUM[language]
    wrong = Record(completion=fenced(language, wrong_code), reference=SUM_CASES)
    ok, bad = verifier.score_batch([right, wrong])
    assert ok.reward == 1.0, (ok.error, ok.details.get("cases"))
    assert ok.details["language"] == language and ok.details["passed"] == 3
    assert bad.reward == 0.0 and bad.error is None
    assert bad.details["cases"][0]["outcome"] == "fail"


@pytest.mark.parametrize(
    "language,broken,expected",
    [
        ("cpp", "int main() { return 0 }", "error: expected"),
        ("java", "public class Main { public static void main(String[] a) { int x = } }", "illegal start"),
        ("go", "package main\nfunc main() { x := 1 }", "declared"),
        ("rust", 'fn main() { let x: i32 = "s"; }', "mismatched types"),
        ("ts", "const x: number = 'text';\nconsole.log(x);", "not assignable"),
    ],
)
def test_compile_error_is_an_error_row_with_the_compilers_first_lines(verifier, language, broken, expected):
    result = verifier.score(Record(completion=fenced(language, broken), reference=SUM_CASES))
    assert result.reward == 0.0
    assert result.error.startswith("compile error: ") and expected in result.error, result.error
    assert result.details["status"] == "compile_error"
    assert len(result.error.splitlines()) <= 13  # the first lines only


def test_each_distinct_program_compiles_once(verifier):
    code = SUM["cpp"].replace("int main", "int unused_1 = 1;\nint main")  # new to this verifier
    records = [Record(completion=fenced("cpp", code), reference=SUM_CASES) for _ in range(3)]
    before = verifier.builds.compiled
    first = verifier.score_batch(records)
    again = verifier.score(records[0])
    assert verifier.builds.compiled == before + 1
    assert [r.details["compile"]["cached"] for r in [*first, again]] == [False, True, True, True]
    assert all(r.reward == 1.0 for r in [*first, again])


def test_missing_toolchain_is_an_error_row_naming_the_package(verifier, monkeypatch):
    go = LANGUAGES["go"]
    monkeypatch.setattr(type(go), "commands", {"rk-no-such-go": "golang-go"})
    result = verifier.score(Record(completion=fenced("go", SUM["go"]), reference=SUM_CASES))
    assert result.reward == 0.0
    assert (
        result.error == "toolchain missing: rk-no-such-go (apt-get install golang-go; scripts/_toolchains.sh)"
    )


# ------------------------------------------------------------------------------------- where the language is


def test_language_from_the_record_wins_over_the_fence(verifier):
    # a C++ program in an unlabelled block, which would be Python's: the record says C++
    record = Record(completion=fenced("", SUM["cpp"]), reference={**SUM_CASES, "language": "c++"})
    assert verifier.score(record).reward == 1.0
    # a C++ block where the record says Python: the Python path runs it (and it fails there)
    python = Record(completion=fenced("cpp", SUM["cpp"]), reference={**SUM_CASES, "language": "python"})
    assert "language" not in verifier.score(python).details
    # metadata, then the verifier's option
    meta = Record(completion=SUM["rust"], reference=SUM_CASES, metadata={"language": "rust"})
    assert verifier.score(meta).details["language"] == "rust"
    option = get_verifier("code", timeout=ROOM_S, parallelism=2, language="go")
    try:
        assert option.score(Record(completion=SUM["go"], reference=SUM_CASES)).reward == 1.0
    finally:
        option.close()


def test_unknown_language_is_an_error_row(verifier):
    result = verifier.score(Record(completion="x", reference={**SUM_CASES, "language": "cobol"}))
    assert result.reward == 0.0 and "unknown language 'cobol'" in result.error


def test_python_stays_on_its_own_path(verifier):
    record = Record(
        completion=fenced("python", "a, b = map(int, input().split())\nprint(a + b)"), reference=SUM_CASES
    )
    result = verifier.score(record)
    assert result.reward == 1.0 and "language" not in result.details


# --------------------------------------------------------------------------------------------- test programs


def early_exit_completion(language: str, row: dict) -> str:
    """The canonical solution with an exit with status 0 before any test can fail: at load time (C++: a
    static object's constructor; JavaScript: top-level code; Go: an init function) or in the first call
    (Java, Rust)."""
    canonical = row["canonical_solution"]
    if language == "cpp":
        return canonical + "\n#include <cstdlib>\nstruct Quit { Quit() { std::exit(0); } } quit_now;\n"
    if language == "js":
        return canonical + "\nprocess.exit(0);\n"
    if language == "go":
        return canonical + "\nfunc init() { os.Exit(0) }\n"
    if language == "java":
        return "        System.exit(0);\n" + canonical
    return "    std::process::exit(0);\n" + canonical


@pytest.mark.parametrize("language", HUMANEVAL_X)
def test_exiting_before_the_tests_is_a_failure(verifier, language):
    """An exit with status 0 before the tests: HumanEval-X's harness reads only the exit status (the
    leaky stand-in: the same program does exit with 0), the verifier also wants the tests' end."""
    row = humaneval_x(language)[0]
    record = problem_records([row])[0]
    record.completion = early_exit_completion(language, row)
    if language == "go":
        row = {**row, "test_setup": row["test_setup"].replace("import (", 'import (\n    "os"')}
        record.reference = {k: v for k, v in row.items() if k != "canonical_solution"}
    item = verifier.prepare_foreign(record, verifier.language_of(record))
    built = verifier.builds.build(verifier.sandbox, [item.program])[0]
    assert built.error is None, built.error
    from rewardlab.verifiers.code.programs import run_task

    report = verifier.sandbox.run([run_task(item.program, built)])[0]
    assert report.exit_code == 0  # the control: exit status 0, what the published harness checks
    result = verifier.score(record)
    assert result.reward == 0.0, result.details
    assert result.details["cases"][0]["outcome"] == "fail"


def test_javascript_assert_cannot_be_silenced(verifier):
    """HumanEval-X's JavaScript tests use console.assert, which only prints in node: the verifier makes it
    throw, and a solution replacing it first makes the program fail rather than pass."""
    row = humaneval_x("js")[0]
    wrong = "  return false;\n}\n"
    silenced = "  return false;\n}\nconsole.assert = () => {};\n"
    frozen = "  return false;\n}\nObject.defineProperty(console, 'assert', {value: () => {}, configurable: false});\n"
    records = problem_records([row] * 3)
    for record, completion in zip(records, (wrong, silenced, frozen), strict=True):
        record.completion = completion
    results = verifier.score_batch(records)
    assert [r.reward for r in results] == [0.0, 0.0, 0.0], [r.details for r in results]
    assert "Assertion failed" in results[0].details["cases"][0]["message"]


def test_generic_function_tests_and_a_fenced_whole_solution(verifier):
    prompt = "#include <vector>\nint add(int a, int b) {\n"
    test = "#include <cassert>\nint main() { assert(add(2, 3) == 5); assert(add(-1, 1) == 0); }\n"
    reference = {"language": "cpp", "test": test, "entry_point": "add", "prompt": prompt}
    body = Record(prompt=prompt, completion="  return a + b;\n}\n", reference=reference)
    whole = Record(
        prompt=prompt,
        completion=fenced("cpp", "int add(int a, int b) { return a + b; }"),
        reference=reference,
    )
    wrong = Record(
        prompt=prompt,
        completion=fenced("cpp", "int add(int a, int b) { return a * b; }"),
        reference=reference,
    )
    results = verifier.score_batch([body, whole, wrong])
    assert [r.reward for r in results] == [1.0, 1.0, 0.0], [
        (r.error, r.details.get("cases")) for r in results
    ]
    assert results[1].details["code_source"].startswith("fenced")


def test_multipl_e_completion_is_cut_at_its_stop_tokens(verifier):
    row = jsonl("multipl_e_ts.jsonl")[0]
    record = problem_records([row])[0]
    record.completion = row["solution"] + "\nfunction extra(): number { return 'not a number'; }\n"
    result = verifier.score(record)  # the extra function would not type-check: cut at "\nfunction "
    assert result.reward == 1.0, result.error


# ------------------------------------------------------------------------------------------ outside data

DEFAULT_SUBSET = 2
"""Problems per language in the default suite (the rest are slow tests)."""


def outside_rows() -> dict[str, list[dict]]:
    rows = {lang: humaneval_x(lang) for lang in HUMANEVAL_X}
    rows["ts"] = jsonl("multipl_e_ts.jsonl")
    rows["c"] = jsonl("c_humaneval.jsonl")
    return rows


def test_outside_data_subset_canonical_passes_broken_fails(verifier):
    rows = {lang: r[:DEFAULT_SUBSET] for lang, r in outside_rows().items()}
    records = [rec for lang in rows for rec in problem_records(rows[lang])]
    records += [rec for lang in HUMANEVAL_X for rec in problem_records(rows[lang], "broken")]
    results = verifier.score_batch(records)
    canonical, broken = (
        results[: -len(HUMANEVAL_X) * DEFAULT_SUBSET],
        results[-len(HUMANEVAL_X) * DEFAULT_SUBSET :],
    )
    assert [r.reward for r in canonical] == [1.0] * len(canonical), [
        (r.error, r.details.get("cases")) for r in canonical if r.reward != 1.0
    ]
    assert [r.reward for r in broken] == [0.0] * len(broken)


CANONICAL_FAILS = {
    "JavaScript/112": "the released canonical solution returns `(z, false)`, a bare boolean (comma operator)",
    "JavaScript/155": "the released test expects evenOddCount(0) == [1, 0]; the canonical solution gives [0, 0]",
    "JavaScript/162": "the canonical solution requires the npm package js-md5, not in Debian",
    "Go/95": "the canonical solution breaks out of a loop over a map: its verdict depends on Go's random map order",
}
"""HumanEval-X problems whose canonical solution may fail under any harness, and why (each checked by hand
against CodeGeeX's harness outside the sandbox; see the issue-48 closing note)."""
BROKEN_PASSES = {
    "CPP/23": "the harness includes <cstring>: the test's strlen(...) is C's, never the candidate's",
    "Rust/4": "the test compares without abs(): any value at or below the expected one passes",
    "Rust/32": "the whole test module is commented out: no test runs",
}
"""Problems whose tests cannot reject the broken variant (a zero-value early return), and why."""


@pytest.mark.slow
@pytest.mark.parametrize("language", HUMANEVAL_X)
def test_humaneval_x_full(verifier, language):
    rows = humaneval_x(language)
    results = verifier.score_batch(problem_records(rows) + problem_records(rows, "broken"))
    canonical, broken = results[: len(rows)], results[len(rows) :]
    failed = {
        row["task_id"]: (r.error or r.details["cases"][0].get("message"))
        for row, r in zip(rows, canonical, strict=True)
        if r.reward != 1.0
    }
    passed_broken = {row["task_id"] for row, r in zip(rows, broken, strict=True) if r.reward != 0.0}
    assert set(failed) <= set(CANONICAL_FAILS), failed
    assert passed_broken <= set(BROKEN_PASSES), passed_broken
    if language == "cpp":  # Boost and OpenSSL come with scripts/_toolchains.sh
        assert not failed
    print(
        f"{language}: canonical {len(rows) - len(failed)}/{len(rows)}, broken rejected {len(rows) - len(passed_broken)}/{len(rows)}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["multipl_e_ts.jsonl", "c_humaneval.jsonl"])
def test_c_and_typescript_full(verifier, name):
    rows = jsonl(name)
    results = verifier.score_batch(problem_records(rows))
    assert [r.reward for r in results] == [1.0] * len(rows), [r.error for r in results if r.reward != 1.0]
    assert len(rows) >= 20
