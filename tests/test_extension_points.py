"""Extension points: a new advantage estimator, verifier, tool and shaping transform, each registered from
outside the library (here) and used by the library's own code, with no other file touched."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from rewardlab.core_algos.estimators import ADVANTAGE_ESTIMATORS, advantage_estimator, estimator_traits
from rewardlab.types import Record, Result

PROMPTS = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(6)]


def digits_reward(prompts, completions, references):
    """A varied reward: the fraction of digits in the completion."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


# ---- advantage estimator --------------------------------------------------------------------------------

CALLS: list[dict[str, Any]] = []


@pytest.fixture
def median_estimator() -> Iterator[str]:
    """``A_i = r_i - median(r_group)``, registered for the test only."""
    name = "_ext_median_baseline"

    @advantage_estimator(name, centres_by_group=True, zero_on_equal_rewards=True)
    def median_baseline(token_level_rewards, response_mask, *, group_size, valid=None, **_):
        """Group median baseline (test estimator)."""
        scores = (token_level_rewards * response_mask).sum(dim=-1)
        grouped = scores.view(-1, group_size)
        adv = (grouped - grouped.median(dim=1, keepdim=True).values).reshape(-1)
        if valid is not None:
            adv = adv * valid.to(adv.dtype)
        CALLS.append({"group_size": group_size, "batch": scores.numel()})
        adv = adv.unsqueeze(-1) * response_mask
        return adv, adv

    CALLS.clear()
    try:
        yield name
    finally:
        ADVANTAGE_ESTIMATORS.unregister(name)


def test_a_new_advantage_estimator_trains_through_the_trainer(
    tmp_path, tiny_model, tiny_tokenizer, median_estimator
):
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer

    assert estimator_traits(median_estimator).centres_by_group
    overrides = [
        "train.max_steps=1",
        "train.prompts_per_step=2",
        "rollout.n=4",
        "rollout.max_new_tokens=6",
        "reward.truncation=none",
        "train.learning_rate=1e-2",
        "reward.sources=[]",
        "train.report_to=none",
        f"run.output_dir={tmp_path}",
        f"algorithm.adv_estimator={median_estimator}",
    ]
    cfg = load_config(preset="grpo", overrides=overrides)
    before = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    with RLTrainer(
        cfg,
        model=tiny_model,
        tokenizer=tiny_tokenizer,
        train_records=PROMPTS,
        eval_records=[],
        reward_fns=[digits_reward],
        console=None,
    ) as trainer:
        last = trainer.train()
    assert CALLS and CALLS[0] == {"group_size": 4, "batch": 8}
    assert not last.get("skipped_update") and last["advantages/abs_mean"] > 0
    assert any(not torch.equal(before[k], v) for k, v in tiny_model.state_dict().items())


# ---- verifier -------------------------------------------------------------------------------------------


@pytest.fixture
def length_verifier() -> Iterator[str]:
    from rewardlab.verifiers import VERIFIERS, Verifier, register_verifier

    name = "_ext_length"

    @register_verifier(name)
    class LengthVerifier(Verifier):
        """1 when the completion is at most ``limit`` characters."""

        def __init__(self, limit: int = 3) -> None:
            self.limit = limit

        def verify(self, record: Record) -> Result:
            return Result(reward=float(len(record.completion_text) <= self.limit))

    try:
        yield name
    finally:
        VERIFIERS.unregister(name)


def test_a_new_verifier_scores_through_the_scoring_engine(length_verifier):
    from rewardlab.scoring import score_records
    from rewardlab.verifiers import get_verifier

    assert get_verifier(length_verifier, limit=1).score(Record(completion="ab")).reward == 0.0
    results = score_records([Record(completion="ab"), {"completion": "abcdef"}], length_verifier)
    assert [r.reward for r in results] == [1.0, 0.0]


# ---- tool -----------------------------------------------------------------------------------------------


@pytest.fixture
def reverse_tool() -> Iterator[str]:
    from rewardlab.envs.tools import TOOLS, Tool, ToolResult

    name = "_ext_reverse"

    class ReverseTool(Tool):
        """Reverses its text."""

        name = "reverse"
        primary = "text"

        def run(self, calls, timeout):
            return [ToolResult(str(args.get("text", ""))[::-1]) for _, args in calls]

    TOOLS.register(name, ReverseTool)
    try:
        yield name
    finally:
        TOOLS.unregister(name)


def test_a_new_tool_answers_an_environment_step(reverse_tool):
    from rewardlab.envs.base import EpisodeState, Turn
    from rewardlab.envs.tool_env import ToolEnv

    env = ToolEnv([reverse_tool], formats=["tool_call"])
    text = 'Let me see.\n<tool_call>{"name": "reverse", "arguments": {"text": "abc"}}</tool_call>'
    episode = EpisodeState(record=Record(prompt="reverse abc"))
    episode.turns.append(Turn("model", text))
    (result,) = env.step([episode], [text], last=False)
    assert result.observation == "cba" and not result.done
    assert episode.tool_calls == 1
    env.close()


# ---- shaping transform ----------------------------------------------------------------------------------


@pytest.fixture
def floor_shaping() -> Iterator[str]:
    from rewardlab.rewardmodels.shaping import SHAPINGS, Shaping
    from rewardlab.rewardmodels.shaping.pipeline import register

    name = "_ext_floor"

    @register(name)
    @dataclass
    class Floor(Shaping):
        """Rewards below ``lo`` become ``lo``."""

        lo: float = 0.0

        def __call__(self, batch):
            return batch.replace(rewards=batch.rewards.clamp(min=self.lo))

    try:
        yield name
    finally:
        SHAPINGS.unregister(name)


def test_a_new_shaping_transform_runs_in_a_pipeline(floor_shaping):
    from rewardlab.rewardmodels.shaping import ShapingBatch, build_pipeline

    pipeline = build_pipeline([f"{floor_shaping}:0.25", "scale:2"])
    out = pipeline(ShapingBatch(rewards=torch.tensor([0.0, 0.5, 1.0])))
    assert out.rewards.tolist() == [0.5, 1.0, 2.0]


# ---- reward-source kind ---------------------------------------------------------------------------------


@pytest.fixture
def constant_kind() -> Iterator[str]:
    """``const:VALUE``: every completion scores VALUE, registered for the test only."""
    from rewardlab.verifiers.python import CallableSource
    from rewardlab.verifiers.sources import SOURCE_KINDS, SourceKind, register_source_kind

    def constant_source(value: str) -> CallableSource:
        return CallableSource(lambda prompts, completions, refs: [float(value)] * len(completions), "const")

    kind = SourceKind(spelling="const:VALUE", prefixes=("const:",), build=constant_source, argument="rest")
    register_source_kind(kind)
    register_source_kind(kind)  # the same definition again (a module imported twice) is no change
    try:
        yield kind.spelling
    finally:
        SOURCE_KINDS.unregister(kind.spelling)


def test_a_new_source_kind_is_checked_and_built_by_rl(constant_kind):
    from rewardlab.rl.config import load_config
    from rewardlab.rl.rewards import RewardSources
    from rewardlab.rl.sources import known_sources

    assert constant_kind in known_sources()
    cfg = load_config(preset="grpo", overrides=["reward.sources=[{name: 'const:0.5'}]"])
    sources = RewardSources.from_config(cfg)
    try:
        assert sources.score(PROMPTS[:2]).rewards == [0.5, 0.5]
    finally:
        sources.close()


def test_a_source_kind_claiming_taken_names_is_refused(constant_kind):
    from rewardlab.registry import NameTakenError
    from rewardlab.verifiers.sources import SOURCE_KINDS, SourceKind, register_source_kind

    for clash in (
        SourceKind("const2", prefixes=("const:x",), build=str),
        SourceKind("c", names=("const:1",), build=str),
    ):
        with pytest.raises(NameTakenError, match="claims names of 'const:VALUE'"):
            register_source_kind(clash)
    with pytest.raises(NameTakenError, match="taken by"):  # another definition under a taken spelling
        register_source_kind(SourceKind(constant_kind, prefixes=("other:",), build=str))
    apart = register_source_kind(SourceKind("constant:VALUE", prefixes=("constant:",), build=str))  # control
    SOURCE_KINDS.unregister(apart.spelling)
