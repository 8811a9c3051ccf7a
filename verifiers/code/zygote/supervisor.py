"""One program's supervisor: forks the program, watches its output and time, cleans up, reports.

Forked by its slot for this program alone (``proctree.run_supervisor``), so its memory holds this program's
code and output only. The program gets a fresh working directory (a tmpfs of its own of ``workdir_mb``
where mounts are possible: its disk quota) and its descriptors at 0-3; the report (exit status, times,
output) goes to the parent as JSON once everything the program left has been killed and reaped.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import json
import os
import select
import shutil
import signal
import stat
import time
import traceback
from collections.abc import Callable

from .jobs import read_fd, write_all
from .namespaces import MS_NODEV, MS_NOSUID, mount, umount
from .program import enter_program, run_exec, run_stdio
from .reaper import kill, kill_leftovers, kill_others
from .rpc import run_candidate
from .state import CONFIG, STATE


def supervise(
    header: dict, fds: list[int], uid: int | None, started: Callable[[], None] | None = None
) -> None:
    """Runs one program under limits and writes a JSON report to ``fds[0]``; calls ``started`` once the
    program is forked."""
    report_fd, payload_fd, extra_fd = fds[0], fds[1], fds[2]
    kind = header["kind"]
    limits = header["limits"]
    payload = read_fd(payload_fd)
    os.close(payload_fd)
    if kind == "exec":
        payload = _exec_job(payload)
    workdir = _make_workdir(kind, uid)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the program
        _run_program(kind, payload, uid, workdir, limits, (out_w, err_w, extra_fd), (out_r, err_r, report_fd))
    os.close(out_w)
    os.close(err_w)
    os.close(extra_fd)
    if started is not None:
        started()
    out, err, status = _watch(pid, uid, out_r, err_r, limits, t0)
    wall = time.monotonic() - t0
    kill_leftovers(pid, uid)
    report = {"kind": kind, "wall": round(wall, 4), **status}
    if kind == "exec" and payload.get("collect"):
        report["files"] = _collect(workdir, payload["collect"], limits)
    _remove_workdir(workdir)
    binary = kind in ("stdio", "exec")
    report["stdout"] = base64.b64encode(out).decode() if binary else out.decode("utf-8", "replace")
    report["stderr"] = err[-4000:].decode("utf-8", "replace")
    write_all(report_fd, json.dumps(report).encode())
    os.close(report_fd)


def _run_program(
    kind: str, payload: bytes, uid: int | None, workdir: str, limits: dict, keep: tuple, close: tuple
) -> None:
    """The program's process; never returns. Its descriptors: 0 its stdin (``stdio``) or /dev/null, 1 the
    supervisor's pipe (``stdio``) or /dev/null, 2 the supervisor's pipe, 3 the judge's socket
    (``candidate``); ``keep`` holds those three ends, ``close`` the supervisor's own. Then its limits and
    identity, then the program."""
    out_w, err_w, extra_fd = keep
    piped = kind in ("stdio", "exec")
    try:
        for fd in close:
            os.close(fd)
        stdin_fd = extra_fd if piped else os.open("/dev/null", os.O_RDONLY)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w if piped else os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(err_w, 2)
        if not piped:
            os.dup2(extra_fd, 3)
        os.closerange(3 if piped else 4, 1 << 16)
        enter_program(uid, workdir, limits)
        if kind == "exec":
            code = run_exec(payload)
        elif kind == "stdio":
            code = run_stdio(payload.decode("utf-8", "replace"))
        else:
            code = run_candidate(payload.decode("utf-8", "replace"), 3)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
        code = 1
    os._exit(code)


def _exec_job(payload: bytes) -> dict:
    """An ``exec`` program's job: its command, environment, the files to write (name: base64, mode) and
    the names or patterns of the files to return once it has ended (a compiler's output)."""
    job = json.loads(payload)
    job["files"] = {name: (base64.b64decode(data), mode) for name, (data, mode) in job["files"].items()}
    return job


def _collect(workdir: str, patterns: list[str], limits: dict) -> dict:
    """The regular files of the working directory's top level matching ``patterns`` (a compiler's output),
    base64, to ``limits["collect_mb"]`` in all. Opened without following links: the program, not the
    supervisor, decided what they are."""
    budget = int(limits.get("collect_mb", 64) * 1024 * 1024)
    found: dict[str, str] = {}
    try:
        names = sorted(os.listdir(workdir))
    except OSError:
        return found
    for name in names:
        if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        try:
            fd = os.open(os.path.join(workdir, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > budget:
                continue
            budget -= info.st_size
            found[name] = base64.b64encode(read_fd(fd)).decode()
        finally:
            os.close(fd)
    return found


def _watch(
    pid: int, uid: int | None, out_r: int, err_r: int, limits: dict, t0: float
) -> tuple[bytes, bytes, dict]:
    """Collects output until the program ends or the wall limit passes; kills the namespace on timeout."""
    deadline = t0 + limits["wall"]
    max_out = int(limits["out_mb"] * 1024 * 1024)
    pidfd = os.pidfd_open(pid)
    out, err = bytearray(), bytearray()
    open_fds = {out_r, err_r}
    timed_out = out_limit = False
    exited = killed = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([*open_fds, pidfd], [], [], remaining)
        for fd in ready:
            if fd == pidfd:
                exited = True
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                open_fds.discard(fd)
            elif fd == out_r:
                out += chunk
                if len(out) > max_out:
                    out_limit = True
            else:
                err += chunk
                if len(err) > 65536:
                    del err[:-8192]
        if out_limit or (exited and not open_fds):
            break
        if exited and not killed:  # the program ended: kill what it left running, then drain the pipes
            killed = True
            kill_others(pid, uid)
        if exited:
            ready, _, _ = select.select(list(open_fds), [], [], 0.05)
            if not ready:
                break
    if not exited or out_limit:
        kill(pid)
    _, wstatus, usage = os.wait4(pid, 0)
    os.close(pidfd)
    _drain(out_r, err_r, open_fds, out, err, max_out)
    status = _status(wstatus, usage, timed_out, out_limit)
    return bytes(out[: max_out + 1]), bytes(err), status


def _drain(out_r: int, err_r: int, open_fds: set[int], out: bytearray, err: bytearray, max_out: int) -> None:
    """Reads what is left in the program's pipes without waiting (to the output limit), then closes them."""
    for fd in (out_r, err_r):
        try:
            while fd in open_fds and len(out) <= max_out:
                r, _, _ = select.select([fd], [], [], 0)
                if not r:
                    break
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                (out if fd == out_r else err).extend(chunk)
        except OSError:
            pass
        os.close(fd)


def _status(wstatus: int, usage, timed_out: bool, out_limit: bool) -> dict:
    """The report's view of how the program ended (a CPU-time kill counts as a timeout)."""
    status = {
        "timed_out": timed_out,
        "output_limit": out_limit,
        "exit_code": os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else None,
        "signal": os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None,
        "cpu": round(usage.ru_utime + usage.ru_stime, 4),
        "maxrss_kb": usage.ru_maxrss,
    }
    if status["signal"] == signal.SIGXCPU:
        status["timed_out"] = True
    return status


def _make_workdir(kind: str, uid: int | None) -> str:
    """A fresh working directory; where mounts are possible, a tmpfs of its own of ``workdir_mb`` (the
    program's disk quota: filling it fails this program only, never a concurrent one)."""
    path = os.path.join(STATE["runs_dir"], f"{kind}-{uid}-{os.urandom(6).hex()}")
    os.mkdir(path, 0o700)
    if STATE["quota"]:
        owner = f",uid={uid},gid={uid}" if uid is not None else ""
        size = f"size={int(CONFIG['workdir_mb'])}m,nr_inodes={_WORKDIR_INODES},mode=700{owner}"
        try:
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, size)
            return path
        except OSError:  # e.g. the root's host directory was removed: the shared, capped /runs then
            pass
    if uid is not None:
        os.chown(path, uid, uid)
    return path


_WORKDIR_INODES = 65536  # files per working directory (each costs kernel memory, like the bytes)


def _remove_workdir(path: str) -> None:
    """Unmounts (where it is a tmpfs of its own) and removes a working directory."""
    if STATE["quota"]:
        with contextlib.suppress(OSError):
            umount(path)  # frees its pages at once; detached even if something still holds a file
    shutil.rmtree(path, ignore_errors=True)
