"""The layer rules that import-linter cannot see (the contract itself: `lint-imports`).

An import of a rewardlab module inside a function is allowed only for a heavy optional dependency or a
measured start-up cost, and must say which in a ``# lazy:`` comment (docs/DEVELOPING.md, "Floors"), so that
a function-level import never hides a cycle between floors.

No module names a module of a higher floor in a string used as code either (a ``"module:attr"`` builder, a
registry entry or ``home``, a ``-m`` module to spawn): import-linter sees imports only, so every string that
is not documentation is scanned here.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# scripts/ is no package of the install: pytest puts tests/, not the repository root, on the path
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.floors import floor_of, floor_order, namespace_roots  # noqa: E402

LIBRARY_FOLDERS = tuple(namespace_roots().values())
MODULE_NAME = re.compile(r"rewardlab(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?")


def _is_rewardlab_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "rewardlab" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "rewardlab"
    return False


def _import_groups(function: ast.AST) -> list[list[ast.stmt]]:
    """Runs of consecutive import statements directly in ``function``'s bodies (one comment may cover a run)."""
    groups: list[list[ast.stmt]] = []
    for node in ast.walk(function):
        for field in ("body", "orelse", "finalbody", "handlers"):
            run: list[ast.stmt] = []
            statements = getattr(node, field, None)
            for stmt in statements if isinstance(statements, list) else []:
                if isinstance(stmt, ast.Import | ast.ImportFrom):
                    run.append(stmt)
                    continue
                if run:
                    groups.append(run)
                run = []
            if run:
                groups.append(run)
    return groups


def unexplained_function_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``path:line`` of each function-level rewardlab import with no ``# lazy:`` comment on or above its run."""
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    found = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for run in _import_groups(function):
            if not any(_is_rewardlab_import(stmt) for stmt in run):
                continue
            first, last = run[0].lineno, run[-1].end_lineno or run[-1].lineno
            text = lines[first - 2 : last]  # the line above the run, and the run
            if not any("# lazy:" in line for line in text):
                found.add(f"{path.relative_to(root)}:{first}")
    return sorted(found)


def library_files() -> list[Path]:
    return sorted(
        p for folder in LIBRARY_FOLDERS for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts
    )


def library_modules() -> list[tuple[Path, str]]:
    """Every library file with its import name (``verifiers/math/__init__.py``: ``rewardlab.verifiers.math``)."""
    modules = []
    for package, folder in namespace_roots().items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            modules.append((path, ".".join([package, *(p for p in parts if p != "__init__")])))
    return modules


def _documentation(tree: ast.AST) -> set[int]:
    """``id`` of each string that is a statement by itself: a module, class or function docstring, or an
    attribute's docstring below it. Such a string is never run; a comment is no string at all."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def upward_names(path: Path, module: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each rewardlab module named in a string of ``path`` (the module ``module``) that is
    not documentation and whose floor is higher than ``module``'s own."""
    tree = ast.parse(path.read_text())
    own, docs = floor_of(module), _documentation(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in docs:
            continue
        for match in MODULE_NAME.finditer(node.value):
            floor = floor_of(match.group(0).partition(":")[0])
            if floor is not None and own is not None and floor > own:
                found.append((node.lineno, match.group(0)))
    return sorted(found)


def test_function_level_imports_say_why():
    missing = [where for path in library_files() for where in unexplained_function_imports(path)]
    assert not missing, (
        "rewardlab imports inside functions need a '# lazy: <heavy dependency or start-up cost>' comment "
        "(docs/DEVELOPING.md, Layers), or belong at module level:\n" + "\n".join(missing)
    )


def test_the_rule_reads_comments_on_or_above_the_run(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "def a():\n    # lazy: torch\n    from rewardlab.rl import trainer\n    import os\n"
        "def b():\n    import os\n    from rewardlab import types\n"
        "def c():\n    from rewardlab import types  # lazy: start-up\n"
    )
    assert unexplained_function_imports(source, root=tmp_path) == ["m.py:6"]


def test_no_string_names_a_higher_floor():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name!r}"
        for path, module in library_modules()
        for line, name in upward_names(path, module)
    ]
    assert not found, (
        "a string used as code names a module of a higher floor (docs/DEVELOPING.md, Floors): register the "
        "entry on the floor that defines it, and import that module from the floor that needs them all:\n"
        + "\n".join(found)
    )


def test_the_scan_reports_upward_strings_not_documentation(tmp_path):
    source = tmp_path / "fake.py"
    source.write_text(
        '"""Module docs may name rewardlab.rl.trainer."""\n'
        'BUILD = "rewardlab.rl.rewards:python_source"\n'
        '"""An attribute docstring naming rewardlab.cli."""\n'
        "def spawn():\n"
        '    """So may a function docstring: rewardlab.eval.runner."""\n'
        "    # a comment naming rewardlab.rl.trainer is no string\n"
        '    return ["-m", "rewardlab.cli", f"rewardlab.serve.app:{spawn}"]\n'
        'DOWN = ("rewardlab.types:Record", "rewardlab.verifiers.math", "rewardlab.unknown_thing")\n'
    )
    assert upward_names(source, "rewardlab.verifiers.fake") == [
        (2, "rewardlab.rl.rewards:python_source"),
        (7, "rewardlab.cli"),
        (7, "rewardlab.serve.app"),
    ]
    assert upward_names(source, "rewardlab.cli.fake") == []  # the top floor names nothing above it


def test_the_scan_reads_every_floor_under_its_import_names():
    modules = dict(library_modules())
    assert modules[ROOT / "apps/serve/app.py"] == "rewardlab.serve.app"
    assert modules[ROOT / "verifiers/math/__init__.py"] == "rewardlab.verifiers.math"
    assert {floor_of(module) for module in modules.values()} == set(range(len(floor_order())))


def test_each_floor_registers_its_source_kinds_and_rl_assembles_them():
    # A fresh process: this one may have imported the registering modules already.
    code = (
        "import sys\n"
        "from rewardlab.verifiers.sources import known_sources, source_kind\n"
        "assert source_kind('py:os.path:basename').spelling == 'py:module:fn'  # the verifiers floor's own\n"
        "assert 'rm:PATH' not in known_sources() and 'ttrl' not in known_sources(), known_sources()\n"
        "assert not [m for m in sys.modules if m.startswith(('rewardlab.rl', 'rewardlab.rewardmodels'))]\n"
        "import rewardlab.rl.sources\n"
        "assert 'rm:PATH' in known_sources() and 'label-free: ttrl, self_certainty' in known_sources()\n"
        "assert source_kind('rm:/m').spelling == 'rm:PATH' and source_kind('ttrl').spelling == 'ttrl'\n"
        "assert 'torch' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


# ---- sizes: one job per module (docs/DEVELOPING.md, "Conventions") -------------------------------------------
MAX_MODULE_LINES = 800
MAX_CLASS_LINES = 400
SIZE_EXEMPT = ("verifiers/ifeval/instructions.py",)
"""IFEval's instruction registry: one class per instruction, Google's list as it is."""


def oversized(path: Path, root: Path = ROOT) -> list[str]:
    """``path`` (lines) when the module is over :data:`MAX_MODULE_LINES`, and ``path:Class`` (lines) for each
    class over :data:`MAX_CLASS_LINES`."""
    text = path.read_text()
    where = path.relative_to(root).as_posix()
    found = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{where} ({lines} lines)")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
            found.append(f"{where}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    return found


def test_no_module_or_class_is_oversized():
    # The scripts under data/ that build sample data (build_*.py) are data, not library code.
    checked = [
        p
        for p in library_files()
        if p.relative_to(ROOT).as_posix() not in SIZE_EXEMPT
        and not (p.relative_to(ROOT).parts[0] == "data" and p.name.startswith("build_"))
    ]
    assert len(checked) > 200  # every floor is read
    too_big = [where for path in checked for where in oversized(path)]
    assert not too_big, "split these into parts with one job each:\n" + "\n".join(too_big)


def test_the_size_check_reports_a_long_module_and_a_long_class(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    path = tmp_path / "m.py"
    path.write_text("class Big:\n" + body + "\n" + "\n" * MAX_MODULE_LINES)
    assert oversized(path, tmp_path) == [
        f"m.py ({MAX_CLASS_LINES + 1 + MAX_MODULE_LINES} lines)",
        f"m.py:Big ({MAX_CLASS_LINES + 1} lines)",
    ]
    path.write_text("class Small:\n    x = 1\n")
    assert oversized(path, tmp_path) == []
