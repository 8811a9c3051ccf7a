"""How the zygote starts: ``python -I -S FOLDER/__main__.py CONFIG_FD SOCKET_FD`` runs this file as a script.

A script, run by path: Python never caches its bytecode and, under ``-I``, puts nothing of its folder on
``sys.path``. It loads the folder as the package ``rk_zygote``, from wherever the folder is
(``/rk_zygote`` inside the sandbox's root; its host path where the zygote starts on the host), so that the
modules import each other relative to it and are importable under that package's name only (a program's
``import wire`` finds none of them); then it starts the zygote (``start.main``).

Like the script, the package is compiled from its source every time: a ``__pycache__`` in the folder is
neither read (a ``.pyc`` compiled on the host, as pip compiles an installation, holds host paths, which
would then be in the memory every program is forked from) nor written (inside the root the folder is
read-only; on the host the checkout or installation stays as it was).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys

PACKAGE = "rk_zygote"
"""The package the folder's modules import each other in (relative imports)."""


class _SourceOnly(importlib.machinery.SourceFileLoader):
    """Compiles a module from its source, never from a cached ``.pyc``, and writes none: with no source
    stats, the loader neither looks for a cache nor writes one."""

    def path_stats(self, path: str) -> dict:
        raise OSError("the zygote's modules are compiled from their source")


def _load_package() -> None:
    folder = os.path.dirname(os.path.abspath(__file__))
    if folder in sys.path:  # run without -I, or as a folder: its modules are the package's only
        sys.path.remove(folder)
    # The package's submodules are found through this finder (start.py clears the cache afterwards).
    sys.path_importer_cache[folder] = importlib.machinery.FileFinder(
        folder, (_SourceOnly, importlib.machinery.SOURCE_SUFFIXES)
    )
    init = os.path.join(folder, "__init__.py")
    spec = importlib.util.spec_from_file_location(
        PACKAGE, init, loader=_SourceOnly(PACKAGE, init), submodule_search_locations=[folder]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the sandbox's zygote from {folder}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)


def main() -> None:
    _load_package()
    start = importlib.import_module(PACKAGE + ".start")  # imports every module of the folder
    start.main()


if __name__ == "__main__":
    main()
