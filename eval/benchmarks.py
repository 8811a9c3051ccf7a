"""Benchmarks as data: where each one lives, its field names, its verifier and its prompt template.

A benchmark is a hub dataset name (when the user has internet), a local JSONL/parquet/``save_to_disk``
folder with the same fields (``--data PATH``), or the small sample shipped under ``data/`` (the name
prefixed with ``sample:``). Any other file can be evaluated with an explicit ``verifier`` and field map.

    from rewardlab.eval.benchmarks import load_benchmark
    bench, problems = load_benchmark("sample:gsm8k")
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rewardlab.data import sample_path
from rewardlab.data.loaders import read_rows as read_all_rows
from rewardlab.extras import require
from rewardlab.hub import hub_problem
from rewardlab.verifiers import VERIFIERS, Verifier

BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass
class Problem:
    """One benchmark item, ready to prompt and to score."""

    id: str
    prompt: str
    reference: Any
    verifier: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Benchmark:
    """How to read one benchmark.

    Attributes:
        name: Registry name.
        verifier: Verifier that scores its completions.
        hub_name: ``datasets`` hub id (loaded only when asked for by name, with internet).
        hub_config: Hub config name (``main`` for GSM8K), if any.
        split: Split evaluated by default.
        sample_file: Shipped sample, relative to the ``rewardlab.data`` folder.
        prompt_field: Row field holding the question.
        id_field: Row field holding a stable id (row index when absent).
        template: Prompt template; ``{prompt}`` is the question (few-shot examples are prepended).
        reference: Builds the verifier's reference from a row.
        subset_fields: Row fields that split the results (level, subject, difficulty...).
        answer_field: Row field with a worked answer, used for few-shot examples.
        answer_votes: How maj@k groups the extracted answers (``math``: math equivalence; ``exact``: equal
            text), ``None`` for no maj@k; a custom benchmark takes its verifier's ``answer_votes``.
        verifier_config: Keyword arguments for the verifier.
        sample_verifier_config: Extra verifier arguments for the shipped sample (``{data}`` in a value is
            the ``rewardlab.data`` folder), e.g. where the sample's SQL databases are.
    """

    name: str
    verifier: str
    hub_name: str | None = None
    hub_config: str | None = None
    split: str = "test"
    sample_file: str | None = None
    prompt_field: str = "problem"
    id_field: str | None = None
    template: str = "{prompt}"
    reference: Callable[[dict[str, Any]], Any] = lambda row: row.get("answer")
    subset_fields: tuple[str, ...] = ()
    answer_field: str | None = None
    answer_votes: str | None = None
    verifier_config: dict[str, Any] = field(default_factory=dict)
    sample_verifier_config: dict[str, Any] = field(default_factory=dict)

    def to_problem(self, row: dict[str, Any], index: int) -> Problem:
        if self.prompt_field not in row:
            raise KeyError(f"benchmark {self.name!r}: row {index} has no field {self.prompt_field!r}")
        problem_id = row.get(self.id_field) if self.id_field else None
        metadata = {key: row[key] for key in self.subset_fields if key in row}
        return Problem(
            id=str(problem_id if problem_id is not None else index),
            prompt=str(row[self.prompt_field]),
            reference=self.reference(row),
            verifier=self.verifier,
            metadata=metadata,
        )


def gsm8k_reference(row: dict[str, Any]) -> str:
    """GSM8K's gold is the text after ``####`` in the worked answer, thousands separators removed."""
    answer = str(row["answer"])
    if "####" in answer:
        answer = answer.rsplit("####", 1)[1]
    return answer.strip().replace(",", "")


def humaneval_reference(row: dict[str, Any]) -> dict[str, Any]:
    return {"test": row["test"], "entry_point": row["entry_point"], "prompt": row.get("prompt", "")}


def mbpp_reference(row: dict[str, Any]) -> dict[str, Any]:
    tests = row.get("test_list") or []
    return {
        "test_list": list(tests),
        "test_setup_code": row.get("test_setup_code", ""),
        "challenge_test_list": list(row.get("challenge_test_list") or []),
    }


def stdio_reference(row: dict[str, Any]) -> dict[str, Any]:
    """LiveCodeBench / APPS / CodeContests style: inputs and expected outputs of stdin/stdout cases."""
    if "inputs" in row and "outputs" in row:
        return {"inputs": list(row["inputs"]), "outputs": list(row["outputs"])}
    if "input_output" in row:
        spec = row["input_output"]
        spec = json.loads(spec) if isinstance(spec, str) else spec
        return {"inputs": spec["inputs"], "outputs": spec["outputs"]}
    cases = row.get("public_test_cases") or row.get("test_cases") or []
    cases = json.loads(cases) if isinstance(cases, str) else cases
    return {"inputs": [c["input"] for c in cases], "outputs": [c["output"] for c in cases]}


def spider_reference(row: dict[str, Any]) -> dict[str, Any]:
    reference = {"gold": row["query"], "db_id": row.get("db_id")}
    for key in ("db_path", "db_paths", "schema", "db_dir"):
        if key in row:
            reference[key] = row[key]
    return reference


def ifeval_reference(row: dict[str, Any]) -> dict[str, Any]:
    return {"instruction_id_list": list(row["instruction_id_list"]), "kwargs": list(row["kwargs"])}


BENCHMARKS: dict[str, Benchmark] = {
    "gsm8k": Benchmark(
        name="gsm8k",
        verifier="math",
        hub_name="openai/gsm8k",
        hub_config="main",
        sample_file="benchmarks/gsm8k_sample.jsonl",
        prompt_field="question",
        template="{prompt}\n" + BOXED_INSTRUCTION + "\n",
        reference=gsm8k_reference,
        answer_field="answer",
        answer_votes="math",
    ),
    "math500": Benchmark(
        name="math500",
        verifier="math",
        hub_name="HuggingFaceH4/MATH-500",
        sample_file="benchmarks/math500_sample.jsonl",
        prompt_field="problem",
        id_field="unique_id",
        template="{prompt}\n" + BOXED_INSTRUCTION + "\n",
        subset_fields=("level", "subject"),
        answer_field="solution",
        answer_votes="math",
    ),
    "aime": Benchmark(
        name="aime",
        verifier="math",
        hub_name="HuggingFaceH4/aime_2024",
        split="train",
        sample_file="benchmarks/aime_sample.jsonl",
        prompt_field="problem",
        id_field="id",
        template="{prompt}\n" + BOXED_INSTRUCTION + "\n",
        reference=lambda row: str(row["answer"]),
        subset_fields=("year",),
        answer_votes="math",
    ),
    "humaneval": Benchmark(
        name="humaneval",
        verifier="code",
        hub_name="openai/openai_humaneval",
        sample_file="benchmarks/humaneval_sample.jsonl",
        prompt_field="prompt",
        id_field="task_id",
        template="Complete the following Python function. Return the whole function in a ```python block.\n\n"
        "```python\n{prompt}```\n",
        reference=humaneval_reference,
    ),
    "mbpp": Benchmark(
        name="mbpp",
        verifier="code",
        hub_name="google-research-datasets/mbpp",
        sample_file="benchmarks/mbpp_sample.jsonl",
        prompt_field="text",
        id_field="task_id",
        template="{prompt}\nYour code should pass these tests:\n{tests}\nWrite the function in a ```python block.\n",
        reference=mbpp_reference,
        answer_field="code",
    ),
    "livecodebench": Benchmark(
        name="livecodebench",
        verifier="code",
        hub_name="livecodebench/code_generation_lite",
        sample_file="benchmarks/livecodebench_sample.jsonl",
        prompt_field="question_content",
        id_field="question_id",
        template="{prompt}\nRead the input from stdin and write the answer to stdout. "
        "Give the program in a ```python block.\n",
        reference=stdio_reference,
        subset_fields=("difficulty",),
    ),
    "spider": Benchmark(
        name="spider",
        verifier="sql",
        hub_name="xlangai/spider",
        split="validation",
        sample_file="sql/questions.jsonl",
        sample_verifier_config={"db_root": "{data}/sql/databases"},
        prompt_field="question",
        template="{schema}Write one SQLite query that answers: {prompt}\nGive the query in a ```sql block.\n",
        reference=spider_reference,
        subset_fields=("db_id", "hardness"),
    ),
    "ifeval": Benchmark(
        name="ifeval",
        verifier="ifeval",
        hub_name="google/IFEval",
        split="train",
        sample_file="ifeval/sample.jsonl",
        prompt_field="prompt",
        id_field="key",
        reference=ifeval_reference,
    ),
}


def list_benchmarks() -> list[str]:
    return sorted(BENCHMARKS)


def read_rows(path: str | Path, split: str | None = None) -> list[dict[str, Any]]:
    """Rows of a local JSONL / JSON / parquet file or a ``datasets`` ``save_to_disk`` folder."""

    if not Path(path).exists():
        raise FileNotFoundError(f"benchmark data not found: {path}")
    return read_all_rows(path, split)


def _hub_rows(bench: Benchmark, split: str | None) -> list[dict[str, Any]]:
    datasets = require("datasets", extra="data", what=f"benchmark {bench.name!r} from the hub")
    problem = hub_problem(datasets_offline=True)
    if problem:
        sample = f", or use its shipped sample: sample:{bench.name}" if bench.sample_file else ""
        raise FileNotFoundError(
            f"benchmark {bench.name!r} comes from the hub ({bench.hub_name}), and {problem}: "
            f"give its rows with --data{sample}"
        )
    dataset = datasets.load_dataset(bench.hub_name, bench.hub_config, split=split or bench.split)
    return [dict(row) for row in dataset]


def resolve(
    spec: str, *, data: str | None = None, verifier: str | None = None
) -> tuple[Benchmark, str | None]:
    """The benchmark named by ``spec`` and where its rows come from.

    ``spec`` is a registry name (rows from ``data`` if given, else the hub), ``sample:NAME`` (the shipped
    sample), or a file path (then ``verifier`` is needed unless the file's name starts with a known
    benchmark's name, and the fields are the standard ``prompt`` / ``reference``, or a field map).
    """
    if spec.startswith("sample:"):
        name = spec.split(":", 1)[1]
        bench = _own_verifier(_lookup(name), verifier)
        if not bench.sample_file:
            raise ValueError(f"benchmark {name!r} ships no sample")
        if bench.sample_verifier_config:
            extra = {
                k: str(v).replace("{data}", sample_path()) for k, v in bench.sample_verifier_config.items()
            }
            bench = replace(bench, verifier_config={**bench.verifier_config, **extra})
        return bench, sample_path(*bench.sample_file.split("/"))
    if spec in BENCHMARKS:
        return _own_verifier(BENCHMARKS[spec], verifier), data
    path = Path(spec)
    if path.exists():
        for name, bench in BENCHMARKS.items():
            if verifier is None and path.name.startswith(name):
                return bench, str(path)
        return custom_benchmark(path.stem, verifier or "math"), str(path)
    raise KeyError(f"unknown benchmark {spec!r}: not a file, and not one of {', '.join(list_benchmarks())}")


def _own_verifier(bench: Benchmark, verifier: str | None) -> Benchmark:
    """``bench`` itself: a named benchmark is scored by its own verifier, so another one asked for is refused
    rather than silently ignored.

    Raises:
        ValueError: ``verifier`` is given and is not the benchmark's.
    """
    if verifier is not None and verifier != bench.verifier:
        raise ValueError(
            f"--verifier {verifier}: benchmark {bench.name} is scored by its own verifier ({bench.verifier}); "
            "to score its rows with another, give them as a data file"
        )
    return bench


def _lookup(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r} (known: {', '.join(list_benchmarks())})")
    return BENCHMARKS[name]


def _answer_votes(verifier: str) -> str | None:
    """The verifier's ``answer_votes``; ``None`` for a name that is not a registered verifier (``http:``)."""
    try:
        return VERIFIERS.get(verifier).answer_votes
    except Exception:  # an unknown name fails later, where the verifier is built, with its own message
        return None


def answer_grouping(bench: Benchmark) -> Callable[[Sequence[str | None]], list[int | None]] | None:
    """How maj@k groups the benchmark's extracted answers, asked of its verifier
    (:meth:`rewardlab.verifiers.Verifier.group_answers`: math equivalence for the math verifier, equal text
    for the others); ``None`` when the benchmark has no maj@k (``answer_votes`` unset). A verifier name the
    registry does not know (``http:``) groups by equal text, the base class's rule."""
    if not bench.answer_votes:
        return None
    try:
        return VERIFIERS.get(bench.verifier).group_answers
    except Exception:  # not a registered verifier class: the base rule
        return Verifier.group_answers


def custom_benchmark(name: str, verifier: str, field_map: dict[str, str] | None = None) -> Benchmark:
    """A benchmark for any file: ``prompt`` and ``reference`` fields (renamed through ``field_map``)."""
    field_map = field_map or {}
    reference_field = field_map.get("reference", "reference")
    return Benchmark(
        name=name,
        verifier=verifier,
        prompt_field=field_map.get("prompt", "prompt"),
        id_field=field_map.get("id", "id"),
        reference=lambda row: row.get(reference_field, row.get("answer")),
        subset_fields=("subset", "level", "category", "difficulty"),
        answer_votes=_answer_votes(verifier),
    )


def load_benchmark(
    spec: str,
    *,
    data: str | None = None,
    split: str | None = None,
    verifier: str | None = None,
    field_map: dict[str, str] | None = None,
    limit: int | None = None,
) -> tuple[Benchmark, list[Problem]]:
    """Loads a benchmark's problems (see :func:`resolve` for what ``spec`` may be)."""
    bench, source = resolve(spec, data=data, verifier=verifier)
    if field_map:
        bench = _with_field_map(bench, field_map)
    rows = read_rows(source, split) if source else _hub_rows(bench, split)
    if limit is not None:
        rows = rows[:limit]
    problems = [bench.to_problem(row, index) for index, row in enumerate(rows)]
    _check_unique_ids(problems)
    return bench, problems


def _with_field_map(bench: Benchmark, field_map: dict[str, str]) -> Benchmark:
    changes: dict[str, Any] = {}
    if "prompt" in field_map:
        changes["prompt_field"] = field_map["prompt"]
    if "id" in field_map:
        changes["id_field"] = field_map["id"]
    if "reference" in field_map:
        key = field_map["reference"]
        changes["reference"] = lambda row: row[key]
    return replace(bench, **changes)


def _check_unique_ids(problems: list[Problem]) -> None:
    seen: set[str] = set()
    for problem in problems:
        if problem.id in seen:
            raise ValueError(f"duplicate problem id {problem.id!r}")
        seen.add(problem.id)


def sqlite_schema(db_root: str, db_id: str) -> str | None:
    """The CREATE statements of a Spider-layout SQLite database, for SQL prompts."""
    import sqlite3

    for candidate in (Path(db_root) / db_id / f"{db_id}.sqlite", Path(db_root) / f"{db_id}.sqlite"):
        if candidate.is_file():
            with sqlite3.connect(f"file:{candidate}?mode=ro", uri=True) as connection:
                rows = connection.execute(
                    "SELECT sql FROM sqlite_master WHERE type='table' AND sql IS NOT NULL"
                )
                return ";\n".join(row[0] for row in rows) + ";"
    return None


def render_prompt(bench: Benchmark, problem: Problem, row_extra: dict[str, Any] | None = None) -> str:
    """The benchmark's prompt template filled in for one problem."""
    values = {"prompt": problem.prompt, "tests": "", "schema": ""}
    db_root = bench.verifier_config.get("db_root")
    if isinstance(problem.reference, dict) and db_root and problem.reference.get("db_id"):
        schema = sqlite_schema(db_root, problem.reference["db_id"])
        if schema:
            values["schema"] = f"Database schema:\n{schema}\n\n"
    if isinstance(problem.reference, dict):
        tests = problem.reference.get("test_list")
        if tests:
            values["tests"] = "\n".join(tests)
        schema = problem.reference.get("schema")
        if isinstance(schema, str):
            values["schema"] = f"Database schema:\n{schema}\n\n"
    values.update(row_extra or {})
    return _format(bench.template, values)


def _format(template: str, values: dict[str, Any]) -> str:
    # str.format would choke on the braces of \boxed{} in templates; only known names are substituted.
    return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), m.group(0))), template)
