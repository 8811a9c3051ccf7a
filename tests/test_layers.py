"""The layer rules that import-linter cannot see (the contract itself: `lint-imports`).

An import of a rewardlab module inside a function is allowed only for a heavy optional dependency or a
measured start-up cost, and must say which in a ``# lazy:`` comment (docs/DEVELOPING.md, "Layers"), so that
a function-level import never hides a cycle between floors.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_FOLDERS = ("rewardlab", "verifiers", "rewardmodels", "rl", "data", "eval", "envs")


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
