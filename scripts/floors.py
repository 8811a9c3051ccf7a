"""The floors: each a top-level folder of the repository, and import-linter's contracts checked on them.

``setup.py`` maps the folders into one import namespace (``verifiers/`` is ``rewardlab.verifiers``,
``apps/serve/`` is ``rewardlab.serve``, ``rewardlab/`` the core). import-linter (through grimp) reads a
package from the one folder its name resolves to, so this module builds the graph itself, from a mirror of
the namespace (every module file linked under its import name into one temporary tree), and renames each
module after the folder it lives in (``rewardlab.serve.app`` is ``apps.serve.app``). The contracts in
pyproject.toml (``[tool.importlinter]``) then name folders: plain ``lint-imports`` in the repository root
checks the real layout.

:func:`floor_of` is the same map for tests/test_layers.py, which checks what import-linter cannot see
(strings that name modules).
"""

from __future__ import annotations

import ast
import functools
import importlib
import os
import sys
import tempfile
from pathlib import Path

import grimp
import tomllib
from importlinter.contracts.independence import IndependenceContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import ContractCheck

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "rewardlab"


@functools.cache
def namespace_roots() -> dict[str, str]:
    """``setup.py``'s ``ROOTS``: import name -> folder (read, not run: running it would call ``setup()``)."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "ROOTS":
            return ast.literal_eval(node.value)
    raise RuntimeError("setup.py has no ROOTS mapping")


def folder_name(module: str) -> str | None:
    """``module``'s name after its folder (``rewardlab.serve.app`` -> ``apps.serve.app``); ``None`` outside
    the namespace. The longest import name of :func:`namespace_roots` that ``module`` starts with wins."""
    best = max(
        (name for name in namespace_roots() if module == name or module.startswith(name + ".")),
        key=len,
        default=None,
    )
    if best is None:
        return None
    return namespace_roots()[best].replace("/", ".") + module[len(best) :]


@functools.cache
def floor_order() -> list[str]:
    """The floors, lowest first: the folders of the floors contract in pyproject.toml."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract.get("type") == "floors":
            return list(reversed(contract["layers"]))
    raise RuntimeError("pyproject.toml has no contract of type 'floors'")


def floor_of(module: str) -> int | None:
    """The floor of ``module`` (0: the core), or ``None`` outside the namespace."""
    name = folder_name(module)
    if name is None:
        return None
    top = name.split(".")[0]
    return floor_order().index(top)


def link_mirror(mirror: Path) -> None:
    """Links every module file of the namespace into ``mirror`` under its import path."""
    for package, folder in namespace_roots().items():
        target = mirror.joinpath(*package.split("."))
        for path in (REPO / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            link = target / path.relative_to(REPO / folder)
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(path, link)


def _import_graph() -> grimp.ImportGraph:
    """grimp's graph of the namespace under its import names."""
    with tempfile.TemporaryDirectory() as mirror:
        link_mirror(Path(mirror))
        # grimp finds the package with importlib: the mirror must be what the package name resolves to.
        saved_path, saved_module = list(sys.path), sys.modules.pop(PACKAGE, None)
        sys.path.insert(0, mirror)
        importlib.invalidate_caches()
        try:
            return grimp.build_graph(PACKAGE, cache_dir=None)
        finally:
            sys.path[:] = saved_path
            if saved_module is not None:
                sys.modules[PACKAGE] = saved_module
            importlib.invalidate_caches()


def _add_with_parents(graph: grimp.ImportGraph, name: str) -> None:
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        graph.add_module(".".join(parts[:i]))


@functools.cache
def folder_graph() -> grimp.ImportGraph:
    """The import graph of the namespace, each module named after its folder (built once per run)."""
    source = _import_graph()
    graph = grimp.ImportGraph()
    for module in source.modules:
        _add_with_parents(graph, folder_name(module))
    for importer in source.modules:
        for imported in source.find_modules_directly_imported_by(importer):
            for detail in source.get_import_details(importer=importer, imported=imported) or [{}]:
                graph.add_import(
                    importer=folder_name(importer),
                    imported=folder_name(imported),
                    line_number=detail.get("line_number", 0),
                    line_contents=detail.get("line_contents", ""),
                )
    return graph


class FloorsContract(LayersContract):
    """import-linter's ``layers`` contract whose layers are folders (:func:`folder_graph`)."""

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        return super().check(folder_graph(), verbose)


class FolderIndependenceContract(IndependenceContract):
    """import-linter's ``independence`` contract whose modules are folders (:func:`folder_graph`)."""

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        return super().check(folder_graph(), verbose)
