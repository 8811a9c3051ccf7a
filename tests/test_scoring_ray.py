"""``engine="ray"`` on a local 2-CPU Ray instance gives exactly the local engine's output."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray", reason="Ray is optional: pip install 'rewardkit[ray]'")

from rewardkit.scoring import score_file, score_records  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_engine_equals_local_engine(local_ray, tmp_path):
    rows = [{"id": i, "completion": f"so \\boxed{{{i % 7}}}", "reference": str(i % 5)} for i in range(300)]
    rows[5]["verifier"] = "nope"
    rows[9]["completion"] = "no answer here"
    rows[11]["completion"] = "\\boxed{" + "+".join(f"x^{{{k}}}" for k in range(10_000)) + "}"
    local = score_records(rows, "math", workers=2, timeout=3)
    remote = score_records(rows, "math", workers=2, timeout=3, engine="ray")
    assert remote == local
    assert local[11].error == "timeout" and local[5].error == "unknown verifier: 'nope'"

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows[:40]) + "not json\n")
    score_file(src, tmp_path / "local.jsonl", "math", workers=2, timeout=3)
    score_file(src, tmp_path / "ray.jsonl", "math", workers=2, timeout=3, engine="ray")
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
