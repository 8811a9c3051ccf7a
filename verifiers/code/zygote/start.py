"""The zygote's start-up: its configuration, its root, then the warm workers (``proctree.zygote_loop``).

Native backend as root: enter the namespaces, build the read-only root, chroot, and run the folder again
from inside it (``/rk_zygote/__main__.py``), so that no process a program descends from held a host path;
where the kernel refuses, record why and go on with the rlimit fallback. Then probe which namespaces a
worker may make of its own, and set ``sys.path`` once, for every fork: the standard library and the
allowed packages.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys

from .jobs import read_fd, write_all
from .namespaces import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUTS,
    PR_SET_PDEATHSIG,
    allowed_in_child,
    build_root,
    libc,
    probe_quota,
    program_namespaces,
    unshare,
)
from .proctree import zygote_loop
from .state import CONFIG, STATE

INSIDE_MAIN = "/rk_zygote/__main__.py"  # this folder's entry, where the root shows it (sandbox.py's mount)


def main() -> None:
    import site  # under -S: only for exit(), quit(), help() that programs call, sys.path stays as is

    site.setquit()
    site.setcopyright()
    site.sethelper()
    config_fd, sock_fd = int(sys.argv[1]), int(sys.argv[2])
    config = json.loads(read_fd(config_fd))  # a local, never a global: workers must not find the uid range
    os.close(config_fd)
    setup_zygote(config, sock_fd)
    zygote_loop(socket.socket(fileno=sock_fd))


def setup_zygote(config: dict, sock_fd: int) -> None:
    """Keeps the configuration and records in ``STATE`` what isolation the kernel allows here, after
    entering the root where it may (on the native backend, the first time: that runs the folder again)."""
    CONFIG.update(config)
    if config.get("pdeathsig", True):
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    is_root = os.geteuid() == 0
    if config.get("entered"):  # started inside the root: by _enter_root, or by bwrap
        STATE.update(bwrap=bool(config.get("inside_bwrap")), chroot=True)
        STATE["netns"] = not config.get("network", False)
    elif is_root and config.get("isolate", True):
        _enter_root(config, sock_fd)  # returns only where the kernel refuses namespaces
    if not STATE["chroot"]:
        os.makedirs(config["host"]["runs_dir"], exist_ok=True)
    STATE["runs_dir"] = "/runs" if STATE["chroot"] else config["host"]["runs_dir"]
    STATE["quota"] = STATE["chroot"] and is_root and probe_quota(STATE["runs_dir"])
    _set_sys_path(config["sys_path"] if STATE["chroot"] else config["host"]["fallback"]["sys_path"])
    STATE["setuid"] = is_root and config.get("drop_privileges", True)
    if is_root and config.get("pid_namespace", True):
        STATE["pidns"] = allowed_in_child(CLONE_NEWPID)  # a PID namespace per slot
    if is_root:
        STATE["program_ns"] = allowed_in_child(program_namespaces())


def _enter_root(config: dict, sock_fd: int) -> None:
    """Enters the namespaces, builds the read-only root and chroots into it, then runs this folder again
    from inside (its memory then never held a host path). Where the kernel refuses a namespace or a
    mount (a container without CAP_SYS_ADMIN), records why and returns: the rlimit fallback runs."""
    flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS
    if not config.get("network", False):
        flags |= CLONE_NEWNET
    try:
        unshare(flags)
        host = config["host"]
        build_root(host["root"], host["mounts"], config["workdir_mb"])
    except OSError as exc:
        STATE["setup_error"] = str(exc)
        return
    name = b"sandbox"
    libc.sethostname(name, len(name))  # not the host's name (a UTS namespace of its own)
    inside = {k: v for k, v in config.items() if k != "host"}  # "host": every host path, left behind
    config_fd = os.memfd_create("rk-config", 0)  # inherited by the new program, unlike argv never shown
    write_all(config_fd, json.dumps({**inside, "entered": True}).encode())
    os.set_inheritable(sock_fd, True)
    argv = [sys.executable, "-I", "-S", INSIDE_MAIN, str(config_fd), str(sock_fd)]
    os.execve(sys.executable, argv, {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")})


def _set_sys_path(entries: list[str]) -> None:
    """The standard library and the allowed packages' directory, nothing else (set once, inherited)."""
    sys.path[:] = entries
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
