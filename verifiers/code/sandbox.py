"""Process sandbox for untrusted programs: warm workers fork one supervised process per program.

The parent side lives here; the sandbox side is the folder ``zygote/`` (standard library only, mounted
read-only in the root, started as ``python -I -S zygote/__main__.py``), and what a program sees of the host
is ``layout.py``'s. Isolation, strongest available first (what was
used is in :attr:`Sandbox.info` and every result's details):

* ``native`` backend as root (the default here): the zygote, an isolated interpreter (``-I -S``) whose
  configuration comes on a descriptor, enters a new mount, network, IPC and UTS namespace once, chroots
  into a minimal read-only root (the system directories, the interpreter, its standard library and the
  allowed packages only; no site-packages or other interpreter's package directory, no ``/home``,
  ``/root``, ``/tmp``, ``/proc``, hub cache or project directory, so neither a dataset nor the tests are on
  any disk the program can see), and runs itself again from inside the root, so that no host path is in
  the memory programs are forked from. Each program runs in a warm slot, PID 1 of a PID namespace of its
  own, forked from a supervisor forked for it alone (so that its memory never held another program's
  code or output; everything the program leaves, double-forked daemons included, is killed after it),
  in IPC and network namespaces of its own (its System V objects and sockets go with it), under the
  slot's unprivileged uid (so that ``RLIMIT_NPROC`` counts exactly its processes and it cannot signal or
  trace anything else), with rlimits on CPU time, address space, file size and open files,
  ``no_new_privs``, and a fresh working directory that is a tmpfs of its own (its disk quota), unmounted
  afterwards.
* ``bwrap`` backend: the zygote is started inside ``bubblewrap`` with the same root (bubblewrap makes the
  mount / network namespaces); the rest is as above where bubblewrap leaves the capabilities.
* Without root or namespaces: rlimits, a process group per program, the allowed packages alone on
  ``sys.path``, and audit hooks refusing sockets and files outside the standard library, the allowed
  packages and the working directory (Python-level only, see ``docs/code.md``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from rewardlab.verifiers.code.layout import SITE, Layout, build_layout

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote")
"""The zygote's folder: its modules and nothing else (no data, nothing of rewardlab)."""
INSIDE_ZYGOTE = "/rk_zygote"  # where the root shows the zygote's folder (not the project's path)
ZYGOTE_MAIN = "__main__.py"  # run as a script, by path: never cached as bytecode, its folder not on sys.path
DEFAULT_PACKAGES = ("numpy",)
"""Packages importable in the sandbox by default: competitive-programming, HumanEval and MBPP solutions use
the standard library, and numpy now and then. Neither ships a dataset."""


@dataclass
class SandboxLimits:
    """What one sandboxed program may use and reach, and how it is isolated: the one definition of these
    settings and their defaults. :class:`SandboxConfig` adds the sandbox's own internals; the code verifier's
    options of the same names are these fields (``CodeConfig`` inherits them)."""

    timeout: float = 10.0
    """Wall-clock limit per program in seconds (a stdio case, or the whole set of function tests of one
    record)."""
    cpu_time: float | None = None
    """CPU-time limit (RLIMIT_CPU) in seconds; ``None`` uses ``timeout``."""
    memory_mb: int = 4096
    """Address-space limit (RLIMIT_AS) in MiB; 0 disables it (needed by some JIT runtimes)."""
    max_processes: int = 64
    """Process (and thread) limit per program, enforced through RLIMIT_NPROC on a private uid."""
    max_file_mb: int = 64
    """Largest file a program may write (RLIMIT_FSIZE), in MiB."""
    max_output_mb: float = 16.0
    """Largest stdout captured; a program printing more is killed and the case fails."""
    workdir_mb: int = 512
    """Disk quota of each program: its working directory is a tmpfs of this size of its own (native, and
    bwrap as root), so that a program filling its disk cannot make another fail. Worst case in memory:
    ``parallelism`` times this."""
    network: bool = False
    """Allow network access (off: a new, empty network namespace, or sockets refused)."""
    backend: str = "auto"
    """``auto`` (native namespaces when root, else bubblewrap when installed, else rlimits only),
    ``native``, ``bwrap`` or ``rlimit`` (no namespaces: rlimits, process groups, sockets refused; see
    ``docs/code.md``)."""
    parallelism: int = 0
    """Programs run at the same time by one batch; 0 uses the number of CPUs."""
    allowed_packages: list[str] = field(default_factory=lambda: list(DEFAULT_PACKAGES))
    """Installed packages (top-level import names) a program may import besides the standard library;
    each brings the distributions it requires. Nothing else of site-packages is visible."""
    extra_ro_paths: list[str] = field(default_factory=list)
    """More host paths made visible (read-only) inside the sandbox, e.g. a data directory a task needs."""


def limit_values(settings: SandboxLimits) -> dict[str, Any]:
    """The :class:`SandboxLimits` fields of ``settings`` (or of a subclass) by name; lists are copied."""
    values = {f.name: getattr(settings, f.name) for f in fields(SandboxLimits)}
    return {name: list(v) if isinstance(v, list) else v for name, v in values.items()}


@dataclass
class SandboxConfig(SandboxLimits):
    """Limits and isolation of one sandboxed program (a stdio run, or one side of a function-test run):
    :class:`SandboxLimits` and the sandbox's own settings."""

    python: str = ""
    """Interpreter of the zygote; empty uses the current one. ``allowed_packages`` are looked up in its
    installation; it runs isolated (``-I -S``: no site-packages, ``.pth`` files, PYTHONPATH, user site)."""
    private_uids: bool = True
    """Run programs and judges as unprivileged uids of their own when started as root (off: as the
    current user, the path taken without root)."""
    pid_namespace: bool = True
    """Give each slot a PID namespace where the kernel allows it (off: the fallback used where it does
    not, killing leftovers by process group and by sweeping the slot's uid)."""
    supervisor_per_program: bool = True
    """Fork a supervisor for each program (forked one program ahead where programs have private uids), so
    that no program is forked from a process that held an earlier program's code or output. Off: the
    slot supervises every program itself; only the reference of ``bench/sandbox_cost.py``, never for
    untrusted code."""

    def limits(self) -> dict[str, Any]:
        return {
            "wall": float(self.timeout),
            "cpu": float(self.cpu_time if self.cpu_time is not None else self.timeout),
            "memory_mb": int(self.memory_mb),
            "nproc": int(self.max_processes),
            "fsize_mb": float(self.max_file_mb),
            "out_mb": float(self.max_output_mb),
        }


@dataclass
class StdioTask:
    """Run ``code`` as a script with ``stdin``; the parent compares the captured stdout."""

    code: str
    stdin: str = ""


@dataclass
class FunctionTask:
    """Load ``code`` in a candidate process, run ``setup`` then each of ``cases`` in a judge process."""

    code: str
    cases: list[str]
    setup: str = ""
    stop_on_fail: bool = False
    """Skip the remaining cases after the first one that does not pass (all-or-nothing rewards)."""
    helpers: str = ""
    """Trusted code run in the judge before ``setup``, over the solution's names: the reference prompt's
    helpers (HumanEval/38's ``encode_cyclic``), so that the tests use those and not the solution's."""
    entry_point: str | None = None
    """The solution's function under test (never replaced by a helper or a standard-library module)."""


@dataclass
class ExecTask:
    """Run a command (a compiler, a compiled program, a runtime) in a fresh working directory holding
    ``files``, with ``stdin``; the parent compares the captured stdout. Needs a read-only root (the
    ``native`` or ``bwrap`` backend): a command is not Python, so no audit hook can stand in for one."""

    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    """Written into the working directory before the command starts (names without ``/``)."""
    executable: tuple[str, ...] = ()
    """Names among ``files`` made executable (a compiled binary)."""
    stdin: str = ""
    env: dict[str, str] = field(default_factory=dict)
    """Set over the program's clean environment (``PATH``, ``HOME`` and ``TMPDIR`` = its directory...)."""
    collect: tuple[str, ...] = ()
    """Names or ``fnmatch`` patterns of the files returned in :attr:`RunReport.files` once it has ended."""
    limits: dict[str, Any] = field(default_factory=dict)
    """Overrides of the batch's limits for this command (a compiler's own time and memory)."""


@dataclass
class RunReport:
    """What the supervisor saw of one program."""

    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    output_limit: bool = False
    wall: float = 0.0
    cpu: float = 0.0
    maxrss_kb: int = 0
    stdout: bytes = b""
    stderr: str = ""
    error: str | None = None  # the sandbox itself failed (zygote died, bad report)
    files: dict[str, bytes] = field(default_factory=dict)
    """:class:`ExecTask` files collected after the program ended (a compiler's output)."""

    @property
    def last_error_line(self) -> str:
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return lines[-1].strip()[:500] if lines else ""

    @property
    def memory_error(self) -> bool:
        return "MemoryError" in self.last_error_line


@dataclass
class FunctionOutcome:
    """The judge's verdict (per-case outcomes) plus both supervisors' reports."""

    cases: list[tuple[str, str]]
    load_error: tuple[str, str] | None
    setup_error: str | None
    candidate: RunReport
    judge: RunReport
    error: str | None = None


class Sandbox:
    """A warm zygote plus a scheduler that keeps up to ``parallelism`` programs running.

    Thread-safe (one batch at a time); forked copies of the owner start their own zygote.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._root: str | None = None
        self._runs_dir: str | None = None
        self._links: str | None = None
        self._owner = os.getpid()
        self.info: dict[str, Any] = {}
        # Private uids for programs: a random block so that two sandboxes on one machine do not share.
        self._uid_base = 1_000_000 + random.SystemRandom().randrange(0, 2000) * 4096
        self._finalizer: weakref.finalize | None = None
        self._slots: list[socket.socket] = []  # warm program supervisors (one program at a time each)
        self._judges: list[socket.socket] = []  # warm judges (one sample at a time each)

    # ------------------------------------------------------------------------------------------ lifecycle

    @property
    def parallelism(self) -> int:
        # Worker sockets travel in one SCM_RIGHTS message (at most 253 descriptors): 2 per slot.
        return min(self.config.parallelism or os.cpu_count() or 1, 120)

    def _backend(self) -> str:
        backend = self.config.backend
        if backend == "auto":
            if os.geteuid() == 0:
                return "native"
            return "bwrap" if shutil.which("bwrap") else "rlimit"
        if backend not in ("native", "bwrap", "rlimit"):
            raise ValueError(f"unknown sandbox backend {backend!r} (native, bwrap, rlimit or auto)")
        if backend == "bwrap" and not shutil.which("bwrap"):
            raise RuntimeError("sandbox backend 'bwrap' needs bubblewrap (apt-get install bubblewrap)")
        return backend

    def start(self) -> None:
        if self._proc is not None and self._owner == os.getpid() and self._proc.poll() is None:
            return
        self._owner = os.getpid()
        self._proc = None
        backend = self._backend()
        layout = self._layout()
        self._root = tempfile.mkdtemp(prefix="rk-sandbox-root-")
        self._runs_dir = tempfile.mkdtemp(prefix="rk-sandbox-runs-")
        self._links = tempfile.mkdtemp(prefix="rk-sandbox-site-")
        os.chmod(self._runs_dir, 0o711)
        os.chmod(self._links, 0o755)
        zconf: dict[str, Any] = {
            "sys_path": [*layout.sys_path, SITE],
            "workdir_mb": int(self.config.workdir_mb),
            "network": bool(self.config.network),
            "isolate": backend == "native",
            "slots": self.parallelism,
            "judges": self.parallelism,
            "uid_base": self._uid_base,
            "judge_memory_mb": max(int(self.config.memory_mb), 1024) if self.config.memory_mb else 0,
            "pid_namespace": bool(self.config.pid_namespace),
            "supervisor_per_program": bool(self.config.supervisor_per_program),
            "drop_privileges": bool(self.config.private_uids),
        }
        script = os.path.join(ZYGOTE, ZYGOTE_MAIN)
        prefix: list[str] = []
        if backend == "bwrap":  # started inside the root: nothing of the host's paths goes in
            zconf.update(entered=True, inside_bwrap=True)
            script, prefix = f"{INSIDE_ZYGOTE}/{ZYGOTE_MAIN}", self._bwrap_argv(layout)
        else:  # every host path under one key, which the zygote leaves behind once inside its root
            zconf["host"] = {
                "root": self._root,
                "runs_dir": self._runs_dir,
                "mounts": [*layout.mounts, ("ro", ZYGOTE, INSIDE_ZYGOTE)],
                "fallback": self._rlimit_view(layout),  # rlimit backend, or namespaces refused
            }
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config_fd = os.memfd_create("rk-config", 0)  # not argv: a program could read that
        os.write(config_fd, json.dumps(zconf).encode())
        os.lseek(config_fd, 0, os.SEEK_SET)
        # -I -S: no site-packages, no .pth file (the editable finder of the project), no PYTHONPATH, no
        # user site, not the script's directory: sys.path is the standard library, then SITE.
        argv = [*prefix, layout.python, "-I", "-S", script, str(config_fd), str(child.fileno())]
        try:
            self._proc = subprocess.Popen(
                argv,
                pass_fds=[child.fileno(), config_fd],
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=_zygote_env(),
            )
        finally:
            os.close(config_fd)
        child.close()
        owned = [parent]  # the worker sockets join once the zygote has sent them
        # Runs on close(), when the sandbox is garbage-collected, or at interpreter exit.
        self._finalizer = weakref.finalize(
            self, _shutdown, self._proc, owned, [self._root, self._runs_dir, self._links], self._owner
        )
        parent.settimeout(60)
        try:
            msg, fds, _flags, _addr = socket.recv_fds(parent, 1 << 16, 2 * self.parallelism + 8)
            hello = json.loads(msg or b"{}")
        except (OSError, ValueError) as exc:
            self.close()
            raise RuntimeError(f"sandbox zygote did not start: {exc}") from exc
        parent.settimeout(None)
        if not hello.get("ready"):
            self.close()
            raise RuntimeError("sandbox zygote did not start")
        self._sock = parent
        # The root's host directory stays until the zygote is gone: removing a mount point detaches the
        # mounts on it in every namespace, and the zygote could then mount no working directory.
        self.info = {
            "backend": backend if hello.get("chroot") or backend == "rlimit" else "rlimit",
            "network": "allowed"
            if self.config.network
            else ("network namespace" if hello.get("netns") else "sockets refused (audit hook)"),
            "pid_namespace": bool(hello.get("pidns")),
            "program_namespaces": bool(hello.get("program_ns")),
            "private_uid": bool(hello.get("setuid")),
            "read_only_root": bool(hello.get("chroot")),
            "workdir_quota": "per program"
            if hello.get("quota")
            else ("shared" if hello.get("chroot") else "none"),
            "packages": list(layout.packages),
        }
        if hello.get("setup_error"):
            self.info["setup_error"] = hello["setup_error"]
        workers = [socket.socket(fileno=fd) for fd in fds]
        owned.extend(workers)
        self._slots = workers[: self.parallelism]
        self._judges = workers[self.parallelism :]

    def _layout(self) -> Layout:
        python = self.config.python or sys.executable
        try:
            return build_layout(
                python, tuple(self.config.allowed_packages), tuple(self.config.extra_ro_paths)
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            raise RuntimeError(f"sandbox: cannot inspect the interpreter {python}: {exc}") from exc

    def _rlimit_view(self, layout: Layout) -> dict[str, Any]:
        """No mounts without namespaces: the allowed packages are links in a directory of their own (the
        only site-packages on sys.path), and an audit hook refuses opening files outside the roots."""
        assert self._links is not None
        site_dir = self._links
        for host, name in layout.package_entries:
            os.symlink(host, os.path.join(site_dir, name))
        return layout.rlimit_view(site_dir)

    def _bwrap_argv(self, layout: Layout) -> list[str]:
        argv = [
            shutil.which("bwrap") or "bwrap",
            "--die-with-parent",
            "--unshare-ipc",
            "--unshare-uts",
            "--new-session",
        ]
        if not self.config.network:
            argv.append("--unshare-net")
        for parent in _parents_to_create(layout):  # bwrap would make them 0700: unreadable to the programs
            argv += ["--perms", "0755", "--dir", parent]
        for kind, source, target in layout.mounts:
            if kind == "link":
                argv += ["--symlink", source, target]
            elif kind == "ro":
                argv += ["--ro-bind", source, target]
            elif kind == "hide_dir":
                argv += ["--tmpfs", target, "--remount-ro", target]
            else:
                argv += ["--ro-bind", "/dev/null", target]
        argv += ["--ro-bind", ZYGOTE, INSIDE_ZYGOTE, "--dev", "/dev", "--perms", "0555", "--dir", "/proc"]
        argv += ["--size", str(int(self.config.workdir_mb) * 1024 * 1024), "--tmpfs", "/runs"]
        if os.geteuid() == 0:
            argv += ["--cap-add", "ALL"]
        else:
            argv += ["--unshare-pid"]
        argv += ["--chdir", "/", "--"]
        return argv

    def close(self) -> None:
        """Stops the zygote and its workers (their sockets close; every program is killed)."""
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()
        self._slots, self._judges, self._sock, self._proc = [], [], None, None
        self._root = self._runs_dir = self._links = None

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])

    # ------------------------------------------------------------------------------------------- running

    def _launch(self, kind: str, payload: bytes, extra_fd: int, limits: dict, worker: socket.socket) -> int:
        """Sends one program to a warm worker; returns the read end of its report pipe."""
        report_r, report_w = os.pipe()
        payload_fd = os.memfd_create(f"rk-{kind}", os.MFD_CLOEXEC)
        try:
            os.write(payload_fd, payload)
            header = json.dumps({"kind": kind, "limits": limits}).encode()
            socket.send_fds(worker, [header], [report_w, payload_fd, extra_fd])
        except OSError:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
            os.close(payload_fd)
        return report_r

    def run(
        self, tasks: Sequence[StdioTask | FunctionTask | ExecTask], *, config: SandboxConfig | None = None
    ) -> list[RunReport | FunctionOutcome]:
        """Runs every task, up to ``parallelism`` at once; results in input order. Never raises on a task."""
        with self._lock:
            for attempt in range(2):
                try:
                    self.start()
                    return self._run(tasks, (config or self.config).limits())
                except (BrokenPipeError, ConnectionError) as exc:
                    # The zygote died (killed, OOM): restart it once and run the batch again.
                    self.close()
                    if attempt:
                        err = f"sandbox error: {exc}"
                        return [
                            FunctionOutcome([], None, None, RunReport(error=err), RunReport(error=err), err)
                            if isinstance(t, FunctionTask)
                            else RunReport(error=err)
                            for t in tasks
                        ]
        raise AssertionError("unreachable")

    def _run(self, tasks: Sequence[StdioTask | FunctionTask | ExecTask], limits: dict) -> list[Any]:
        results: list[Any] = [None] * len(tasks)
        if not self.info.get("read_only_root"):  # a command would see the whole host: none runs
            refused = RunReport(error=f"sandbox error: {NO_ROOT_FOR_COMMANDS} ({self.info.get('backend')})")
            results = [refused if isinstance(t, ExecTask) else None for t in tasks]
        pending = [i for i in range(len(tasks)) if results[i] is None][::-1]
        sel = selectors.DefaultSelector()
        buffers: dict[int, bytearray] = {}
        free_slots, free_judges = list(self._slots), list(self._judges)
        # per task: {"reports": {kind: RunReport}, "fds": [(fd, kind, worker)], "deadline": float}
        inflight: dict[int, dict[str, Any]] = {}
        judge_limits = {**limits, "wall": limits["wall"] + 1.0, "cpu": limits["cpu"] + 1.0}
        broken = False

        def launch(index: int) -> None:
            task = tasks[index]
            state: dict[str, Any] = {"reports": {}, "fds": []}
            inflight[index] = state
            if isinstance(task, (StdioTask, ExecTask)):
                kind, payload, task_limits = _single_program(task, limits)
                stdin_fd = os.memfd_create("rk-stdin", os.MFD_CLOEXEC)
                slot = free_slots.pop()
                try:
                    os.write(stdin_fd, task.stdin.encode("utf-8", "replace"))
                    os.lseek(stdin_fd, 0, os.SEEK_SET)
                    fd = self._launch(kind, payload, stdin_fd, task_limits, slot)
                    state["fds"].append((fd, kind, slot))
                finally:
                    os.close(stdin_fd)
            else:
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                spec = {
                    "setup": task.setup,
                    "cases": list(task.cases),
                    "stop_on_fail": task.stop_on_fail,
                    "helpers": task.helpers,
                    "entry_point": task.entry_point,
                }
                spec_json = json.dumps(spec).encode()
                slot, judge = free_slots.pop(), free_judges.pop()
                try:
                    fd_c = self._launch(
                        "candidate", task.code.encode("utf-8", "replace"), b.fileno(), limits, slot
                    )
                    state["fds"].append((fd_c, "candidate", slot))
                    fd_j = self._launch("judge", spec_json, a.fileno(), judge_limits, judge)
                    state["fds"].append((fd_j, "judge", judge))
                finally:
                    a.close()
                    b.close()
            state["deadline"] = time.monotonic() + judge_limits["wall"] + 30.0
            for fd, kind, worker in state["fds"]:
                buffers[fd] = bytearray()
                sel.register(fd, selectors.EVENT_READ, (index, kind, worker))

        def finish(index: int) -> None:
            state = inflight.pop(index)
            reports = state["reports"]
            if isinstance(tasks[index], (StdioTask, ExecTask)):
                kind = "exec" if isinstance(tasks[index], ExecTask) else "stdio"
                results[index] = reports.get(kind) or RunReport(error="sandbox error: no report")
            else:
                cand = reports.get("candidate") or RunReport(error="sandbox error: no report")
                judge = reports.get("judge") or RunReport(error="sandbox error: no report")
                results[index] = _function_outcome(cand, judge)

        def done(fd: int, index: int, kind: str, worker: socket.socket, report: RunReport) -> None:
            nonlocal broken
            sel.unregister(fd)
            os.close(fd)
            buffers.pop(fd, None)
            if report.error:
                broken = True  # a worker died: do not reuse it; the sandbox restarts after the batch
            else:
                (free_judges if kind == "judge" else free_slots).append(worker)
            state = inflight[index]
            state["reports"][kind] = report
            if len(state["reports"]) == len(state["fds"]):
                finish(index)

        def can_launch() -> bool:
            if not pending or not free_slots:
                return False
            return not isinstance(tasks[pending[-1]], FunctionTask) or bool(free_judges)

        try:
            while pending or inflight:
                while can_launch():
                    index = pending.pop()
                    try:
                        launch(index)
                    except OSError as exc:  # a dead worker socket: fail this task, restart afterwards
                        broken = True
                        for fd, _kind, _worker in inflight[index]["fds"]:
                            sel.unregister(fd)
                            os.close(fd)
                            buffers.pop(fd, None)
                        inflight.pop(index)
                        err = RunReport(error=f"sandbox error: {exc}")
                        results[index] = (
                            _function_outcome(err, err) if isinstance(tasks[index], FunctionTask) else err
                        )
                if pending and not inflight and not can_launch():
                    for index in pending:  # every worker is gone
                        inflight[index] = {"reports": {}, "fds": []}
                        finish(index)
                    pending.clear()
                    break
                events = sel.select(timeout=1.0)
                for key, _ in events:
                    index, kind, worker = key.data
                    chunk = os.read(key.fd, 1 << 20)
                    if chunk:
                        buffers[key.fd] += chunk
                    else:
                        done(key.fd, index, kind, worker, _parse_report(bytes(buffers[key.fd])))
                now = time.monotonic()
                for index, state in list(inflight.items()):
                    if now > state["deadline"]:  # a worker that never reported (should not happen)
                        for fd, kind, worker in state["fds"]:
                            if kind not in state["reports"]:
                                done(
                                    fd,
                                    index,
                                    kind,
                                    worker,
                                    RunReport(timed_out=True, error="sandbox error: no report"),
                                )
        finally:
            for key in list(sel.get_map().values()):
                sel.unregister(key.fd)
                os.close(key.fd)
            sel.close()
            if broken:
                self.close()
        return results


NO_ROOT_FOR_COMMANDS = "programs other than Python need a read-only root (the native or bwrap backend)"


def _single_program(task: StdioTask | ExecTask, limits: dict) -> tuple[str, bytes, dict]:
    """The worker's kind, payload and limits of a one-process task."""
    if isinstance(task, StdioTask):
        return "stdio", task.code.encode("utf-8", "replace"), limits
    files = {
        name: (base64.b64encode(data).decode(), 0o755 if name in task.executable else 0o644)
        for name, data in task.files.items()
    }
    job = {"argv": list(task.argv), "files": files, "env": dict(task.env), "collect": list(task.collect)}
    # Commands get a /proc of their own (compilers and runtimes find themselves through it) and an
    # RLIMIT_DATA instead of RLIMIT_AS (JIT and threaded runtimes reserve far more than they use).
    merged = {**limits, "proc": True, **task.limits}
    merged.setdefault("data_mb", merged["memory_mb"])
    return "exec", json.dumps(job).encode(), merged


def _parents_to_create(layout: Layout) -> list[str]:
    """Directories above the mount targets that exist in no mount (bwrap creates them in its root)."""
    binds = [target for kind, _, target in layout.mounts if kind == "ro"]
    found: list[str] = []
    for _kind, _source, target in layout.mounts:
        parent = os.path.dirname(target)
        chain = []
        while parent not in ("/", "") and not any(parent == b or parent.startswith(b + "/") for b in binds):
            chain.append(parent)
            parent = os.path.dirname(parent)
        found += [d for d in reversed(chain) if d not in found]
    return found


def zygote_frame(line: str) -> bool:
    """Whether a line of a program's traceback names a file of the zygote (the runner's own frames above
    the program's; host paths under the rlimit backend), which a report shown to a model leaves out."""
    return f'"{INSIDE_ZYGOTE}/' in line or f'"{ZYGOTE}{os.sep}' in line


def _zygote_env() -> dict[str, str]:
    """The zygote's environment: nothing of the caller's (tokens, cache and project paths stay out of
    reach even of a program reading its process's original environment block)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _shutdown(
    proc: subprocess.Popen, sockets: list[socket.socket], paths: list[str | None], owner: int
) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.close()
    if owner != os.getpid():
        return  # a forked copy: the zygote belongs to the parent
    try:  # the zygote exits by itself once its workers are gone
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    for path in paths:
        if path:
            shutil.rmtree(path, ignore_errors=True)


def _parse_report(data: bytes) -> RunReport:
    if not data:
        return RunReport(error="sandbox error: supervisor died")
    try:
        raw = json.loads(data)
    except ValueError:
        return RunReport(error="sandbox error: unreadable report")
    stdout = raw.get("stdout", "")
    if raw.get("kind") in ("stdio", "exec"):
        stdout = base64.b64decode(stdout)
    else:
        stdout = stdout.encode()
    return RunReport(
        exit_code=raw.get("exit_code"),
        signal=raw.get("signal"),
        timed_out=bool(raw.get("timed_out")),
        output_limit=bool(raw.get("output_limit")),
        wall=float(raw.get("wall", 0.0)),
        cpu=float(raw.get("cpu", 0.0)),
        maxrss_kb=int(raw.get("maxrss_kb", 0)),
        stdout=stdout,
        stderr=raw.get("stderr", ""),
        files={name: base64.b64decode(data) for name, data in (raw.get("files") or {}).items()},
    )


def _function_outcome(candidate: RunReport, judge: RunReport) -> FunctionOutcome:
    error = candidate.error or judge.error
    try:
        verdict = json.loads(judge.stdout.decode("utf-8", "replace") or "{}")
    except ValueError:
        verdict = {}
    if not verdict and error is None:
        error = "sandbox error: judge gave no verdict" + (
            f" ({judge.last_error_line})" if judge.last_error_line else ""
        )
    load = verdict.get("load_error")
    if verdict.get("judge_error") and error is None:
        judge.timed_out = judge.timed_out or verdict["judge_error"] == "timeout"
        judge.stderr = judge.stderr or str(verdict["judge_error"])
    return FunctionOutcome(
        cases=[(str(o), str(m)) for o, m in verdict.get("cases", [])],
        load_error=(str(load[0]), str(load[1])) if load else None,
        setup_error=verdict.get("setup_error"),
        candidate=candidate,
        judge=judge,
        error=error,
    )


__all__ = [
    "ExecTask",
    "FunctionOutcome",
    "FunctionTask",
    "RunReport",
    "Sandbox",
    "SandboxConfig",
    "StdioTask",
]
