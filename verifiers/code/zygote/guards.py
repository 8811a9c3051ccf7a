"""The rlimit backend's guards: audit hooks standing in for the root and the network namespace.

Without namespaces nothing can be hidden on disk, so a program's Python code may open only the standard
library, the allowed packages, its working directory and a few system paths (``layout.py`` computes the
roots), and may neither use sockets (where no network namespace could be made) nor reach past the hooks
(``ctypes``, starting programs). A guard at the level of Python, not a boundary (``docs/code.md``).
"""

from __future__ import annotations

import _posixsubprocess  # imported before the privileges drop: rlimit programs get it patched
import os
import sys

from .state import CONFIG


def disable_network() -> None:
    """Fallback when no network namespace could be made: an audit hook refusing socket use (cannot be
    removed from Python code once installed)."""

    def hook(event: str, args: tuple) -> None:
        if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo"):
            raise PermissionError("network access is disabled in the rewardlab sandbox")

    sys.addaudithook(hook)


# Without a read-only root (rlimit backend) a program could open any file its uid can read; this audit hook
# refuses it at the Python level: files outside the standard library, the allowed packages and the
# working directory, the hidden paths inside those, and the ways out of the hook's reach (ctypes, which
# calls libc directly, and exec / spawn, whose new program would run without the hook).
_OPEN_EVENTS = ("open", "os.listdir", "os.scandir", "sqlite3.connect")
_ESCAPE_EVENTS = ("os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen", "pty.spawn")
_ESCAPE_EVENTS += ("gc.get_objects", "gc.get_referrers", "gc.get_referents")  # to the unpatched fork_exec


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    """``path`` is one of ``roots`` or below one."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def guard_files(workdir: str) -> None:
    """Installs the file audit hook of a program (rlimit backend), with the roots ``layout.py`` computed."""
    view = CONFIG["host"]["fallback"]
    real = os.path.realpath
    home = real(workdir)
    roots = tuple(real(p) for p in view["read_roots"]) + (home,)
    packages = tuple(real(p) for p in view["package_roots"])
    hidden_dirs = tuple(real(p) for p in view["hidden_dirs"])
    hidden_files = tuple(real(p) for p in view["hidden_files"])

    def allowed(event: str, path) -> bool:
        if isinstance(path, int):
            return True  # an open descriptor: it passed this check when it was opened
        name = os.fsdecode(os.fspath("." if path is None else path))
        if not os.path.isabs(name) and ".." in name.split("/"):
            return False  # with dir_fd the hook cannot tell where a relative path leads
        target = real(name)
        if event == "open" and os.path.isdir(target) and not _inside(target, (home,)):
            return False  # a directory descriptor (dir_fd) would reach past these checks
        if _inside(target, hidden_files):
            return False
        if _inside(target, packages):  # allowed packages live inside the hidden site-packages
            return True
        return _inside(target, roots) and not _inside(target, hidden_dirs)

    def hook(event: str, args: tuple) -> None:
        if event in _OPEN_EVENTS and not allowed(event, args[0]):
            raise PermissionError(f"{event}: outside the rewardlab sandbox's files")
        if event.startswith("ctypes.") or event in _ESCAPE_EVENTS:
            raise PermissionError(f"{event} is refused in the rewardlab sandbox (rlimit backend)")
        if event == "import" and args[0] == "_posixsubprocess":  # a fresh copy of the unpatched module
            raise PermissionError(
                "import _posixsubprocess is refused in the rewardlab sandbox (rlimit backend)"
            )

    _refuse_fork_exec()
    sys.addaudithook(hook)


def _refuse_fork_exec() -> None:
    """``_posixsubprocess.fork_exec`` (what subprocess runs) raises no audit event of its own: replace it,
    so that importing subprocess still works and starting a program fails."""

    def fork_exec(*args, **kwargs):
        raise PermissionError("starting programs is refused in the rewardlab sandbox (rlimit backend)")

    _posixsubprocess.fork_exec = fork_exec
