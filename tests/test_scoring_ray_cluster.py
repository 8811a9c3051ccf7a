"""``--engine ray --ray-address``: a cluster of two Ray nodes (both on this machine) shares the rows."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scored_rows import untimed  # tests/scored_rows.py

pytest.importorskip("ray", reason="Ray is optional: pip install 'rewardlab[ray]'")

RAY = shutil.which("ray") or str(Path(sys.executable).parent / "ray")


def _ray(*args: str) -> None:
    subprocess.run([RAY, *args], check=True, capture_output=True, timeout=180)


@pytest.fixture
def two_node_cluster(tmp_path, free_port, monkeypatch):
    """`ray start --head` with one CPU, and a second node with one CPU joining it."""
    # Ray >= 2.60 turns token authentication on for `ray start --head`, and a node joining it then fails
    # ("InvalidAuthToken"); a local test cluster needs none. Every ray command and driver below inherits it.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    port = free_port
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus", "1", "--disable-usage-stats"]
    _ray(
        "start",
        "--head",
        "--port",
        str(port),
        "--node-ip-address",
        "127.0.0.1",
        "--include-dashboard=false",
        *common,
    )
    try:
        _ray("start", "--address", address, "--node-ip-address", "127.0.0.1", *common)
        yield address
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)


@pytest.mark.slow
def test_a_second_node_joins_and_scores(two_node_cluster, tmp_path):
    from rewardlab.cli import main

    rows = [{"id": i, "completion": f"\\boxed{{{i % 7}}}", "reference": str(i % 5)} for i in range(2000)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = f"""
import json, sys
import ray
ray.init(address={two_node_cluster!r}, log_to_driver=False)
from rewardlab.scoring import Scorer
from rewardlab.scoring.io import RowJob, input_items
with Scorer("math", workers=2, engine="ray") as scorer:
    outputs = list(scorer.iter_outputs(input_items({str(src)!r}, None), RowJob()))
    print(json.dumps({{"nodes": len(set(scorer.ray_nodes)), "actors": len(scorer.ray_nodes), "rows": len(outputs)}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"nodes": 2, "actors": 2, "rows": 2000}
    # the CLI joins the same cluster and writes what the local engine writes
    cli = [sys.executable, "-m", "rewardlab.cli", "score", str(src), "--verifier", "math", "--no-progress"]
    subprocess.run(
        [*cli, "-o", str(tmp_path / "ray.jsonl"), "--engine", "ray", "--ray-address", two_node_cluster],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert main(["score", str(src), "-o", str(tmp_path / "local.jsonl"), "--verifier", "math"]) == 0
    assert untimed(tmp_path / "ray.jsonl") == untimed(tmp_path / "local.jsonl")
