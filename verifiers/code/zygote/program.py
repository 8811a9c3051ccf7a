"""The program process: its limits and identity, and the runner of a stdin/stdout program.

:func:`enter_program` runs in the program's process before any untrusted code: rlimits, namespaces of its
own, a private uid, ``no_new_privs``, a clean environment, its working directory, and the rlimit backend's
guards. The standard-library modules imported here are imported for the programs: the zygote imports them
once, and every fork inherits them, so that a program importing them starts fast.
"""

from __future__ import annotations

# Preloaded so that programs importing them start fast (they are inherited by every fork).
import bisect  # noqa: F401
import builtins
import collections  # noqa: F401
import contextlib
import copy  # noqa: F401
import hashlib  # noqa: F401
import heapq  # noqa: F401
import itertools  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import os
import random  # noqa: F401
import re  # noqa: F401
import resource
import statistics  # noqa: F401
import string  # noqa: F401
import sys
import tempfile
import traceback

from .guards import disable_network, guard_files
from .namespaces import (
    CLONE_NEWNS,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_NO_NEW_PRIVS,
    libc,
    mount,
    program_namespaces,
    unshare,
)
from .state import CONFIG, STATE


def enter_program(uid: int | None, workdir: str, limits: dict) -> None:
    """Limits and identity of the program process (called in P before any untrusted code runs)."""
    os.setsid()
    mb = 1024 * 1024
    cpu = max(1, int(limits["cpu"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if limits.get("data_mb"):  # JIT and threaded runtimes reserve far more address space than they use
        data = int(limits["data_mb"] * mb)
        resource.setrlimit(resource.RLIMIT_DATA, (data, data))
        if limits.get("as_mb"):  # native code: shared mappings count here, not in RLIMIT_DATA
            as_bytes = int(limits["as_mb"] * mb)
            resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
    elif limits.get("memory_mb"):
        as_bytes = int(limits["memory_mb"] * mb)
        resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
    fsize = int(limits["fsize_mb"] * mb)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if STATE["program_ns"]:  # while still root: System V IPC and sockets of its own, gone when it ends
        unshare(program_namespaces())
    if limits.get("proc") and STATE["chroot"] and uid is not None:
        _mount_own_proc()
        if STATE["program_ns"] and limits.get("data_mb"):
            _cap_shared_memory(int(limits["data_mb"]))
    if uid is not None:
        # RLIMIT_NPROC counts the processes of the real uid: exact here because each in-flight program
        # has a uid of its own. Root ignores it, hence the drop below.
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"]))
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
    )
    tempfile.tempdir = workdir
    sys.path[:] = [p for p in sys.path if p] + [workdir]
    if not STATE["netns"] and not CONFIG.get("network", False):
        disable_network()
    if not STATE["chroot"]:
        guard_files(workdir)


def _mount_own_proc() -> None:
    """A ``/proc`` of the program's own (a mount namespace of its own): compilers and runtimes find their
    files through ``/proc/self/exe`` (the loader's ``$ORIGIN``, rustc's sysroot, the JVM). It shows the
    slot's PID namespace only, and of that only the program's own uid's processes (``hidepid=2``)."""
    try:
        unshare(CLONE_NEWNS)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    except OSError as exc:
        os.write(2, f"sandbox: no /proc for this program ({exc})\n".encode())


def _cap_shared_memory(megabytes: int) -> None:
    """System V shared memory of the program's own IPC namespace, capped at its memory limit (segments
    count in neither RLIMIT_DATA nor, until attached, RLIMIT_AS)."""
    pages = megabytes * 1024 * 1024 // os.sysconf("SC_PAGE_SIZE")
    for name, value in (("shmmax", megabytes * 1024 * 1024), ("shmall", pages)):
        try:
            with open(f"/proc/sys/kernel/{name}", "w") as f:
                f.write(str(value))
        except OSError as exc:
            os.write(2, f"sandbox: kernel.{name} not set ({exc})\n".encode())


def run_exec(job: dict) -> int:
    """Writes the job's files into the working directory and replaces this process with its command (a
    compiler, a compiled binary, a runtime); returns only when the command cannot start."""
    for name, (data, mode) in job["files"].items():
        if "/" in name or name.startswith("."):
            raise ValueError(f"bad file name {name!r}")
        with open(name, "wb") as f:
            f.write(data)
        os.chmod(name, mode)
    os.environ.update(job.get("env") or {})
    argv = job["argv"]
    try:
        os.execvpe(argv[0], argv, os.environ)
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
    return 127


def _fresh_streams() -> None:
    """Text streams on descriptors 0-2 that never fail on bytes that are not UTF-8."""
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


def run_stdio(code: str) -> int:
    """Runs ``code`` as ``__main__`` on stdin and stdout; returns its exit status."""
    _fresh_streams()
    ret = 0
    try:
        exec(compile(code, "<solution>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as exc:
        ret = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        ret = 1
    try:
        sys.stdout.flush()
    except BaseException:
        ret = ret or 1
    with contextlib.suppress(BaseException):
        sys.stderr.flush()
    return ret
