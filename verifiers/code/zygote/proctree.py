"""The process tree below the zygote: warm slots and judges, and a supervisor forked per program.

The zygote forks the workers once (``zygote_loop``) and hands their sockets to the parent. A slot is PID 1
of a PID namespace of its own where the kernel allows it, runs one program at a time and never reads a
program's code or output: for each it forks a supervisor (``supervisor.py``), which forks the program. A
judge (``judge.py``) runs the tests of one sample after another.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import traceback

from .jobs import recv_job
from .judge import judge_loop
from .namespaces import CLONE_NEWPID, PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, libc, unshare
from .reaper import kill_leftovers
from .state import CONFIG, STATE
from .supervisor import supervise


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
    """Forks one warm worker (a slot or a judge) with the uid it will run programs as; returns the
    parent's end of its socket."""
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
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if kind == "judge":
            judge_loop(child_end, uid if STATE["setuid"] else None)
        else:
            if STATE["pidns"]:
                # The slot is PID 1 of a namespace of its own: kill(-1) from a supervisor (root) in it
                # reaches every process a program left behind (double-forked, setsid-ed), and nothing
                # else but the slot.
                unshare(CLONE_NEWPID)
                init = os.fork()
                if init:
                    child_end.close()  # only the slot may hold it: if the slot dies, sends to it fail
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(init, 0)
                    os._exit(0)
                libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            slot_loop(child_end, uid if STATE["setuid"] else None)
    except BaseException:
        traceback.print_exc()
    os._exit(0)


def slot_loop(sock: socket.socket, uid: int | None) -> None:
    """One program at a time, each under a supervisor forked for it.

    With a private uid (:func:`spare_loop`) the supervisor is forked one program ahead and takes its job
    from the parent itself; without one, the slot takes the job and forks its supervisor then
    (:func:`run_supervisor`)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if not STATE["pidns"]:
        # Without a namespace of its own, the slot adopts what a dead supervisor left (see kill_leftovers).
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    per_program = CONFIG.get("supervisor_per_program", True)
    if uid is not None and per_program:
        spare_loop(sock, uid)
        return
    while True:
        job = recv_job(sock)
        if job is None:
            return
        header, fds = job
        try:
            run_supervisor(header, fds, uid, fork=per_program)
        except BaseException:
            traceback.print_exc()
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


def spare_loop(sock: socket.socket, uid: int) -> None:
    """Supervisors forked one program ahead (*spares*): each waits on the parent's socket for one job,
    supervises it, and tells the slot, on a socket of its own, once its program has started; the slot then
    forks the next spare while that program runs, and reaps each supervisor as it exits. So neither a
    fork, nor an exit, nor a hand-over is on the way of a program's start. A spare is forked from the
    slot, which never reads a job, like any supervisor, and has read nothing. (A supervisor's sweep, by its program's uid, spares
    the next spare, which is root's: ``reaper.kill_others``. One that failed before its own sweep is
    swept by uid when reaped, which may also end the program the next spare has just started.)"""
    previous: int | None = None
    while True:
        pid, told = fork_spare(sock, uid)
        said = _said(told, previous, uid)
        previous = None
        if said == b"s":
            previous = pid  # running: reaped when it exits, while the next spare waits
            continue
        wait_supervisor(pid, uid)
        if said == b"e":  # the parent is gone
            return


def _said(told: socket.socket, previous: int | None, uid: int) -> bytes:
    """What the new spare said: ``s`` (its program started), ``e`` (the parent's socket closed), or
    nothing (it ended before starting a program). Meanwhile the previous supervisor is reaped as soon as it
    exits (no zombie waits for the next job)."""
    pidfd = os.pidfd_open(previous) if previous is not None else None
    try:
        while True:
            ready = select.select([told] + ([pidfd] if pidfd is not None else []), [], [])[0]
            if pidfd is not None and pidfd in ready:
                wait_supervisor(previous, uid)  # type: ignore[arg-type]
                os.close(pidfd)
                pidfd = None
            if told in ready:
                return told.recv(1)
    except OSError:
        return b""
    finally:
        told.close()
        if pidfd is not None:  # the new spare spoke first: the previous one is reaped now
            os.close(pidfd)
            wait_supervisor(previous, uid)  # type: ignore[arg-type]


def fork_spare(sock: socket.socket, uid: int) -> tuple[int, socket.socket]:
    """A supervisor forked ahead of its job (see :func:`spare_loop`). Returns its pid and the slot's end of
    the socket on which it says when its program has started."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid:
        theirs.close()
        return pid, ours
    code = 0
    try:
        ours.close()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        job = recv_job(sock)
        sock.close()  # one job only: the next one goes to the next spare
        if job is None:
            theirs.send(b"e")
        else:
            supervise(job[0], job[1], uid, started=lambda: _tell(theirs, b"s"))
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
        code = 1
    os._exit(code)


def _tell(sock: socket.socket, what: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.send(what)


def wait_supervisor(pid: int, uid: int | None) -> None:
    """Reaps a supervisor; one that failed before its clean-up leaves what the program left to the slot."""
    status = os.waitpid(pid, 0)[1]
    if status != 0:
        kill_leftovers(None, uid)


def run_supervisor(header: dict, fds: list[int], uid: int | None, fork: bool = True) -> None:
    """Forks the supervisor of one program and waits for it. The slot itself never reads the program's
    code or output: each program is forked from a supervisor whose memory held nothing of an earlier one
    (its output stayed in its own supervisor, gone with it). ``fork=False``: the slot supervises the
    program itself (``supervisor_per_program=False``, the reference of ``bench/sandbox_cost.py``)."""
    if not fork:
        supervise(header, fds, uid)
        return
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # Orphans of the program (double-forked daemons) become the supervisor's to kill and reap.
            libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            supervise(header, fds, uid)
        except BaseException:
            with contextlib.suppress(BaseException):
                traceback.print_exc()
            code = 1
        os._exit(code)
    status = os.waitpid(pid, 0)[1]
    if status != 0:  # the supervisor failed before its clean-up: what the program left is the slot's now
        kill_leftovers(None, uid)
