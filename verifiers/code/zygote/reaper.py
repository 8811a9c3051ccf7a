"""Killing and reaping what a program leaves running: daemons, ``setsid``-ed or double-forked children.

In a slot's PID namespace, ``kill(-1)`` from the supervisor reaches every process of the namespace but
the slot. Without one (a kernel refusing PID namespaces, ``pid_namespace=False``): the program's process
group, then every process of its private uid (a helper's ``kill(-1)`` as that uid), or without private
uids the orphans the slot adopted as their subreaper.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from .state import STATE


def kill(pid: int) -> None:
    """SIGKILL the program and its process group (either may be gone already)."""
    for target in (lambda: os.kill(pid, signal.SIGKILL), lambda: os.killpg(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            target()


def kill_others(pid: int | None = None, uid: int | None = None) -> None:
    """SIGKILL what a program left running, without reaping. In a slot's PID namespace: every process of
    it but the caller and the slot (its PID 1). Without a namespace: the program's process group and the
    processes of its uid."""
    if STATE["pidns"]:
        if uid is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
        else:
            _kill_all_as(uid)
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


def _kill_all_as(uid: int) -> None:
    """kill(-1) with the program's uid as the real and effective uid (root kept as the saved one, then
    taken back): every process of the program, and not the slot's spare supervisor, which is root's."""
    os.setresuid(uid, uid, 0)
    try:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
    finally:
        os.setresuid(0, 0, 0)


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


def kill_leftovers(pid: int | None, uid: int | None) -> None:
    """Kills and reaps everything the program left (the caller is the subreaper of what it left). In a
    slot's PID namespace: kill(-1) until no child is left. Without one: the process group, then (with a
    private uid) every process of that uid, which also catches double-forked, ``setsid``-ed children."""
    if STATE["pidns"]:
        for _ in range(10000):
            kill_others(None, uid)
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
    """Reaps every child that has exited, without waiting."""
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
