"""``rewardlab serve --ray-serve --replicas 2`` (its own local Ray instance, in a subprocess): the local
engine's rewards through rewardlab's and OpenRLHF's protocols, requests spread over both replicas (each
replica's ``/health`` names its process), and SIGTERM deleting the application and exiting 0."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from http_servers import stop_process  # tests/http_servers.py (pytest puts tests/ on the path)

pytest.importorskip("ray.serve", reason="Ray Serve is optional: pip install 'rewardlab[ray]'")

from rewardlab.scoring import score_records  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ROWS = [{"id": i, "completion": f"so \\boxed{{{i % 7}}}", "reference": str(i % 5)} for i in range(40)]
ROWS[3]["completion"] = "no answer here"


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n") and time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line += os.read(proc.stdout.fileno(), 1)
    return line.decode()


@pytest.mark.slow
def test_two_replicas_answer_as_local_scoring(free_port):
    command = [sys.executable, "-m", "rewardlab.cli", "serve", "--verifier", "math", "--ray-serve"]
    command += ["--replicas", "2", "--workers", "1", "--timeout", "5", "--port", str(free_port)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    try:
        line = _read_line(proc, timeout=120)
        assert re.match(
            rf"rewardlab serve: math at http://127\.0\.0\.1:{free_port} \(Ray Serve, 2 replicas", line
        ), (
            line,
            proc.poll(),
        )
        url = f"http://127.0.0.1:{free_port}"
        local = score_records(ROWS, "math", workers=1, timeout=5)
        remote = score_records(ROWS, f"http:{url}/score", config={"batch_size": 4, "concurrency": 4})
        assert [r.reward for r in remote] == [r.reward for r in local]
        assert [r.error for r in remote] == [f"reward server: {r.error}" if r.error else None for r in local]
        assert [json.dumps(r.details) for r in remote] == [json.dumps(r.details) for r in local]
        remote = score_records(ROWS, f"http:{url}/get_reward", config={"protocol": "openrlhf"})
        assert [r.reward for r in remote] == [r.reward for r in local]
        # Both replicas take requests (on a loaded machine the second may come up a while after the first).
        pids: set[int] = set()
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            pids |= {httpx.get(f"{url}/health", timeout=10).json()["pid"] for _ in range(20)}
        assert len(pids) == 2, pids
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        stop_process(proc)
