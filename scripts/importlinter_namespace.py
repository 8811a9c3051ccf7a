"""import-linter's layers contract over the whole ``rewardkit`` namespace (pyproject.toml, ``[tool.importlinter]``).

import-linter (through grimp) reads a package from the one folder ``rewardkit`` resolves to, while
``setup.py`` maps seven folders into the namespace (``verifiers/`` is ``rewardkit.verifiers``, ...). This
contract type checks the same layers as import-linter's own ``layers`` contract, on a graph grimp builds from
a mirror of the namespace: every module file linked, under its import name, into one temporary
``rewardkit/`` tree. Plain ``lint-imports`` in the repository root then checks the real layout.
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
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import ContractCheck

REPO = Path(__file__).resolve().parent.parent


def namespace_roots() -> dict[str, str]:
    """``setup.py``'s ``ROOTS``: import name -> folder (read, not run: running it would call ``setup()``)."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "ROOTS":
            return ast.literal_eval(node.value)
    raise RuntimeError("setup.py has no ROOTS mapping")


def link_mirror(mirror: Path) -> None:
    """Links every module file of the namespace into ``mirror`` under its import path."""
    for package, folder in namespace_roots().items():
        target = mirror.joinpath(*package.split("."))
        for path in (REPO / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            link = target / path.relative_to(REPO / folder)
            if link.exists():  # rewardkit/ and a subpackage mapped onto it: the first mapping wins
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(path, link)


@functools.cache
def namespace_graph() -> grimp.ImportGraph:
    """The import graph of the whole namespace (built once per ``lint-imports`` run)."""
    with tempfile.TemporaryDirectory() as mirror:
        link_mirror(Path(mirror))
        # grimp finds the package with importlib: the mirror must be what "rewardkit" resolves to.
        saved_path, saved_module = list(sys.path), sys.modules.pop("rewardkit", None)
        sys.path.insert(0, mirror)
        importlib.invalidate_caches()
        try:
            return grimp.build_graph("rewardkit", cache_dir=None)
        finally:
            sys.path[:] = saved_path
            if saved_module is not None:
                sys.modules["rewardkit"] = saved_module
            importlib.invalidate_caches()


class NamespaceLayersContract(LayersContract):
    """import-linter's ``layers`` contract, checked on :func:`namespace_graph` instead of the graph of the
    one ``rewardkit/`` folder."""

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        return super().check(namespace_graph(), verbose)
