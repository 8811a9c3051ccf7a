"""The demo learns on every seed: each gains >= 15 points of held-out greedy pass@1 with <= 5% truncated."""

from __future__ import annotations

import json

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
def test_demo_learns_on_three_seeds(tmp_path):
    result = demo.main(["--out", str(tmp_path), "--seeds", "0,1,2", "--jobs", "2"])
    for seed in result["seeds"]:
        assert seed["gain_points"] >= 15, json.dumps(seed)
        assert seed["heldout_truncated_after"] <= 0.05, json.dumps(seed)
    assert (tmp_path / "checkpoint").read_text().strip() == result["checkpoint"]
