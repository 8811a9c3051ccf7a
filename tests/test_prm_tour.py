"""The PRM tour of docs/prm.md, run as written: the bash block's commands are read from the doc itself (so doc
and test cannot drift), run in a scratch folder that sees the repository's ``data/``, and the trained PRM must
reach the ProcessBench F1 the doc states (within 0.1, and at least 0.65) on the held-out test file.

About 1 minute on 2 cores (training ~20 s; evaluation, scoring and Monte Carlo labelling the rest)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "prm.md"


def tour_section() -> str:
    text = DOC.read_text()
    start = text.index("## Tour")
    return text[start : text.index("\n## ", start + 1)]


def tour_commands() -> list[str]:
    """The commands of the tour's bash block, continuation lines joined, comments dropped."""
    block = re.search(r"```bash\n(.*?)```", tour_section(), re.S)
    assert block, "docs/prm.md's tour has a bash block"
    commands, current = [], ""
    for line in block.group(1).splitlines():
        line = line.strip()
        if not line or (line.startswith("#") and not current):
            continue
        current += line[:-1].strip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            commands.append(current.strip())
            current = ""
    return commands


def documented_f1() -> float:
    found = re.search(r"ProcessBench F1 (0\.\d+)", tour_section())
    assert found, "the tour states the ProcessBench F1 its training command reaches"
    return float(found.group(1))


def test_tour_commands_are_parsed():
    commands = tour_commands()
    assert [c.split()[:3] for c in commands if c.startswith("rewardlab")] == [
        ["rewardlab", "rm", "train"],
        ["rewardlab", "rm", "eval"],
        ["rewardlab", "rm", "score"],
        ["rewardlab", "rm", "label-steps"],
    ]
    assert commands[0].startswith("python -c ")


@pytest.mark.slow
def test_prm_tour_as_documented(tmp_path):
    (tmp_path / "data").symlink_to(ROOT / "data")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    outputs = {}
    for command in tour_commands():
        argv = shlex.split(command)
        if argv[0] == "python":
            argv[0] = sys.executable
        else:
            assert argv[0] == "rewardlab", command
            argv = [sys.executable, "-m", "rewardlab.cli", *argv[1:]]
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-2000:])
        outputs[" ".join(argv[3:5]) if argv[1] == "-m" else "setup"] = proc.stdout

    summary = json.loads(outputs["rm train"].strip().splitlines()[-1])
    final = summary["eval"]
    f1, documented = final["processbench_f1"], documented_f1()
    assert f1 >= 0.65 and abs(f1 - documented) <= 0.1, (f1, documented, final)
    assert final["step_auc"] >= 0.8, final
    history = [json.loads(line) for line in (tmp_path / "runs/prm/metrics.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in history if "loss" in row]
    assert sum(losses[-10:]) < 0.6 * sum(losses[:10]), losses  # it learns, not just the label prior

    # `rm eval` reads the saved model back and reports the same figure.
    reported = re.search(r"processbench_f1=(\d\.\d+)", outputs["rm eval"])
    assert reported and float(reported.group(1)) == pytest.approx(f1, abs=1e-3), outputs["rm eval"]

    scored = [json.loads(line) for line in (tmp_path / "runs/prm_scores.jsonl").read_text().splitlines()]
    assert scored and all(row["error"] is None for row in scored)
    # The scored records are held-out problems: solutions with the right final answer score above the others.
    right = [r["reward"] for r in scored if r["completion"].endswith(f"is {r['reference']}.")]
    wrong = [r["reward"] for r in scored if not r["completion"].endswith(f"is {r['reference']}.")]
    assert right and wrong and sum(right) / len(right) > sum(wrong) / len(wrong), (right, wrong)

    labelled = [json.loads(line) for line in (tmp_path / "runs/labelled.jsonl").read_text().splitlines()]
    assert len(labelled) == 20 and all(len(r["labels"]) == len(r["completions"]) for r in labelled)
