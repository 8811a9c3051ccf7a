"""Hostile programs and host checks shared by the code verifier's sandbox tests and the python tool's
(tests/test_code_sandbox.py, tests/test_envs_safety.py): one definition of each attack."""

from __future__ import annotations

import os
import subprocess
from typing import Any

BOUNDED_FORKS = (
    "import os, time\nn = 0\n"
    "for _ in range(40):\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError:\n"
    "        break\n"
    "    if pid == 0:\n"
    "        time.sleep(5)\n"
    "        os._exit(0)\n"
    "    n += 1\n"
    "print(n)\n"
)
"""Forks until the process limit refuses: prints 15 under a limit of 16 processes. The count does not depend on
the children's sleep outlasting the forks: a child that has exited stays a zombie (the program never reaps it),
and a zombie holds its slot under RLIMIT_NPROC all the same."""
FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
DAEMON = (
    "import os, time\n"
    "_r, _w = os.pipe()\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        os.write(_w, b'up')\n"
    "        time.sleep(60)\n"
    "    os._exit(0)\n"
    "os.read(_r, 2)\n"
)
"""A double-forked, setsid-ed daemon meant to outlive its program (append what the program then does); the
program goes on once the daemon runs (a pipe, not a sleep: the order holds on a loaded machine)."""


def secret_hunter(roots: list[str]) -> str:
    """Source of ``secret()``: every way a program might find a string ``rk-secret-<32 hex>`` that the
    harness holds: files under ``roots`` (the dataset, the working directory, temp dirs, the repository),
    then every object and frame of its own interpreter; ``"not found"`` when none has it."""
    return f"""
import gc, os, re, sys
PAT = re.compile(r"rk-secret-[0-9a-f]{{32}}")
def search_text(text):
    m = PAT.search(text)
    return m.group(0) if m else None
def secret():
    for root in {roots!r}:
        try:
            for dirpath, _, files in os.walk(root):
                for name in files[:200]:
                    try:
                        with open(os.path.join(dirpath, name), errors="ignore") as f:
                            found = search_text(f.read(1 << 20))
                        if found:
                            return found
                    except Exception:
                        pass
                if dirpath.count("/") > 4:
                    break
        except Exception:
            pass
    for obj in gc.get_objects():
        for value in (obj.values() if isinstance(obj, dict) else [obj]):
            if isinstance(value, str):
                found = search_text(value)
                if found:
                    return found
    f = sys._getframe()
    while f:
        found = search_text(repr(f.f_locals))
        if found:
            return found
        f = f.f_back
    return "not found"
"""


def native_code_verifier(limits: dict) -> Any:
    """A code verifier whose sandbox started on the native backend with a read-only root; skips (as a
    machine that cannot have it) elsewhere."""
    import pytest

    from rewardlab.verifiers import get_verifier

    v = get_verifier("code", **limits)
    v.sandbox.start()
    if v.sandbox.info.get("backend") != "native" or not v.sandbox.info.get("read_only_root"):
        v.close()
        pytest.skip("this machine cannot have it: the native backend (root and namespaces)")
    return v


def sandbox_processes(sandbox: Any) -> list[str]:
    """Processes still running under the private uid of one of ``sandbox``'s program slots (the warm
    judges, which run the trusted tests, have uids of their own above those)."""
    base, n_slots = sandbox._uid_base, sandbox.parallelism
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if base <= uid < base + n_slots:
            found.append(pid)
    return found


def machine_healthy() -> bool:
    return subprocess.run(["true"], timeout=30).returncode == 0


# ----------------------------------------------------------------------------------------------------------
# What one program may learn of another (issue 30). Each attack is a pair of programs: ``plant`` leaves a
# secret where a later or concurrent program might find it, ``harvest`` prints the secret iff it found it.
# ----------------------------------------------------------------------------------------------------------

MEMORY_PAGES = """
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
_libc.sbrk.restype = ctypes.c_void_p
_libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_libc.write.restype = ctypes.c_ssize_t
PAGE = 4096
def memory_pages():
    # This process's heap, page by page, found without /proc: write() of an unmapped page to a pipe
    # fails with EFAULT instead of crashing. The break (sbrk(0)) is the heap's top; walk down from it
    # (malloc'ed buffers, e.g. a supervisor's output buffer, live there), then around a few objects'
    # addresses (pymalloc arenas are mapped elsewhere).
    r, w = os.pipe()
    def read(addr):
        if _libc.write(w, addr, PAGE) != PAGE:
            return None
        return os.read(r, PAGE)
    top = _libc.sbrk(0) // PAGE * PAGE
    misses, addr = 0, top - PAGE
    while misses < 64 and addr > top - (512 << 20):
        page = read(addr)
        misses = misses + 1 if page is None else 0
        if page is not None:
            yield page
        addr -= PAGE
    for obj in (PAGE, "x", memory_pages, os):
        base = id(obj) // PAGE * PAGE
        for a in range(base - (2 << 20), base + (2 << 20), PAGE):
            page = read(a)
            if page is not None:
                yield page
"""


def memory_harvest() -> str:
    """Prints the first ``rk-secret-...`` line of this process's memory (what a program forked from a
    process that once held another program's output would find), or ``not found``."""
    return (
        MEMORY_PAGES
        + """
import re
PAT = re.compile(rb"(rk-secret-[0-9a-f]{32})x{64}")
found = "not found"
for page in memory_pages():
    m = PAT.search(page)
    if m:  # the answer's start: the rest is rebuilt (an attacker knows the answer's shape)
        found = m.group(1).decode() + "x" * 4000
        break
print(found)
"""
    )


def secret_answer(secret: str) -> str:
    """An answer of about 4 KB (outputs this size survived in the supervisor's freed buffers in every
    round; 1 KB ones in some)."""
    return secret + "x" * 4000


def memory_plant(secret: str) -> str:
    return f"print({secret_answer(secret)!r})\n"


_IPC = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 64)]
IPC_CREAT, IPC_NOWAIT, IPC_RMID, SHM_RDONLY = 0o1000, 0o4000, 0, 0o10000
SHM_STAT, SHM_INFO, SETVAL, GETVAL = 13, 14, 16, 12
def attached(shm):
    addr = libc.shmat(shm, None, SHM_RDONLY)
    return None if addr in (None, ctypes.c_void_p(-1).value) else addr
"""


def ipc_plant(key: int, secret: str, megabytes: int = 0) -> str:
    """Leaves ``secret`` in a System V shared-memory segment, a message queue and (as a number) a
    semaphore, all of key ``key``, and exits without removing them. With ``megabytes``, the segment is
    that large and every page is touched (memory that would outlive the program)."""
    size = max(4096, megabytes << 20)
    return (
        _IPC
        + f"""
shm = libc.shmget({key}, {size}, IPC_CREAT | 0o666)
addr = libc.shmat(shm, None, 0)
ctypes.memset(addr, 1, {size})
ctypes.memmove(addr, {secret.encode()!r}, {len(secret)})
q = libc.msgget({key}, IPC_CREAT | 0o666)
libc.msgsnd(q, ctypes.byref(Msg(1, {secret.encode()!r})), 64, IPC_NOWAIT)
sem = libc.semget({key}, 1, IPC_CREAT | 0o666)
libc.semctl(sem, 0, SETVAL, ctypes.c_int(4242))
print("planted", shm, q, sem)
"""
    )


def ipc_harvest(key: int) -> str:
    """Prints whatever of a planted secret it finds in System V IPC: by key, and by enumerating every
    segment; then removes what it found (so that the host control leaves nothing behind)."""
    return (
        _IPC
        + f"""
import re
found = []
buf = ctypes.create_string_buffer(512)
ids = {{libc.shmget({key}, 0, 0)}}
top = libc.shmctl(0, SHM_INFO, buf)
ids |= {{libc.shmctl(i, SHM_STAT, buf) for i in range(max(top, -1) + 1)}}
for shm in sorted(i for i in ids if i >= 0):
    addr = attached(shm)
    if addr:
        m = re.search(rb"rk-secret-[0-9a-f]{{32}}", ctypes.string_at(addr, 64))
        if m:
            found.append(m.group(0).decode())
            libc.shmctl(shm, IPC_RMID, None)
q = libc.msgget({key}, 0)
if q >= 0:
    msg = Msg()
    if libc.msgrcv(q, ctypes.byref(msg), 64, 0, IPC_NOWAIT) > 0:
        found.append(msg.mtext.decode())
    libc.msgctl(q, IPC_RMID, None)
sem = libc.semget({key}, 0, 0)
if sem >= 0:
    found.append("semaphore=" + str(libc.semctl(sem, 0, GETVAL)))
    libc.semctl(sem, 0, IPC_RMID)
print(" ".join(found) or "not found")
"""
    )


def ipc_remove(key: int) -> None:
    """Removes the segment, queue and semaphore of ``key`` from the host (after a host control)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for get, ctl in ((libc.shmget, libc.shmctl), (libc.msgget, libc.msgctl), (libc.semget, libc.semctl)):
        ident = get(key, 0, 0)
        if ident >= 0:
            if ctl is libc.semctl:
                ctl(ident, 0, 0)
            else:
                ctl(ident, 0, None)


def socket_listener(name: str, wait: float = 1.5) -> str:
    """Binds the abstract unix socket ``name`` and prints what it hears within ``wait`` seconds."""
    return f"""
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\\0" + {name!r})
s.settimeout({wait})
try:
    print("heard " + s.recv(100).decode())
except OSError:
    print("heard nothing")
"""


def socket_talker(name: str, secret: str, wait: float = 1.5) -> str:
    """Sends ``secret`` to the abstract unix socket ``name`` as soon as someone listens there."""
    return f"""
import socket, time
end = time.monotonic() + {wait}
while True:
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto({secret.encode()!r}, "\\0" + {name!r})
        print("sent")
        break
    except OSError:
        if time.monotonic() > end:
            print("nobody listens")
            break
        time.sleep(0.05)
"""


def host_details(needles: list[str]) -> str:
    """Prints the indices of the ``needles`` (host paths) that the program finds about itself: its argv,
    the runner's globals, its modules, frames and objects, its environment, and its heap; and
    ``uid range`` where a dictionary it can reach holds the sandbox's uid range; else ``clean``.
    The program holds each needle as its first three characters, length and hash only (the needle itself
    in its code would be found in its own memory)."""
    import hashlib

    hashed = [(n[:3], len(n), hashlib.sha256(n.encode()).hexdigest()) for n in needles]
    return (
        MEMORY_PAGES
        + f"""
import gc, hashlib, sys
HASHED = {hashed!r}
def hits(data):
    found = set()
    for i, (head, size, digest) in enumerate(HASHED):
        start = data.find(head.encode())
        while start >= 0:
            if hashlib.sha256(data[start:start + size]).hexdigest() == digest:
                found.add(i)
                break
            start = data.find(head.encode(), start + 1)
    return found
texts = [repr(sys.argv), repr(getattr(sys, "orig_argv", "")), sys.executable, repr(sys.path)]
texts += [repr(dict(os.environ)), os.getcwd()]
texts += [repr(vars(m)) for m in list(sys.modules.values()) if m is not None]
texts += [repr(obj) for obj in gc.get_objects() if isinstance(obj, (dict, list, tuple))]
f = sys._getframe()
while f:
    texts.append(f.f_code.co_filename)
    f = f.f_back
found = hits("\\n".join(texts).encode("utf-8", "replace"))
for page in memory_pages():
    found |= hits(page)
found = sorted(found)
dicts = [o for o in gc.get_objects() if isinstance(o, dict)]  # (gc does not track dicts of plain values)
dicts += [v for m in list(sys.modules.values()) for v in vars(m).values() if isinstance(v, dict)]
if any("uid_base" in d for d in dicts):
    found.append("uid range")
print(found or "clean")
"""
    )


PACKAGE_DIR_NAMES = ("site-packages", "dist-packages", "node_modules", "nltk_data", "huggingface")


def package_dirs_listing(top: str = "/", allowed: str = "/site-packages") -> str:
    """Prints every non-empty package directory (any interpreter's) or hub cache it can list, walking from
    ``top`` (the allowed packages' own directory excepted); else ``none``."""
    return f"""
import os
NAMES = {PACKAGE_DIR_NAMES!r}
found = []
for root, dirs, files in os.walk({top!r}):
    if root.startswith(("/proc", "/sys", "/dev")) or root.count("/") > 9:
        dirs[:] = []
        continue
    for d in list(dirs):
        path = os.path.join(root, d)
        if d in NAMES and path != {allowed!r}:
            dirs.remove(d)
            try:
                if os.listdir(path):
                    found.append(path)
            except OSError:
                pass
print(found or "none")
"""
