"""Scoring records in languages other than Python: build each program once, run its cases, reward.

The stages, each a named function: :func:`make_program` (the record's program in its language),
``Builds.build`` (compile once, ``programs.py``), the runs (a test program once; a stdin/stdout program once
per case, the later cases only when the first passed, as the Python path's ``early_stop``), then
:func:`test_case` / :func:`stdio_case` (one outcome per run) and the verifier's reward.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rewardlab.verifiers.code.languages import Program
from rewardlab.verifiers.code.multilang import ForeignSpec, assemble
from rewardlab.verifiers.code.programs import Builds, Built, run_task
from rewardlab.verifiers.code.sandbox import RunReport, Sandbox

MEMORY_MESSAGES = (
    "MemoryError",
    "OutOfMemoryError",
    "heap out of memory",
    "std::bad_alloc",
    "memory allocation of",
    "runtime: out of memory",
    "Cannot allocate memory",
    "cannot allocate memory",
)
"""What each runtime prints when its memory limit refuses an allocation."""


@dataclass
class Planned:
    """One record on its way: its spec, its program and how the program came from the completion."""

    index: int
    spec: ForeignSpec
    program: Program
    source: str
    built: Built | None = None


def make_program(
    spec: ForeignSpec, code: str, source: str, record_prompt: str, done: str, memory_mb: int
) -> Program:
    """The record's program: the completion alone (stdin/stdout) or prompt + completion + tests."""
    language = spec.language
    if spec.style == "stdio":
        return language.stdio_program(code, memory_mb)
    entry = spec.entry_point or ""
    whole = source.startswith("fenced") and bool(entry) and language.defines(code, entry)
    return language.test_program(assemble(spec, code, whole, record_prompt), done, memory_mb)


Match = Callable[[str, str], bool]
"""The verifier's comparison of a program's output with the expected one."""


def run_planned(
    sandbox: Sandbox, builds: Builds, plan: list[Planned], staged: bool, match: Match
) -> dict[int, list[RunReport]]:
    """Compiles the plan's programs (once each) and runs them; reports by record index (a record whose
    program did not build has none)."""
    for item, built in zip(plan, builds.build(sandbox, [p.program for p in plan]), strict=True):
        item.built = built
    ready = [p for p in plan if p.built and not p.built.error]
    reports: dict[int, list[RunReport]] = {p.index: [] for p in ready}
    first = [(p, _stdins(p.spec)[:1] if staged else _stdins(p.spec)) for p in ready]
    _run_wave(sandbox, first, reports)
    if staged:
        rest = [
            (p, _stdins(p.spec)[1:])
            for p in ready
            if p.spec.style == "stdio"
            and len(p.spec.inputs) > 1
            and _first_passed(p, reports[p.index], match)
        ]
        _run_wave(sandbox, rest, reports)
    return reports


def _stdins(spec: ForeignSpec) -> list[str]:
    return list(spec.inputs) if spec.style == "stdio" else [""]


def _run_wave(
    sandbox: Sandbox, work: list[tuple[Planned, list[str]]], reports: dict[int, list[RunReport]]
) -> None:
    tasks, owners = [], []
    for item, stdins in work:
        assert item.built is not None
        for stdin in stdins:
            tasks.append(run_task(item.program, item.built, stdin))
            owners.append(item.index)
    if not tasks:
        return
    try:
        outcomes = sandbox.run(tasks)
    except Exception as exc:  # noqa: BLE001 - e.g. the zygote cannot start
        outcomes = [RunReport(error=f"sandbox error: {exc}") for _ in tasks]
    for owner, report in zip(owners, outcomes, strict=True):
        reports[owner].append(report)  # type: ignore[arg-type]


def _first_passed(item: Planned, reports: list[RunReport], match: Match) -> bool:
    return bool(reports) and stdio_case(reports[0], item.spec.outputs[0], match)["outcome"] == "pass"


def memory_error(report: RunReport) -> bool:
    return any(m in report.stderr for m in MEMORY_MESSAGES)


MemoryCheck = Callable[[RunReport], bool]
"""Whether a run ended on its memory limit (each path knows its runtimes' messages)."""


def _died(report: RunReport, memory: MemoryCheck = memory_error) -> dict | None:
    """The outcome of a run that did not end normally, or ``None``."""
    timing = {"wall": report.wall, "cpu": report.cpu}
    if report.timed_out:
        return {"outcome": "timeout", **timing}
    if report.output_limit:
        return {"outcome": "fail", "message": "output limit exceeded", **timing}
    if memory(report):
        return {"outcome": "memory", "message": report.last_error_line, **timing}
    if report.signal is not None:
        return {"outcome": "error", "message": f"killed by signal {report.signal}", **timing}
    return None


def stdio_case(report: RunReport, expected: str, match: Match, memory: MemoryCheck = memory_error) -> dict:
    """One stdin/stdout case's outcome (both paths: Python's passes its own ``memory`` check)."""
    died = _died(report, memory)
    if died:
        return died
    timing = {"wall": report.wall, "cpu": report.cpu}
    if report.exit_code:
        return {
            "outcome": "error",
            "message": report.last_error_line or f"exit code {report.exit_code}",
            **timing,
        }
    actual = report.stdout.decode("utf-8", "replace")
    if match(actual, expected):
        return {"outcome": "pass", **timing}
    return {"outcome": "fail", "message": f"wrong output: {actual[:200]!r}", **timing}


def test_case(report: RunReport, done: str | None) -> dict:
    """A test program's outcome: it passes when it exited with 0 after printing ``done`` on a line of its
    own (a program that exits early never prints it)."""
    timing = {"wall": report.wall, "cpu": report.cpu}
    died = _died(report)
    if died and died["outcome"] != "error":
        return died
    if died or report.exit_code:  # a failed assert aborts (SIGABRT) in C and C++
        return {"outcome": "fail", "message": _failure_line(report), **timing}
    lines = [line.strip() for line in report.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    if done and not any(line.startswith(done) for line in lines[-3:]):
        return {
            "outcome": "fail",
            "message": "the tests did not run to their end (the program exited early)",
            **timing,
        }
    return {"outcome": "pass", **timing}


def _failure_line(report: RunReport) -> str:
    """The first line naming the failed assertion or the error (not the last: runtimes end with stacks)."""
    text = report.stderr + "\n" + report.stdout.decode("utf-8", "replace")
    for line in text.splitlines():
        if re.search(r"assert|Assertion|panicked|Error|error|FAIL|Exception", line):
            return line.strip()[:500]
    return report.last_error_line or f"exit code {report.exit_code}"


__all__ = ["Planned", "make_program", "memory_error", "run_planned", "stdio_case", "test_case"]
