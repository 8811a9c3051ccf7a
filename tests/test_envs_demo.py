"""The tool-use demo learns on every seed: +20 points of held-out accuracy with the calculator, tool calls
rising, within 5 minutes for the three seeds."""

from __future__ import annotations

import json

import pytest

from rewardlab.demos import tools as demo


def test_demonstrations_mask_the_tool_output():
    row = {"prompt": "123*456=", "reference": "56088"}
    prompt, segments = demo.demonstration(row, use_tool=True)
    assert prompt == "123*456="
    assert segments == [("<calc>123*456</calc>", True), ("=56088;", False), ("\\boxed{56088}", True)]
    assert demo.demonstration(row, use_tool=False)[1] == [("\\boxed{56088}", True)]


def test_report_takes_medians(tmp_path):
    def stage(acc, without, rate):
        return {"accuracy_with_tools": acc, "accuracy_without_tools": without, "tool_call_rate": rate}

    rows = [
        {
            "seed": s,
            "before": stage(b, 0.0, 0.5),
            "after": stage(a, 0.0, 1.0),
            "gain_points": 100 * (a - b),
            "rl_episodes_per_s": 100.0,
        }
        for s, b, a in [(0, 0.3, 0.7), (1, 0.35, 0.6), (2, 0.2, 0.9)]
    ]
    result = demo.report(rows, tmp_path)
    assert result["median"]["after/accuracy_with_tools"] == 0.7
    assert result["min_gain_points"] == pytest.approx(25.0)
    assert json.loads((tmp_path / "summary.json").read_text())["median_gain_points"] == pytest.approx(40.0)


@pytest.mark.slow
def test_tool_use_is_learned_on_three_seeds(tmp_path):
    result = demo.main(["--out", str(tmp_path), "--seeds", "0,1,2"])
    for seed in result["seeds"]:
        before, after = seed["before"], seed["after"]
        assert seed["gain_points"] >= 20, json.dumps(seed)
        assert after["tool_call_rate"] > before["tool_call_rate"] + 0.2, json.dumps(seed)
        assert after["accuracy_without_tools"] <= 0.05, json.dumps(
            seed
        )  # the gain is the tool's, not arithmetic
