"""The sandbox side of the code verifier: a warm "zygote" interpreter and the workers it forks.

This file runs as a script (``python -I -S _zygote.py CONFIG_FD SOCKET_FD``), never imported by rewardlab
itself: it must stay light (standard library only) because every sandboxed program is a fork of it, and
it runs where neither rewardlab nor any site-packages is visible (``sys.path``: the standard library and
the allowed packages, see ``layout.py``). Its configuration comes through a descriptor, not ``argv``.

Start-up, native backend: the host-side process enters new mount, IPC, UTS and network namespaces, builds
the read-only root, chroots, and then executes this script again from inside the root (``/rk_zygote.py``)
with the part of its configuration that names no host path. So no process a program is forked from ever
held the checkout's, the venv's or the temporary directories' paths (bwrap starts it inside already).

Process tree::

    zygote (root, started once; own mount + network + IPC + UTS namespace, chrooted into a read-only root)
      ├─ slot i (root, PID 1 of a PID namespace of its own; warm, one program at a time; never reads
      │    │      a program's output, so its memory stays what it was when it was forked)
      │    └─ supervisor S (forked per program; collects the program's output, reports, exits)
      │         └─ program P (private uid, rlimits, no_new_privs, fresh working dir: a tmpfs of its own,
      │              its own IPC and network namespaces: whatever System V IPC or socket it creates is
      │              gone with it), one of:
      │              "stdio"     - the program on stdin; stdout goes to S, then to the parent, which
      │                            alone holds the expected outputs and compares
      │              "candidate" - loads the solution, then answers the judge's calls over a socket
      └─ judge j (its own private uid; warm, one sample at a time)
           runs the test code (from a memfd the candidate never sees) with fresh globals, calling the
           candidate's functions through the socket; writes the verdict to the parent

After each program its supervisor kills every other process of the slot's namespace (``kill(-1)``),
which includes double-forked, ``setsid``-ed daemons (it is their subreaper), reaps them, and unmounts and
removes the working directory. A program is forked from its own supervisor, which had read nothing but the
program's code: no earlier program's output or code is in its memory.
The judge never runs solution code and the candidate never holds the tests, so nothing the solution does
in its own process (exit early, print, patch builtins or ``assert`` helpers, walk the stack or ``gc`` for the
expected values) changes the verdict: the judge sees plain data values (decoded by a strict, non-pickle
decoder) or opaque handles, never the solution's objects.
"""

from __future__ import annotations

import _posixsubprocess  # imported before the privileges drop: rlimit programs get it patched
import ast
import base64

# Preloaded so that programs importing them start fast (they are inherited by every fork).
import bisect  # noqa: F401
import builtins
import collections  # noqa: F401
import contextlib
import copy  # noqa: F401
import ctypes
import fcntl
import functools
import gc
import hashlib  # noqa: F401
import heapq  # noqa: F401
import importlib
import importlib.machinery
import itertools  # noqa: F401
import json
import math  # noqa: F401
import operator  # noqa: F401
import os
import random  # noqa: F401
import re  # noqa: F401
import resource
import select
import shutil
import signal
import socket
import statistics  # noqa: F401
import string  # noqa: F401
import struct
import sys
import tempfile
import time
import traceback
import types
import typing

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

CONFIG: dict = {}
STATE = {
    "netns": False,
    "pidns": False,
    "chroot": False,
    "setuid": False,
    "bwrap": False,
    "program_ns": False,
}


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


# ---------------------------------------------------------------------------------------------- zygote setup


def _build_root(root: str, mounts: list, workdir_mb: int) -> None:
    """Builds a minimal root under ``root`` (a tmpfs holding the layout's read-only mounts) and chroots."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=755")
    for kind, source, target in mounts:
        _place(root, kind, source, target)
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in ("null", "zero", "full", "random", "urandom"):
        target = f"{root}/dev/{dev}"
        open(target, "a").close()
        _mount(f"/dev/{dev}", target, None, MS_BIND)
    os.makedirs(root + "/runs", exist_ok=True)
    # Mount points of the programs' working dirs (each a tmpfs of its own, see _make_workdir); their
    # shared home where per-program mounts are refused, capped so that no program fills the host's disk.
    _mount("tmpfs", root + "/runs", "tmpfs", MS_NOSUID | MS_NODEV, f"size={workdir_mb}m,mode=711")
    os.chmod(root, 0o755)
    os.chroot(root)
    os.chdir("/")


def _place(root: str, kind: str, source: str, target: str) -> None:
    """One mount of the layout (``layout.py``): a read-only bind, a symlink, or an empty mount hiding
    what an earlier bind showed (a site-packages directory, a cache, a dataset file)."""
    path = root + target
    if kind == "link":
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.lexists(path):
            os.symlink(source, path)
    elif kind == "hide_dir":
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=555")
    elif kind == "hide_file":
        if os.path.isfile(path):
            _mount("/dev/null", path, None, MS_BIND)
    elif os.path.lexists(source):
        if os.path.isdir(source):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        _mount(source, path, None, MS_BIND | MS_REC)
        _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)


def _probe_quota(runs_dir: str) -> bool:
    """Whether a tmpfs can be mounted per working directory here (root in our own mount namespace)."""
    probe = os.path.join(runs_dir, ".quota-probe")
    try:
        os.mkdir(probe)
        _mount("tmpfs", probe, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
        _umount(probe)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)


def _umount(path: str) -> None:
    _check(_libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")


def _set_sys_path(entries: list[str]) -> None:
    """The standard library and the allowed packages' directory, nothing else (set once, inherited)."""
    sys.path[:] = entries
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()


INSIDE_SCRIPT = "/rk_zygote.py"  # where the root shows this script (bound by layout.py's mounts)


def setup_zygote(config: dict, sock_fd: int) -> None:
    CONFIG.update(config)
    if config.get("pdeathsig", True):
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    is_root = os.geteuid() == 0
    if config.get("entered"):  # started inside the root: by _enter_root, or by bwrap
        STATE.update(bwrap=bool(config.get("inside_bwrap")), chroot=True)
        STATE["netns"] = not config.get("network", False)
    elif is_root and config.get("isolate", True):
        _enter_root(config, sock_fd)  # returns only where the kernel refuses namespaces
    if not STATE["chroot"]:
        os.makedirs(config["host"]["runs_dir"], exist_ok=True)
    STATE["runs_dir"] = "/runs" if STATE["chroot"] else config["host"]["runs_dir"]
    STATE["quota"] = STATE["chroot"] and is_root and _probe_quota(STATE["runs_dir"])
    _set_sys_path(config["sys_path"] if STATE["chroot"] else config["host"]["fallback"]["sys_path"])
    STATE["setuid"] = is_root and config.get("drop_privileges", True)
    if is_root and config.get("pid_namespace", True):
        STATE["pidns"] = _allowed_in_child(CLONE_NEWPID)  # a PID namespace per slot
    if is_root:
        STATE["program_ns"] = _allowed_in_child(_program_namespaces())


def _enter_root(config: dict, sock_fd: int) -> None:
    """Enters the namespaces, builds the read-only root and chroots into it, then runs this script again
    from inside (its memory then never held a host path). Where the kernel refuses a namespace or a
    mount (a container without CAP_SYS_ADMIN), records why and returns: the rlimit fallback runs."""
    flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS
    if not config.get("network", False):
        flags |= CLONE_NEWNET
    try:
        _unshare(flags)
        host = config["host"]
        _build_root(host["root"], host["mounts"], config["workdir_mb"])
    except OSError as exc:
        STATE["setup_error"] = str(exc)
        return
    name = b"sandbox"
    _libc.sethostname(name, len(name))  # not the host's name (a UTS namespace of its own)
    inside = {k: v for k, v in config.items() if k != "host"}  # "host": every host path, left behind
    config_fd = os.memfd_create("rk-config", 0)  # inherited by the new program, unlike argv never shown
    _write_all(config_fd, json.dumps({**inside, "entered": True}).encode())
    os.set_inheritable(sock_fd, True)
    argv = [sys.executable, "-I", "-S", INSIDE_SCRIPT, str(config_fd), str(sock_fd)]
    os.execve(sys.executable, argv, {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")})


def _program_namespaces() -> int:
    """The namespaces each program gets of its own: IPC always, network unless the network is allowed
    (then programs share the host's)."""
    return CLONE_NEWIPC | (0 if CONFIG.get("network", False) else CLONE_NEWNET)


def _allowed_in_child(flags: int) -> bool:
    """Whether a forked child may unshare ``flags`` here (probed once at start-up)."""
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid == 0:
        try:
            _unshare(flags)
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def zygote_loop(sock: socket.socket) -> None:
    """Starts the warm workers, hands their sockets to the parent, then waits until the parent is gone."""
    gc.collect()
    gc.freeze()  # forks then share these pages: the GC of a child does not touch (copy) them
    n_slots, n_judges, uid_base = CONFIG["slots"], CONFIG["judges"], CONFIG["uid_base"]
    ends: list[socket.socket] = []
    for i in range(n_slots):
        ends.append(_spawn_worker("slot", uid_base + i, sock, ends))
    for j in range(n_judges):
        ends.append(_spawn_worker("judge", uid_base + n_slots + j, sock, ends))
    hello = json.dumps({"ready": True, **STATE}).encode()
    socket.send_fds(sock, [hello], [e.fileno() for e in ends])
    for e in ends:
        e.close()
    while True:
        try:
            if not sock.recv(1):
                break  # the parent is gone; workers see their sockets close and exit too
        except InterruptedError:
            continue
    signal.alarm(5)  # reap the workers as they exit (so that no zombie outlives the sandbox), then go
    with contextlib.suppress(ChildProcessError):
        while True:
            os.waitpid(-1, 0)


def _spawn_worker(kind: str, uid: int, control: socket.socket, others: list[socket.socket]) -> socket.socket:
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid:
        child_end.close()
        return parent_end
    try:
        control.close()
        parent_end.close()
        for other in others:
            other.close()
        for key in ("uid_base", "slots", "judges"):  # a worker knows its own uid only
            CONFIG.pop(key, None)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if kind == "judge":
            judge_loop(child_end, uid if STATE["setuid"] else None)
        else:
            if STATE["pidns"]:
                # The slot is PID 1 of a namespace of its own: kill(-1) from a supervisor (root) in it
                # reaches every process a program left behind (double-forked, setsid-ed), and nothing
                # else but the slot.
                _unshare(CLONE_NEWPID)
                init = os.fork()
                if init:
                    child_end.close()  # only the slot may hold it: if the slot dies, sends to it fail
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(init, 0)
                    os._exit(0)
                _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            slot_loop(child_end, uid if STATE["setuid"] else None)
    except BaseException:
        traceback.print_exc()
    os._exit(0)


def _recv_job(sock: socket.socket) -> tuple[dict, list[int]] | None:
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
            break
        except InterruptedError:
            continue
    if not msg:
        return None
    # Received fds take the lowest free numbers (3, 4, ...); move them out of the way of the
    # dup2() calls that place a program's descriptors at 0-4.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds]
    for fd in fds:
        os.close(fd)
    return json.loads(msg), high


def slot_loop(sock: socket.socket, uid: int | None) -> None:
    """One program at a time, each under a supervisor forked for it (see :func:`run_supervisor`)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if not STATE["pidns"]:
        # Without a namespace of its own, the slot adopts what a dead supervisor left (see _kill_leftovers).
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    while True:
        job = _recv_job(sock)
        if job is None:
            return
        header, fds = job
        try:
            run_supervisor(header, fds, uid)
        except BaseException:
            traceback.print_exc()
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


def run_supervisor(header: dict, fds: list[int], uid: int | None) -> None:
    """Forks the supervisor of one program and waits for it. The slot itself never reads the program's
    code or output: each program is forked from a supervisor whose memory held nothing of an earlier one
    (its output stayed in its own supervisor, gone with it)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # Orphans of the program (double-forked daemons) become the supervisor's to kill and reap.
            _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            supervise(header, fds, uid)
        except BaseException:
            with contextlib.suppress(BaseException):
                traceback.print_exc()
            code = 1
        os._exit(code)
    status = os.waitpid(pid, 0)[1]
    if status != 0:  # the supervisor failed before its clean-up: what the program left is the slot's now
        _kill_leftovers(None, uid)


# ------------------------------------------------------------------------------------------------ supervisor


def _read_fd(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def supervise(header: dict, fds: list[int], uid: int | None) -> None:
    """Runs one program under limits and writes a JSON report to ``fds[0]``."""
    report_fd, payload_fd, extra_fd = fds[0], fds[1], fds[2]
    kind = header["kind"]
    limits = header["limits"]
    payload = _read_fd(payload_fd)
    os.close(payload_fd)
    workdir = _make_workdir(kind, uid)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the program
        try:
            os.close(out_r)
            os.close(err_r)
            os.close(report_fd)
            stdin_fd = extra_fd if kind == "stdio" else os.open("/dev/null", os.O_RDONLY)
            os.dup2(stdin_fd, 0)
            os.dup2(out_w if kind == "stdio" else os.open(os.devnull, os.O_WRONLY), 1)
            os.dup2(err_w, 2)
            if kind != "stdio":
                os.dup2(extra_fd, 3)
            os.closerange(4, 1 << 16)
            _enter_program(uid, workdir, limits)
            if kind == "stdio":
                code = _run_stdio(payload.decode("utf-8", "replace"))
            else:
                code = _run_candidate(payload.decode("utf-8", "replace"), 3)
        except BaseException:
            with contextlib.suppress(BaseException):
                traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(out_w)
    os.close(err_w)
    os.close(extra_fd)
    out, err, status = _watch(pid, uid, out_r, err_r, limits, t0)
    wall = time.monotonic() - t0
    _kill_leftovers(pid, uid)
    _remove_workdir(workdir)
    report = {"kind": kind, "wall": round(wall, 4), **status}
    report["stdout"] = base64.b64encode(out).decode() if kind == "stdio" else out.decode("utf-8", "replace")
    report["stderr"] = err[-4000:].decode("utf-8", "replace")
    _write_all(report_fd, json.dumps(report).encode())
    os.close(report_fd)


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
            _kill_others(pid, uid)
        if exited:
            ready, _, _ = select.select(list(open_fds), [], [], 0.05)
            if not ready:
                break
    if not exited or out_limit:
        _kill(pid)
    _, wstatus, usage = os.wait4(pid, 0)
    os.close(pidfd)
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
    return bytes(out[: max_out + 1]), bytes(err), status


def _kill(pid: int) -> None:
    for target in (lambda: os.kill(pid, signal.SIGKILL), lambda: os.killpg(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            target()


def _kill_others(pid: int | None = None, uid: int | None = None) -> None:
    """SIGKILL what a program left running, without reaping. In a slot's PID namespace: every process of
    it but the caller and the slot (its PID 1). Without a namespace: the program's process group and the
    processes of its uid."""
    if STATE["pidns"]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        return
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    if uid is not None:
        _sweep_uid(uid)
    else:
        _kill_adopted()


def _kill_adopted() -> int:
    """SIGKILL the slot's children other than zombies: as a child subreaper it adopts the orphans of its
    programs (double-forked daemons), so these are what a program left behind. Returns how many."""
    me, n = str(os.getpid()), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == me and fields[0] != "Z":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                n += 1
    return n


def _sweep_uid(uid: int) -> None:
    """kill(-1) from a helper running as ``uid``: every process of that uid, ``setsid``-ed ones included."""
    child = os.fork()
    if child == 0:
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # as that uid: all processes it may signal, i.e. its own
        except OSError:
            pass
        os._exit(0)
    os.waitpid(child, 0)


def _kill_leftovers(pid: int | None, uid: int | None) -> None:
    """Kills and reaps everything the program left (the caller is the subreaper of what it left). In a
    slot's PID namespace: kill(-1) until no child is left. Without one: the process group, then (with a
    private uid) every process of that uid, which also catches double-forked, ``setsid``-ed children."""
    if STATE["pidns"]:
        for _ in range(10000):
            _kill_others()
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                return  # nothing left in the namespace
            time.sleep(0.0005)
        return
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    if uid is None:
        for _ in range(1000):
            killed = _kill_adopted()
            _reap()
            if not killed:
                return
            time.sleep(0.001)
        return
    for _ in range(50):
        _sweep_uid(uid)
        _reap()
        if not any(_owned_by(p, uid) for p in os.listdir("/proc") if p.isdigit()):
            return
        time.sleep(0.001)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _owned_by(pid: str, uid: int) -> bool:
    """Whether a live (not zombie) process of that uid has this pid."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != uid:
            return False
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _make_workdir(kind: str, uid: int | None) -> str:
    """A fresh working directory; where mounts are possible, a tmpfs of its own of ``workdir_mb`` (the
    program's disk quota: filling it fails this program only, never a concurrent one)."""
    path = os.path.join(STATE["runs_dir"], f"{kind}-{uid}-{os.urandom(6).hex()}")
    os.mkdir(path, 0o700)
    if STATE["quota"]:
        owner = f",uid={uid},gid={uid}" if uid is not None else ""
        size = f"size={int(CONFIG['workdir_mb'])}m,nr_inodes={_WORKDIR_INODES},mode=700{owner}"
        try:
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, size)
            return path
        except OSError:  # e.g. the root's host directory was removed: the shared, capped /runs then
            pass
    if uid is not None:
        os.chown(path, uid, uid)
    return path


_WORKDIR_INODES = 65536  # files per working directory (each costs kernel memory, like the bytes)


def _remove_workdir(path: str) -> None:
    if STATE["quota"]:
        with contextlib.suppress(OSError):
            _umount(path)  # frees its pages at once; detached even if something still holds a file
    shutil.rmtree(path, ignore_errors=True)


def _enter_program(uid: int | None, workdir: str, limits: dict) -> None:
    """Limits and identity of the program process (called in P before any untrusted code runs)."""
    os.setsid()
    mb = 1024 * 1024
    cpu = max(1, int(limits["cpu"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if limits.get("memory_mb"):
        as_bytes = int(limits["memory_mb"] * mb)
        resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
    fsize = int(limits["fsize_mb"] * mb)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if STATE["program_ns"]:  # while still root: System V IPC and sockets of its own, gone when it ends
        _unshare(_program_namespaces())
    if uid is not None:
        # RLIMIT_NPROC counts the processes of the real uid: exact here because each in-flight program
        # has a uid of its own. Root ignores it, hence the drop below.
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"]))
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
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
        _disable_network()
    if not STATE["chroot"]:
        _guard_files(workdir)


def _disable_network() -> None:
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
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _guard_files(workdir: str) -> None:
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


# -------------------------------------------------------------------------------------------------- programs


def _fresh_streams() -> None:
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


def _run_stdio(code: str) -> int:
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


# Wire format between judge and candidate: length-prefixed JSON where every container is a tagged list,
# so decoding builds only plain values (never pickle: the candidate is adversarial).

_MAX_MSG = 256 * 1024 * 1024


class _Unencodable(Exception):
    pass


def _enc(value, refs: dict | None):
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            return ["f", repr(value)]
        return value
    if t is list:
        return ["L", [_enc(v, refs) for v in value]]
    if t is tuple:
        return ["T", [_enc(v, refs) for v in value]]
    if t is dict:
        return ["D", [[_enc(k, refs), _enc(v, refs)] for k, v in value.items()]]
    if t is set:
        return ["S", [_enc(v, refs) for v in value]]
    if t is frozenset:
        return ["F", [_enc(v, refs) for v in value]]
    if t is bytes:
        return ["B", base64.b64encode(value).decode()]
    if t is complex:
        return ["C", repr(value.real), repr(value.imag)]
    if t is range:
        return ["G", value.start, value.stop, value.step]
    if t is _RemoteRef:
        return ["R", value._rk_ref]
    # Subclasses of the plain types (Counter, OrderedDict, defaultdict, namedtuple, IntEnum, numpy.float64,
    # or a class whose __eq__ always matches) travel as the plain value they hold, read through the base
    # type's own methods: no override runs, so the judge compares the honest underlying value.
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return _enc(float.__float__(value), refs)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return _enc(bytes.__add__(b"", value), refs)
    if isinstance(value, tuple):
        return ["T", [_enc(tuple.__getitem__(value, i), refs) for i in range(tuple.__len__(value))]]
    if isinstance(value, list):
        return ["L", [_enc(list.__getitem__(value, i), refs) for i in range(list.__len__(value))]]
    if isinstance(value, dict):
        return ["D", [[_enc(k, refs), _enc(v, refs)] for k, v in dict.items(value)]]
    if isinstance(value, frozenset):
        return ["F", [_enc(v, refs) for v in frozenset.__iter__(value)]]
    if isinstance(value, set):
        return ["S", [_enc(v, refs) for v in set.__iter__(value)]]
    if (
        refs is not None
        and (t.__module__ or "").split(".")[0] == "numpy"
        and getattr(value, "ndim", None) == 0
    ):
        return _enc(value.item(), refs)  # numpy scalars compare as Python numbers (arrays stay handles)
    if refs is None:
        return _enc_helper(value, t)
    key = len(refs) + 1  # anything else stays on the candidate side behind a handle
    refs[key] = value
    return ["R", key]


# The prompt's helpers the judge defined for the current sample (see _bind_prompt_helpers): how the tests'
# objects built from them travel to the candidate.
_HELPER_CLASSES: dict[type, str] = {}  # instances go by value, rebuilt from the candidate's class
_HELPER_NAMES: dict[int, str] = {}  # id() of a helper function or class: sent as the candidate's namesake


def _enc_helper(value, t: type):
    """Judge side: an instance of a prompt helper class (by value: class name and attributes), or a helper
    itself (as the candidate's object of that name); anything else cannot go to the candidate."""
    if t in _HELPER_CLASSES:
        return ["O", _HELPER_CLASSES[t], _enc(dict(getattr(value, "__dict__", {})), None)]
    if id(value) in _HELPER_NAMES:
        return ["R", _HELPER_NAMES[id(value)]]
    raise _Unencodable(t.__name__)


def _dec(value, resolve, build=None):
    """Decodes a wire value; ``resolve`` turns a handle into an object, ``build`` (candidate side only)
    rebuilds an instance of a prompt helper class sent by value."""
    if not isinstance(value, list):
        return value
    tag = value[0]
    if tag == "L":
        return [_dec(v, resolve, build) for v in value[1]]
    if tag == "T":
        return tuple(_dec(v, resolve, build) for v in value[1])
    if tag == "D":
        return {_dec(k, resolve, build): _dec(v, resolve, build) for k, v in value[1]}
    if tag == "S":
        return {_dec(v, resolve, build) for v in value[1]}
    if tag == "F":
        return frozenset(_dec(v, resolve, build) for v in value[1])
    if tag == "f":
        return float(value[1])
    if tag == "B":
        return base64.b64decode(value[1])
    if tag == "C":
        return complex(float(value[1]), float(value[2]))
    if tag == "G":
        return range(int(value[1]), int(value[2]), int(value[3]))
    if tag == "R":
        return resolve(value[1])
    if tag == "O" and build is not None:
        return build(str(value[1]), _dec(value[2], resolve, build))
    raise ValueError(f"bad wire tag {tag!r}")


def _send(sock: socket.socket, obj) -> None:
    data = json.dumps(obj, allow_nan=True).encode()
    sock.sendall(struct.pack("<Q", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket):
    (n,) = struct.unpack("<Q", _recv_exact(sock, 8))
    if n > _MAX_MSG:
        raise ValueError("message too large")
    return json.loads(_recv_exact(sock, n))


def _last_line(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()[:500]


def _run_candidate(code: str, fd: int) -> int:
    """Loads the solution, then serves the judge's calls until it hangs up."""
    sock = socket.socket(fileno=fd)
    send, recv = _send, _recv  # bound now: the solution may rebind module globals, not these locals
    globs: dict = {"__name__": "__candidate__", "__builtins__": builtins}
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    try:
        exec(compile(code, "<solution>", "exec"), globs)
    except BaseException as exc:
        send(sock, ["load_error", type(exc).__name__, _last_line(exc)])
        return 0
    names = {}
    for name, value in list(globs.items()):
        if name.startswith("__"):
            continue
        if type(value).__name__ == "module":
            names[name] = ["module", getattr(value, "__name__", name)]
        else:
            names[name] = ["object"]
    send(sock, ["ready", names])
    refs: dict = {}

    # When the judge is done (for instance after a failed assert) while this process still computes a
    # prefetched call, the judge's hang-up raises SIGIO: exit at once instead of running to the time
    # limit. Only a speed-up: the slot's wall-clock limit stays the bound.
    def on_io(signum, frame):
        with contextlib.suppress(BlockingIOError, InterruptedError):
            if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                os._exit(0)

    with contextlib.suppress(OSError, ValueError):
        signal.signal(signal.SIGIO, on_io)
        fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)

    def resolve(key):
        if isinstance(key, str):
            return globs[key]
        return refs[key]

    def build(name: str, attrs: dict):
        cls = globs[name]  # the solution's class of that name (the prompt's, unless it redefined it)
        obj = cls.__new__(cls)
        obj.__dict__.update(attrs)
        return obj

    def handle(req: list) -> list:
        try:
            op = req[0]
            target = resolve(req[1])
            if op == "call":
                args = _dec(req[2], resolve, build)
                kwargs = _dec(req[3], resolve, build)
                value = target(*args, **kwargs)
            elif op == "getattr":
                value = getattr(target, req[2])
            elif op == "iter":
                value = list(target)
            elif op == "next":
                value = next(target)
            elif op == "len":
                value = len(target)
            else:
                raise ValueError(f"bad op {op!r}")
            return ["ok", _enc(value, refs)]
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the judge as data
            kind = type(exc)
            return ["err", kind.__name__ if kind.__module__ == "builtins" else "Exception", _last_line(exc)]

    def reply(answer: list) -> None:
        try:
            send(sock, answer)
        except RecursionError:
            send(sock, ["err", "RecursionError", "return value nested too deeply"])

    while True:
        try:
            req = recv(sock)
        except (EOFError, OSError):
            return 0
        if req and req[0] == "batch":  # prefetched calls: one reply each, streamed as they finish
            for call in req[1]:
                reply(handle(["call", *call]))
        else:
            reply(handle(req))


class _RemoteDied(Exception):
    """The candidate process ended (timeout, memory, exit) while the judge waited for it."""


class _RemoteError(Exception):
    """A non-builtin exception raised by the candidate."""


class _Channel:
    """The judge's end of the socket. Calls with literal arguments that the tests make unconditionally
    are sent ahead in one ``batch`` (:func:`_prefetch_calls`); their replies stream back in order and are
    used when the tests reach those calls, so a test of N asserts costs one round trip instead of N."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.deadline = time.monotonic() + timeout
        self.dead = False
        self.planned: dict[tuple, list[int]] = {}  # call key -> indices into the batch, in order
        self.batch_size = 0
        self.batch_read = 0
        self.batch_replies: dict[int, list] = {}

    def _read(self) -> list:
        try:
            self.sock.settimeout(max(0.01, self.deadline - time.monotonic()))
            return _recv(self.sock)
        except TimeoutError:
            self.dead = True
            raise _RemoteDied("timeout") from None
        except (EOFError, OSError) as exc:
            self.dead = True
            raise _RemoteDied(str(exc)) from None

    def prefetch(self, calls: list[tuple]) -> None:
        if not calls or self.dead:
            return
        try:
            _send(self.sock, ["batch", [[ref, json.loads(a), json.loads(k)] for ref, a, k in calls]])
        except OSError:
            return
        for i, call in enumerate(calls):
            self.planned.setdefault(call, []).append(i)
        self.batch_size = len(calls)

    def _batch_reply(self, index: int) -> list:
        while index not in self.batch_replies:
            if self.dead:
                raise _RemoteDied("candidate is gone")
            self.batch_replies[self.batch_read] = self._read()
            self.batch_read += 1
        return self.batch_replies.pop(index)

    def _drain(self) -> None:
        """Reads the batch replies still on the way: any other request is answered after them."""
        while self.batch_read < self.batch_size:
            self.batch_replies[self.batch_read] = self._read()
            self.batch_read += 1

    def call(self, ref, args: tuple, kwargs: dict):
        enc_args, enc_kwargs = _enc(list(args), None), _enc(kwargs, None)
        key = (ref, json.dumps(enc_args), json.dumps(enc_kwargs))
        if self.planned.get(key):
            if self.dead:
                raise _RemoteDied("candidate is gone")
            return self._result(self._batch_reply(self.planned[key].pop(0)))
        return self.request(["call", ref, enc_args, enc_kwargs])

    def request(self, req: list):
        if self.dead:
            raise _RemoteDied("candidate is gone")
        self._drain()
        try:
            _send(self.sock, req)
        except OSError as exc:
            self.dead = True
            raise _RemoteDied(str(exc)) from None
        return self._result(self._read())

    def _result(self, reply: list):
        if reply[0] == "ok":
            return _dec(reply[1], self.ref)
        kind = getattr(builtins, str(reply[1]), None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            raise kind(reply[2])
        raise _RemoteError(reply[2])

    def ref(self, key) -> _RemoteRef:
        return _RemoteRef(self, key)


def _literal_call(node: ast.Call, names: dict[str, str]) -> tuple | None:
    """(candidate name, encoded args, encoded kwargs) of a call of a candidate function on literals."""
    if not isinstance(node.func, ast.Name) or node.func.id not in names:
        return None
    try:
        args = [ast.literal_eval(a) for a in node.args if not isinstance(a, ast.Starred)]
        if len(args) != len(node.args) or any(k.arg is None for k in node.keywords):
            return None
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        return (names[node.func.id], json.dumps(_enc(args, None)), json.dumps(_enc(kwargs, None)))
    except Exception:  # noqa: BLE001 - not a literal: called over the wire when reached
        return None


_CONDITIONAL = (ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp, ast.IfExp, ast.BoolOp)


def _calls_in(statements: list[ast.stmt], names: dict[str, str], local: set[str]) -> tuple[list[tuple], bool]:
    """Literal-argument calls of candidate functions that the statements make unconditionally, in the
    order Python makes them, and whether the scan had to stop.

    The scan stops at the first point after which the candidate could be called in another order than
    the batch: a candidate call on computed arguments, a call of a test-defined function (``local``) or
    of an unknown name, an ``if``/loop/``try``, or a conditional expression around a call."""
    found: list[tuple] = []
    for stmt in statements:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Pass)):
            continue
        if not isinstance(stmt, (ast.Assert, ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)):
            return found, True
        nodes = list(ast.walk(stmt))
        calls = [n for n in nodes if isinstance(n, ast.Call)]
        if calls and any(isinstance(n, _CONDITIONAL) for n in nodes):
            return found, True
        calls.sort(key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))  # a call runs at its ")"
        for node in calls:
            call = _literal_call(node, names)
            if call is not None:
                found.append(call)
                continue
            func = node.func
            if isinstance(func, ast.Attribute):
                continue  # math.isclose(...), result.split(): no candidate call of its own
            if (
                isinstance(func, ast.Name)
                and func.id not in names
                and func.id not in local
                and hasattr(builtins, func.id)
            ):
                continue  # abs(), sorted(), set()...
            return found, True
    return found, False


def _prefetch_calls(spec: dict, candidate_names: set[str]) -> list[tuple]:
    try:
        setup = ast.parse(spec.get("setup") or "")
    except SyntaxError:
        return []
    defined = set()
    functions = {}
    for node in ast.walk(setup):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
            functions[node.name] = node
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    names = {n: n for n in candidate_names if n not in defined}
    found: list[tuple] = []
    for case in spec["cases"]:
        try:
            body = ast.parse(case).body
        except SyntaxError:
            return found
        # HumanEval: ``check(f)`` runs check's body with its parameter bound to the candidate's f
        if (
            len(body) == 1
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Call)
            and isinstance(body[0].value.func, ast.Name)
            and body[0].value.func.id in functions
            and len(body[0].value.args) == 1
            and isinstance(body[0].value.args[0], ast.Name)
            and body[0].value.args[0].id in names
        ):
            fn = functions[body[0].value.func.id]
            params = [a.arg for a in fn.args.args]
            if len(params) != 1:
                return found
            calls, stopped = _calls_in(fn.body, {params[0]: body[0].value.args[0].id}, set(functions))
        else:
            calls, stopped = _calls_in(body, names, set(functions))
        found += calls
        if stopped:
            return found
    return found


class _RemoteRef:
    """A judge-side handle on a candidate-side object: calls, attributes and iteration go over the wire."""

    __slots__ = ("_rk_chan", "_rk_ref")

    def __init__(self, chan: _Channel, key) -> None:
        object.__setattr__(self, "_rk_chan", chan)
        object.__setattr__(self, "_rk_ref", key)

    def __call__(self, *args, **kwargs):
        return self._rk_chan.call(self._rk_ref, args, kwargs)

    def __getattr__(self, name: str):
        return self._rk_chan.request(["getattr", self._rk_ref, name])

    def __iter__(self):
        return iter(self._rk_chan.request(["iter", self._rk_ref]))

    def __len__(self) -> int:
        return self._rk_chan.request(["len", self._rk_ref])

    def __next__(self):
        return self._rk_chan.request(["next", self._rk_ref])

    def __eq__(self, other):
        if type(other) is not _RemoteRef:
            return NotImplemented  # lets a prompt helper class's __eq__ compare it (through its attributes)
        return other._rk_ref == self._rk_ref

    def __hash__(self) -> int:
        return hash(("rk-ref", self._rk_ref))

    def __repr__(self) -> str:
        return f"<candidate object {self._rk_ref}>"


def _judge_namespace(spec: dict, names: dict, chan: _Channel) -> dict:
    """The tests' globals: the solution's names as handles, the real modules for the standard-library
    names the tests read as modules, and the prompt's helpers, defined here from the reference."""
    test = _analyse(
        spec.get("helpers") or "", spec.get("setup") or "", tuple(spec["cases"]), spec.get("entry_point")
    )
    globs: dict = {"__name__": "__test__", "__builtins__": builtins}
    _bind_candidate(globs, names, chan, test.loaded)
    for name, module in test.modules:
        # ``assert math.isclose(area(2), 12.566)`` without ``import math``: the real math, never the
        # solution's ``math = <object whose isclose returns True>`` (nor ``import spoof as math``).
        real = _import_real(module)
        if real is None:  # not importable here, so no honest solution could have imported it either
            globs.pop(name, None)
        else:
            globs[name] = real
    _bind_prompt_helpers(globs, test, names)
    return globs


class _TestNames(typing.NamedTuple):
    loaded: frozenset[str]  # names the test code reads
    modules: tuple[tuple[str, str], ...]  # (name, module) bound to the real module (_module_names)
    helpers: types.CodeType | None  # the prompt's helpers, compiled
    helper_defs: tuple[tuple[str, bool], ...]  # (name, is a class) of the functions and classes they define


@functools.lru_cache(maxsize=256)
def _analyse(helpers: str, setup: str, cases: tuple[str, ...], entry_point: str | None) -> _TestNames:
    """What the judge needs to know of a sample's test code; cached, since the same tests come back for
    sample after sample of one problem."""
    trees = []
    for source in (helpers, setup, *cases):
        with contextlib.suppress(SyntaxError, ValueError):
            trees.append(ast.parse(source))
    helper_tree = ast.parse(helpers) if helpers else None
    defs = tuple(
        (node.name, isinstance(node, ast.ClassDef))
        for node in (helper_tree.body if helper_tree else [])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )
    return _TestNames(
        loaded=frozenset(_loaded_names(trees)),
        modules=tuple(_module_names(trees, entry_point).items()),
        helpers=compile(helper_tree, "<prompt>", "exec") if helper_tree else None,
        helper_defs=defs,
    )


@functools.lru_cache(maxsize=1024)
def _compiled(source: str, filename: str) -> types.CodeType:
    return compile(source, filename, "exec")


def _bind_candidate(globs: dict, names: dict, chan: _Channel, loaded: set[str]) -> None:
    for name, info in names.items():
        # A solution's global never shadows a builtin in the tests (``def abs(x): return 0`` would
        # make ``assert abs(candidate(x) - y) < 1e-6`` pass in an in-process harness).
        if not isinstance(name, str) or not name.isidentifier() or hasattr(builtins, name):
            continue
        module = info[1] if info[0] == "module" and isinstance(info[1], str) else None
        if module in _IMPORT_SIDE_EFFECTS:
            module = None
        # A module the solution imported, which the tests use without importing it: the judge's own copy
        # (a solution patching it in its process changes nothing here).
        real = _import_real(module) if module and name in loaded else None
        globs[name] = chan.ref(name) if real is None else real


def _loaded_names(trees: list[ast.AST]) -> set[str]:
    return {
        n.id
        for tree in trees
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


# Conventional aliases read like module names by tests (``np.isclose``): the real package when allowed.
_ALIASES = {"np": "numpy", "pd": "pandas"}
# Standard-library modules whose import does something (opens a browser, prints): never on a solution's say.
_IMPORT_SIDE_EFFECTS = frozenset({"antigravity", "this", "idlelib", "turtledemo", "__hello__", "__phello__"})


def _module_names(trees: list[ast.AST], entry_point: str | None) -> dict[str, str]:
    """{name: module} for the standard-library module names (and :data:`_ALIASES`) the test code reads
    attributes of (``math.isclose``), other than the entry point and the names it calls (a solution's
    function may be named like a module)."""
    bases, called = set(), set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                bases.add(node.value.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(node.func.id)
    names = {n: n for n in bases if n in sys.stdlib_module_names}
    names.update({n: _ALIASES[n] for n in bases if n in _ALIASES})
    return {n: m for n, m in names.items() if n not in called and n != entry_point}


def _import_real(module: str):
    """The module of that name as the judge imports it (already imported, standard library, or an allowed
    package), or None: a name only the solution's process knows is not imported here."""
    root = module.split(".")[0]
    known = module in sys.modules or root in sys.stdlib_module_names
    try:
        if known or importlib.machinery.PathFinder.find_spec(root) is not None:
            return importlib.import_module(module)
    except Exception:  # noqa: BLE001 - not importable here (a missing optional module)
        pass
    return None


def _bind_prompt_helpers(globs: dict, test: _TestNames, names: dict) -> None:
    """Defines the reference prompt's helpers (its top-level code other than the entry point: HumanEval/38's
    encode_cyclic, /32's poly) in the judge, over the solution's versions, so that a solution redefining
    them (``encode_cyclic`` as the identity, ``poly`` returning 0) does not redefine what the tests check."""
    _HELPER_CLASSES.clear()
    _HELPER_NAMES.clear()
    if test.helpers is None:
        return
    exec(test.helpers, globs)
    for name, is_class in test.helper_defs:
        value = globs.get(name)
        if is_class and isinstance(value, type):
            _HELPER_CLASSES[value] = name
        if name in names:  # passed to the solution (``candidate(poly)``): the solution's own poly
            _HELPER_NAMES[id(value)] = name


def _run_judge(spec: dict, sock: socket.socket, limits: dict) -> dict:
    """Runs the tests against the candidate (over socket ``fd``) and returns the verdict."""
    chan = _Channel(sock, limits["wall"])
    verdict: dict = {"cases": []}
    try:
        first = chan.sock
        first.settimeout(limits["wall"])
        hello = _recv(first)
    except BaseException as exc:
        verdict["load_error"] = ["died", _last_line(exc)]
        return verdict
    if hello[0] == "load_error":
        verdict["load_error"] = [hello[1], hello[2]]
        return verdict
    try:
        globs = _judge_namespace(spec, hello[1], chan)
    except Exception as exc:  # the prompt's own helpers fail (the solution's process ran them too)
        verdict["setup_error"] = f"prompt helpers: {_last_line(exc)}"
        return verdict
    with contextlib.suppress(Exception):  # an optimisation only: without it every call is a round trip
        chan.prefetch(_prefetch_calls(spec, {n for n, v in globs.items() if type(v) is _RemoteRef}))
    try:
        exec(_compiled(spec.get("setup") or "", "<test-setup>"), globs)
    except BaseException as exc:
        verdict["setup_error"] = _last_line(exc)
        return verdict
    stop_on_fail = bool(spec.get("stop_on_fail"))
    for case in spec["cases"]:
        if stop_on_fail and any(outcome != "pass" for outcome, _ in verdict["cases"]):
            verdict["cases"].append(["skipped", "not run: an earlier case failed"])
            continue
        if chan.dead:
            verdict["cases"].append(["died", "candidate process ended"])
            continue
        try:
            exec(_compiled(case, "<test>"), globs)
            verdict["cases"].append(["pass", ""])
        except AssertionError as exc:
            verdict["cases"].append(["fail", _last_line(exc)])
        except _RemoteDied as exc:
            verdict["cases"].append(["died", str(exc)])
        except MemoryError as exc:
            verdict["cases"].append(["memory", _last_line(exc)])
        except RecursionError as exc:
            verdict["cases"].append(["error", _last_line(exc)])
        except BaseException as exc:
            verdict["cases"].append(["error", _last_line(exc)])
    return verdict


class _JudgeTimeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _JudgeTimeout()


def judge_loop(sock: socket.socket, uid: int | None) -> None:
    """A warm judge: runs trusted test code for one sample after another (fresh globals each time), as a
    private uid that the candidates cannot signal or trace. An alarm bounds each sample's wall time."""
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - test code printing goes to /dev/null
    mb = 1024 * 1024
    if CONFIG.get("judge_memory_mb"):
        limit = int(CONFIG["judge_memory_mb"] * mb)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # cleared by the uid change: set again
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir("/")
    signal.signal(signal.SIGALRM, _on_alarm)
    while True:
        job = _recv_job(sock)
        if job is None:
            return
        header, (report_fd, payload_fd, rpc_fd) = job
        limits = header["limits"]
        t0 = time.monotonic()
        cpu0 = time.process_time()
        rpc = socket.socket(fileno=rpc_fd)
        code = 0
        try:
            signal.setitimer(signal.ITIMER_REAL, limits["wall"] + 1.0)
            spec = json.loads(_read_fd(payload_fd))
            verdict = _run_judge(spec, rpc, limits)
        except _JudgeTimeout:
            verdict, code = {"judge_error": "timeout"}, 1
        except BaseException as exc:
            verdict, code = {"judge_error": _last_line(exc)}, 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            rpc.close()  # the candidate sees EOF and exits
            os.close(payload_fd)
        report = {
            "kind": "judge",
            "wall": round(time.monotonic() - t0, 4),
            "timed_out": verdict.get("judge_error") == "timeout",
            "exit_code": code,
            "cpu": round(time.process_time() - cpu0, 4),
            "stdout": json.dumps(verdict),
            "stderr": "",
        }
        with contextlib.suppress(OSError):
            _write_all(report_fd, json.dumps(report).encode())
        os.close(report_fd)


def main() -> None:
    import site  # under -S: only for exit(), quit(), help() that programs call, sys.path stays as is

    site.setquit()
    site.setcopyright()
    site.sethelper()
    config_fd, sock_fd = int(sys.argv[1]), int(sys.argv[2])
    config = json.loads(_read_fd(config_fd))
    os.close(config_fd)
    setup_zygote(config, sock_fd)
    zygote_loop(socket.socket(fileno=sock_fd))


if __name__ == "__main__":
    main()
