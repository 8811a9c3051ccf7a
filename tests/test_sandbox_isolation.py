"""No sandboxed program sees another's traces (issue 30): memory residue, System V IPC, abstract unix
sockets, memory that outlives a call, host paths, other interpreters' package directories.

Each attack runs three ways: as code verifier completions (the harvest's stdout must be the planted secret
to score, so a hack that works scores 1), as python-tool calls through ``ToolEnv.step`` (the observation
must not hold the secret), and as plain host processes, where it must succeed, so that no test is blind.
Needs the native backend (root, namespaces); skipped elsewhere, where docs/code.md says what holds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
    package_dirs_listing,
    secret_answer,
    socket_listener,
    socket_talker,
)

from rewardlab.envs import ToolEnv, Turn
from rewardlab.types import Record
from rewardlab.verifiers import get_verifier

LIMITS = {"timeout": 5.0, "max_processes": 16, "parallelism": 2}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def new_secret() -> str:
    return f"rk-secret-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def verifier():
    v = get_verifier("code", **LIMITS)
    v.sandbox.start()
    if v.sandbox.info.get("backend") != "native" or not v.sandbox.info.get("read_only_root"):
        v.close()
        pytest.skip("needs the native backend (root and namespaces)")
    yield v
    v.close()


@pytest.fixture(scope="module")
def env(verifier):
    options = {k: v for k, v in LIMITS.items() if k != "timeout"}
    tool_env = ToolEnv(
        ["python"], formats=["fenced"], tool_timeout=LIMITS["timeout"], tool_options={"python": options}
    )
    yield tool_env
    tool_env.close()


def expecting(output: str) -> dict:
    return {"inputs": [""], "outputs": [output]}


def run_completions(verifier, programs: list[str], output: str) -> list[float]:
    """Scores ``programs`` as one batch (they run at the same time, one per slot)."""
    records = [Record(completion=p, reference=expecting(output)) for p in programs]
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
    held = f"held = bytearray({secret_answer(secret)!r}.encode())\ndel held\n"
    assert secret in on_host(held + memory_harvest())


def test_memory_residue_code_verifier(verifier):
    secret = new_secret()
    assert run_completions(verifier, [memory_plant(secret)] * 2, secret_answer(secret)) == [1.0, 1.0]
    assert run_completions(verifier, [memory_harvest()] * 2, secret_answer(secret)) == [0.0, 0.0]


def test_memory_residue_python_tool(env):
    secret = new_secret()
    assert all(secret in o for o in call_tool(env, [memory_plant(secret)] * 2))
    observations = call_tool(env, [memory_harvest()] * 2)
    assert not any(secret in o for o in observations), observations


# ----------------------------------------------------------------------------------------------------------
# System V IPC: shared memory, message queues, semaphores left behind by one program
# ----------------------------------------------------------------------------------------------------------
def test_ipc_host_control():
    key, secret = uuid.uuid4().int % 2**30 + 1, new_secret()
    try:
        on_host(ipc_plant(key, secret))
        found = on_host(ipc_harvest(key))
        assert secret in found and "semaphore=4242" in found
    finally:
        ipc_remove(key)


def test_ipc_code_verifier(verifier):
    key, secret = uuid.uuid4().int % 2**30 + 1, new_secret()
    run_completions(verifier, [ipc_plant(key, secret)] * 2, "")
    assert run_completions(verifier, [ipc_harvest(key)] * 2, secret) == [0.0, 0.0]
    assert run_completions(verifier, [ipc_harvest(key)] * 2, "not found") == [1.0, 1.0]


def test_ipc_python_tool(env):
    key, secret = uuid.uuid4().int % 2**30 + 1, new_secret()
    assert all("planted" in o for o in call_tool(env, [ipc_plant(key, secret)] * 2))
    assert call_tool(env, [ipc_harvest(key)] * 2) == ["not found", "not found"]


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
    key = uuid.uuid4().int % 2**30 + 1
    before = shmem_kb()
    try:
        on_host(ipc_plant(key, new_secret(), megabytes=64))
        assert leftover_kb(before, settle=0.5) >= 60 * 1024
    finally:
        ipc_remove(key)


def test_shared_memory_outliving_the_call(verifier, env):
    before = shmem_kb()
    for _ in range(3):  # repeated calls must not add up
        run_completions(verifier, [ipc_plant(uuid.uuid4().int % 2**30 + 1, new_secret(), megabytes=64)], "")
        call_tool(env, [ipc_plant(uuid.uuid4().int % 2**30 + 1, new_secret(), megabytes=64)])
    assert leftover_kb(before) < 32 * 1024


# ----------------------------------------------------------------------------------------------------------
# abstract unix sockets: two programs of one batch talking
# ----------------------------------------------------------------------------------------------------------
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


def test_abstract_socket_code_verifier(verifier):
    name, secret = f"rk-{uuid.uuid4().hex}", new_secret()
    rewards = run_completions(
        verifier, [socket_listener(name), socket_talker(name, secret)], f"heard {secret}"
    )
    assert rewards == [0.0, 0.0]


def test_abstract_socket_python_tool(env):
    name, secret = f"rk-{uuid.uuid4().hex}", new_secret()
    heard, sent = call_tool(env, [socket_listener(name), socket_talker(name, secret)])
    assert heard == "heard nothing" and sent == "nobody listens"


# ----------------------------------------------------------------------------------------------------------
# host details: paths of the checkout, the venv, the host's temporary folders; the uid range
# ----------------------------------------------------------------------------------------------------------
NEEDLES = [REPO, sys.prefix, "rk-sandbox-"]


def test_host_details_host_control():
    assert on_host(host_details(NEEDLES), cwd=REPO).strip() == "[0, 1]"
    runner = "CONFIG = {'uid_base': 1000000}\n"  # a runner's globals as the zygote's were
    assert "uid range" in on_host(runner + host_details(NEEDLES))


def test_host_details_code_verifier(verifier):
    assert run_completions(verifier, [host_details(NEEDLES)], "clean") == [1.0]


def test_host_details_python_tool(env):
    assert call_tool(env, [host_details(NEEDLES)]) == ["clean"]


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
def test_package_dirs_host_control():
    assert "none" not in on_host(package_dirs_listing("/usr"))


def test_package_dirs_code_verifier(verifier):
    assert run_completions(verifier, [package_dirs_listing()], "none") == [1.0]


def test_package_dirs_python_tool(env):
    assert call_tool(env, [package_dirs_listing()]) == ["none"]


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


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_bwrap_backend_isolates_programs_too():
    """The same attacks against the bwrap backend's sandbox (as root it gets the same per-program
    namespaces); one batch of two programs at a time, as the code verifier and the python tool run them."""
    from rewardlab.verifiers.code.sandbox import Sandbox, SandboxConfig, StdioTask

    sandbox = Sandbox(SandboxConfig(backend="bwrap", parallelism=2, timeout=5.0))
    try:
        sandbox.start()
        if not sandbox.info["program_namespaces"]:
            pytest.skip("bubblewrap without root: no namespaces per program")

        def outputs(programs: list[str]) -> list[str]:
            return [r.stdout.decode().strip() for r in sandbox.run([StdioTask(p) for p in programs])]

        secret, key, name = new_secret(), uuid.uuid4().int % 2**30 + 1, f"rk-{uuid.uuid4().hex}"
        outputs([memory_plant(secret)] * 2)
        assert outputs([memory_harvest()] * 2) == ["not found"] * 2
        outputs([ipc_plant(key, secret)] * 2)
        assert outputs([ipc_harvest(key)] * 2) == ["not found"] * 2
        assert outputs([socket_listener(name), socket_talker(name, secret)]) == [
            "heard nothing",
            "nobody listens",
        ]
        assert outputs([host_details(NEEDLES)]) == ["clean"]
        assert outputs([package_dirs_listing()]) == ["none"]
    finally:
        sandbox.close()
