"""Row-level shaping (``repetition_penalty``, ``cosine_length``): the torch-free path gives the tensor
pipeline's rewards bit for bit, and ``rewardlab score --shape repetition_penalty`` runs without torch."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rewardlab.rewardmodels import shaping as S
from rewardlab.rewardmodels.shaping.rows import ShapingRow, to_float32
from rewardlab.types import Record, Result, as_reward

NO_TORCH = '''"""Makes torch absent for this interpreter, as on an install without the rl extra."""
import sys


class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoTorch())
'''

ROW_PIPELINES = [
    ["repetition_penalty"],
    ["cosine_length:max_len=40"],
    [
        "repetition_penalty:ngram_size=2,weight=0.37,unit=mixed",
        "cosine_length:max_len=30,correct_threshold=0.7",
    ],
    [
        "cosine_length:max_len=50,exceed=-3,min_value_correct=0.1",
        "repetition_penalty:unit=chars,max_penalty=-0.3",
    ],
]


def _rows(seed: int) -> tuple[list[Record], list[Result]]:
    rng = random.Random(seed)
    words = ["the", "The", "cat", "sat", "答案", "是", "wait", "x", "="]
    records, results = [], []
    for i in range(300):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 40)))
        meta = {"num_tokens": rng.choice([3, 17.5, 1e9 + 1])} if i % 4 == 0 else {}
        records.append(Record(completion=text, prompt=f"p{i % 5}", metadata=meta))
        reward = rng.choice([0.0, 1.0, 0.7, 0.1, 0.3, rng.random(), rng.uniform(-5, 5), None, math.nan])
        results.append(Result(reward=reward, error="verifier error: x" if i % 17 == 0 else None))
    return records, results


@pytest.mark.parametrize("specs", ROW_PIPELINES)
@pytest.mark.parametrize("known_correct", [False, True])
def test_row_path_equals_the_tensor_pipeline(specs, known_correct):
    records, results = _rows(len(specs))
    if known_correct:
        results = [Result(reward=r.reward, details={"correct": i % 3 == 0}) for i, r in enumerate(results)]
    pipeline = S.build_pipeline(specs)
    assert pipeline.row_level
    shaped = S.shape_results(records, results, pipeline)
    batch = pipeline(S.results_to_batch(records, results))
    rewards = batch.rewards.tolist()
    expected = [None if as_reward(r.reward) is None else v for r, v in zip(results, rewards, strict=True)]
    assert [r.reward for r in shaped] == expected  # bit for bit, not approximately
    assert all(r.details["shaping"]["pipeline"] == pipeline.specs() for r in shaped)


def test_a_pipeline_with_a_tensor_transform_is_not_row_level():
    assert not S.build_pipeline(["repetition_penalty", "clamp:-1,1"]).row_level
    records = [Record(completion="a b a b a b", prompt="p"), Record(completion="c d", prompt="p")]
    results = [Result(reward=1.0), Result(reward=0.0)]
    shaped = S.shape_results(records, results, ["repetition_penalty:ngram_size=2", "group_norm"])
    assert shaped[0].reward > 0 > shaped[1].reward


def test_row_threshold_compares_as_the_float32_batch():
    """``ShapingRow.correct_or`` rounds the threshold to float32, as torch compares a float32 tensor."""
    thresholds = [0.7, 0.3, 0.5, 0.1, 1.0, 1 / 3, 2 / 3, 0.9999999, 1e-8, 1e39]
    rewards = sorted({to_float32(t + d) for t in thresholds[:-1] for d in (-1e-7, -1e-8, 0.0, 1e-8, 1e-7)})
    batch = S.ShapingBatch(rewards=torch.tensor(rewards))
    for threshold in thresholds:
        expected = batch.correct_or(threshold).tolist()
        assert [ShapingRow(reward=r).correct_or(threshold) for r in rewards] == expected, threshold
    assert ShapingRow(reward=to_float32(0.7)).correct_or(0.7)  # float32(0.7) < 0.7, as the batch has it


def test_cosine_length_reward_is_open_r1s_value_exactly():
    """The tensor function is the scalar formula at each element: open-r1's ``math.cos`` values, to the bit."""
    lengths = [0, 1, 3, 7, 250, 500, 999, 1000, 1001, 1500, 4095, 12345]
    for length, correct in [(n, c) for n in lengths for c in (True, False)]:
        lo, hi = (0.5, 1.0) if correct else (-0.5, -1.0)
        expected = lo + 0.5 * (hi - lo) * (1.0 + math.cos(math.pi * (length / 1000)))
        assert S.cosine_length_reward([length], [correct], 1000).item() == expected


def _score(tmp_path: Path, *shape: str) -> subprocess.CompletedProcess:
    """``rewardlab score --verifier math --shape ...`` of two rows, in an interpreter without torch."""
    rows = [
        {"prompt": "p", "completion": "the the the the \\boxed{2}", "reference": "2"},
        {"prompt": "p", "completion": "so \\boxed{3}", "reference": "2"},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    blocker = tmp_path / "no_torch"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(NO_TORCH)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")])),
    }
    flags = [f for spec in shape for f in ("--shape", spec)]
    command = [
        sys.executable,
        "-m",
        "rewardlab.cli",
        "score",
        "in.jsonl",
        "-o",
        "out.jsonl",
        "--verifier",
        "math",
    ]
    return subprocess.run(
        [*command, *flags, "--no-progress"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_score_shape_repetition_penalty_runs_without_torch(tmp_path):
    done = _score(tmp_path, "repetition_penalty")
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    # "the the the the \boxed{2}": 3 trigrams, 2 distinct -> 1 - 1/3, in the batch's float32
    assert [r["reward"] for r in out] == [to_float32(1.0 - 1 / 3), 0.0]
    assert [r["details"]["shaping"]["raw_reward"] for r in out] == [1.0, 0.0]


def test_score_shape_group_norm_without_torch_is_one_line(tmp_path):
    done = _score(tmp_path, "repetition_penalty", "group_norm")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "rewardlab score: error: the shaping transform 'group_norm' needs the rl extra (no module named "
        "'torch'): pip install 'rewardlab[rl]'"
    ]
    assert not (tmp_path / "out.jsonl").exists()  # refused before scoring
