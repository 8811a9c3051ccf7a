"""The sandbox holds for every language the code verifier compiles, not only for Python: each attack is
written in C, C++, Java, JavaScript, TypeScript, Go and Rust (tests/language_attacks.py, one kit per
language, compiled once in the sandbox as the verifier compiles) and must fail there, while its leaky
stand-in, the very same compiled kit run on the host in a temporary directory (a plain subprocess), shows
that the attack program works:

* reading the checkout (the README, a test-data file);
* a TCP connection to a listener this test opens on the host;
* a process bomb (``/bin/sleep`` children until refused), a memory bomb, a disk bomb;
* two programs of one batch meeting on a unix socket (abstract where the language has them) or, in C, a
  System V shared-memory segment;
* a daemon outliving the call;
* writing outside the working directory;
* the compilers themselves: including the README at compile time, and a template bomb.

The default suite runs every attack in C, Java and Go, and the cheap ones in all seven languages; the
rest is marked slow. Needs the native backend (root, namespaces): skipped elsewhere, where docs/code.md says what holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import socket
import struct
import subprocess
import time
import uuid
from dataclasses import dataclass

import pytest
from language_attacks import (  # tests/language_attacks.py (pytest puts tests/ on the path)
    ABSTRACT_SOCKETS,
    END,
    KITS,
    LANGUAGES,
    SHARED_MAPPINGS,
    c_incbin,
    cpp_include,
    rust_include_str,
    template_bomb,
)
from sandbox_attacks import ipc_remove, machine_healthy, native_code_verifier, sandbox_processes
from time_bounds import HANG_S, ROOM_S, eventually

from rewardlab.types import Record
from rewardlab.verifiers.code.foreign import stdio_case
from rewardlab.verifiers.code.languages import LANGUAGES as TOOLCHAINS
from rewardlab.verifiers.code.languages import Program
from rewardlab.verifiers.code.layout import PROJECT
from rewardlab.verifiers.code.programs import Builds, Built, CompileLimits, run_task

MAX_PROCESSES = 32
MEMORY_MB = 1024
"""Room for every runtime's start (the JVM's threads' stacks count in ``RLIMIT_DATA``); the bombs ask for twice
as much."""
BOMB_MB = 2048
COMPILE_TIMEOUT = 20.0
LIMITS = {
    "timeout": ROOM_S,
    "max_processes": MAX_PROCESSES,
    "memory_mb": MEMORY_MB,
    "parallelism": 2,
    "max_file_mb": 16,
    "workdir_mb": 128,
    "compile_timeout": COMPILE_TIMEOUT,
}
README = os.path.join(PROJECT, "README.md")
DATASET = os.path.join(PROJECT, "tests", "data", "code", "humaneval_x", "humaneval_cpp.jsonl.gz")
WAIT_MS = 3000
"""How long the two programs of an IPC attack wait for each other (they start together)."""
HOST_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The sandbox's PATH: the host controls run the same toolchains (Debian's rustc, not a user's)."""

# A few languages are slow to start or to compile: the default suite keeps C, Java and Go for every attack
# (and the rest where they are cheap); ``--slow`` runs all seven everywhere.
DEFAULT = ("c", "java", "go")


def languages(*, every: bool = True, among: tuple[str, ...] = LANGUAGES):
    """``among`` as parameters; with ``every=False`` those outside :data:`DEFAULT` are marked slow."""
    return [
        lang if every or lang in DEFAULT else pytest.param(lang, marks=pytest.mark.slow) for lang in among
    ]


# ----------------------------------------------------------------------------------------------------------
# the sandbox, the kits, and the host stand-in
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verifier():
    v = native_code_verifier(LIMITS)
    yield v
    v.close()


@dataclass
class Kit:
    program: Program
    built: Built


@pytest.fixture(scope="module")
def kits(verifier) -> dict[str, Kit]:
    """Every language's kit, compiled once, together, in the verifier's sandbox (its compile limits, but a
    timeout that is room for a loaded machine: Go builds its standard library's net package here)."""
    programs = {lang: TOOLCHAINS[lang].stdio_program(KITS[lang], MEMORY_MB) for lang in LANGUAGES}
    builds = Builds(CompileLimits(timeout=4 * ROOM_S))
    built = builds.build(verifier.sandbox, list(programs.values()))
    return {lang: Kit(programs[lang], b) for lang, b in zip(programs, built, strict=True)}


def kit_of(kits: dict[str, Kit], lang: str) -> Kit:
    missing = TOOLCHAINS[lang].missing()
    assert missing is None, missing  # a toolchain the tests need (CI installs them all)
    kit = kits[lang]
    assert kit.built.error is None, f"the {lang} kit did not compile: {kit.built.error}"
    return kit


def stdin(*args: object) -> str:
    return "".join(f"{a}\n" for a in args)


def lines_of(data: bytes) -> list[str]:
    return [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]


def sandboxed(verifier, kit: Kit, *attacks: tuple) -> list:
    """Runs the kit once per attack (one argument tuple each), all in one batch: they run at the same
    time, one per slot. The reports."""
    tasks = [run_task(kit.program, kit.built, stdin(*attack)) for attack in attacks]
    reports = verifier.sandbox.run(tasks)
    for report in reports:
        assert report.error is None, report.error
    return reports


@dataclass
class HostRun:
    returncode: int
    lines: list[str]
    stderr: str


def host_start(kit: Kit, folder, *args: object) -> subprocess.Popen:
    """The kit started on the host in ``folder``/run (its files there, a session of its own, the sandbox's
    environment but no limit): the leaky stand-in."""
    run_dir = folder / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, data in kit.built.files.items():
        (run_dir / name).write_bytes(data)
        if name in kit.built.executable:
            (run_dir / name).chmod(0o755)
    (folder / "stdin").write_text(stdin(*args))
    env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": str(run_dir), "TMPDIR": str(run_dir)}
    env.update(kit.program.env)
    with open(folder / "stdin") as i, open(folder / "stdout", "wb") as o, open(folder / "stderr", "wb") as e:
        # files, not pipes: a child the kit leaves behind cannot hold the test up
        return subprocess.Popen(
            kit.program.run, cwd=run_dir, env=env, stdin=i, stdout=o, stderr=e, start_new_session=True
        )


def host_finish(proc: subprocess.Popen, folder) -> HostRun:
    try:
        proc.wait(timeout=ROOM_S)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # children it left in its session
        proc.wait()
    stderr = (folder / "stderr").read_text(errors="replace")
    return HostRun(proc.returncode, lines_of((folder / "stdout").read_bytes()), stderr)


def on_host(kit: Kit, folder, *args: object) -> HostRun:
    return host_finish(host_start(kit, folder, *args), folder)


def ran_to_end(report) -> list[str]:
    """The report's lines without the last, which must be :data:`END` (the attack ran to its end)."""
    lines = lines_of(report.stdout)
    assert lines and lines[-1] == END, (report.exit_code, report.signal, lines, report.stderr[-2000:])
    assert report.exit_code == 0 and not report.timed_out, (report.exit_code, report.stderr[-2000:])
    return lines[:-1]


def host_ran_to_end(run: HostRun) -> list[str]:
    assert run.lines and run.lines[-1] == END and run.returncode == 0, (run.returncode, run.lines, run.stderr)
    return run.lines[:-1]


def exact(actual: str, expected: str) -> bool:
    return actual.strip() == expected.strip()


SIOCGIFADDR = 0x8915


def host_addresses() -> list[str]:
    """The host's IPv4 addresses other than loopback (a sandboxed program might reach those instead)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            address = socket.inet_ntoa(packed[20:24])
            if not address.startswith("127."):
                found.append(address)
    return found


def marked(marker: str) -> list[int]:
    """Host processes running ``sleep MARKER``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].endswith(b"sleep") and argv[1] == marker.encode():
            found.append(int(pid))
    return found


def no_leftovers(verifier) -> None:
    processes = lambda: sandbox_processes(verifier.sandbox)  # noqa: E731
    assert eventually(lambda: processes() == []), processes()


# ----------------------------------------------------------------------------------------------------------
# 1. reading the checkout
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", languages())
def test_reading_the_checkout(verifier, kits, lang, tmp_path):
    kit = kit_of(kits, lang)
    paths = [README, DATASET]
    (report,) = sandboxed(verifier, kit, ("read", *paths, "/etc/passwd"))
    lines = ran_to_end(report)
    for path, line in zip(paths, lines, strict=False):
        assert line.startswith(f"error {path} "), lines
        assert any(word in line for word in ("No such file", "NoSuchFile", "ENOENT", "no such file")), line
    assert lines[-1] == f"read /etc/passwd {os.path.getsize('/etc/passwd')}"  # reading works there
    # the leaky stand-in: the same kit on the host reads both whole
    host = host_ran_to_end(on_host(kit, tmp_path, "read", *paths))
    assert host == [f"read {path} {os.path.getsize(path)}" for path in paths]


# ----------------------------------------------------------------------------------------------------------
# 2. network
# ----------------------------------------------------------------------------------------------------------
def accepted(listener: socket.socket) -> int:
    """How many connections the listener has waiting (taken and closed)."""
    listener.setblocking(False)
    n = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return n
        conn.close()
        n += 1


@pytest.mark.parametrize("lang", languages())
def test_network(verifier, kits, lang, tmp_path):
    kit = kit_of(kits, lang)
    hosts = ["127.0.0.1", *host_addresses()]
    with socket.create_server(("0.0.0.0", 0), backlog=16) as listener:
        port = listener.getsockname()[1]
        (report,) = sandboxed(verifier, kit, ("connect", port, *hosts))
        lines = ran_to_end(report)
        assert [line.split()[:2] for line in lines] == [["refused", h] for h in hosts], lines
        assert accepted(listener) == 0
        host = host_ran_to_end(on_host(kit, tmp_path, "connect", port, *hosts))
        assert host == [f"connected {h}" for h in hosts]
        assert eventually(lambda: accepted(listener) >= len(hosts))  # the listener saw them


# ----------------------------------------------------------------------------------------------------------
# 3. process bomb
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", languages())
def test_process_bomb(verifier, kits, lang, tmp_path):
    kit = kit_of(kits, lang)
    bound = MAX_PROCESSES + 10
    (report,) = sandboxed(verifier, kit, ("spawn", bound))
    (line,) = ran_to_end(report)
    spawned = int(line.split()[1])
    # the kit and its children (and its runtime's threads) under the limit; it did start some
    assert 1 <= spawned < MAX_PROCESSES, line
    no_leftovers(verifier)
    host = host_ran_to_end(on_host(kit, tmp_path, "spawn", bound))
    assert host == [f"spawned {bound}"]  # no limit: past MAX_PROCESSES
    assert machine_healthy()


# ----------------------------------------------------------------------------------------------------------
# 4. memory bomb
# ----------------------------------------------------------------------------------------------------------
def memory_bomb(verifier, kit: Kit, attack: str, tmp_path) -> None:
    small, bomb = sandboxed(verifier, kit, (attack, 32), (attack, BOMB_MB))
    assert ran_to_end(small) == ["allocated 32"]  # the kit allocates under the limit
    said = lines_of(bomb.stdout)
    assert f"allocated {BOMB_MB}" not in said and END not in said, said
    outcome = stdio_case(bomb, f"allocated {BOMB_MB}\n{END}\n", exact)["outcome"]
    assert outcome in ("memory", "error"), (outcome, bomb.exit_code, bomb.signal, bomb.stderr[-500:])
    no_leftovers(verifier)
    assert machine_healthy()
    # the leaky stand-in: a modest 1 GiB on the host (already over the sandbox's limit)
    host = host_ran_to_end(on_host(kit, tmp_path, attack, MEMORY_MB))
    assert host == [f"allocated {MEMORY_MB}"]


@pytest.mark.parametrize("lang", languages(every=False))
def test_memory_bomb(verifier, kits, lang, tmp_path):
    memory_bomb(verifier, kit_of(kits, lang), "alloc", tmp_path)


@pytest.mark.parametrize("lang", languages(every=False, among=SHARED_MAPPINGS))
def test_memory_bomb_shared_mapping(verifier, kits, lang, tmp_path):
    # mmap(MAP_SHARED | MAP_ANONYMOUS): shmem pages, which RLIMIT_DATA does not count
    memory_bomb(verifier, kit_of(kits, lang), "shmem", tmp_path)


# ----------------------------------------------------------------------------------------------------------
# 5. disk bomb
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", languages(every=False))
def test_disk_bomb(verifier, kits, lang, tmp_path):
    kit = kit_of(kits, lang)
    # one 200 MiB file (max_file_mb=16), and 25 files of 8 MiB (workdir_mb=128); 8 MiB fits
    small, one, many = sandboxed(verifier, kit, ("disk", 1, 8), ("disk", 1, 200), ("disk", 25, 8))
    assert ran_to_end(small) == ["wrote 8"]
    for report in (one, many):
        said = lines_of(report.stdout)
        assert "wrote 200" not in said and END not in said, said
        assert report.exit_code != 0 or report.signal is not None, report
    assert machine_healthy()
    for i, (count, mib) in enumerate(((1, 200), (25, 8))):
        host = host_ran_to_end(on_host(kit, tmp_path / str(i), "disk", count, mib))
        assert host == ["wrote 200"]


# ----------------------------------------------------------------------------------------------------------
# 6. two programs of one batch meeting on a socket or in shared memory
# ----------------------------------------------------------------------------------------------------------
def overlapping(listen_lines: list[str], dial_line: str) -> bool:
    """Whether the dialer tried while the listener listened (``listening T`` and ``nobody T``, or
    ``planted T`` and ``removed T``; ``unreachable T0 T1`` or ``missing T0 T1``: epoch milliseconds)."""
    listening, nobody = int(listen_lines[0].split()[1]), int(listen_lines[1].split()[1])
    _, t0, t1 = dial_line.split()
    return int(t0) < nobody and listening < int(t1)


@pytest.mark.parametrize("lang", languages(every=False))
def test_unix_socket_between_programs(verifier, kits, lang, tmp_path):
    kit = kit_of(kits, lang)
    token = uuid.uuid4().hex[:16]
    abstract = lang in ABSTRACT_SOCKETS
    name = f"@rk-ipc-{token}" if abstract else f"/tmp/rk-ipc-{token}.sock"
    for _attempt in range(3):  # the two windows must overlap; a loaded machine may start one late
        listener, dialer = sandboxed(verifier, kit, ("listen", name, WAIT_MS), ("dial", name, WAIT_MS))
        (dialed,) = ran_to_end(dialer)
        assert dialed.startswith("unreachable "), dialed
        if not abstract:  # no /tmp in the sandbox: there is no path both could name
            assert lines_of(listener.stdout)[0].startswith("cannot listen"), listener
            break
        heard = ran_to_end(listener)
        assert heard[0].startswith("listening ") and heard[1].startswith("nobody "), heard
        if overlapping(heard, dialed):
            break
    else:
        pytest.fail(f"the listener and the dialer never ran at the same time: {heard} {dialed}")
    # the leaky stand-in: both on the host, at the same time
    a = host_start(kit, tmp_path / "a", "listen", name, WAIT_MS)
    b = host_start(kit, tmp_path / "b", "dial", name, WAIT_MS)
    assert host_ran_to_end(host_finish(b, tmp_path / "b"))[0].startswith("dialed "), name
    heard = host_ran_to_end(host_finish(a, tmp_path / "a"))
    assert heard[0].startswith("listening ") and heard[1] == "accepted hello", heard


def test_sysv_shared_memory_between_programs(verifier, kits, tmp_path):
    kit = kit_of(kits, "c")
    key, secret = random.randrange(1, 2**30), f"rk-secret-{uuid.uuid4().hex}"
    try:
        for _attempt in range(3):  # as above: the two windows must overlap
            planter, harvester = sandboxed(
                verifier, kit, ("shmput", key, secret, WAIT_MS), ("shmget", key, WAIT_MS)
            )
            planted = ran_to_end(planter)
            assert planted[0].startswith("planted ") and planted[1].startswith("removed "), planted
            (found,) = ran_to_end(harvester)
            assert found.startswith("missing "), found
            if overlapping(planted, found):
                break
        else:
            pytest.fail(f"the planter and the harvester never ran at the same time: {planted} {found}")
        # the leaky stand-in: on the host, the harvester finds it
        a = host_start(kit, tmp_path / "a", "shmput", key, secret, WAIT_MS)
        b = host_start(kit, tmp_path / "b", "shmget", key, WAIT_MS)
        assert host_ran_to_end(host_finish(b, tmp_path / "b")) == [f"found {secret}"]
        a.kill()  # its wait is over (the segment goes below)
        assert host_finish(a, tmp_path / "a").lines[0].startswith("planted ")
    finally:
        ipc_remove(key)


# ----------------------------------------------------------------------------------------------------------
# 7. a daemon outliving the call
# ----------------------------------------------------------------------------------------------------------
def new_marker() -> str:
    """A ``sleep`` duration of about a minute that names one test's daemon."""
    return f"61.{random.randrange(10**8):08d}"


@pytest.mark.parametrize("lang", languages())
def test_daemon_outliving_the_call(verifier, kits, lang, tmp_path):
    kit = kit_of(kits, lang)
    marker = new_marker()
    (report,) = sandboxed(verifier, kit, ("detach", marker))
    assert ran_to_end(report) == ["detached"]  # the daemon had started
    assert eventually(lambda: marked(marker) == []), marked(marker)
    no_leftovers(verifier)
    # the leaky stand-in: on the host the daemon outlives the kit
    marker = new_marker()
    try:
        assert host_ran_to_end(on_host(kit, tmp_path, "detach", marker)) == ["detached"]
        assert eventually(lambda: marked(marker) != [])
    finally:
        for pid in marked(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# ----------------------------------------------------------------------------------------------------------
# 8. writing outside the working directory
# ----------------------------------------------------------------------------------------------------------
def host_paths_with(token: str, roots: list[str]) -> list[str]:
    """Paths under ``roots`` (the sandbox's own host directories) whose name holds ``token``."""
    found = []
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            found += [os.path.join(dirpath, n) for n in dirs + files if token in n]
    return found


@pytest.mark.parametrize("lang", languages())
def test_writing_outside_the_working_directory(verifier, kits, lang, tmp_path):
    kit = kit_of(kits, lang)
    token = uuid.uuid4().hex
    outside = [f"/tmp/rk-escape-{token}", f"/etc/rk-{token}", f"../rk-{token}"]
    (report,) = sandboxed(verifier, kit, ("write", *outside, f"own-{token}"))
    lines = ran_to_end(report)
    assert [line.split()[:2] for line in lines] == [["refused", p] for p in outside] + [
        ["wrote", f"own-{token}"]  # its own directory it may write
    ], lines
    assert not os.path.exists(outside[0]) and not os.path.exists(outside[1])
    assert host_paths_with(token, [verifier.sandbox._root, verifier.sandbox._runs_dir]) == []
    # the leaky stand-in (not /etc: the host runs as root)
    token = uuid.uuid4().hex
    escape = f"/tmp/rk-escape-{token}"
    try:
        host = host_ran_to_end(on_host(kit, tmp_path, "write", escape, f"../rk-{token}"))
        assert host == [f"wrote {escape}", f"wrote ../rk-{token}"]
        assert os.path.exists(escape) and (tmp_path / f"rk-{token}").exists()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(escape)


# ----------------------------------------------------------------------------------------------------------
# the compilers run in the sandbox too
# ----------------------------------------------------------------------------------------------------------
def readme_lines() -> list[str]:
    with open(README) as f:
        return [line.strip() for line in f if len(line.strip()) >= 12]


def host_compile(lang: str, code: str, folder) -> subprocess.CompletedProcess:
    """Compiles ``code`` on the host with the language's own command (the leaky stand-in), in ``folder``."""
    program = TOOLCHAINS[lang].stdio(code, MEMORY_MB)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / program.source).write_text(program.text)
    env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": str(folder), "TMPDIR": str(folder), **program.env}
    return subprocess.run(
        program.compile, cwd=folder, env=env, capture_output=True, text=True, timeout=4 * ROOM_S
    )


def score(verifier, lang: str, code: str, expected: str):
    record = Record(
        prompt="Print the answer.",
        completion=f"```{lang}\n{code}\n```\n",
        reference={"inputs": [""], "outputs": [expected], "language": lang},
    )
    return verifier.score_batch([record])[0]


INCLUDES = {
    "cpp-include": ("cpp", cpp_include),
    "c-incbin": ("c", c_incbin),
    "cpp-incbin": ("cpp", c_incbin),
    "rust-include_str": ("rust", rust_include_str),
}


@pytest.mark.parametrize("attack", list(INCLUDES))
def test_compiler_includes_the_checkout(verifier, attack, tmp_path):
    lang, make = INCLUDES[attack]
    code, lines = make(README), readme_lines()
    with open(README) as f:
        readme = f.read()
    result = score(verifier, lang, code, readme)
    assert result.reward == 0.0
    assert result.details["status"] == "compile_error", result.details
    assert any(s in result.error for s in ("No such file", "file not found", "couldn't read")), result.error
    assert not [line for line in lines if line in result.error], result.error
    # the leaky stand-in: the host's compiler reads the README
    compiled = host_compile(lang, code, tmp_path)
    if attack == "cpp-include":  # not C++: the errors quote its lines
        assert compiled.returncode != 0
        assert [line for line in lines if line in compiled.stderr], compiled.stderr[:2000]
    else:  # embedded: the program prints it
        assert compiled.returncode == 0, compiled.stderr
        printed = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True, timeout=ROOM_S)
        assert printed.stdout.rstrip("\0") == readme


def test_template_bomb(verifier):
    # 2**depth distinct instantiations: depth 10 compiles at once and prints 1024; depth 40 never ends (it
    # fills its memory limit or runs out of time)
    small = score(verifier, "cpp", template_bomb(10), "1024")
    assert small.reward == 1.0, (small.error, small.details)
    t0 = time.monotonic()
    bomb = score(verifier, "cpp", template_bomb(40), "0")
    elapsed = time.monotonic() - t0
    assert bomb.reward == 0.0 and bomb.details["status"] == "compile_error", (bomb.error, bomb.details)
    assert "ran out of time" in bomb.error or "memory" in bomb.error, bomb.error
    assert bomb.details["compile"]["wall"] <= COMPILE_TIMEOUT + 1.0, bomb.details
    assert elapsed < COMPILE_TIMEOUT + HANG_S  # a hang guard: not stopped, it runs for minutes
    # the next compilation and run still work
    after = score(verifier, "cpp", template_bomb(11), "2048")
    assert after.reward == 1.0, (after.error, after.details)
    no_leftovers(verifier)
    assert machine_healthy()
