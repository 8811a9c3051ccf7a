"""The judge: runs a sample's trusted tests against the candidate, through handles, and gives the verdict.

A warm judge (forked once by the zygote, a private uid of its own) runs the tests of one sample after
another, each with fresh globals: the solution's names as handles on the candidate process (``rpc.py``),
never shadowing builtins; the real modules for the module names the tests read; the prompt's helpers
defined here from the reference. The verdict, one outcome per case, goes to the parent as JSON.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import importlib.machinery
import json
import os
import resource
import signal
import socket
import sys
import time

from .analysis import IMPORT_SIDE_EFFECTS, TestNames, analyse, compiled, prefetch_calls
from .jobs import read_fd, recv_job, write_all
from .namespaces import PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, libc
from .rpc import Channel, RemoteDied
from .state import CONFIG
from .wire import HELPER_CLASSES, HELPER_NAMES, RemoteRef, last_line, recv


def _judge_namespace(spec: dict, names: dict, chan: Channel) -> dict:
    """The tests' globals: the solution's names as handles, the real modules for the standard-library
    names the tests read as modules, and the prompt's helpers, defined here from the reference."""
    test = analyse(
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


def _bind_candidate(globs: dict, names: dict, chan: Channel, loaded: set[str]) -> None:
    """The solution's globals in the tests' globals: handles, or the judge's own copy of a module."""
    for name, info in names.items():
        # A solution's global never shadows a builtin in the tests (``def abs(x): return 0`` would
        # make ``assert abs(candidate(x) - y) < 1e-6`` pass in an in-process harness).
        if not isinstance(name, str) or not name.isidentifier() or hasattr(builtins, name):
            continue
        module = info[1] if info[0] == "module" and isinstance(info[1], str) else None
        if module in IMPORT_SIDE_EFFECTS:
            module = None
        # A module the solution imported, which the tests use without importing it: the judge's own copy
        # (a solution patching it in its process changes nothing here).
        real = _import_real(module) if module and name in loaded else None
        globs[name] = chan.ref(name) if real is None else real


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


def _bind_prompt_helpers(globs: dict, test: TestNames, names: dict) -> None:
    """Defines the reference prompt's helpers (its top-level code other than the entry point: HumanEval/38's
    encode_cyclic, /32's poly) in the judge, over the solution's versions, so that a solution redefining
    them (``encode_cyclic`` as the identity, ``poly`` returning 0) does not redefine what the tests check."""
    HELPER_CLASSES.clear()
    HELPER_NAMES.clear()
    if test.helpers is None:
        return
    exec(test.helpers, globs)
    for name, is_class in test.helper_defs:
        value = globs.get(name)
        if is_class and isinstance(value, type):
            HELPER_CLASSES[value] = name
        if name in names:  # passed to the solution (``candidate(poly)``): the solution's own poly
            HELPER_NAMES[id(value)] = name


def _run_judge(spec: dict, sock: socket.socket, limits: dict) -> dict:
    """Runs the tests against the candidate (over socket ``fd``) and returns the verdict."""
    chan = Channel(sock, limits["wall"])
    verdict: dict = {"cases": []}
    try:
        first = chan.sock
        first.settimeout(limits["wall"])
        hello = recv(first)
    except BaseException as exc:
        verdict["load_error"] = ["died", last_line(exc)]
        return verdict
    if hello[0] == "load_error":
        verdict["load_error"] = [hello[1], hello[2]]
        return verdict
    try:
        globs = _judge_namespace(spec, hello[1], chan)
    except Exception as exc:  # the prompt's own helpers fail (the solution's process ran them too)
        verdict["setup_error"] = f"prompt helpers: {last_line(exc)}"
        return verdict
    with contextlib.suppress(Exception):  # an optimisation only: without it every call is a round trip
        chan.prefetch(prefetch_calls(spec, {n for n, v in globs.items() if type(v) is RemoteRef}))
    try:
        exec(compiled(spec.get("setup") or "", "<test-setup>"), globs)
    except BaseException as exc:
        verdict["setup_error"] = last_line(exc)
        return verdict
    verdict["cases"] = _run_cases(spec, globs, chan)
    return verdict


def _run_cases(spec: dict, globs: dict, chan: Channel) -> list[list[str]]:
    """Each case's outcome and message: ``pass``, ``fail``, ``error``, ``died``, ``memory``, ``skipped``."""
    cases: list[list[str]] = []
    stop_on_fail = bool(spec.get("stop_on_fail"))
    for case in spec["cases"]:
        if stop_on_fail and any(outcome != "pass" for outcome, _ in cases):
            cases.append(["skipped", "not run: an earlier case failed"])
            continue
        if chan.dead:
            cases.append(["died", "candidate process ended"])
            continue
        try:
            exec(compiled(case, "<test>"), globs)
            cases.append(["pass", ""])
        except AssertionError as exc:
            cases.append(["fail", last_line(exc)])
        except RemoteDied as exc:
            cases.append(["died", str(exc)])
        except MemoryError as exc:
            cases.append(["memory", last_line(exc)])
        except RecursionError as exc:
            cases.append(["error", last_line(exc)])
        except BaseException as exc:
            cases.append(["error", last_line(exc)])
    return cases


class _JudgeTimeout(BaseException):
    """A sample's tests ran past the judge's wall-clock limit (the alarm)."""


def _on_alarm(signum, frame):
    raise _JudgeTimeout()


def judge_loop(sock: socket.socket, uid: int | None) -> None:
    """A warm judge: runs trusted test code for one sample after another (fresh globals each time), as a
    private uid that the candidates cannot signal or trace. An alarm bounds each sample's wall time."""
    _become_judge(uid)
    while True:
        job = recv_job(sock)
        if job is None:
            return
        _judge_one(*job)


def _become_judge(uid: int | None) -> None:
    """The judge's descriptors (all /dev/null), limits and identity, set once."""
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
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # cleared by the uid change: set again
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir("/")
    signal.signal(signal.SIGALRM, _on_alarm)


def _judge_one(header: dict, fds: list[int]) -> None:
    """Judges one sample: its tests from the payload memfd, the candidate on the socket; reports."""
    report_fd, payload_fd, rpc_fd = fds
    limits = header["limits"]
    t0 = time.monotonic()
    cpu0 = time.process_time()
    rpc = socket.socket(fileno=rpc_fd)
    code = 0
    try:
        signal.setitimer(signal.ITIMER_REAL, limits["wall"] + 1.0)
        spec = json.loads(read_fd(payload_fd))
        verdict = _run_judge(spec, rpc, limits)
    except _JudgeTimeout:
        verdict, code = {"judge_error": "timeout"}, 1
    except BaseException as exc:
        verdict, code = {"judge_error": last_line(exc)}, 1
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
        write_all(report_fd, json.dumps(report).encode())
    os.close(report_fd)
