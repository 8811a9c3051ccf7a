"""What the zygote was told and what it found it may do: the two dictionaries its modules share.

``CONFIG`` is the sandbox's configuration (``sandbox.py``'s ``zconf``), read once from the descriptor at
start-up; a worker keeps only what it needs (its own uid, no uid range). ``STATE`` is what start-up found:
the isolation the kernel gave (namespaces, chroot, private uids) and where working directories go; the
parent gets it in the zygote's hello. Both are filled in place, never rebound, so that every module sees
the same two objects.
"""

from __future__ import annotations

CONFIG: dict = {}
STATE = {
    "netns": False,
    "pidns": False,
    "chroot": False,
    "setuid": False,
    "bwrap": False,
    "program_ns": False,
}
