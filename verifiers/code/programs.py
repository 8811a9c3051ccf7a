"""Compile once, run many: the sandbox stages of a program in a language other than Python.

:class:`Builds` compiles each distinct program once per verifier (keyed by the hash of its language,
compiler command and source) inside the sandbox, with the compiler's own time and memory limits, and keeps
the compiled files (bounded, least recently used out first); :func:`run_task` turns a built program and
its stdin into the sandbox task that runs it. A compile error is kept too: the same wrong program is not
compiled twice either.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from rewardlab.verifiers.code.languages import Program
from rewardlab.verifiers.code.sandbox import ExecTask, RunReport, Sandbox

COMPILE_ERROR_LINES = 12
"""How many lines of the compiler's messages a compile error keeps (the first ones: the cause)."""


@dataclass
class Built:
    """A compiled program (its files), or why it did not compile."""

    files: dict[str, bytes] = field(default_factory=dict)
    executable: tuple[str, ...] = ()
    error: str | None = None
    compile_wall: float = 0.0
    compile_cpu: float = 0.0
    cached: bool = False


@dataclass
class CompileLimits:
    """The compiler's own limits (a template bomb or a crafted include stops here, not at the run's)."""

    timeout: float = 30.0
    memory_mb: int = 2048
    max_processes: int = 64
    max_file_mb: int = 256


class Builds:
    """Each distinct program compiled once (see module docstring); thread-unsafe like its verifier."""

    def __init__(self, limits: CompileLimits | None = None, max_bytes: int = 512 << 20) -> None:
        self.limits = limits or CompileLimits()
        self.max_bytes = max_bytes
        self._cache: OrderedDict[str, Built] = OrderedDict()
        self._bytes = 0
        self.compiled = 0

    @staticmethod
    def key(program: Program) -> str:
        payload = json.dumps([program.source, program.compile, program.artifacts, program.env, program.text])
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    def build(self, sandbox: Sandbox, programs: list[Program]) -> list[Built]:
        """The built form of each program, compiling (in parallel) those not built before; ``cached``
        marks those built by an earlier call or earlier in this batch."""
        keys = [self.key(p) for p in programs]
        known = {key: self._cache[key] for key in keys if key in self._cache}
        todo: dict[str, Program] = {}
        for key, program in zip(keys, programs, strict=True):
            if program.compile is not None and key not in known:
                todo.setdefault(key, program)
        fresh: dict[str, Built] = {}
        if todo:
            reports = sandbox.run([self._compile_task(p) for p in todo.values()])
            for (key, program), report in zip(todo.items(), reports, strict=True):
                fresh[key] = _built(program, report)  # type: ignore[arg-type]
                self._store(key, fresh[key])
        out, used = [], set()
        for key, program in zip(keys, programs, strict=True):
            if program.compile is None:  # interpreted: the source is what runs
                out.append(Built({program.source: program.text.encode("utf-8", "replace")}))
                continue
            cached = key in known or key in used
            used.add(key)
            out.append(replace(known.get(key) or fresh[key], cached=cached))
        return out

    def _compile_task(self, program: Program) -> ExecTask:
        limits = {
            "wall": self.limits.timeout,
            "cpu": self.limits.timeout,
            "memory_mb": self.limits.memory_mb,
            "nproc": self.limits.max_processes,
            "fsize_mb": float(self.limits.max_file_mb),
        }
        source = {program.source: program.text.encode("utf-8", "replace")}
        return ExecTask(
            program.compile or [], source, env=program.env, collect=program.artifacts, limits=limits
        )

    def _store(self, key: str, built: Built) -> None:
        self.compiled += 1
        size = sum(len(v) for v in built.files.values())
        self._cache[key] = built
        self._bytes += size
        while self._bytes > self.max_bytes and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._bytes -= sum(len(v) for v in old.files.values())


def _built(program: Program, report: RunReport) -> Built:
    timing = {"compile_wall": report.wall, "compile_cpu": report.cpu}
    if report.error:
        return Built(error=report.error, **timing)
    if report.timed_out:
        return Built(error="compile error: the compiler ran out of time", **timing)
    if report.exit_code != 0 or report.signal is not None:
        return Built(error="compile error: " + _first_lines(report), **timing)
    missing = [p for p in program.artifacts if "*" not in p and p not in report.files]
    if missing or not report.files:
        return Built(error=f"compile error: the compiler left no {', '.join(missing) or 'output'}", **timing)
    executable = tuple(name for name in report.files if name in program.executable)
    return Built(dict(report.files), executable, **timing)


def _first_lines(report: RunReport) -> str:
    text = report.stderr or report.stdout.decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip()][:COMPILE_ERROR_LINES]
    if not lines:
        return (
            f"exit code {report.exit_code}" if report.signal is None else f"killed by signal {report.signal}"
        )
    return "\n".join(lines)[:2000]


def run_task(program: Program, built: Built, stdin: str = "") -> ExecTask:
    """The sandbox task running a built program on ``stdin``."""
    return ExecTask(
        list(program.run),
        dict(built.files),
        built.executable,
        stdin,
        dict(program.env),
        limits=dict(program.limits),
    )


__all__ = ["Built", "Builds", "CompileLimits", "run_task"]
