"""How a worker gets its work: one message from the parent with a header and descriptors.

The parent (``sandbox.py``'s ``_launch``) sends a JSON header (the kind of program, its limits) with three
descriptors: where the report goes, a memfd holding the payload (code, or the judge's tests), and the
program's stdin or its socket to the other side. Also whole-descriptor reads and writes.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket


def recv_job(sock: socket.socket) -> tuple[dict, list[int]] | None:
    """The next job (header, descriptors), or ``None`` once the parent has closed the worker's socket."""
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
            break
        except InterruptedError:
            continue
    if not msg:
        return None
    # Received fds take the lowest free numbers (3, 4, ...); move them out of the way of the
    # dup2() calls that place a program's descriptors at 0-4.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds]
    for fd in fds:
        os.close(fd)
    return json.loads(msg), high


def read_fd(fd: int) -> bytes:
    """All of a memfd, from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def write_all(fd: int, data: bytes) -> None:
    """``data`` whole (``os.write`` may write part of it to a pipe)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
