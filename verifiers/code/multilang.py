"""Records in languages other than Python: which language, which tests, and the program they make.

The language comes from the record (``reference.language``, a HumanEval-X ``task_id`` prefix, MultiPL-E's
``language``, ``metadata.language``), then the verifier's ``language`` option, then the fence label of the
extracted block. Accepted references, dict keys as published:

* stdin/stdout cases in any of the shapes the Python path reads (``inputs``/``outputs``, APPS,
  CodeContests, LiveCodeBench), with a ``language``;
* generic function tests: ``{"language": L, "test": T, "prompt": P (optional, else the record's prompt),
  "entry_point": E (optional)}``; the program is ``P + completion + T``;
* HumanEval-X (THUDM/CodeGeeX): ``task_id``, ``prompt``, ``declaration``, ``test`` (``example_test``,
  ``import``, ``test_setup`` where the language has them), assembled as CodeGeeX's harness does;
* MultiPL-E (nuprl): ``name``, ``language``, ``prompt``, ``tests``, ``stop_tokens``; a completion that
  continues the prompt is cut at the first stop token, as MultiPL-E does.

A completion may be a body continuing the prompt (the benchmarks' own setting) or a fenced whole solution
that defines the entry point itself; then the prompt's include and import lines it lacks go above it and the
prompt's own definition is left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rewardlab.verifiers.code.languages import PYTHON_NAMES, Language, find_language

HUMANEVAL_X_PREFIXES = {
    "cpp": "cpp",
    "java": "java",
    "javascript": "js",
    "go": "go",
    "rust": "rust",
    "c": "c",
}
"""HumanEval-X ``task_id`` prefixes (``CPP/0``), lower case, and the language each means."""
CPP_HEADERS = (
    "#include<stdlib.h>",
    "#include<algorithm>",
    "#include<math.h>",
    "#include<stdio.h>",
    "#include<vector>",
    "#include<string>",
    "#include<climits>",
    "#include<cstring>",
    "#include<iostream>",
)
"""What CodeGeeX's harness puts above a C++ program, each where the prompt lacks it (IMPORT_HELPER)."""
GO_HELPER_PACKAGES = (
    "math",
    "strings",
    "fmt",
    "strconv",
    "time",
    "bytes",
    "regexp",
    "sort",
    "math/rand",
    "crypto/md5",
)
"""Packages CodeGeeX's harness imports for a Go completion that uses them (IMPORT_HELPER["go"])."""


@dataclass
class ForeignSpec:
    """A non-Python record's tests, normalised."""

    language: Language
    style: str  # "stdio" or "tests"
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    prompt: str = ""
    test: str = ""
    entry_point: str | None = None
    stop_tokens: list[str] = field(default_factory=list)
    benchmark: str = "generic"
    record: dict[str, Any] = field(default_factory=dict)
    """The reference's own fields (HumanEval-X's ``test_setup``, ``import``...)."""


def as_dict(reference: Any) -> dict[str, Any] | None:
    """The reference as a dict (a JSON string of one is decoded), or ``None``."""
    if isinstance(reference, str) and reference.strip().startswith("{"):
        try:
            reference = json.loads(reference)
        except ValueError:
            return None
    return reference if isinstance(reference, dict) else None


def record_language(reference: Any, metadata: dict | None) -> str | None:
    """The language a record names (reference first, then metadata), as written; ``None`` if none."""
    for source in (as_dict(reference), metadata or {}):
        if not source:
            continue
        if isinstance(source.get("language"), str) and source["language"].strip():
            return source["language"]
        task_id = source.get("task_id")
        if isinstance(task_id, str) and "/" in task_id:
            prefix = task_id.split("/", 1)[0].lower()
            if prefix in HUMANEVAL_X_PREFIXES:
                return HUMANEVAL_X_PREFIXES[prefix]
            if prefix in PYTHON_NAMES:
                return "python"
    return None


def resolve_language(named: str | None, fence: str | None) -> Language | None:
    """The language to run (``None``: Python). ``named`` (record or option) wins over the fence label.

    Raises:
        ValueError: ``named`` is neither Python nor a known language.
    """
    if named:
        if named.strip().lower() in PYTHON_NAMES:
            return None
        language = find_language(named)
        if language is None:
            raise ValueError(f"unknown language {named!r}")
        return language
    return find_language(fence)


def fence_label(text: str, extract: str) -> str | None:
    """The label of the fenced block that extraction would pick among labelled blocks (``None`` when the
    completion has no labelled block)."""
    labels = [m.group(1).lower() for m in re.finditer(r"```[ \t]*([\w+#.-]+)[^\n]*\n", text)]
    if not labels:
        return None
    return labels[0] if extract == "first" else labels[-1]


def foreign_spec(reference: Any, metadata: dict | None, language: Language, stdio: Any) -> ForeignSpec:
    """The tests of a record in ``language``. ``stdio`` turns a Python-path reference into its
    stdin/stdout spec (``verifier.normalize_reference``), tried when the record has no test code.

    Raises:
        ValueError: no tests in a shape known for this language.
    """
    ref = as_dict(reference) or {}
    if not ref or not any(k in ref for k in ("test", "tests")):
        ref = {**(metadata or {}), **ref}
    test = ref.get("test", ref.get("tests"))
    if isinstance(test, str) and test.strip():
        return _test_spec(ref, language, test)
    spec = stdio(reference, metadata=metadata)
    if spec.style != "stdio":
        raise ValueError(f"invalid reference: {language.name} function tests need test code ('test')")
    return ForeignSpec(language, "stdio", inputs=spec.inputs, outputs=spec.outputs)


def _test_spec(ref: dict[str, Any], language: Language, test: str) -> ForeignSpec:
    task_id = str(ref.get("task_id") or "")
    if "/" in task_id and task_id.split("/", 1)[0].lower() in HUMANEVAL_X_PREFIXES:
        benchmark = "humaneval-x"
    elif "stop_tokens" in ref or ("name" in ref and "tests" in ref):
        benchmark = "multipl-e"
    else:
        benchmark = "generic"
    stops = ref.get("stop_tokens") or []
    prompt = str(ref.get("prompt") or "")
    declaration = str(ref.get("declaration") or "")
    head = declaration.strip().splitlines()[-1].strip() if declaration.strip() else ""
    declared = _entry_from({"declaration": declaration}, language) if head else None
    if benchmark == "humaneval-x" and head not in prompt and not language.defines(prompt, declared or ""):
        prompt += declaration  # HumanEval-X's Rust prompts are the description alone
    return ForeignSpec(
        language,
        "tests",
        prompt=prompt,
        test=test,
        entry_point=ref.get("entry_point") or _entry_from(ref, language),
        stop_tokens=[str(s) for s in stops] if isinstance(stops, list) else [],
        benchmark=benchmark,
        record=ref,
    )


def _entry_from(ref: dict[str, Any], language: Language) -> str | None:
    """The function under test, read from the declaration (or the prompt): the name before the last
    parenthesis of its head."""
    head = str(ref.get("declaration") or ref.get("prompt") or "")
    names = re.findall(
        r"(\w+)\s*(?:<[^()]*>)?\s*\([^()]*\)[^(){};]*\{\s*$", head.rstrip() + "\n", re.MULTILINE
    )
    if names:
        return names[-1]
    names = re.findall(r"\b(?:const|let|var)\s+(\w+)\s*=", head)
    return names[-1] if names else None


def cut_at_stop(completion: str, stops: list[str]) -> str:
    """A continuing completion up to its first stop token (MultiPL-E's rule)."""
    cut = min((completion.find(s) for s in stops if s and s in completion), default=-1)
    return completion if cut < 0 else completion[:cut]


def assemble(spec: ForeignSpec, code: str, whole: bool, record_prompt: str) -> str:
    """The test program: prompt (or, for a whole solution, the prompt's header lines it lacks), code, tests."""
    language, prompt = spec.language, spec.prompt or record_prompt
    if whole:
        missing = [line for line in language.header(prompt).splitlines() if line.strip() not in code]
        head = "\n".join(missing) + ("\n" if missing else "")
    else:
        head = prompt
    code = code + language.test_prelude
    if spec.benchmark == "humaneval-x":
        return _humaneval_x(spec, head, code)
    return head + code + "\n" + spec.test


def _humaneval_x(spec: ForeignSpec, head: str, code: str) -> str:
    """CodeGeeX's assembly (``codegeex/benchmark/execution.py``, ``utils.py``)."""
    name, ref = spec.language.name, spec.record
    if name == "cpp":
        setup = "".join(line + "\n" for line in CPP_HEADERS if line not in head)
        return setup + "\n" + head + code + "\n" + spec.test
    if name == "go":
        return _go_program(str(ref.get("test_setup") or "package main\n"), head, code, spec.test)
    if name == "rust":
        return head + code + "\n" + rand_08(spec.test)
    return head + code + "\n" + spec.test


_GEN_RANGE = re.compile(r"\.gen_range\(([^,()]+),\s*([^()]+(?:\([^()]*\))?[^()]*)\)")


def rand_08(test: str) -> str:
    """HumanEval-X's Rust tests for rand 0.4 (CodeGeeX pins 0.4.6) on Debian's rand 0.8: the two-argument
    ``gen_range(low, high)`` (Rust/50) becomes ``gen_range(low..high)``; nothing else they use changed."""
    return _GEN_RANGE.sub(r".gen_range(\1..\2)", test)


def _go_program(setup: str, head: str, code: str, test: str) -> str:
    """Go: the test file's package clause and imports, then the prompt's imports that the program uses
    (Go refuses an unused import, and a solution need not use every import of the prompt)."""
    body = head + code + "\n" + test
    imports = re.findall(r'"([\w./-]+)"', " ".join(re.findall(r"import\s*\(([^)]*)\)", body)))
    imports += re.findall(r'^import\s+"([\w./-]+)"', body, re.MULTILINE) + list(GO_HELPER_PACKAGES)
    body = re.sub(r"^import\s*\([^)]*\)\s*\n?|^import\s+\"[\w./-]+\"\s*\n?", "", body, flags=re.MULTILINE)
    body = re.sub(r"^package\s+\w+\s*\n", "", body, flags=re.MULTILINE)
    setup_imports = re.findall(r'"([\w./-]+)"', setup)
    code_only = re.sub(r"//[^\n]*|/\*.*?\*/", "", body, flags=re.DOTALL)  # a name in a comment is no use
    used = [
        imp
        for imp in dict.fromkeys(imports)
        if imp not in setup_imports and re.search(rf"\b{re.escape(imp.rsplit('/', 1)[-1])}\.", code_only)
    ]
    extra = "".join(f'import "{imp}"\n' for imp in used)
    return setup.rstrip("\n") + "\n" + extra + body


__all__ = [
    "ForeignSpec",
    "assemble",
    "cut_at_stop",
    "fence_label",
    "foreign_spec",
    "record_language",
    "resolve_language",
]
