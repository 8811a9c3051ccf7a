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
"""Forks until the process limit refuses: prints 15 under a limit of 16 processes."""
FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
DAEMON = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(60)\n"
    "    os._exit(0)\n"
    "time.sleep(0.2)\n"
)
"""A double-forked, setsid-ed daemon meant to outlive its program (append what the program then does)."""


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
