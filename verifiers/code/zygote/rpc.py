"""The calls between judge and candidate: the candidate's server and the judge's channel to it.

The candidate process loads the solution and answers the judge's requests (``call``, ``getattr``,
``iter``, ``next``, ``len``) on objects named by handles; every answer is plain data (``wire.py``) or an
error as one line. The judge's :class:`Channel` sends calls with literal arguments ahead as one batch
(``analysis.prefetch_calls``), so that a test of N asserts costs one round trip.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
import time

from . import wire
from .wire import RemoteRef, dec, enc, last_line, recv, send


def run_candidate(code: str, fd: int) -> int:
    """Loads the solution, then serves the judge's calls until it hangs up."""
    sock = socket.socket(fileno=fd)
    send, recv = wire.send, wire.recv  # bound now: the solution may rebind module globals, not these locals
    globs: dict = {"__name__": "__candidate__", "__builtins__": builtins}
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    try:
        exec(compile(code, "<solution>", "exec"), globs)
    except BaseException as exc:
        send(sock, ["load_error", type(exc).__name__, last_line(exc)])
        return 0
    send(sock, ["ready", _global_names(globs)])
    handle = _handler(globs)
    _exit_on_hang_up(sock, fd)

    def reply(answer: list) -> None:
        try:
            send(sock, answer)
        except RecursionError:
            send(sock, ["err", "RecursionError", "return value nested too deeply"])

    while True:
        try:
            req = recv(sock)
        except (EOFError, OSError):
            return 0
        if req and req[0] == "batch":  # prefetched calls: one reply each, streamed as they finish
            for call in req[1]:
                reply(handle(["call", *call]))
        else:
            reply(handle(req))


def _global_names(globs: dict) -> dict:
    """What the judge learns of the solution's globals: their names, and which are modules (by name)."""
    names = {}
    for name, value in list(globs.items()):
        if name.startswith("__"):
            continue
        if type(value).__name__ == "module":
            names[name] = ["module", getattr(value, "__name__", name)]
        else:
            names[name] = ["object"]
    return names


def _exit_on_hang_up(sock: socket.socket, fd: int) -> None:
    """When the judge is done (for instance after a failed assert) while this process still computes a
    prefetched call, the judge's hang-up raises SIGIO: exit at once instead of running to the time
    limit. Only a speed-up: the slot's wall-clock limit stays the bound."""

    def on_io(signum, frame):
        with contextlib.suppress(BlockingIOError, InterruptedError):
            if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                os._exit(0)

    with contextlib.suppress(OSError, ValueError):
        signal.signal(signal.SIGIO, on_io)
        fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)


def _handler(globs: dict):
    """The candidate's answer to one request: a handle names a global of the solution (by name) or an
    object it returned earlier (by number); the answer goes back as wire data, an exception as its line."""
    refs: dict = {}

    def resolve(key):
        if isinstance(key, str):
            return globs[key]
        return refs[key]

    def build(name: str, attrs: dict):
        cls = globs[name]  # the solution's class of that name (the prompt's, unless it redefined it)
        obj = cls.__new__(cls)
        obj.__dict__.update(attrs)
        return obj

    def handle(req: list) -> list:
        try:
            op = req[0]
            target = resolve(req[1])
            if op == "call":
                args = dec(req[2], resolve, build)
                kwargs = dec(req[3], resolve, build)
                value = target(*args, **kwargs)
            elif op == "getattr":
                value = getattr(target, req[2])
            elif op == "iter":
                value = list(target)
            elif op == "next":
                value = next(target)
            elif op == "len":
                value = len(target)
            else:
                raise ValueError(f"bad op {op!r}")
            return ["ok", enc(value, refs)]
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the judge as data
            kind = type(exc)
            return ["err", kind.__name__ if kind.__module__ == "builtins" else "Exception", last_line(exc)]

    return handle


class RemoteDied(Exception):
    """The candidate process ended (timeout, memory, exit) while the judge waited for it."""


class _RemoteError(Exception):
    """A non-builtin exception raised by the candidate."""


class Channel:
    """The judge's end of the socket. Calls with literal arguments that the tests make unconditionally
    are sent ahead in one ``batch`` (``analysis.prefetch_calls``); their replies stream back in order and are
    used when the tests reach those calls, so a test of N asserts costs one round trip instead of N."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.deadline = time.monotonic() + timeout
        self.dead = False
        self.planned: dict[tuple, list[int]] = {}  # call key -> indices into the batch, in order
        self.batch_size = 0
        self.batch_read = 0
        self.batch_replies: dict[int, list] = {}

    def _read(self) -> list:
        try:
            self.sock.settimeout(max(0.01, self.deadline - time.monotonic()))
            return recv(self.sock)
        except TimeoutError:
            self.dead = True
            raise RemoteDied("timeout") from None
        except (EOFError, OSError) as exc:
            self.dead = True
            raise RemoteDied(str(exc)) from None

    def prefetch(self, calls: list[tuple]) -> None:
        """Sends ``calls`` ahead as one batch (keys as :func:`analysis.prefetch_calls` makes them)."""
        if not calls or self.dead:
            return
        try:
            send(self.sock, ["batch", [[ref, json.loads(a), json.loads(k)] for ref, a, k in calls]])
        except OSError:
            return
        for i, call in enumerate(calls):
            self.planned.setdefault(call, []).append(i)
        self.batch_size = len(calls)

    def _batch_reply(self, index: int) -> list:
        while index not in self.batch_replies:
            if self.dead:
                raise RemoteDied("candidate is gone")
            self.batch_replies[self.batch_read] = self._read()
            self.batch_read += 1
        return self.batch_replies.pop(index)

    def _drain(self) -> None:
        """Reads the batch replies still on the way: any other request is answered after them."""
        while self.batch_read < self.batch_size:
            self.batch_replies[self.batch_read] = self._read()
            self.batch_read += 1

    def call(self, ref, args: tuple, kwargs: dict):
        """Calls the candidate's ``ref``: the batch's reply if this call was sent ahead, else a round trip."""
        enc_args, enc_kwargs = enc(list(args), None), enc(kwargs, None)
        key = (ref, json.dumps(enc_args), json.dumps(enc_kwargs))
        if self.planned.get(key):
            if self.dead:
                raise RemoteDied("candidate is gone")
            return self._result(self._batch_reply(self.planned[key].pop(0)))
        return self.request(["call", ref, enc_args, enc_kwargs])

    def request(self, req: list):
        """One round trip, after the batch replies still on the way; returns the decoded answer."""
        if self.dead:
            raise RemoteDied("candidate is gone")
        self._drain()
        try:
            send(self.sock, req)
        except OSError as exc:
            self.dead = True
            raise RemoteDied(str(exc)) from None
        return self._result(self._read())

    def _result(self, reply: list):
        """The answer's value, or its exception raised here (a builtin one as itself)."""
        if reply[0] == "ok":
            return dec(reply[1], self.ref)
        kind = getattr(builtins, str(reply[1]), None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            raise kind(reply[2])
        raise _RemoteError(reply[2])

    def ref(self, key) -> RemoteRef:
        """A handle on the candidate's object ``key``."""
        return RemoteRef(self, key)
