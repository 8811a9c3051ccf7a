"""The wire between judge and candidate: a strict codec of plain values, and handles on the rest.

Messages are length-prefixed JSON where every container is a tagged list, so decoding builds only plain
values (never pickle: the candidate is adversarial): numbers, strings, bytes, lists, tuples, dicts, sets,
ranges. Anything else stays on the candidate's side behind a handle (:class:`RemoteRef` on the judge's
side), and subclasses of the plain types travel as the plain value they hold.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .rpc import Channel


_MAX_MSG = 256 * 1024 * 1024


class Unencodable(Exception):
    """A judge-side value that cannot go to the candidate (only plain values and prompt helpers can)."""


def enc(value, refs: dict | None):
    """The wire form of ``value``. Candidate side (``refs`` given): what is not a plain value is kept in
    ``refs`` and sent as a handle. Judge side (``refs`` None): only plain values and prompt helpers go."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            return ["f", repr(value)]
        return value
    if t is list:
        return ["L", [enc(v, refs) for v in value]]
    if t is tuple:
        return ["T", [enc(v, refs) for v in value]]
    if t is dict:
        return ["D", [[enc(k, refs), enc(v, refs)] for k, v in value.items()]]
    if t is set:
        return ["S", [enc(v, refs) for v in value]]
    if t is frozenset:
        return ["F", [enc(v, refs) for v in value]]
    if t is bytes:
        return ["B", base64.b64encode(value).decode()]
    if t is complex:
        return ["C", repr(value.real), repr(value.imag)]
    if t is range:
        return ["G", value.start, value.stop, value.step]
    if t is RemoteRef:
        return ["R", value._rk_ref]
    # Subclasses of the plain types (Counter, OrderedDict, defaultdict, namedtuple, IntEnum, numpy.float64,
    # or a class whose __eq__ always matches) travel as the plain value they hold, read through the base
    # type's own methods: no override runs, so the judge compares the honest underlying value.
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return enc(float.__float__(value), refs)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return enc(bytes.__add__(b"", value), refs)
    if isinstance(value, tuple):
        return ["T", [enc(tuple.__getitem__(value, i), refs) for i in range(tuple.__len__(value))]]
    if isinstance(value, list):
        return ["L", [enc(list.__getitem__(value, i), refs) for i in range(list.__len__(value))]]
    if isinstance(value, dict):
        return ["D", [[enc(k, refs), enc(v, refs)] for k, v in dict.items(value)]]
    if isinstance(value, frozenset):
        return ["F", [enc(v, refs) for v in frozenset.__iter__(value)]]
    if isinstance(value, set):
        return ["S", [enc(v, refs) for v in set.__iter__(value)]]
    if (
        refs is not None
        and (t.__module__ or "").split(".")[0] == "numpy"
        and getattr(value, "ndim", None) == 0
    ):
        return enc(value.item(), refs)  # numpy scalars compare as Python numbers (arrays stay handles)
    if refs is None:
        return _enc_helper(value, t)
    key = len(refs) + 1  # anything else stays on the candidate side behind a handle
    refs[key] = value
    return ["R", key]


# The prompt's helpers the judge defined for the current sample (see judge.py's _bind_prompt_helpers):
# how the tests' objects built from them travel to the candidate.
HELPER_CLASSES: dict[type, str] = {}  # instances go by value, rebuilt from the candidate's class
HELPER_NAMES: dict[int, str] = {}  # id() of a helper function or class: sent as the candidate's namesake


def _enc_helper(value, t: type):
    """Judge side: an instance of a prompt helper class (by value: class name and attributes), or a helper
    itself (as the candidate's object of that name); anything else cannot go to the candidate."""
    if t in HELPER_CLASSES:
        return ["O", HELPER_CLASSES[t], enc(dict(getattr(value, "__dict__", {})), None)]
    if id(value) in HELPER_NAMES:
        return ["R", HELPER_NAMES[id(value)]]
    raise Unencodable(t.__name__)


def dec(value, resolve, build=None):
    """Decodes a wire value; ``resolve`` turns a handle into an object, ``build`` (candidate side only)
    rebuilds an instance of a prompt helper class sent by value."""
    if not isinstance(value, list):
        return value
    tag = value[0]
    if tag == "L":
        return [dec(v, resolve, build) for v in value[1]]
    if tag == "T":
        return tuple(dec(v, resolve, build) for v in value[1])
    if tag == "D":
        return {dec(k, resolve, build): dec(v, resolve, build) for k, v in value[1]}
    if tag == "S":
        return {dec(v, resolve, build) for v in value[1]}
    if tag == "F":
        return frozenset(dec(v, resolve, build) for v in value[1])
    if tag == "f":
        return float(value[1])
    if tag == "B":
        return base64.b64decode(value[1])
    if tag == "C":
        return complex(float(value[1]), float(value[2]))
    if tag == "G":
        return range(int(value[1]), int(value[2]), int(value[3]))
    if tag == "R":
        return resolve(value[1])
    if tag == "O" and build is not None:
        return build(str(value[1]), dec(value[2], resolve, build))
    raise ValueError(f"bad wire tag {tag!r}")


def send(sock: socket.socket, obj) -> None:
    """One message: its length (8 bytes), then its JSON."""
    data = json.dumps(obj, allow_nan=True).encode()
    sock.sendall(struct.pack("<Q", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes, or ``EOFError`` when the peer hangs up first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket):
    """One message (refused above :data:`_MAX_MSG`), parsed from JSON; its wire values are :func:`dec`'s."""
    (n,) = struct.unpack("<Q", _recv_exact(sock, 8))
    if n > _MAX_MSG:
        raise ValueError("message too large")
    return json.loads(_recv_exact(sock, n))


def last_line(exc: BaseException) -> str:
    """An exception as the one line that travels (``ValueError: bad input``), at most 500 characters."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()[:500]


class RemoteRef:
    """A judge-side handle on a candidate-side object: calls, attributes and iteration go over the wire."""

    __slots__ = ("_rk_chan", "_rk_ref")

    def __init__(self, chan: Channel, key) -> None:
        object.__setattr__(self, "_rk_chan", chan)
        object.__setattr__(self, "_rk_ref", key)

    def __call__(self, *args, **kwargs):
        return self._rk_chan.call(self._rk_ref, args, kwargs)

    def __getattr__(self, name: str):
        return self._rk_chan.request(["getattr", self._rk_ref, name])

    def __iter__(self):
        return iter(self._rk_chan.request(["iter", self._rk_ref]))

    def __len__(self) -> int:
        return self._rk_chan.request(["len", self._rk_ref])

    def __next__(self):
        return self._rk_chan.request(["next", self._rk_ref])

    def __eq__(self, other):
        if type(other) is not RemoteRef:
            return NotImplemented  # lets a prompt helper class's __eq__ compare it (through its attributes)
        return other._rk_ref == self._rk_ref

    def __hash__(self) -> int:
        return hash(("rk-ref", self._rk_ref))

    def __repr__(self) -> str:
        return f"<candidate object {self._rk_ref}>"
