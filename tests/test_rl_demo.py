"""The demo learns on every seed: each of scripts/demo's 5 gains >= 15 points of held-out greedy pass@1 with <= 5%
truncated, and the evaluation of the median seed runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rewardlab.demos import rl as demo


def test_seed_list_is_parsed_and_checked():
    assert demo.parse_seeds("0, 3,4") == [0, 3, 4]
    with pytest.raises(SystemExit, match="comma-separated integers"):
        demo.parse_seeds("0,x")


def test_report_takes_the_median_seed(tmp_path):
    rows = [
        {
            "seed": s,
            "heldout_pass@1_before": b,
            "heldout_pass@1_after": a,
            "gain_points": 100 * (a - b),
            "heldout_truncated_after": 0.0,
            "checkpoint": f"ckpt-{s}",
        }
        for s, b, a in [(0, 0.4, 0.7), (1, 0.5, 0.6), (2, 0.3, 0.9)]
    ]
    result = demo.report(rows, tmp_path)
    assert result["median_seed"] == 0 and (tmp_path / "checkpoint").read_text().strip() == "ckpt-0"
    assert result["median"]["heldout_pass@1_after"] == 0.7
    assert result["min_gain_points"] == pytest.approx(10.0)


@pytest.mark.slow
def test_scripts_demo_learns_on_every_seed(tmp_path):
    """The README's command itself (CI runs it only here): 5 seeds, then the eval of the median seed."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "DEMO_OUT": str(tmp_path)}
    done = subprocess.run(["bash", str(root / "scripts" / "demo")], env=env, capture_output=True, text=True)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "summary.json").read_text())
    assert [seed["seed"] for seed in result["seeds"]] == [0, 1, 2, 3, 4]
    for seed in result["seeds"]:
        assert seed["gain_points"] >= 15, json.dumps(seed)
        assert seed["heldout_truncated_after"] <= 0.05, json.dumps(seed)
    assert (tmp_path / "checkpoint").read_text().strip() == result["checkpoint"]
    evaluation = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert evaluation["num_problems"] == 200 and evaluation["num_samples"] == 1600
    pass_at = [evaluation["metrics"][f"pass@{k}"]["mean"] for k in (1, 4, 8)]
    assert pass_at == sorted(pass_at) and pass_at[0] > 0, pass_at
