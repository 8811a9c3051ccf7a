"""The "missing reward" contract: a source returning ``Result(reward=None)`` (or NaN) is a row without a
reward, not a failure: the engine passes it on (in process, in pooled workers), files get ``"reward": null``
with no error, the summary leaves it out of the mean, and an RL step marks the sample invalid."""

from __future__ import annotations

import json
import math
from typing import ClassVar

import pytest
from scored_rows import untimed  # tests/scored_rows.py

from rewardlab.scoring import Scorer, score_file
from rewardlab.types import Record, Result
from rewardlab.verifiers import Verifier, register_verifier

ROWS = [
    {"id": "a", "completion": "1"},
    {"id": "b", "completion": "none"},
    {"id": "c", "completion": "nan"},
    {"id": "d", "completion": "0.5"},
]


@register_verifier("_missing_reward")
class MissingRewardVerifier(Verifier):
    """The completion is the reward: ``none`` and ``nan`` are missing rewards, ``failed`` an error without
    one, ``text`` a reward that is not a number."""

    name: ClassVar[str] = "_missing_reward"

    def verify(self, record: Record) -> Result:
        text = record.completion_text
        if text == "none":
            return Result(reward=None)
        if text == "nan":
            return Result(reward=math.nan, details={"why": "undefined"})
        if text == "failed":
            return Result(reward=None, error="judge: no verdict")
        if text == "text":
            return Result(reward="high")  # type: ignore[arg-type]
        return Result(reward=float(text))


class InProcessMissingReward(MissingRewardVerifier):
    runs_in_process = True


@pytest.mark.parametrize(
    ("source", "workers"),
    [
        (InProcessMissingReward(), 1),  # score_batch in this process
        (MissingRewardVerifier(), 0),  # a pooled source scored in this process (debugging)
        (MissingRewardVerifier(), 1),  # one worker process
        (MissingRewardVerifier(), 2),  # a pool
        ("_missing_reward", 2),  # by name
    ],
)
def test_none_and_nan_come_back_as_missing_rewards(source, workers):
    rows = [*ROWS, {"completion": "failed"}, {"completion": "text"}, {"completion": "1"}]
    with Scorer(source, workers=workers, timeout=10) as scorer:
        results = scorer.score(rows)
        again = scorer.score(rows)  # the workers are alive and still score
    assert [r.reward for r in results[:4]] == [1.0, None, None, 0.5]
    assert [r.error for r in results[:4]] == [None] * 4
    assert results[2].details == {"why": "undefined"}
    # An error is a failure, reward 0, whatever the source put in ``reward``.
    assert (results[4].reward, results[4].error) == (0.0, "judge: no verdict")
    assert results[5].reward == 0.0 and results[5].error.startswith("source error: reward is str 'high'")
    assert results[6].reward == 1.0 and results[6].error is None
    assert again == results


def test_a_file_gets_null_rewards_and_the_summary_leaves_them_out(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "out.jsonl"
    summary = score_file(src, out, MissingRewardVerifier(), workers=2, progress=False)
    lines = out.read_text().splitlines()
    assert '"reward": null' in lines[1] and "NaN" not in out.read_text()  # valid JSON
    got = [json.loads(line) for line in lines]
    assert [(g["id"], g["reward"], g["error"]) for g in got] == [
        ("a", 1.0, None),
        ("b", None, None),
        ("c", None, None),
        ("d", 0.5, None),
    ]
    assert summary.rows == 4 and summary.missing == 2 and not summary.errors
    assert summary.mean_reward == pytest.approx(0.75)  # over the two rows with a reward
    assert summary.to_dict()["missing_reward"] == 2 and "no reward    2" in summary.format()

    # A resumed run counts the kept rows the same way.
    whole = untimed(out)
    out.write_text("\n".join(lines[:2]) + "\n")
    resumed = score_file(src, out, MissingRewardVerifier(), workers=2, resume=True, progress=False)
    assert resumed.resumed == 2 and resumed.missing == 2 and resumed.mean_reward == pytest.approx(0.75)
    assert out.read_text().splitlines()[:2] == lines[:2] and untimed(out) == whole  # times differ


def test_rl_reward_sources_mark_missing_rewards_invalid():
    from rewardlab.rl.rewards import RewardSources
    from rewardlab.scoring import WarmPool

    records = [Record(prompt="q", completion=r["completion"]) for r in ROWS]
    for workers in (0, 2):
        source = WarmPool("_missing_reward", {}, workers=workers, timeout=10)
        try:
            scored = RewardSources([(source, 1.0)]).score(records)
        finally:
            source.close()
        assert scored.rewards == [1.0, None, None, 0.5]
        assert scored.per_source["_missing_reward"] == [1.0, None, None, 0.5]
        assert scored.num_errors == 0 and not scored.errors


@pytest.mark.slow
def test_ray_engine_passes_missing_rewards_on():
    ray = pytest.importorskip("ray", reason="Ray is optional: pip install 'rewardlab[ray]'")
    from pathlib import Path

    from rewardlab.scoring import score_records

    # The actors unpickle this module's verifier class: they need the tests folder on their path.
    env = {"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parent)}}
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False, runtime_env=env
    )
    try:
        results = score_records(ROWS, MissingRewardVerifier(), workers=2, engine="ray")
    finally:
        ray.shutdown()
    assert [(r.reward, r.error) for r in results] == [(1.0, None), (None, None), (None, None), (0.5, None)]
