"""What a sandboxed program sees of the host: the standard library and an allow-list of packages, no more.

:func:`build_layout` asks the sandbox's interpreter (``_probe.py``) where its standard library, its shared
libpython and the allowed packages live, and returns a :class:`Layout`: the mounts of the read-only root
(``native`` and ``bwrap`` backends) and, for the ``rlimit`` backend, which cannot hide anything on disk, the
roots an audit hook lets the program open.

Inside the root: the system directories (``/usr``, ``/lib*``, ``/bin``, ``/sbin``, ``/etc``), the
interpreter binary and libpython, the standard library (lib-dynload included), and the allowed packages'
top-level entries (package directory or module, ``.libs`` of compiled wheels, ``.dist-info``, and those of
the distributions they require) bind-mounted one by one under :data:`SITE`. Hidden under empty read-only
mounts wherever they fall inside those directories: every site-packages directory of the installation, every
package directory of any interpreter found in them (:data:`PACKAGE_DIR_NAMES`), the hub caches, the
project checkout; and files that look like datasets (``*.jsonl.gz`` ...) inside an allowed package.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
from dataclasses import dataclass, field

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_probe.py")
SITE = "/site-packages"
"""Where the allowed packages are inside the sandbox's root (on the sandboxed interpreter's ``sys.path``)."""
SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc")
# Files and devices a program may open under the rlimit backend besides the standard library, the
# allowed packages and its working directory.
RLIMIT_READABLE = ("/dev", "/etc", "/usr/share/zoneinfo")
PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Layout:
    """The files a sandboxed interpreter sees, as mounts ``(kind, source, target)`` of its root.

    ``kind``: ``ro`` (read-only bind of ``source`` at ``target``), ``link`` (a symlink to ``source``),
    ``hide_dir`` (an empty read-only directory over ``target``), ``hide_file`` (an empty file over it)."""

    python: str
    sys_path: list[str]
    mounts: list[tuple[str, str, str]] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    package_entries: list[tuple[str, str]] = field(default_factory=list)
    """(host path, name in site-packages) of every allowed entry."""
    hidden: list[str] = field(default_factory=list)
    """Host directories hidden (site-packages directories, caches, the project)."""
    hidden_files: list[str] = field(default_factory=list)
    """Host paths of the dataset-like files hidden inside allowed packages."""
    extra: list[str] = field(default_factory=list)
    """``extra_ro_paths`` that exist."""

    def rlimit_view(self, site_dir: str) -> dict[str, list[str]]:
        """What the rlimit backend's audit hook lets a program open, ``site_dir`` holding links to the
        allowed entries: the read roots, minus the hidden directories (except the allowed packages inside
        them), minus the hidden files."""
        return {
            "sys_path": [*self.sys_path, site_dir],
            "read_roots": [*self.sys_path, site_dir, *RLIMIT_READABLE, *self.extra],
            "package_roots": [host for host, _name in self.package_entries],
            "hidden_dirs": list(self.hidden),
            "hidden_files": list(self.hidden_files),
        }


@functools.lru_cache(maxsize=16)
def _probe(python: str, packages: tuple[str, ...]) -> dict:
    out = subprocess.run(
        [python, PROBE, json.dumps(list(packages))],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",  # not the project: nothing there may pass for an installed package
        timeout=120,
    )
    return json.loads(out.stdout)


def _under(path: str, roots: list[str]) -> bool:
    """Strictly inside one of ``roots`` (hiding a root itself would hide what it was mounted for)."""
    return any(path != root and os.path.commonpath([path, root]) == root for root in roots)


PACKAGE_DIR_NAMES = frozenset(
    {"site-packages", "dist-packages", "node_modules", "gems", "site-library", "nltk_data", "huggingface"}
)
"""Directories hidden wherever they appear in what the root shows: any interpreter's installed packages
(Python's, also of a bundled interpreter such as the Cloud SDK's; node's, Ruby's, R's), which may ship
datasets and tests, and the data and model caches that libraries keep under system directories."""
CACHE_VARIABLES = (
    "HF_HOME",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_DATASETS_CACHE",
    "TRANSFORMERS_CACHE",
    "TORCH_HOME",
    "XDG_CACHE_HOME",
    "MODELSCOPE_CACHE",
    "NLTK_DATA",
    "KERAS_HOME",
    "SENTENCE_TRANSFORMERS_HOME",
)
"""Environment variables naming hub and data caches (hidden wherever they point)."""


@functools.lru_cache(maxsize=8)
def package_dirs(roots: tuple[str, ...]) -> tuple[str, ...]:
    """Every directory named in :data:`PACKAGE_DIR_NAMES` under ``roots`` (symbolic links not followed;
    nothing below a found one is searched, it is hidden whole). About 0.5 s for /usr and /etc here, once
    per process."""
    found: list[str] = []
    stack = [r for r in roots if os.path.isdir(r) and not os.path.islink(r)]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                    if entry.name in PACKAGE_DIR_NAMES:
                        found.append(entry.path)
                    else:
                        stack.append(entry.path)
    return tuple(sorted(found))


def hidden_dirs(site_dirs: list[str], roots: list[str] | tuple[str, ...]) -> list[str]:
    """Directories that must never be visible: the interpreter's site directories, package directories
    of any interpreter under ``roots`` (the directories the root shows; the system Pythons' ones among
    them), hub caches, the project checkout and the current directory."""
    dirs = list(site_dirs) + list(package_dirs(tuple(roots)))
    caches = [os.environ.get(k) for k in CACHE_VARIABLES] + [os.path.expanduser("~/.cache")]
    dirs += [c for c in caches if c] + [PROJECT]
    with contextlib.suppress(OSError):  # the current directory may be gone
        dirs.append(os.getcwd())
    return [os.path.realpath(d) for d in dirs if os.path.isdir(d)]


def build_layout(
    python: str,
    allowed_packages: list[str] | tuple[str, ...],
    extra_ro_paths: list[str] | tuple[str, ...] = (),
) -> Layout:
    """The root of a sandbox running ``python`` with ``allowed_packages`` importable (see module doc)."""
    info = _probe(python, tuple(allowed_packages))
    extra = [p for p in extra_ro_paths if os.path.exists(p)]
    layout = Layout(python=info["executable"], sys_path=list(info["stdlib"]), extra=extra)
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # /bin -> usr/bin on merged-/usr systems: recreate the link
            layout.mounts.append(("link", os.readlink(path), path))
        elif os.path.exists(path):
            layout.mounts.append(("ro", path, path))
    for path in [info["executable"], *info["libs"], *info["stdlib"], *extra]:
        if not _under(path, [t for _, _, t in layout.mounts]):
            layout.mounts.append(("ro", path, path))
    visible = [target for kind, _, target in layout.mounts if kind == "ro"]
    for path in hidden_dirs(info["site_dirs"], [p for p in visible if os.path.isdir(p)]):
        if _under(path, visible) and path not in layout.hidden:
            layout.mounts.append(("hide_dir", "", path))
            layout.hidden.append(path)
    _add_packages(layout, info["packages"])
    return layout


def _add_packages(layout: Layout, packages: dict[str, dict]) -> None:
    for name, found in packages.items():
        if found.get("error"):
            layout.missing[name] = found["error"]
            continue
        if found.get("stdlib"):
            continue
        layout.packages.append(name)
        for host, entry in found["entries"]:
            if (host, entry) not in layout.package_entries:
                layout.package_entries.append((host, entry))
                layout.mounts.append(("ro", host, f"{SITE}/{entry}"))
        for host, relative in found["datasets"]:
            if host not in layout.hidden_files:
                layout.mounts.append(("hide_file", "", f"{SITE}/{relative}"))
                layout.hidden_files.append(host)


__all__ = ["PACKAGE_DIR_NAMES", "SITE", "Layout", "build_layout", "hidden_dirs", "package_dirs"]
