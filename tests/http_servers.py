"""Real HTTP servers for the tests of what rewardlab calls over HTTP (reward servers, judges, the hub): the
standard library's, in a thread, answering JSON. Shared by test_remote_reward, test_judge_remote, test_hub."""

from __future__ import annotations

import contextlib
import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from typing import Any


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
