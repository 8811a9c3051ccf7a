"""No sandboxed program sees another's traces (issue 30): memory residue, System V IPC, abstract unix
sockets, memory that outlives a call, host paths, other interpreters' package directories.

Each attack runs as code verifier completions (a program's stdout must equal the expected text to score 1)
and as python-tool calls through ``ToolEnv.step`` (the observation is the stdout). So that "the secret is
not seen" can pass only because of the isolation, each test also shows, in the same test:

* that the plant worked: its program checks what it left (and prints ``plant ok``), or its output is the
  secret, or the planted host path exists;
* that the harvester ran to its end: it prints :data:`DONE` last, and the expected output is exact (a
  crashed or killed harvester scores 0 and fails the test);
* that the harvester sees the secret where the isolation is off: in the same sandbox when it is the
  planting program itself, on the host, or in a sandbox whose zygote gives programs no IPC and network
  namespaces of their own (:func:`leaky_zygote`).

Needs the native backend (root, namespaces); skipped elsewhere, where docs/code.md says what holds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid

import pytest
from sandbox_attacks import (  # tests/sandbox_attacks.py (pytest puts tests/ on the path)
    host_details,
    ipc_harvest,
    ipc_plant,
    ipc_remove,
    memory_harvest,
    memory_plant,
    native_code_verifier,
    package_dirs_listing,
    secret_answer,
    socket_listener,
    socket_talker,
)

from rewardlab.envs import ToolEnv, Turn
from rewardlab.types import Record
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.code import sandbox as sandbox_module

LIMITS = {"timeout": 5.0, "max_processes": 16, "parallelism": 2}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DONE = "rk-harvester-done"
"""The last line every harvester prints: its output ends with it only when it ran to completion."""


def new_secret() -> str:
    return f"rk-secret-{uuid.uuid4().hex}"


def new_key() -> int:
    return uuid.uuid4().int % 2**30 + 1


def to_the_end(program: str) -> str:
    """``program``, then :data:`DONE`: printed only when nothing before it crashed or hung."""
    return f"{program}\nprint({DONE!r})\n"


def checked_ipc_plant(key: int, secret: str, megabytes: int = 0) -> str:
    """:func:`ipc_plant`, its own output swallowed, then a check in the same process that the segment
    (``megabytes`` touched), the queue and the semaphore exist under ``key`` and hold the secret: prints
    ``plant ok`` (else ``plant failed ...``). It removes nothing."""
    return (
        "import io, sys\n_rk_stdout, sys.stdout = sys.stdout, io.StringIO()\n"
        + ipc_plant(key, secret, megabytes)
        + f"""
_rk_said, sys.stdout = sys.stdout.getvalue(), _rk_stdout
_rk_ok = (
    _rk_said.split()[0] == "planted"
    and min(shm, q, sem) >= 0
    and libc.shmget({key}, 0, 0) == shm and libc.msgget({key}, 0) == q and libc.semget({key}, 0, 0) == sem
    and ctypes.string_at(addr, {len(secret)}) == {secret.encode()!r}
    and ctypes.string_at(addr + {max(4096, megabytes << 20)} - 1, 1) == b"\\x01"
    and libc.semctl(sem, 0, GETVAL) == 4242
)
print("plant ok" if _rk_ok else "plant failed " + _rk_said)
"""
    )


def held_then_harvested(secret: str) -> str:
    """A process that held the planted answer and freed it, then harvests its own memory."""
    return f"held = bytearray({secret_answer(secret)!r}.encode())\ndel held\n" + memory_harvest()


def leaky_zygote(folder) -> str:
    """A copy of the sandbox's zygote whose programs get no IPC or network namespace of their own (they
    share the zygote's): the isolation these tests check, switched off."""
    shutil.copytree(sandbox_module.ZYGOTE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(folder, "namespaces.py"), "a") as f:
        f.write("\n\ndef program_namespaces() -> int:  # the leaky stand-in\n    return 0\n")
    return str(folder)


@pytest.fixture(scope="module")
def verifier():
    v = native_code_verifier(LIMITS)
    yield v
    v.close()


def tool_env() -> ToolEnv:
    options = {k: v for k, v in LIMITS.items() if k != "timeout"}
    return ToolEnv(
        ["python"], formats=["fenced"], tool_timeout=LIMITS["timeout"], tool_options={"python": options}
    )


@pytest.fixture(scope="module")
def env(verifier):
    environment = tool_env()
    yield environment
    environment.close()


@pytest.fixture(scope="module")
def leaky(verifier, tmp_path_factory):
    """A code verifier and a python tool on :func:`leaky_zygote` (both started while it is patched in)."""
    folder = leaky_zygote(tmp_path_factory.mktemp("leaky") / "zygote")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sandbox_module, "ZYGOTE", folder)
        v = get_verifier("code", **LIMITS)
        v.sandbox.start()
        environment = tool_env()
        assert call_tool(environment, ["print('up')"]) == ["up"]  # starts its sandbox now
    yield v, environment
    v.close()
    environment.close()


def expecting(output: str) -> dict:
    return {"inputs": [""], "outputs": [output]}


def run_completions(verifier, programs: list[str], output: str | list[str]) -> list[float]:
    """Scores ``programs`` as one batch (they run at the same time, one per slot); ``output``: the expected
    stdout of each (one for all, or one per program)."""
    outputs = [output] * len(programs) if isinstance(output, str) else output
    records = [Record(completion=p, reference=expecting(o)) for p, o in zip(programs, outputs, strict=True)]
    return [r.reward for r in verifier.score_batch(records)]


def call_tool(env: ToolEnv, programs: list[str]) -> list[str]:
    """One turn per program, all in one ``step`` (they run at the same time): the observations."""
    texts = [f"```python\n{p}\n```\n" for p in programs]
    episodes = [env.reset(Record()) for _ in programs]
    for ep, text in zip(episodes, texts, strict=True):
        ep.turns.append(Turn("model", text))
    return [r.observation for r in env.step(episodes, texts, last=False)]


def on_host(code: str, **kw) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, **kw
    ).stdout


# ----------------------------------------------------------------------------------------------------------
# memory residue: a program forked from a process that held an earlier program's output
# ----------------------------------------------------------------------------------------------------------
def test_memory_residue_host_control():
    secret = new_secret()
    assert secret in on_host(held_then_harvested(secret))


def test_memory_residue_code_verifier(verifier):
    secret = new_secret()
    # the harvester finds the secret in a sandboxed process that held it (in the host's, see below too)
    assert run_completions(verifier, [held_then_harvested(secret)], secret_answer(secret)) == [1.0]
    assert secret in on_host(held_then_harvested(secret))
    # the plant: the supervisors held the secret (the programs printed it: scored against it)
    assert run_completions(verifier, [memory_plant(secret)] * 2, secret_answer(secret)) == [1.0, 1.0]
    # the harvest ran to its end and found nothing
    done = f"not found\n{DONE}"
    assert run_completions(verifier, [to_the_end(memory_harvest())] * 2, done) == [1.0, 1.0]


def test_memory_residue_python_tool(env):
    secret = new_secret()
    (own,) = call_tool(env, [held_then_harvested(secret)])
    assert own.startswith(secret), own[:200]
    assert all(o.startswith(secret_answer(secret)) for o in call_tool(env, [memory_plant(secret)] * 2))
    observations = call_tool(env, [to_the_end(memory_harvest())] * 2)
    assert observations == [f"not found\n{DONE}"] * 2, observations


# ----------------------------------------------------------------------------------------------------------
# System V IPC: shared memory, message queues, semaphores left behind by one program
# ----------------------------------------------------------------------------------------------------------
def test_ipc_host_control():
    key, secret = new_key(), new_secret()
    try:
        assert on_host(checked_ipc_plant(key, secret)) == "plant ok\n"
        assert on_host(to_the_end(ipc_harvest(key))) == f"{secret} {secret} semaphore=4242\n{DONE}\n"
    finally:
        ipc_remove(key)


def test_ipc_code_verifier(verifier, leaky):
    key, secret = new_key(), new_secret()
    found, done = f"{secret} {secret} semaphore=4242\n{DONE}", f"not found\n{DONE}"
    # the plant left its objects (checked in the planting process), the harvest ran to its end, saw none
    assert run_completions(verifier, [checked_ipc_plant(key, secret)] * 2, "plant ok") == [1.0, 1.0]
    assert run_completions(verifier, [to_the_end(ipc_harvest(key))] * 2, done) == [1.0, 1.0]
    # the same pair where programs share an IPC namespace: the harvest finds all three
    leaky_verifier, _ = leaky
    assert run_completions(leaky_verifier, [checked_ipc_plant(key, secret)], "plant ok") == [1.0]
    assert run_completions(leaky_verifier, [to_the_end(ipc_harvest(key))], found) == [1.0]


def test_ipc_python_tool(env, leaky):
    key, secret = new_key(), new_secret()
    assert call_tool(env, [checked_ipc_plant(key, secret)] * 2) == ["plant ok"] * 2
    assert call_tool(env, [to_the_end(ipc_harvest(key))] * 2) == [f"not found\n{DONE}"] * 2
    _, leaky_env = leaky
    assert call_tool(leaky_env, [checked_ipc_plant(key, secret)]) == ["plant ok"]
    assert call_tool(leaky_env, [to_the_end(ipc_harvest(key))]) == [
        f"{secret} {secret} semaphore=4242\n{DONE}"
    ]


def shmem_kb() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Shmem:"))


def leftover_kb(before: int, settle: float = 3.0) -> int:
    """Shared memory still allocated on the host over ``before`` once it settles (a namespace's segments
    are freed by the kernel shortly after its last process)."""
    end = time.monotonic() + settle
    while True:
        extra = shmem_kb() - before
        if extra < 32 * 1024 or time.monotonic() > end:
            return extra
        time.sleep(0.1)


def test_shared_memory_outliving_the_call_host_control():
    key = new_key()
    before = shmem_kb()
    try:
        assert on_host(checked_ipc_plant(key, new_secret(), megabytes=64)) == "plant ok\n"
        assert leftover_kb(before, settle=0.5) >= 60 * 1024
    finally:
        ipc_remove(key)


def test_shared_memory_outliving_the_call(verifier, env, leaky):
    before = shmem_kb()
    for _ in range(3):  # repeated calls must not add up; each plant touched its 64 MiB (checked)
        plant = checked_ipc_plant(new_key(), new_secret(), megabytes=64)
        assert run_completions(verifier, [plant], "plant ok") == [1.0]
        assert call_tool(env, [checked_ipc_plant(new_key(), new_secret(), megabytes=64)]) == ["plant ok"]
    assert leftover_kb(before) < 32 * 1024
    # where programs share the zygote's IPC namespace, the segment outlives the call
    leaky_verifier, _ = leaky
    key, secret = new_key(), new_secret()
    plant = checked_ipc_plant(key, secret, megabytes=64)
    assert run_completions(leaky_verifier, [plant], "plant ok") == [1.0]
    try:
        extra = leftover_kb(before, settle=0.5)
    finally:  # the harvest removes what it finds
        found = f"{secret} {secret} semaphore=4242\n{DONE}"
        removed = run_completions(leaky_verifier, [to_the_end(ipc_harvest(key))], found)
    assert extra >= 60 * 1024
    assert removed == [1.0]


# ----------------------------------------------------------------------------------------------------------
# abstract unix sockets: two programs of one batch talking
# ----------------------------------------------------------------------------------------------------------
WAIT = 4.0
"""How long the listener listens and the talker tries, in seconds."""
START_BY = 3.0
"""Both must have started within this many seconds of the batch being built (reported by each): then
the listener was bound while the talker tried, for at least ``WAIT - START_BY`` seconds."""


def timed(program: str) -> str:
    """``program``, then whether it started in time (``started in time``, against the wall clock the host
    and every sandbox share), then :data:`DONE`."""
    start_by = time.time() + START_BY
    return (
        f"import time as _rk_time\n_rk_t0 = _rk_time.time()\n{program}\n"
        f"print('started in time' if _rk_t0 < {start_by!r} else 'started late')\nprint({DONE!r})\n"
    )


def socket_pair(name: str, secret: str) -> list[str]:
    return [timed(socket_listener(name, WAIT)), timed(socket_talker(name, secret, WAIT))]


def socket_outputs(heard: str, sent: str) -> list[str]:
    return [f"{heard}\nstarted in time\n{DONE}", f"{sent}\nstarted in time\n{DONE}"]


def test_abstract_socket_host_control():
    name, secret = f"rk-{uuid.uuid4().hex}", new_secret()
    listener = subprocess.Popen(
        [sys.executable, "-c", socket_listener(name, 5.0)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert "sent" in on_host(socket_talker(name, secret, 5.0))
        assert secret in listener.communicate(timeout=30)[0]
    finally:
        listener.kill()


def test_abstract_socket_code_verifier(verifier, leaky):
    name, secret = f"rk-{uuid.uuid4().hex}", new_secret()
    quiet = socket_outputs("heard nothing", "nobody listens")
    assert run_completions(verifier, socket_pair(name, secret), quiet) == [1.0, 1.0]
    leaky_verifier, _ = leaky
    heard = socket_outputs(f"heard {secret}", "sent")
    assert run_completions(leaky_verifier, socket_pair(name, secret), heard) == [1.0, 1.0]


def test_abstract_socket_python_tool(env, leaky):
    name, secret = f"rk-{uuid.uuid4().hex}", new_secret()
    assert call_tool(env, socket_pair(name, secret)) == socket_outputs("heard nothing", "nobody listens")
    _, leaky_env = leaky
    assert call_tool(leaky_env, socket_pair(name, secret)) == socket_outputs(f"heard {secret}", "sent")


# ----------------------------------------------------------------------------------------------------------
# host details: paths of the checkout, the venv, the host's temporary folders; the uid range
# ----------------------------------------------------------------------------------------------------------
NEEDLES = [REPO, sys.prefix, "rk-sandbox-"]
PLANTED_NEEDLE = f"planted = {REPO!r}\n"
"""A program holding the first needle itself: the harvester must report it (``[0]``)."""


def needles_exist(verifier) -> None:
    assert os.path.isdir(REPO) and os.path.isdir(sys.prefix)
    assert os.path.basename(verifier.sandbox._root).startswith(NEEDLES[2])
    assert os.path.isdir(verifier.sandbox._root)


def test_host_details_host_control():
    assert on_host(to_the_end(host_details(NEEDLES)), cwd=REPO) == f"[0, 1]\n{DONE}\n"
    runner = "CONFIG = {'uid_base': 1000000}\n"  # a runner's globals as the zygote's were
    assert "uid range" in on_host(runner + host_details(NEEDLES))


def test_host_details_code_verifier(verifier):
    needles_exist(verifier)
    assert on_host(to_the_end(host_details(NEEDLES)), cwd=REPO) == f"[0, 1]\n{DONE}\n"
    assert run_completions(
        verifier, [to_the_end(PLANTED_NEEDLE + host_details(NEEDLES))], f"[0]\n{DONE}"
    ) == [1.0]
    assert run_completions(verifier, [to_the_end(host_details(NEEDLES))], f"clean\n{DONE}") == [1.0]


def test_host_details_python_tool(env, verifier):
    needles_exist(verifier)
    assert call_tool(env, [to_the_end(PLANTED_NEEDLE + host_details(NEEDLES))]) == [f"[0]\n{DONE}"]
    assert call_tool(env, [to_the_end(host_details(NEEDLES))]) == [f"clean\n{DONE}"]


def test_zygote_is_compiled_from_its_source(tmp_path, monkeypatch):
    """The zygote's folder is compiled from source at each start, like the script it was: a ``.pyc`` found
    there (compiled on the host, as pip compiles an installation: it holds host paths) is never loaded
    into the memory programs are forked from, and none is written."""
    import importlib.util
    import marshal

    from rewardlab.verifiers.code import sandbox as sandbox_module

    folder = tmp_path / "zygote"
    shutil.copytree(sandbox_module.ZYGOTE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = folder / "state.py"
    planted = compile(source.read_text() + f"\nPLANTED = {str(folder)!r}\n", str(source), "exec")
    stat = source.stat()
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + stat.st_size.to_bytes(4, "little")
    cached = importlib.util.cache_from_source(str(source))  # a valid cache entry for the unchanged source
    os.makedirs(os.path.dirname(cached))
    with open(cached, "wb") as f:
        f.write(header + marshal.dumps(planted))
    monkeypatch.setattr(sandbox_module, "ZYGOTE", str(folder))
    probe = "import sys\nprint(hasattr(sys.modules['rk_zygote.state'], 'PLANTED'))\n"
    for backend in ("native", "rlimit"):
        with sandbox_module.Sandbox(sandbox_module.SandboxConfig(backend=backend, parallelism=1)) as sandbox:
            report = sandbox.run([sandbox_module.StdioTask(probe)])[0]
        assert report.stdout == b"False\n", (backend, report)
    assert os.listdir(os.path.dirname(cached)) == [os.path.basename(cached)]


# ----------------------------------------------------------------------------------------------------------
# package directories of any interpreter, hub caches
# ----------------------------------------------------------------------------------------------------------
SITE_PACKAGES = sysconfig.get_paths()["purelib"]
"""The host's (this venv's) site-packages: the package directory the sandboxed programs must not see."""
SANDBOX_SITE = f"[{sandbox_module.SITE!r}]\n{DONE}"
"""What the harvester lists inside the sandbox with the allowed packages' own directory not excepted."""


def host_sees_package_dirs() -> None:
    assert os.path.isdir(SITE_PACKAGES) and os.listdir(SITE_PACKAGES)  # the plant: it is there, not empty
    listed = on_host(to_the_end(package_dirs_listing(sys.prefix)))
    assert listed.endswith(f"{DONE}\n") and repr(SITE_PACKAGES) in listed, listed  # the harvester sees it


def test_package_dirs_host_control():
    host_sees_package_dirs()
    assert "none" not in on_host(package_dirs_listing("/usr"))


def test_package_dirs_code_verifier(verifier):
    host_sees_package_dirs()
    control = to_the_end(package_dirs_listing(allowed="/nonexistent"))  # it sees the sandbox's own one
    assert run_completions(verifier, [control], SANDBOX_SITE) == [1.0]
    assert run_completions(verifier, [to_the_end(package_dirs_listing())], f"none\n{DONE}") == [1.0]


def test_package_dirs_python_tool(env):
    host_sees_package_dirs()
    assert call_tool(env, [to_the_end(package_dirs_listing(allowed="/nonexistent"))]) == [SANDBOX_SITE]
    assert call_tool(env, [to_the_end(package_dirs_listing())]) == [f"none\n{DONE}"]


def test_package_dirs_of_any_interpreter_are_found(tmp_path):
    """The rule is by name, wherever the directory lies (another interpreter's tree, a bundled one), and
    does not follow links or look inside what it hides."""
    from rewardlab.verifiers.code.layout import package_dirs

    for rel in (
        "lib/pypy3.10/site-packages/pkg",
        "lib/sdk/platform/bundled/lib/python3.12/site-packages/x",
        "lib/python2.7/dist-packages",
        "lib/node_modules/left-pad",
        "share/nltk_data/corpora",
        "lib/ruby/gems/3.1.0",
        "lib/python3/plain/kept",
    ):
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "lib")
    found = {os.path.relpath(p, tmp_path) for p in package_dirs((str(tmp_path),))}
    assert found == {
        "lib/pypy3.10/site-packages",
        "lib/sdk/platform/bundled/lib/python3.12/site-packages",
        "lib/python2.7/dist-packages",
        "lib/node_modules",
        "share/nltk_data",
        "lib/ruby/gems",
    }


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
)
def test_bwrap_backend_isolates_programs_too():
    """The same attacks against the bwrap backend's sandbox (as root it gets the same per-program
    namespaces); one batch of two programs at a time, as the code verifier and the python tool run them; each
    harvester runs to its end, and its controls (above) see what it looks for."""
    from rewardlab.verifiers.code.sandbox import Sandbox, SandboxConfig, StdioTask

    sandbox = Sandbox(SandboxConfig(backend="bwrap", parallelism=2, timeout=5.0))
    try:
        sandbox.start()
        if not sandbox.info["program_namespaces"]:
            pytest.skip("this machine cannot have it: namespaces per program under bubblewrap (not root)")

        def outputs(programs: list[str]) -> list[str]:
            reports = sandbox.run([StdioTask(p) for p in programs])
            assert all(r.exit_code == 0 and not r.timed_out for r in reports), reports
            return [r.stdout.decode().strip() for r in reports]

        secret, key, name = new_secret(), new_key(), f"rk-{uuid.uuid4().hex}"
        done = f"not found\n{DONE}"
        assert outputs([held_then_harvested(secret)]) == [secret_answer(secret)]  # the harvester works here
        assert outputs([memory_plant(secret)] * 2) == [secret_answer(secret)] * 2
        assert outputs([to_the_end(memory_harvest())] * 2) == [done] * 2
        assert outputs([checked_ipc_plant(key, secret)] * 2) == ["plant ok"] * 2
        assert outputs([to_the_end(ipc_harvest(key))] * 2) == [done] * 2
        assert outputs(socket_pair(name, secret)) == socket_outputs("heard nothing", "nobody listens")
        assert outputs([to_the_end(PLANTED_NEEDLE + host_details(NEEDLES))]) == [f"[0]\n{DONE}"]
        assert outputs([to_the_end(host_details(NEEDLES))]) == [f"clean\n{DONE}"]
        assert outputs([to_the_end(package_dirs_listing(allowed="/nonexistent"))]) == [SANDBOX_SITE]
        assert outputs([to_the_end(package_dirs_listing())]) == [f"none\n{DONE}"]
    finally:
        sandbox.close()
