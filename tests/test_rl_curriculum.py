"""Curricula inside the RL trainer (issue 50), on the tiny model: each one draws, logs its state and resumes
exactly; with the prompt filter, asynchronous rollouts and two data-parallel ranks; the reverse
curriculum's prefix is prompt (never trained on) and scored as the start of the completion; guided hints
re-sample unsolved groups within the step. The rules themselves are checked against their authors' code in
``tests/test_curriculum_formulas.py``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
import torch.multiprocessing as mp

from rewardlab.rl.config import ConfigError, load_config
from rewardlab.rl.curriculum import CURRICULA, HINT_INTRO, Curriculum
from rewardlab.rl.prompts import RESPONSE_PREFIX
from rewardlab.rl.trainer import RLTrainer
from rewardlab.training.metrics import read_metrics
from rewardlab.types import Record

SOLUTION = "AAAA\nBBBB\nCCCC\nDDDD"  # 4 steps; GHPO's 25% hint is "AAAA\n", its 50% adds "BBBB"


def _records(count: int = 16) -> list[Record]:
    return [
        Record(
            id=f"p{i}",
            prompt=f"{i}+{i}=",
            reference=str(2 * i),
            metadata={"difficulty": 1 + i % 4, "source": f"s{i % 4}", "solution": SOLUTION},
        )
        for i in range(count)
    ]


def by_prompt_and_position(prompts, completions, references):
    """Rewards that depend on the prompt and the sample's place only (not on what the policy wrote), so that
    two runs see the same rewards and a curriculum's state can be compared exactly; groups have variance."""
    return [float((len(p) + i) % 3 == 0) for i, p in enumerate(prompts)]


def _cfg(out, name, *overrides):
    base = [
        "train.max_steps=3",
        "train.prompts_per_step=4",
        "rollout.n=3",
        "rollout.max_new_tokens=2",
        "train.per_device_train_batch_size=12",
        "reward.sources=[]",
        "reward.truncation=none",
        "train.report_to=none",
        "run.log_completions=12",
        f"run.output_dir={out}",
        f"algorithm.curriculum.name={name}",
    ]
    return load_config(preset="grpo", overrides=base + list(overrides))


def _train(cfg, reward=by_prompt_and_position, **kw):
    with RLTrainer(cfg, train_records=_records(), eval_records=[], reward_fns=[reward], console=None) as tr:
        tr.train(**kw)
        return tr


def _prompts_by_step(out):
    rows = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    steps: dict[int, list[str]] = {}
    for row in rows:
        steps.setdefault(row["step"], []).append(row["prompt"])
    return steps


STATE_KEYS = {
    "adarft": "curriculum/target_difficulty",
    "dump": "curriculum/p/s0",
    "sec": "curriculum/score/s3",
    "vcrl": "curriculum/high_p_share",
    "reverse": "curriculum/prefix_fraction",
    "guided_hints": "curriculum/hint_samples",
}


# Two in the default suite (a random stream and a state of its own; a response prefix), all six in the slow
# step: three trainers each. Every curriculum's state round-trip is also in test_curriculum_formulas.py.
QUICK = {"sec", "reverse"}


@pytest.mark.parametrize(
    "name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in sorted(STATE_KEYS)]
)
def test_each_curriculum_logs_its_state_and_resumes_exactly(tmp_path, name):
    """Three steps straight against one, a checkpoint, and two more: the same prompts drawn in steps 2 and 3
    and the same state at the end."""
    straight = _train(_cfg(tmp_path / "a", name))
    rows = read_metrics(tmp_path / "a")
    assert all(STATE_KEYS[name] in r and "curriculum/drawn_difficulty" in r for r in rows if r["step"] >= 1)
    _train(_cfg(tmp_path / "b", name, "train.max_steps=1", "train.save_steps=1"))
    resumed = _train(_cfg(tmp_path / "b", name), resume=True)
    assert resumed.prompts.curriculum.state_dict() == straight.prompts.curriculum.state_dict()
    a, b = _prompts_by_step(tmp_path / "a"), _prompts_by_step(tmp_path / "b")
    assert [a[2], a[3]] == [b[2], b[3]]
    json.dumps(straight.state_dict()["curriculum"])  # the checkpoint's part is plain JSON


def test_adarft_draws_the_prompts_nearest_its_target_then_the_prompt_filter_picks(tmp_path):
    cfg = _cfg(
        tmp_path, "adarft", "algorithm.curriculum.adarft_initial=3", "algorithm.prompt_filter.mode=band"
    )
    tr = _train(cfg, steps=1)
    drawn = _prompts_by_step(tmp_path)[1]
    difficulty = {r.prompt: r.metadata["difficulty"] for r in _records()}
    assert {difficulty[p] for p in drawn} == {3}  # 4 prompts of difficulty 3 exist: the nearest are those
    row = read_metrics(tmp_path)[-1]
    assert row["prompt_filter/considered"] >= 4
    # the batch's mean reward (1/3 here) is under beta = 0.5: the target moves to easier prompts
    assert row["curriculum/target_difficulty"] < 3 == cfg.algorithm.curriculum.adarft_initial
    assert tr.prompts.curriculum.target == row["curriculum/target_difficulty"]


def test_adarft_gives_the_next_nearest_when_asked_again_within_a_batch(tmp_path):
    """The prompt filter may reject the nearest prompts and ask for more: the next nearest come, and after the
    batch's observation the nearest again."""
    from rewardlab.rl.curriculum import GroupOutcome

    cfg = _cfg(tmp_path, "adarft", "algorithm.curriculum.adarft_initial=2")
    tr = RLTrainer(
        cfg, train_records=_records(), eval_records=[], reward_fns=[by_prompt_and_position], console=None
    )
    curriculum = tr.prompts.curriculum
    difficulty = [r.metadata["difficulty"] for r in _records()]
    first, second = curriculum.draw(4, tr.prompts), curriculum.draw(4, tr.prompts)
    assert {difficulty[i] for i in first} == {2} and not set(first) & set(second)
    assert {difficulty[i] for i in second} <= {1, 3}  # next nearest: distance 1
    batches = [first]
    for _ in range(3):
        curriculum.observe([GroupOutcome("p1", [0.5, 0.5], [True, False])])  # mean = beta: the target stays
        batches.append(curriculum.draw(4, tr.prompts))
    assert all({difficulty[i] for i in b} == {2} for b in batches)
    # the prompts of one level tie: a seeded order per batch, not the same first four at every step
    assert len({tuple(b) for b in batches}) > 1
    tr.close()


def test_reverse_prefix_is_prompt_not_trained_and_scored_with_the_completion(tmp_path):
    tr = _train(_cfg(tmp_path, "reverse"), steps=0)
    prompts = tr.prompts.draw(2)
    prefix = "AAAA\nBBBB\nCCCC\n"  # stage 0: every step but the last (L - 1 of L)
    assert [p.metadata[RESPONSE_PREFIX] for p in prompts] == [prefix, prefix]
    rollout = tr.sampler.rollout(prompts, 0, {"generate": 0.0, "score": 0.0}, step=0)
    for gen, record in zip(rollout.gens, rollout.reward.records, strict=True):
        # the prefix is in the prompt's tokens (no loss on them), not in the sampled ones
        assert tr.tokenizer.decode(gen.prompt_token_ids).endswith(prefix)
        assert tr.tokenizer.decode(gen.token_ids, skip_special_tokens=True).startswith(gen.text[:1])
        assert record.completion == prefix + gen.text


def test_reverse_stages_shrink_the_prefix_when_the_reward_is_reached(tmp_path):
    tr = _train(_cfg(tmp_path, "reverse", "algorithm.curriculum.reverse_advance_reward=0.3"), steps=2)
    fractions = [r["curriculum/prefix_fraction"] for r in read_metrics(tmp_path) if r["step"] >= 1]
    assert fractions == [0.75, 0.5]  # the mean reward (1/3) passes 0.3 each step
    assert tr.prompts.draw(1)[0].metadata[RESPONSE_PREFIX] == "AAAA\nBBBB\n"  # round(0.5 * 3) = 2 steps


def solved_with_half_the_solution(prompts, completions, references):
    return [float("BBBB" in p) for p in prompts]


def test_guided_hints_resample_unsolved_groups_until_a_hint_suffices(tmp_path):
    """Nothing is solved without a hint nor with 25% of the solution; 50% solves: two hinted rounds of every
    group, counted, and the trained groups carry the 50% hint."""
    tr = _train(_cfg(tmp_path, "guided_hints"), reward=solved_with_half_the_solution, steps=1)
    row = read_metrics(tmp_path)[-1]
    groups, n = 4, 3
    assert row["curriculum/hint_groups"] == groups
    assert row["curriculum/hint_samples"] == groups * n * 2
    assert row["curriculum/hint_fraction"] == 0.5 and row["curriculum/hint_solved"] == 1.0
    trained = _prompts_by_step(tmp_path)[1]
    assert all(HINT_INTRO in p and p.endswith("AAAA\nBBBB\n") for p in trained)
    assert row["reward"] == 1.0
    assert tr.prompts.curriculum.hint_samples == 0  # reset once logged
    # 36 samples generated (none, 25% and 50% hints), 12 trained on, at most 2 tokens each: the replaced
    # attempts count in the generated tokens too
    assert row["num_completion_tokens"] > groups * n * 2


def test_guided_hints_leave_solved_groups_alone(tmp_path):
    _train(_cfg(tmp_path, "guided_hints"), reward=lambda p, c, r: [1.0] * len(p), steps=1)
    row = read_metrics(tmp_path)[-1]
    assert row["curriculum/hint_groups"] == 0 and row["curriculum/hint_samples"] == 0
    assert not any(HINT_INTRO in p for p in _prompts_by_step(tmp_path)[1])


def test_async_rollouts_save_the_state_of_the_last_batch_trained(tmp_path):
    """The rollout thread draws (and observes) ahead; the checkpoint holds the state after what was trained."""
    tr = _train(_cfg(tmp_path, "sec", "rollout.async_staleness=1"), steps=3)
    assert tr.async_sampler.overlap is None
    state = tr.prompts.curriculum.state_dict()
    assert state["draws"] == 3
    assert tr.state_dict()["curriculum"] == [state]


def test_a_curriculum_without_the_metadata_it_needs_is_one_clear_error(tmp_path):
    cfg = _cfg(tmp_path, "adarft")
    rows = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(4)]
    with pytest.raises(ValueError, match="adarft: every prompt needs a difficulty"):
        RLTrainer(cfg, train_records=rows, eval_records=[], reward_fns=[by_prompt_and_position], console=None)


def test_config_refuses_what_a_curriculum_cannot_run(tmp_path):
    with pytest.raises(ConfigError, match="curriculum.name: unknown value 'easy_first'"):
        _cfg(tmp_path, "easy_first")
    with pytest.raises(ConfigError, match=r"hint_fractions must be shares in \(0, 1\)"):
        _cfg(tmp_path, "guided_hints", "algorithm.curriculum.hint_fractions=[0.5, 1.0]")
    with pytest.raises(ConfigError, match="not multi-turn environments"):
        _cfg(tmp_path, "reverse", "env.name=tools")


def test_a_curriculum_registered_from_outside_is_used_by_name(tmp_path):
    @dataclass
    class LastFirst(Curriculum):
        name: ClassVar[str] = "last_first_test"

        def draw(self, count, stream):
            self.draws += 1
            return list(range(len(self.pool)))[::-1][:count]

    CURRICULA.register("last_first_test", LastFirst)
    try:
        _train(_cfg(tmp_path, "last_first_test"), steps=1)
    finally:
        CURRICULA.unregister("last_first_test")
    assert set(_prompts_by_step(tmp_path)[1]) == {r.prompt for r in _records()[-4:]}


# -- two data-parallel ranks ----------------------------------------------------------------------------------
def _ddp_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:
        cfg = _cfg(out_dir, "dump", "train.max_steps=1", "train.prompts_per_step=2")
        with RLTrainer(
            cfg, train_records=_records(), eval_records=[], reward_fns=[by_prompt_and_position], console=None
        ) as tr:
            drawn = [str(r.id) for r in tr.prompts.draw(2)]
            tr.train()
            saved = tr.state_dict()["curriculum"]  # a collective: every rank's state
            result = {"state": tr.prompts.curriculum.state_dict(), "drawn": drawn, "saved": saved}
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
            handle.write(json.dumps(result))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two processes with a model each: over 20 s on 2 cores
@pytest.mark.skipif(
    not torch.distributed.is_available(), reason="this machine cannot have it: torch.distributed"
)
def test_two_ranks_share_the_curriculum_state_and_draw_from_their_own_shards(tmp_path, free_port):
    world = 2
    mp.spawn(_ddp_worker, args=(world, free_port, str(tmp_path)), nprocs=world, join=True)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    # the windows and counts come from every rank's groups: the same on both
    assert results[0]["state"]["windows"] == results[1]["state"]["windows"]
    assert sum(results[0]["state"]["counts"].values()) == 1 * 2 * 2 * 3  # steps x ranks x prompts x n
    ids = [set(r["drawn"]) for r in results]
    assert not ids[0] & ids[1]  # each rank draws from its own shard
    assert results[0]["saved"] == [results[0]["state"], results[1]["state"]]
