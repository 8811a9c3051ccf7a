"""Tools an episode can call: ``python`` (the code verifier's sandbox), ``sql`` (the SQL verifier's read-only
engines), ``calculator``, ``search`` and ``open`` (a local corpus, ``envs/search.py``), and a user's own
Python callable.

A tool answers a batch of calls (one per running episode that called it this turn) with one
:class:`ToolResult` each and never raises on a call: a failure is an output saying what went wrong plus
an error kind, which the episode's metrics count.
"""

from __future__ import annotations

import ast
import inspect
import operator
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from rewardlab.envs.base import EpisodeState
from rewardlab.registry import Registry, lazy
from rewardlab.verifiers.code.sandbox import Sandbox, SandboxConfig, StdioTask, zygote_frame
from rewardlab.verifiers.sql.engines import QueryError
from rewardlab.verifiers.sql.verifier import SQLVerifier


@dataclass
class ToolResult:
    """What a call returned: the text shown to the model, and an error kind when it failed (the environment
    times each tool's batch of calls itself: ``EpisodeState.tool_seconds``)."""

    output: str
    error: str | None = None
    """``timeout``, ``exception``, ``memory``, ``output_limit``, ``killed``, ``sql_<kind>``, ``bad_arguments``,
    ``malformed``, ``too_large``, ``unknown_tool``, ``too_many_calls``, ``sandbox``... (``None``: it worked)."""


Call = tuple[EpisodeState, dict[str, Any]]
"""One call of a batch: the calling episode and the call's arguments."""


class Tool:
    """Base class of tools.

    Attributes:
        name: What the model calls it by (every built-in tool takes ``name=`` to rename it: a shorter name
            is fewer tokens per call).
        primary: The argument a ``fenced`` block or a ``tag`` fills (``code`` for ``python``).
        description: One line for the prompt or a chat template's tool list.
    """

    name = "tool"
    primary = "input"
    description = ""

    def run(self, calls: Sequence[Call], timeout: float) -> list[ToolResult]:
        """Answers each call within ``timeout`` seconds; results in input order; never raises."""
        raise NotImplementedError

    def close(self) -> None:
        """Releases processes or connections."""


def _argument(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None and len(args) == 1:  # a model that named the one argument differently
        value = next(iter(args.values()))
    return value if isinstance(value, str) else None


# ----------------------------------------------------------------------------------------------------------
# python
# ----------------------------------------------------------------------------------------------------------
def echo_last_expression(code: str) -> str:
    """``code`` with its last statement printed when it is an expression (as a notebook cell shows it):
    models often write ``123 * 456`` and expect the value. Code that does not parse here is left as it is,
    so that the program reports its own error (``SyntaxError``; or, nested too deeply for the parser,
    ``RecursionError`` or ``MemoryError``) as its output."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return code
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return code
    last = tree.body[-1]
    try:
        value = ast.unparse(last.value)
    except RecursionError:  # unparse recurses deeper than parse: "-" * 900 + "1" parses, does not unparse
        return code
    # The code before the expression, up to its first character: the lines above it and, on its own line,
    # what comes before it (``x = 1; x``). Lines as the parser counts them; col_offset counts UTF-8 bytes.
    lines = re.split(r"\r\n|\r|\n", code)
    before = lines[last.lineno - 1].encode()[: last.col_offset].decode()
    head = "\n".join([*lines[: last.lineno - 1], before])
    return f"{head}\n__rk_value = ({value})\nif __rk_value is not None:\n    print(repr(__rk_value))\n"


def replay_program(cells: Sequence[str], code: str) -> str:
    """A program that re-runs an episode's earlier cells silently, then ``code``: state (names, files in the
    working directory) carries over between calls although each call is a fresh sandboxed process."""
    parts = ["import contextlib as __rk_c, io as __rk_io", "__rk_g = {'__name__': '__main__'}"]
    for i, cell in enumerate(cells):
        parts.append(
            "with __rk_c.redirect_stdout(__rk_io.StringIO()), __rk_c.redirect_stderr(__rk_io.StringIO()):\n"
            "    try:\n"
            f"        exec(compile({cell!r}, '<cell {i + 1}>', 'exec'), __rk_g)\n"
            "    except SystemExit:\n"  # a cell that ended with sys.exit() must not end every later one
            "        pass"
        )
    parts.append(f"exec(compile({code!r}, '<cell {len(cells) + 1}>', 'exec'), __rk_g)")
    return "\n".join(parts) + "\n"


class PythonTool(Tool):
    """Runs code in the code verifier's sandbox: every isolation guarantee of ``verifiers/code/sandbox.py``
    holds (a fresh private working directory and disk quota per call, no network, rlimits, every child
    killed, nothing of the host's data, tests or site-packages visible). Output: stdout, then the last
    lines of the traceback when the program failed (the episode runner cuts long outputs).

    Args:
        state: Keep state across an episode's calls by re-running its earlier successful cells (silently)
            before each new one (several calls of one turn run in order); off, every call starts from nothing.
        sandbox: Sandbox settings (``SandboxLimits`` field names: ``memory_mb``, ``max_processes``...);
            ``timeout`` is the environment's per-call timeout.
    """

    name = "python"
    primary = "code"
    description = "Runs Python code and returns what it prints (the last expression's value is printed)."

    def __init__(self, *, state: bool = False, name: str = "python", **sandbox: Any) -> None:
        self.name = name
        self.state = state
        self.config = SandboxConfig(**sandbox)
        self._sandbox: Any = None

    @property
    def sandbox(self) -> Any:
        if self._sandbox is None:
            self._sandbox = Sandbox(self.config)
        return self._sandbox

    def run(self, calls: Sequence[Call], timeout: float) -> list[ToolResult]:
        if not self.state:
            return self._run(calls, timeout)
        # With state, an episode's calls of one turn run one after another (its second call sees its first):
        # round k runs every episode's k-th call.
        rounds: list[list[int]] = []
        seen: dict[int, int] = {}
        for i, (episode, _) in enumerate(calls):
            k = seen[id(episode)] = seen.get(id(episode), -1) + 1
            if k == len(rounds):
                rounds.append([])
            rounds[k].append(i)
        results: list[ToolResult | None] = [None] * len(calls)
        for indices in rounds:
            for i, result in zip(indices, self._run([calls[i] for i in indices], timeout), strict=True):
                results[i] = result
        return results  # type: ignore[return-value]

    def _run(self, calls: Sequence[Call], timeout: float) -> list[ToolResult]:
        results: list[ToolResult | None] = [None] * len(calls)
        tasks, where = [], []
        for i, (episode, args) in enumerate(calls):
            code = _argument(args, "code")
            if code is None:
                results[i] = ToolResult(
                    "error: the python tool needs a string argument 'code'", "bad_arguments"
                )
                continue
            cells = episode.data.get("python_cells", []) if self.state else []
            tasks.append(
                StdioTask(
                    replay_program(cells, echo_last_expression(code)) if cells else echo_last_expression(code)
                )
            )
            where.append((i, code))
        if tasks:
            reports = self.sandbox.run(tasks, config=replace(self.config, timeout=timeout))
            for (i, code), report in zip(where, reports, strict=True):
                results[i] = self._result(report)
                if self.state and results[i].error is None:  # type: ignore[union-attr]
                    calls[i][0].data.setdefault("python_cells", []).append(echo_last_expression(code))
        return results  # type: ignore[return-value]

    def _result(self, report: Any) -> ToolResult:
        out = report.stdout.decode("utf-8", errors="replace")
        error = None
        if report.error:
            error, note = "sandbox", f"sandbox error: {report.error}"
        elif report.timed_out:
            error, note = "timeout", "error: timed out"
        elif report.output_limit:
            error, note = "output_limit", "error: output limit exceeded"
        elif report.memory_error:
            error, note = "memory", "MemoryError"
        elif report.exit_code not in (0, None):
            error = "exception"
            # the traceback's last lines, without the sandbox runner's own frames (host paths)
            lines = [ln for ln in report.stderr.strip().splitlines() if ln.strip() and not zygote_frame(ln)]
            tail = lines[-3:]
            note = "\n".join(tail) or f"exit code {report.exit_code}"
        elif report.signal:
            error, note = "killed", f"error: killed by signal {report.signal}"
        else:
            note = ""
        text = "\n".join(part for part in (out.rstrip("\n"), note) if part) or "(no output)"
        return ToolResult(text, error)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


# ----------------------------------------------------------------------------------------------------------
# sql
# ----------------------------------------------------------------------------------------------------------
class SQLTool(Tool):
    """Queries the episode's database (the record's, found as the SQL verifier finds it: ``db``,
    ``db_id`` or ``setup_sql`` in the reference or metadata) read-only through the SQL verifier's engines
    (SQLite opened ``mode=ro`` with an authorizer, DuckDB read-only; one statement, a time limit, bounded
    rows). The gold query is never run or shown. Output: the columns and up to ``max_rows_shown`` rows.

    Args:
        max_rows_shown: Rows shown to the model (the count of the rest is given).
        verifier: Options of the SQL verifier (``engine``, ``db_root``, ``max_rows``...).
    """

    name = "sql"
    primary = "query"
    description = "Runs one read-only SQL query on the task's database and returns the rows."

    def __init__(self, *, max_rows_shown: int = 20, name: str = "sql", **verifier: Any) -> None:
        self.name = name

        self.max_rows_shown = max_rows_shown
        self.verifier = SQLVerifier(**verifier)

    def run(self, calls: Sequence[Call], timeout: float) -> list[ToolResult]:
        return [self._one(episode, args, timeout) for episode, args in calls]

    def _one(self, episode: EpisodeState, args: dict[str, Any], timeout: float) -> ToolResult:
        query = _argument(args, "query")
        if query is None:
            return ToolResult("error: the sql tool needs a string argument 'query'", "bad_arguments")
        try:
            engine, databases = self.verifier.record_databases(episode.record)
        except (ValueError, FileNotFoundError) as exc:
            return ToolResult(f"error: no database for this task ({exc})", "no_database")
        try:
            out = self.verifier.engine(engine).run(databases[0], query.strip().rstrip(";"), timeout)
        except QueryError as exc:
            return ToolResult(f"error: {exc.message}", f"sql_{exc.kind.replace(' ', '_')}")
        except Exception as exc:  # not the query's fault alone: a broken setup_sql or file, an unknown engine
            first = str(exc).splitlines()[0] if str(exc) else ""
            return ToolResult(f"error: {type(exc).__name__}: {first}", "sql_error")
        return ToolResult(self._table(out.columns, out.rows))

    def _table(self, columns: list[str], rows: list[tuple]) -> str:
        shown = rows[: self.max_rows_shown]
        lines = [" | ".join(columns)] + [" | ".join(str(v) for v in row) for row in shown]
        if len(rows) > len(shown):
            lines.append(f"... ({len(rows) - len(shown)} more rows)")
        return "\n".join(lines) if rows else " | ".join(columns) + "\n(no rows)"

    def close(self) -> None:
        self.verifier.close()


# ----------------------------------------------------------------------------------------------------------
# calculator
# ----------------------------------------------------------------------------------------------------------
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_DIGITS = 1000
"""Largest result the calculator computes (digits of numerator or denominator); a power beyond it is an
error, so ``9**9**9`` costs nothing."""


class CalculatorError(ValueError):
    """The expression is not arithmetic the calculator evaluates."""


def calculate(expression: str) -> Fraction:
    """The exact value of an arithmetic expression: numbers, ``+ - * / // % **`` and parentheses. Evaluated
    over fractions from the parsed tree (no ``eval``), so ``1/3*3`` is 1 and no name or call can run."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression ({exc.msg})") from None
    except ValueError:  # a lone surrogate (or, on some Pythons, a NUL) that the parser cannot encode
        raise CalculatorError("not an arithmetic expression (text that cannot be encoded)") from None
    except (MemoryError, RecursionError):  # how the parser refuses very deep nesting (``-----...1``)
        raise CalculatorError("expression nested too deeply") from None
    try:
        return _evaluate(tree.body)
    except RecursionError:
        raise CalculatorError("expression nested too deeply") from None


def _evaluate(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            if right.denominator != 1:
                raise CalculatorError("only whole-number powers")
            size = max(len(str(abs(left.numerator))), len(str(left.denominator)))
            if abs(right) * size > MAX_DIGITS:
                raise CalculatorError("result too large")
            if left == 0 and right < 0:
                raise CalculatorError("division by zero")
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise CalculatorError("division by zero")
        value = _BINARY[type(node.op)](left, right)
        value = Fraction(value)
        if max(len(str(abs(value.numerator))), len(str(value.denominator))) > MAX_DIGITS:
            raise CalculatorError("result too large")
        return value
    raise CalculatorError(f"{type(node).__name__} is not allowed (numbers and + - * / // % ** only)")


def format_number(value: Fraction) -> str:
    """An integer as digits; a fraction as a decimal with up to 12 significant digits."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.12g}"


class CalculatorTool(Tool):
    """Evaluates arithmetic exactly (see :func:`calculate`); instant, in process, nothing to isolate."""

    name = "calculator"
    primary = "expression"
    description = "Evaluates an arithmetic expression: numbers, + - * / // % ** and parentheses."

    def __init__(self, *, name: str = "calculator") -> None:
        self.name = name

    def run(self, calls: Sequence[Call], timeout: float) -> list[ToolResult]:
        out = []
        for _, args in calls:
            expression = _argument(args, "expression")
            if expression is None:
                out.append(
                    ToolResult("error: the calculator needs a string argument 'expression'", "bad_arguments")
                )
                continue
            try:
                out.append(ToolResult(format_number(calculate(expression))))
            except (CalculatorError, OverflowError, ValueError, ZeroDivisionError, RecursionError) as exc:
                out.append(ToolResult(f"error: {exc}", "exception"))
        return out


# ----------------------------------------------------------------------------------------------------------
# a user's callable
# ----------------------------------------------------------------------------------------------------------
class FunctionTool(Tool):
    """A user's Python function as a tool: called with the call's arguments as keywords (plus
    ``episode=`` the :class:`EpisodeState` when it takes that parameter); its return value, as text, is the
    output. It runs in this process (it is the user's trusted code, not the model's), each call in a daemon
    thread of its own with the per-call timeout: a call past it is answered ``timeout`` (the thread cannot
    be killed and finishes in the background, holding up neither later calls nor the interpreter's exit).
    Arguments that do not fit the function's signature are ``bad_arguments``; an exception is the output
    ``error: <type>: <message>``.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self._signature = inspect.signature(fn)
        params = [p for p in self._signature.parameters.values() if p.name != "episode"]
        self.primary = params[0].name if params else "input"
        self.description = (inspect.getdoc(fn) or "").split("\n")[0]
        self.takes_episode = "episode" in self._signature.parameters

    def run(self, calls: Sequence[Call], timeout: float) -> list[ToolResult]:
        t0 = time.perf_counter()
        out: list[ToolResult | None] = [None] * len(calls)
        started = []
        for i, (episode, args) in enumerate(calls):
            # The episode is the environment's to give, never the model's (an "episode" argument is replaced).
            kwargs = {**args, "episode": episode} if self.takes_episode else dict(args)
            try:
                self._signature.bind(**kwargs)
            except TypeError as exc:
                out[i] = ToolResult(f"error: bad arguments: {exc}", "bad_arguments")
                continue
            box: dict[str, Any] = {}
            thread = threading.Thread(
                target=self._call, args=(kwargs, box), name=f"tool-{self.name}", daemon=True
            )
            thread.start()
            started.append((i, thread, box))
        for i, thread, box in started:
            thread.join(max(0.0, t0 + timeout - time.perf_counter()))
            if thread.is_alive():
                out[i] = ToolResult(f"error: timed out after {timeout:g}s", "timeout")
            elif "error" in box:
                exc = box["error"]
                out[i] = ToolResult(f"error: {type(exc).__name__}: {exc}", "exception")
            else:
                out[i] = ToolResult(box["output"])
        return out  # type: ignore[return-value]

    def _call(self, kwargs: dict[str, Any], box: dict[str, Any]) -> None:
        try:
            value = self.fn(**kwargs)
            box["output"] = "" if value is None else str(value)
        except BaseException as exc:  # the tool's own failure is the model's observation
            box["error"] = exc


# ----------------------------------------------------------------------------------------------------------
TOOLS: Registry[type[Tool]] = Registry("tool")
TOOLS.register("python", "rewardlab.envs.tools:PythonTool")
TOOLS.register("sql", "rewardlab.envs.tools:SQLTool")
TOOLS.register("calculator", "rewardlab.envs.tools:CalculatorTool")
TOOLS.register("search", "rewardlab.envs.search:SearchTool")
TOOLS.register("open", "rewardlab.envs.search:OpenTool")


def build_tool(spec: Any, options: dict[str, Any] | None = None) -> Tool:
    """A tool from a registered name, a ``"module:attr"`` path (a :class:`Tool` class or a function), a
    :class:`Tool` instance or a function; ``options`` go to the class's constructor."""
    if isinstance(spec, Tool):
        return spec
    if isinstance(spec, str):
        spec = TOOLS.get(spec) if ":" not in spec else lazy(spec)
    if isinstance(spec, type) and issubclass(spec, Tool):
        return spec(**(options or {}))
    if callable(spec):
        return FunctionTool(spec, **(options or {}))
    raise TypeError(f"not a tool: {spec!r} (a tool name, a Tool, or a function)")


__all__ = [
    "TOOLS",
    "CalculatorTool",
    "FunctionTool",
    "PythonTool",
    "SQLTool",
    "Tool",
    "ToolResult",
    "build_tool",
    "calculate",
]
