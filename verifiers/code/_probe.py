"""What a sandboxed interpreter needs from its installation; run as a script by ``layout.py``.

``python _probe.py '["numpy"]'`` prints one JSON object: the interpreter's real path, its standard library
(the entries of ``sys.path`` that ``-I -S`` keeps), the shared libpython it links, every site-packages
directory of the installation (to hide them), and for each allowed package the top-level entries of
site-packages that make it importable: the package directory or module file, the other entries its
distribution installs (``numpy.libs``, its ``.dist-info``) and those of the distributions it requires.
Standard library only: it runs in the sandbox's interpreter, which may not be rewardlab's.
"""

from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
import json
import os
import re
import site
import sys
import sysconfig
from collections.abc import Callable

# Files that look like a dataset (HumanEval.jsonl.gz) are hidden even inside an allowed package.
DATASET_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.bz2", ".jsonl.xz", ".json.gz", ".parquet", ".arrow")


def _real(path: str) -> str:
    return os.path.realpath(path)


def stdlib_paths() -> list[str]:
    """The standard library: what ``sys.path`` holds under ``-I -S`` (zip, stdlib, lib-dynload). Not
    ``sysconfig``'s ``platstdlib``, which in a virtualenv is the venv's ``lib/pythonX.Y``."""
    found = [p for p in sys.path if p.endswith(".zip") and os.path.exists(p)]
    found.append(os.path.dirname(_real(os.__file__)))
    found += [_real(p) for p in sys.path if os.path.basename(p) == "lib-dynload"]
    return _unique(found)


def shared_libs() -> list[str]:
    """libpython when the interpreter links it dynamically (outside the system directories)."""
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if not (sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir and soname):
        return []
    path = os.path.join(libdir, soname)
    return [path] if os.path.exists(path) else []


def site_dirs() -> list[str]:
    """Every site-packages directory of this installation: the venv's, the base interpreter's, the user's,
    and the ones found next to the standard library."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found = list(site.getsitepackages(list(prefixes)))
    found.append(site.getusersitepackages())
    found += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    for std in stdlib_paths():
        found += [os.path.join(std, name) for name in ("site-packages", "dist-packages")]
    return _unique(_real(p) for p in found if os.path.isdir(p))


def _unique(items) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _tops(dist: importlib.metadata.Distribution) -> list[str]:
    """First path components of the files a distribution installed, read from its RECORD (``dist.files``
    builds a path object per file, slow for numpy's thousands)."""
    record = dist.read_text("RECORD")
    paths = [row[0] for row in csv.reader(record.splitlines()) if row] if record else []
    if not record:
        paths = [str(f) for f in dist.files or []]
    tops: list[str] = []
    for path in paths:
        top = path.replace("\\", "/").split("/", 1)[0]
        if top not in tops:
            tops.append(top)
    return tops


def _dist_entries(
    dist: importlib.metadata.Distribution, tops: list[str], sites: list[str]
) -> list[list[str]]:
    """[host path, name] of the top-level site-packages entries a distribution installed."""
    entries = []
    for top in tops:
        if top in ("", "..", "__pycache__") or top.endswith(".pth") or top.startswith("__editable__"):
            continue
        path = _real(str(dist.locate_file(top)))
        if os.path.dirname(path) in sites and os.path.lexists(path):
            entries.append([path, top])
    return entries


def _editable(dist: importlib.metadata.Distribution, tops: list[str]) -> bool:
    with_finder = any(top.startswith("__editable__") for top in tops)
    return with_finder or '"editable": true' in (dist.read_text("direct_url.json") or "")


def _required(dist: importlib.metadata.Distribution) -> list[str]:
    """Names of the distributions it requires, extras left out."""
    names = []
    for req in dist.requires or []:
        marker = req.split(";", 1)[1] if ";" in req else ""
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req.strip())
        if match and "extra" not in marker:
            names.append(match.group(0))
    return names


def _datasets(entries: list[list[str]]) -> list[list[str]]:
    """[host path, path relative to site-packages] of the dataset-like files inside the entries."""
    found = []
    for path, name in entries:
        if not os.path.isdir(path):
            continue
        for dirpath, _dirs, files in os.walk(path):
            for file in files:
                if file.lower().endswith(DATASET_SUFFIXES):
                    host = os.path.join(dirpath, file)
                    found.append([host, os.path.join(name, os.path.relpath(host, path))])
    return found


def _owners(name: str, all_owners: Callable[[], dict[str, list[str]]]) -> list[str]:
    """Distributions installing top-level ``name``: the one of that name when it does (a quick look-up),
    else the full map of installed distributions (slower: it reads every one)."""
    try:
        dist = importlib.metadata.distribution(name)
        if any(top in (name, name + ".py") for top in _tops(dist)):
            return [name]
    except importlib.metadata.PackageNotFoundError:
        pass
    return all_owners().get(name, [])


def resolve(name: str, sites: list[str], all_owners: Callable[[], dict[str, list[str]]]) -> dict:
    """Where an allowed top-level package lives, or why it cannot be mounted."""
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return {"stdlib": True, "entries": [], "datasets": []}
    if not name.isidentifier():
        return {"error": "not a top-level module name"}
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    if spec is None:
        return {"error": "not installed"}
    locations = list(spec.submodule_search_locations or []) or [spec.origin or ""]
    entries = []
    for location in locations:
        path = _real(location)
        if os.path.dirname(path) not in sites:  # an editable checkout, a project directory, cwd
            return {"error": f"not in a site-packages directory ({path})"}
        entries.append([path, os.path.basename(path)])
    seen: set[str] = set()
    todo = _owners(name, all_owners)
    while todo:
        dist_name = todo.pop()
        key = re.sub(r"[-_.]+", "-", dist_name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        tops = _tops(dist)
        if not _editable(dist, tops):
            entries += [e for e in _dist_entries(dist, tops, sites) if e not in entries]
        todo += _required(dist)
    return {"entries": entries, "datasets": _datasets(entries)}


def main() -> None:
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # this script's directory (the project) is no place to find packages in
    names = json.loads(sys.argv[1])
    sites = site_dirs()
    cache: list[dict[str, list[str]]] = []

    def all_owners() -> dict[str, list[str]]:
        if not cache:
            cache.append(importlib.metadata.packages_distributions())
        return cache[0]

    print(
        json.dumps(
            {
                "executable": _real(sys.executable),
                "stdlib": stdlib_paths(),
                "libs": shared_libs(),
                "site_dirs": sites,
                "packages": {name: resolve(name, sites, all_owners) for name in names},
            }
        )
    )


if __name__ == "__main__":
    main()
