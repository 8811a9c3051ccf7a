"""Real HTTP servers for the tests of what rewardlab calls over HTTP (reward servers, judges, the hub): the
standard library's, in a thread, answering JSON. Shared by test_remote_reward, test_judge_remote, test_hub;
and ``rewardlab view`` in a process (the viewer's browser tests)."""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import select
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


class JSONHandler(http.server.BaseHTTPRequestHandler):
    """A request handler with JSON helpers; subclasses define ``do_GET`` / ``do_POST``."""

    protocol_version = "HTTP/1.1"

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def send_json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.send_raw(code, json.dumps(payload).encode(), headers)

    def send_raw(self, code: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
            self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded server of ``handler`` on a free loopback port; yields its base URL (``http://127.0.0.1:P``)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def stop_process(proc: subprocess.Popen) -> None:
    """Stops a server started in a subprocess (terminate, then kill if it lingers) and closes its pipes."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


@contextlib.contextmanager
def view_server(root: Path, names: set[str]) -> Iterator[tuple[str, dict[str, int]]]:
    """``rewardlab view ROOT`` on a free port, listing the sources ``names``: ``(base_url, {name: id})``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rewardlab.cli", "view", str(root), "--no-browser", "--port", "0"],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        match = re.search(r"at (http://\S+/)", line)
        if not match:
            proc.kill()
            pytest.fail(f"rewardlab view printed {line!r}; stderr:\n{proc.stderr.read()}")
        url = match.group(1)
        with urllib.request.urlopen(url, timeout=10) as response:
            index = response.read().decode()
        sids = {name: int(sid) for sid, name in re.findall(r'<a href="/s/(\d+)">([^<]+)</a>', index)}
        assert set(sids) == names, f"the index lists {sorted(sids)}"
        yield url.rstrip("/"), sids
    finally:
        stop_process(proc)
