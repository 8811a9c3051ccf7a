"""What the judge reads in a sample's test code before running it (``ast``; the code itself is trusted).

The names the tests read, the standard-library module names they use as modules (bound to the real
modules, never the solution's), the prompt's helpers, and the calls of the solution's functions on
literal arguments that the tests make unconditionally, in order: those are sent to the candidate ahead,
as one batch (``rpc.Channel.prefetch``). Cached per problem: the same tests come back sample after sample.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import json
import sys
import types
import typing

from .wire import enc


def _literal_call(node: ast.Call, names: dict[str, str]) -> tuple | None:
    """(candidate name, encoded args, encoded kwargs) of a call of a candidate function on literals."""
    if not isinstance(node.func, ast.Name) or node.func.id not in names:
        return None
    try:
        args = [ast.literal_eval(a) for a in node.args if not isinstance(a, ast.Starred)]
        if len(args) != len(node.args) or any(k.arg is None for k in node.keywords):
            return None
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        return (names[node.func.id], json.dumps(enc(args, None)), json.dumps(enc(kwargs, None)))
    except Exception:  # noqa: BLE001 - not a literal: called over the wire when reached
        return None


_CONDITIONAL = (ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp, ast.IfExp, ast.BoolOp)


def _calls_in(statements: list[ast.stmt], names: dict[str, str], local: set[str]) -> tuple[list[tuple], bool]:
    """Literal-argument calls of candidate functions that the statements make unconditionally, in the
    order Python makes them, and whether the scan had to stop.

    The scan stops at the first point after which the candidate could be called in another order than
    the batch: a candidate call on computed arguments, a call of a test-defined function (``local``) or
    of an unknown name, an ``if``/loop/``try``, or a conditional expression around a call."""
    found: list[tuple] = []
    for stmt in statements:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Pass)):
            continue
        if not isinstance(stmt, (ast.Assert, ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)):
            return found, True
        nodes = list(ast.walk(stmt))
        calls = [n for n in nodes if isinstance(n, ast.Call)]
        if calls and any(isinstance(n, _CONDITIONAL) for n in nodes):
            return found, True
        calls.sort(key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))  # a call runs at its ")"
        for node in calls:
            call = _literal_call(node, names)
            if call is not None:
                found.append(call)
                continue
            func = node.func
            if isinstance(func, ast.Attribute):
                continue  # math.isclose(...), result.split(): no candidate call of its own
            if (
                isinstance(func, ast.Name)
                and func.id not in names
                and func.id not in local
                and hasattr(builtins, func.id)
            ):
                continue  # abs(), sorted(), set()...
            return found, True
    return found, False


def prefetch_calls(spec: dict, candidate_names: set[str]) -> list[tuple]:
    """The calls of the candidate's functions (``candidate_names``) that the tests of ``spec`` make
    unconditionally on literal arguments, in order, up to the first one that could come out of order."""
    try:
        setup = ast.parse(spec.get("setup") or "")
    except SyntaxError:
        return []
    defined = set()
    functions = {}
    for node in ast.walk(setup):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
            functions[node.name] = node
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    names = {n: n for n in candidate_names if n not in defined}
    found: list[tuple] = []
    for case in spec["cases"]:
        try:
            body = ast.parse(case).body
        except SyntaxError:
            return found
        # HumanEval: ``check(f)`` runs check's body with its parameter bound to the candidate's f
        if (
            len(body) == 1
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Call)
            and isinstance(body[0].value.func, ast.Name)
            and body[0].value.func.id in functions
            and len(body[0].value.args) == 1
            and isinstance(body[0].value.args[0], ast.Name)
            and body[0].value.args[0].id in names
        ):
            fn = functions[body[0].value.func.id]
            params = [a.arg for a in fn.args.args]
            if len(params) != 1:
                return found
            calls, stopped = _calls_in(fn.body, {params[0]: body[0].value.args[0].id}, set(functions))
        else:
            calls, stopped = _calls_in(body, names, set(functions))
        found += calls
        if stopped:
            return found
    return found


class TestNames(typing.NamedTuple):
    """What :func:`analyse` found in a sample's test code."""

    loaded: frozenset[str]  # names the test code reads
    modules: tuple[tuple[str, str], ...]  # (name, module) bound to the real module (_module_names)
    helpers: types.CodeType | None  # the prompt's helpers, compiled
    helper_defs: tuple[tuple[str, bool], ...]  # (name, is a class) of the functions and classes they define


@functools.lru_cache(maxsize=256)
def analyse(helpers: str, setup: str, cases: tuple[str, ...], entry_point: str | None) -> TestNames:
    """What the judge needs to know of a sample's test code; cached, since the same tests come back for
    sample after sample of one problem."""
    trees = []
    for source in (helpers, setup, *cases):
        with contextlib.suppress(SyntaxError, ValueError):
            trees.append(ast.parse(source))
    helper_tree = ast.parse(helpers) if helpers else None
    defs = tuple(
        (node.name, isinstance(node, ast.ClassDef))
        for node in (helper_tree.body if helper_tree else [])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )
    return TestNames(
        loaded=frozenset(_loaded_names(trees)),
        modules=tuple(_module_names(trees, entry_point).items()),
        helpers=compile(helper_tree, "<prompt>", "exec") if helper_tree else None,
        helper_defs=defs,
    )


@functools.lru_cache(maxsize=1024)
def compiled(source: str, filename: str) -> types.CodeType:
    """The test code compiled once per problem."""
    return compile(source, filename, "exec")


def _loaded_names(trees: list[ast.AST]) -> set[str]:
    """Every name the code reads."""
    return {
        n.id
        for tree in trees
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


# Conventional aliases read like module names by tests (``np.isclose``): the real package when allowed.
_ALIASES = {"np": "numpy", "pd": "pandas"}
# Standard-library modules whose import does something (opens a browser, prints): never on a solution's say.
IMPORT_SIDE_EFFECTS = frozenset({"antigravity", "this", "idlelib", "turtledemo", "__hello__", "__phello__"})


def _module_names(trees: list[ast.AST], entry_point: str | None) -> dict[str, str]:
    """{name: module} for the standard-library module names (and :data:`_ALIASES`) the test code reads
    attributes of (``math.isclose``), other than the entry point and the names it calls (a solution's
    function may be named like a module)."""
    bases, called = set(), set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                bases.add(node.value.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(node.func.id)
    names = {n: n for n in bases if n in sys.stdlib_module_names}
    names.update({n: _ALIASES[n] for n in bases if n in _ALIASES})
    return {n: m for n, m in names.items() if n not in called and n != entry_point}
