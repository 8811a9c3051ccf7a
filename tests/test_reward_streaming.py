"""Rewards computed while generation runs (``rollout.stream_rewards``): each sample goes to the row-wise reward
sources the moment the backend reports it finished, the step waits only for the last reward, and the rewards,
advantages and weights are those of scoring after generation."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import torch

from rewardlab.data.tiny import build_tiny_model
from rewardlab.envs.rollout import run_episodes
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.generation.base import Generation
from rewardlab.rl.config import load_config
from rewardlab.rl.rewards import RewardSources, RewardStream
from rewardlab.rl.trainer import RLTrainer
from rewardlab.scoring.pool import WarmPool
from rewardlab.types import Record, Result
from rewardlab.verifiers import Verifier, register_verifier

PROMPTS = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(12)]
SCORED: list[str] = []
"""Ids of the records the recording verifier scored, in order (in this process: ``reward.workers=0``)."""
SCORED_LOCK = threading.Lock()


@register_verifier("_stream_digits", override=True)
class DigitsVerifier(Verifier):
    """A varied, deterministic reward (the share of digits in the completion) that records what it scored."""

    def verify(self, record: Record) -> Result:
        with SCORED_LOCK:
            SCORED.append(str(record.id))
        text = record.completion_text
        return Result(reward=sum(ch.isdigit() for ch in text) / max(len(text), 1))


class GroupSpy:
    """A batched reward function that records the groups of every batch it gets (a group-level source)."""

    def __init__(self) -> None:
        self.batches: list[Counter] = []

    def score_batch(self, records: list[Record]) -> list[Result]:
        self.batches.append(Counter(r.metadata["group"] for r in records))
        return [Result(reward=float(len(r.completion_text) % 3) / 2) for r in records]


def _cfg(tmp_path, stream: bool, *overrides: str):
    base = [
        "train.max_steps=2",
        "train.prompts_per_step=3",
        "rollout.n=4",
        "rollout.max_new_tokens=12",
        "rollout.batch_size=6",
        "train.learning_rate=1e-3",
        "train.per_device_train_batch_size=6",
        "reward.sources=[{name: _stream_digits}]",
        "reward.workers=0",
        "run.log_completions=100",
        "train.report_to=none",
        f"rollout.stream_rewards={str(stream).lower()}",
        f"run.output_dir={tmp_path / ('stream' if stream else 'batch')}",
    ]
    return load_config(preset="grpo", overrides=base + list(overrides))


def _run(cfg, tokenizer, spy: GroupSpy):
    model = build_tiny_model()
    with RLTrainer(
        cfg,
        train_records=PROMPTS,
        eval_records=[],
        reward_fns=[spy],
        model=model,
        tokenizer=tokenizer,
        console=None,
    ) as tr:
        tr.train()
    rows = [
        json.loads(line) for line in (Path(cfg.run.output_dir) / "rollouts.jsonl").read_text().splitlines()
    ]
    return rows, model.state_dict()


def test_streaming_gives_the_same_rewards_advantages_and_weights(tmp_path, tiny_tokenizer):
    spies = {True: GroupSpy(), False: GroupSpy()}
    runs = {stream: _run(_cfg(tmp_path, stream), tiny_tokenizer, spies[stream]) for stream in (True, False)}
    (rows_on, weights_on), (rows_off, weights_off) = runs[True], runs[False]
    keys = ("step", "group", "index", "completion", "reward", "shaped_reward", "rewards", "advantage")
    assert len(rows_on) == 2 * 3 * 4
    assert [{k: r[k] for k in keys} for r in rows_on] == [{k: r[k] for k in keys} for r in rows_off]
    # The rewards vary, so that a reward handed to the wrong sample would show.
    assert len({r["rewards"]["_stream_digits"] for r in rows_on}) > 3
    assert any(r["advantage"] for r in rows_on)
    for name, tensor in weights_on.items():
        assert torch.equal(tensor, weights_off[name]), name
    # The group-level source scored whole batches of whole groups in both runs, after generation.
    for spy in spies.values():
        assert spy.batches and all(set(b.values()) == {4} and len(b) == 3 for b in spy.batches)


def _streamed_sources(spy: GroupSpy | None = None) -> RewardSources:
    pool = WarmPool("_stream_digits", workers=0, stream=True)
    parts = [(pool, 1.0)] + ([(spy, 1.0)] if spy is not None else [])
    return RewardSources(parts, streamed=[0])


def _record(i: int, k: int, gen: Generation) -> Record:
    return Record(id=f"{i}#{k}", prompt="p", completion=gen.text, metadata={"group": i})


def test_rows_are_scored_while_the_others_decode(tiny_tokenizer):
    """The first sample to end is scored while generation is held inside the decoding step that ended it (and
    decoding steps follow); the source sees the samples in the order they ended; the results come back in the
    batch's order."""
    torch.manual_seed(0)  # a model whose samples end at different lengths (EOS) and at the limit
    backend = get_backend("hf", build_tiny_model(), tiny_tokenizer, batch_size=16)
    sources = _streamed_sources()
    stream = RewardStream(sources, _record)
    prompts = ["1+1=", "2+3=", "12+7="]
    params = SamplingParams(n=3, max_new_tokens=20, seed=5)
    seen: dict[str, object] = {}
    steps = [0]  # the model's forward passes so far: decoding steps
    backend.model.register_forward_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))

    def on_finished(i: int, k: int, gen: Generation) -> None:
        stream(i, k, gen)
        if "first" not in seen:  # held here, inside generate: the reward must arrive all the same
            future = stream.submitted([[None] * 3 for _ in prompts])[i * 3 + k][0]
            seen["first"] = future.result(timeout=120)[0].reward
            seen["steps_at_first"] = steps[0]
        seen.setdefault("lengths", []).append(len(gen.token_ids))

    SCORED.clear()
    try:
        groups = backend.generate(prompts, params, on_finished=on_finished)
        steps_in_all = steps[0]
        scored = sources.score_submitted(
            [_record(i, k, g) for i, grp in enumerate(groups) for k, g in enumerate(grp)],
            stream.submitted(groups),
        )
    finally:
        sources.close()
    assert steps_in_all > seen["steps_at_first"], "the first reward was computed only after decoding ended"
    assert seen["lengths"] == sorted(seen["lengths"]), "samples were not handed over as they ended"
    assert len(set(seen["lengths"])) > 1
    assert [f"{i}#{k}" for i, k in stream.order] == SCORED
    expected = DigitsVerifier().score_batch(
        [_record(i, k, g) for i, grp in enumerate(groups) for k, g in enumerate(grp)]
    )
    assert scored.rewards == [r.reward for r in expected]
    # The same samples as without the callback (seeded).
    plain = backend.generate(prompts, params)
    assert [[g.token_ids for g in grp] for grp in plain] == [[g.token_ids for g in grp] for grp in groups]


def test_group_sources_see_whole_groups_after_generation(tiny_tokenizer):
    spy = GroupSpy()
    sources = _streamed_sources(spy)
    stream = RewardStream(sources, _record)
    backend = get_backend("hf", build_tiny_model(), tiny_tokenizer, batch_size=5)  # groups across chunks
    groups = backend.generate(
        ["1+1=", "2+3=", "4+4="], SamplingParams(n=3, max_new_tokens=10, seed=3), stream
    )
    assert spy.batches == []  # nothing group-level ran while samples were still decoding
    records = [_record(i, k, g) for i, grp in enumerate(groups) for k, g in enumerate(grp)]
    try:
        scored = sources.score_submitted(records, stream.submitted(groups))
    finally:
        sources.close()
    assert spy.batches == [Counter({0: 3, 1: 3, 2: 3})]
    assert scored.per_source["_stream_digits"] == [r.reward for r in DigitsVerifier().score_batch(records)]


def test_episodes_are_handed_over_as_each_ends(tiny_tokenizer):
    """Multi-turn: an episode goes to the rewards the moment the environment ends it, while others run on."""

    class CountdownEnv:
        """Episode ``j`` lasts ``1 + j % 3`` model turns."""

        stop: list[str] = []

        def reset(self, record):
            from rewardlab.envs.base import EpisodeState

            return EpisodeState(record=record)

        def step(self, states, texts, last):
            from rewardlab.envs.base import StepResult

            return [
                StepResult(
                    observation=None if len(s.model_turns) >= 1 + int(s.record.id) % 3 else " ok", done=False
                )
                for s in states
            ]

        def answer(self, state):
            return state.turns[-1].text

    records = [Record(id=j, prompt=f"{j}+1=") for j in range(3)]
    reported: list[tuple[int, int, object]] = []
    ended_turns: list[int] = []
    env = CountdownEnv()
    cfg = SimpleNamespace(
        observation_format="text",
        observation_template="{output}",
        max_tokens=64,
        max_turns=5,
        max_observation_chars=0,
    )
    backend = get_backend("hf", build_tiny_model(), tiny_tokenizer)
    original = backend.interact

    def interact(prompts, params, respond):
        def counting(ended):
            ended_turns.append(len(ended))
            return respond(ended)

        return original(prompts, params, counting)

    backend.interact = interact
    episodes = run_episodes(
        backend,
        env,
        records,
        [r.prompt for r in records],
        SamplingParams(n=2, max_new_tokens=6, seed=1),
        tiny_tokenizer,
        cfg,
        on_finished=lambda i, k, ep: reported.append((i, k, ep, len(ended_turns))),
    )
    assert sorted((i, k) for i, k, _, _ in reported) == [(i, k) for i in range(3) for k in range(2)]
    for i, k, ep, _ in reported:
        assert episodes[i][k] is ep
    # Episodes of record 0 (one turn) were handed over before the last turn of record 2's (three turns).
    first_of_0 = min(t for i, _, _, t in reported if i == 0)
    assert first_of_0 < len(ended_turns)


class _FakeEngine:
    def __init__(self) -> None:
        self.queue: list = []

    def step(self):
        return [self.queue.pop(0)] if self.queue else []

    def has_unfinished_requests(self):
        return bool(self.queue)


class _FakeLLM:
    """What ``VLLMBackend`` reads of ``vllm.LLM``: requests numbered by ``request_counter``, ``generate``
    driving ``llm_engine.step`` until every request is out (here in ``finish_order``), the outputs sorted by
    request id."""

    def __init__(self, finish_order: list[int]) -> None:
        self.request_counter = SimpleNamespace(counter=7)  # an earlier call took ids 0..6
        self.finish_order = finish_order
        self.llm_engine = _FakeEngine()

    def generate(self, inputs, sp, use_tqdm=False, lora_request=None):
        first = self.request_counter.counter
        self.request_counter.counter += len(inputs)
        outs = [_request_output(first + i, inp["prompt_token_ids"], 5 + i) for i, inp in enumerate(inputs)]
        order = self.finish_order if len(self.finish_order) == len(outs) else range(len(outs))
        self.llm_engine.queue = [outs[i] for i in order]
        done = []
        while self.llm_engine.has_unfinished_requests():
            done += [o for o in self.llm_engine.step() if o.finished]
        return sorted(done, key=lambda o: int(o.request_id))


def _request_output(request_id: int, prompt: list[int], token: int) -> SimpleNamespace:
    sample = SimpleNamespace(token_ids=[token, 6], logprobs=None, finish_reason="stop", text="")
    return SimpleNamespace(
        request_id=str(request_id), finished=True, prompt_token_ids=prompt, outputs=[sample, sample]
    )


def test_vllm_backend_reports_each_request_as_the_engine_finishes_it(tiny_tokenizer, monkeypatch):
    from rewardlab.generation.vllm import VLLMBackend

    backend = object.__new__(VLLMBackend)  # no engine to start: the fake LLM stands in for vllm.LLM
    backend.tokenizer, backend._weights_dropped, backend._asleep, backend._lora = (
        tiny_tokenizer,
        False,
        set(),
        None,
    )
    backend.llm = _FakeLLM([2, 0, 1])
    monkeypatch.setattr(VLLMBackend, "_sampling_params", lambda self, params, prompts: None)
    reported = []
    groups = backend.generate(
        ["a", "b", "c"],
        SamplingParams(n=2, logprobs=False),
        on_finished=lambda i, k, g: reported.append((i, k, g)),
    )
    assert [(i, k) for i, k, _ in reported] == [(2, 0), (2, 1), (0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(groups[i][k] is g for i, k, g in reported)
    assert [g[0].token_ids for g in groups] == [[5, 6], [6, 6], [7, 6]]
    assert "step" not in vars(backend.llm.llm_engine)  # the engine's own step is back
    assert backend.generate(["a"], SamplingParams(n=2, logprobs=False))[0][0].token_ids == [5, 6]


def test_a_backend_without_the_callback_reports_every_sample_when_it_returns():
    from rewardlab.generation import generate_reporting

    class Duck:
        def generate(self, prompts, params):
            return [[Generation(p, [1], [2], None, "stop") for _ in range(params.n)] for p in prompts]

    reported = []
    groups = generate_reporting(
        Duck(), ["a", "b"], SamplingParams(n=2), lambda i, k, g: reported.append((i, k, g))
    )
    assert [(i, k) for i, k, _ in reported] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(groups[i][k] is g for i, k, g in reported)
