"""Where a local web command listens (`rewardlab view`, `rewardlab serve`): the socket is bound before the
server starts, so that the address printed is the one served, and a port in use is one line (exit 2)."""

from __future__ import annotations

import socket

from rewardlab.errors import UserError


def listening_socket(host: str, port: int) -> tuple[socket.socket, str]:
    """A socket bound to ``host:port`` (port 0: a free one) and its URL (``http://host:port``, IPv6 in
    brackets)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return sock, f"http://{shown}:{bound_port}"
