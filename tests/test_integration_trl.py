"""rewardlab's sources as TRL reward functions (``rewardlab.integrations.trl``).

The end-to-end test runs ``docs/examples/trl_grpo.py`` (the documented example itself): a real
``trl.GRPOTrainer`` trains the tiny model for 2 steps with ``reward_function("math")``, the model made to
write known completions (right, wrong, no answer), and what the function returned, and what TRL logged, are
the rewards expected for them (1s and 0s), equal to ``score_records(records, "math")`` too. A second
trainer drives TRL's reward path (``GRPOTrainer._calculate_rewards``: the synchronous and the ``async``
reward functions, ``None`` as NaN, ``log_metric`` / ``log_extra``) without generating. The rest calls the
function directly, as TRL does: missing rewards, error rows, conversational completions, timeouts, closing.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rewardlab.integrations import trl as rk_trl
from rewardlab.integrations.trl import RewardFunction, async_reward_function, reward_function
from rewardlab.scoring import score_records
from rewardlab.types import Record, Result
from rewardlab.verifiers import Verifier, register_verifier

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "trl_grpo.py"

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")


@register_verifier("_trl_spinning", override=True)
class SpinningVerifier(Verifier):
    """Spins ``completion`` seconds of CPU (a runaway check: timeouts count CPU time), then rewards 1."""

    name: ClassVar[str] = "_trl_spinning"

    def verify(self, record: Record) -> Result:
        end = time.process_time() + float(record.completion_text)
        while time.process_time() < end:
            pass
        return Result(reward=1.0)


@register_verifier("_trl_maybe", override=True)
class MaybeVerifier(Verifier):
    """No reward (``None``) for a row whose metadata says ``task != "math"``: the source does not apply."""

    name: ClassVar[str] = "_trl_maybe"

    def verify(self, record: Record) -> Result:
        if record.metadata.get("task") != "math":
            return Result(reward=None)
        return Result(reward=0.5, details={"extracted": "yes"})


def long_only(prompts, completions, references):
    """A ``py:`` reward function: 1 for a completion over 5 characters, no reward for a shorter one."""
    return [1.0 if len(c) > 5 else None for c in completions]


class Loggers:
    """Stand-ins for TRL's ``log_metric`` and ``log_extra``."""

    def __init__(self) -> None:
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list[Any]] = {}

    def log_metric(self, name: str, value: float) -> None:
        self.metrics.setdefault(name, []).append(value)

    def log_extra(self, column: str, values: list) -> None:
        self.extra.setdefault(column, []).extend(values)

    def kwargs(self) -> dict[str, Any]:
        return {"log_metric": self.log_metric, "log_extra": self.log_extra, "trainer_state": None}


@pytest.fixture
def math_fn():
    fn = reward_function("math")
    yield fn
    fn.close()


# ------------------------------------------------------------------------------------------------ TRL itself
def _load_example():
    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RecordingRewardFunction(RewardFunction):
    """The reward function, remembering what TRL gave it and what it returned."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, prompts=None, completions=None, **kwargs):
        rewards = super().__call__(prompts, completions, **kwargs)
        self.calls.append(
            {
                "prompts": prompts,
                "completions": completions,
                "solution": kwargs["solution"],
                "rewards": rewards,
            }
        )
        return rewards


def forced_completion(prompt: str, row: int) -> tuple[str, float, str | None]:
    """What the policy is made to write for ``prompt`` in row ``row`` of a generation batch (2 prompts x 2
    completions, one prompt's two side by side), with the reward and error expected for it: a correct boxed
    answer, a wrong one, a correct one, no answer at all. The answer is worked out here from the prompt
    (``"a+b="`` or ``"a-b="``), not read from the dataset."""
    a, op, b = re.fullmatch(r"(\d+)([+-])(\d+)=", prompt).groups()
    answer = int(a) + int(b) if op == "+" else int(a) - int(b)
    return [
        (f"\\boxed{{{answer}}}", 1.0, None),
        (f"\\boxed{{{answer + 1}}}", 0.0, None),
        (f"\\boxed{{{answer}}}", 1.0, None),
        ("no idea", 0.0, "no answer found"),
    ][row % 4]


def forcing_model(tokenizer, generated: list[list[str]]):
    """The tiny model, its ``generate`` made to write :func:`forced_completion` (a logits processor leaves
    one token possible at each step, then EOS); each call's texts are appended to ``generated``."""
    import torch  # lazy: torch (the [rl] extra) is only needed by the TRL tests
    from transformers import LogitsProcessor, LogitsProcessorList

    from rewardlab.data.tiny import build_tiny_model

    class Forced(LogitsProcessor):
        def __init__(self, targets: list[list[int]], prompt_length: int) -> None:
            self.targets, self.prompt_length = targets, prompt_length

        def __call__(self, input_ids, scores):
            step = input_ids.shape[1] - self.prompt_length
            forced = torch.full_like(scores, float("-inf"))
            for row, target in enumerate(self.targets):
                forced[row, target[step] if step < len(target) else tokenizer.eos_token_id] = 0.0
            return forced

    model = build_tiny_model()
    generate = model.generate

    def forced_generate(*args, input_ids, **kwargs):
        prompts = tokenizer.batch_decode(input_ids, skip_special_tokens=True)
        texts = [forced_completion(p, row)[0] for row, p in enumerate(prompts)]
        generated.append(texts)
        targets = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        processors = LogitsProcessorList([Forced(targets, input_ids.shape[1])])
        return generate(*args, input_ids=input_ids, logits_processor=processors, **kwargs)

    model.generate = forced_generate
    return model


def test_example_trains_with_trl_and_its_rewards_are_rewardlabs(tmp_path, monkeypatch, one_torch_thread):
    """The example trains 2 steps with a policy made to write known completions (per batch: right, wrong,
    right, no answer): the rewards TRL got, logged and averaged are the expected ones, 1s and 0s."""
    pytest.importorskip("trl")
    example = _load_example()
    made: list[RecordingRewardFunction] = []
    generated: list[list[str]] = []

    def recording_reward_function(*args, **kwargs):
        made.append(RecordingRewardFunction(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(example, "reward_function", recording_reward_function)
    monkeypatch.setattr(
        example, "build_tiny_model", lambda: forcing_model(example.load_tiny_tokenizer(), generated)
    )
    trainer = example.main(str(tmp_path / "out"), steps=2, max_completion_length=12)

    (fn,) = made
    assert fn._pools[0].scorer is None  # the example closed the pool
    assert len(generated) == 2 and len(fn.calls) == 2
    dataset = {row["prompt"]: row["solution"] for row in example.arithmetic_dataset(4)}
    seen_prompts = []
    for call, texts in zip(fn.calls, generated, strict=True):
        assert len(call["prompts"]) == 4 and call["prompts"][0::2] == call["prompts"][1::2]
        seen_prompts += call["prompts"][0::2]
        expected = [forced_completion(p, row) for row, p in enumerate(call["prompts"])]
        assert call["completions"] == texts == [text for text, _, _ in expected]  # what the policy wrote
        assert call["solution"] == [dataset[p] for p in call["prompts"]]
        assert call["rewards"] == [reward for _, reward, _ in expected] == [1.0, 0.0, 1.0, 0.0]
        records = [
            Record(prompt=p, completion=c, reference=s)
            for p, c, s in zip(call["prompts"], call["completions"], call["solution"], strict=True)
        ]
        assert call["rewards"] == [r.reward for r in score_records(records, "math")]
    assert sorted(seen_prompts) == sorted(dataset)  # 2 steps x 2 prompts: each of the 4 once

    # What TRL logged: the last generation batch's rewards and the extra columns, and each step's metrics.
    last = fn.calls[-1]
    assert list(trainer._logs["completion"]) == last["completions"]
    assert list(trainer._logs["rewards"]["math"]) == [1.0, 0.0, 1.0, 0.0]
    assert list(trainer._logs["extra"]["math/error"]) == [None, None, None, "no answer found"]
    answers = [dataset[p] for p in last["prompts"]]
    assert list(trainer._logs["extra"]["math/answer"]) == [
        answers[0],
        str(int(answers[1]) + 1),
        answers[2],
        None,
    ]
    steps = [entry for entry in trainer.state.log_history if "rewards/math/mean" in entry]
    assert len(steps) == 2
    for entry in steps:
        assert entry["rewards/math/mean"] == 0.5
        assert entry["reward"] == 0.5
        assert entry["rewardlab/math/errors"] == 0.25
        assert entry["rewardlab/math/errors/no_answer_found"] == 0.25
        assert entry["rewardlab/math/missing"] == 0.0


def test_trl_reward_path_sync_and_async(tmp_path, tiny_tokenizer, one_torch_thread):
    """TRL's ``_calculate_rewards`` with a synchronous and an ``async`` rewardlab function: conversational
    rows, a ``None`` reward (NaN in TRL), and the loggers TRL passes."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import is_async_callable

    from rewardlab.data.tiny import build_tiny_model

    sync_fn = reward_function("math")
    async_fn = async_reward_function({"math": 1.0, "_trl_maybe": 2.0}, name="mixed")
    assert is_async_callable(async_fn) and not is_async_callable(sync_fn)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=2,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=build_tiny_model(),
        reward_funcs=[sync_fn, async_fn],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "1+1=", "solution": "2", "task": "math"}]),
        processing_class=tiny_tokenizer,
    )
    try:
        assert trainer.reward_func_names == ["math", "mixed"]
        prompts = [[{"role": "user", "content": "2+2="}]] * 3
        completions = [
            [{"role": "assistant", "content": "\\boxed{4}"}],
            [{"role": "assistant", "content": "\\boxed{5}"}],
            [{"role": "assistant", "content": "no idea"}],
        ]
        tasks = ["math", "other", "math"]
        inputs = [{"prompt": p, "solution": "4", "task": t} for p, t in zip(prompts, tasks, strict=True)]
        rewards = trainer._calculate_rewards(inputs, prompts, completions, [[1]] * 3)
        assert rewards[:, 0].tolist() == [1.0, 0.0, 0.0]
        mixed = rewards[:, 1].tolist()
        assert mixed[0] == 2.0 and math.isnan(mixed[1]) and mixed[2] == 1.0  # 1*math + 2*maybe
        assert trainer._pending_metrics["rewardlab/math/errors"] == [pytest.approx(1 / 3)]
        assert trainer._pending_metrics["rewardlab/mixed/missing"] == [pytest.approx(1 / 3)]
        assert trainer._pending_metrics["rewardlab/mixed/errors/no_answer_found"] == [pytest.approx(1 / 3)]
        assert trainer._pending_extra_logs["math/answer"] == ["4", "5", None]
        assert trainer._pending_extra_logs["mixed/error"] == [None, None, "math: no answer found"]
    finally:
        sync_fn.close()
        async_fn.close()


# ------------------------------------------------------------------------------------------------ rewards
def test_rewards_and_logs_as_trl_calls_it(math_fn):
    logs = Loggers()
    rewards = math_fn(
        prompts=["1+1=", "2+2=", "3+3="],
        completions=["\\boxed{2}", "\\boxed{5}", "The answer is 6"],
        completion_ids=[[1], [2], [3]],
        solution=["2", "4", "6"],
        level=[1, 2, 3],
        **logs.kwargs(),
    )
    assert rewards == [1.0, 0.0, 1.0]
    assert logs.metrics == {"rewardlab/math/errors": [0.0], "rewardlab/math/missing": [0.0]}
    assert logs.extra["math/answer"] == ["2", "5", "6"]
    assert logs.extra["math/error"] == [None, None, None]
    assert '"match": true' in logs.extra["math/details"][0]


def test_conversational_completions_and_columns_as_metadata():
    fn = reward_function("_trl_maybe", reference=None)
    try:
        prompts = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]] * 2
        completions = [[{"role": "assistant", "content": "x"}]] * 2
        assert fn(prompts=prompts, completions=completions, task=["math", "chat"]) == [0.5, None]
        results = fn.score(prompts, completions, task=["math", "chat"])
        assert results[0].details == {"extracted": "yes"}
    finally:
        fn.close()


def test_conversational_math_scores_the_last_message(math_fn):
    completions = [
        [{"role": "assistant", "content": "Let me think."}, {"role": "assistant", "content": "\\boxed{4}"}]
    ]
    prompts = [[{"role": "user", "content": "2+2="}]]
    assert math_fn(prompts=prompts, completions=completions, solution=["4"]) == [1.0]


def test_none_where_a_py_source_has_no_reward():
    fn = reward_function("py:test_integration_trl:long_only", reference=None)
    try:
        logs = Loggers()
        rewards = fn(prompts=["p", "p"], completions=["short", "much longer"], **logs.kwargs())
        assert rewards == [None, 1.0]
        assert fn.__name__ == "py:test_integration_trl:long_only"  # the source's name, as TRL logs it
        assert logs.metrics[f"rewardlab/{fn.__name__}/missing"] == [0.5]
    finally:
        fn.close()


def test_none_where_a_part_of_a_combination_has_no_reward():
    fn = reward_function([("math", 1.0), {"name": "_trl_maybe", "weight": 2.0}], reference="answer")
    try:
        assert fn.__name__ == "1*math+2*_trl_maybe"
        rewards = fn(
            prompts=["q"] * 3,
            completions=["\\boxed{1}", "\\boxed{1}", "\\boxed{7}"],
            answer=["1", "1", "1"],
            task=["math", "chat", "math"],
        )
        assert rewards == [2.0, None, 1.0]
    finally:
        fn.close()


def test_error_rows_are_zero_and_logged(math_fn):
    logs = Loggers()
    completions = ["no answer here", 42, "\\boxed{3}", None]
    rewards = math_fn(
        prompts=["q"] * 4, completions=completions, solution=["3", "3", "3", "3"], **logs.kwargs()
    )
    assert rewards == [0.0, 0.0, 1.0, 0.0]
    assert logs.extra["math/error"][0] == "no answer found"
    assert logs.extra["math/error"][1].startswith("invalid record: TypeError: completion is int")
    assert logs.extra["math/error"][3].startswith("invalid record")
    assert logs.metrics["rewardlab/math/errors"] == [0.75]
    assert logs.metrics["rewardlab/math/errors/no_answer_found"] == [0.25]
    assert logs.metrics["rewardlab/math/errors/invalid_record"] == [0.5]
    assert all(len(values) == 4 for values in logs.extra.values())

    # A kind once seen is logged every batch after (0 when absent), so TRL's average is over those batches.
    logs2 = Loggers()
    assert math_fn(prompts=["q"], completions=["\\boxed{3}"], solution=["3"], **logs2.kwargs()) == [1.0]
    assert logs2.metrics["rewardlab/math/errors/no_answer_found"] == [0.0]


def test_a_short_column_is_an_error_row_not_a_crash(math_fn):
    rewards = math_fn(prompts=["q", "q"], completions=["\\boxed{1}", "\\boxed{1}"], solution=["1"])
    assert rewards == [1.0, 0.0]
    assert "IndexError" in math_fn.score(["q", "q"], ["a", "b"], solution=["1"])[1].error


def test_a_missing_reference_column_warns_once_and_scores_without(math_fn):
    with pytest.warns(UserWarning, match="no 'solution' column"):
        assert math_fn(prompts=["q"], completions=["\\boxed{1}"], answer=["1"]) == [0.0]
    assert math_fn(prompts=["q"], completions=["\\boxed{1}"], answer=["1"]) == [0.0]


def test_loggers_are_optional_and_a_failing_logger_costs_nothing(math_fn):
    def broken(*args):
        raise RuntimeError("tracker down")

    kwargs = {"prompts": ["q"], "completions": ["\\boxed{1}"], "solution": ["1"]}
    assert math_fn(**kwargs) == [1.0]  # an older TRL passes no loggers
    assert math_fn(**kwargs, log_metric=broken, log_extra=broken) == [1.0]


def test_a_timeout_row_does_not_stall_the_others():
    fn = reward_function("_trl_spinning", reference=None, workers=1, timeout=1)
    try:
        logs = Loggers()
        start = time.monotonic()
        rewards = fn(prompts=["p"] * 4, completions=["0", "60", "0", "0"], **logs.kwargs())
        elapsed = time.monotonic() - start
        assert rewards == [1.0, 0.0, 1.0, 1.0]
        assert logs.extra["_trl_spinning/error"] == [None, "timeout", None, None]
        assert logs.metrics["rewardlab/_trl_spinning/errors/timeout"] == [0.25]
        # a hang guard, not a speed check: the 60 s row was cut at ~1 s (uncut, the call takes 60 s)
        assert elapsed < 30, elapsed
        assert fn(prompts=["p"], completions=["0"]) == [1.0]  # the pool goes on
    finally:
        fn.close()


def test_async_variant_returns_the_same_rewards():
    fn = async_reward_function("math")
    try:
        kwargs = {"prompts": ["q", "q"], "completions": ["\\boxed{1}", "\\boxed{2}"], "solution": ["1", "1"]}
        assert asyncio.run(fn(**kwargs)) == [1.0, 0.0]
    finally:
        fn.close()


# ------------------------------------------------------------------------------------------------ lifecycle
def test_pool_is_built_on_first_call_reused_closed_and_rebuilt(math_fn):
    assert math_fn._pools[0].scorer is None
    kwargs = {"prompts": ["q"], "completions": ["\\boxed{1}"], "solution": ["1"]}
    assert math_fn(**kwargs) == [1.0]
    scorer = math_fn._pools[0].scorer
    assert math_fn(**kwargs) == [1.0] and math_fn._pools[0].scorer is scorer
    math_fn.close()
    assert scorer._closed and math_fn._pools[0].scorer is None
    assert math_fn(**kwargs) == [1.0]  # a later call builds a new pool


def test_garbage_collection_closes_the_pool():
    fn = reward_function("math")
    fn(prompts=["q"], completions=["\\boxed{1}"], solution=["1"])
    scorer = fn._pools[0].scorer
    workers = [w.process for w in scorer._pool]
    assert workers and all(p.is_alive() for p in workers)
    del fn
    gc.collect()
    assert scorer._closed
    for process in workers:
        process.join(timeout=30)  # a hang guard: a live worker fails at once after it
        assert not process.is_alive()


@pytest.mark.parametrize(
    ("source", "config", "match"),
    [
        ("mth", {}, "unknown reward source 'mth'"),
        ("self_certainty", {}, "needs the policy"),
        ("math", {"mode": "bogus"}, "unknown extraction mode"),
        ("math", {"bogus": 1}, r"source\.kwargs"),
        ({"math": 1.0}, {"mode": "strict"}, "give each part its own 'kwargs'"),
        ([("math", 1.0), ("nope", 1.0)], {}, r"source\[1\]\.name: unknown reward source"),
        ([{"nam": "math"}], {}, "expected keys"),
        ([], {}, "at least one source"),
    ],
)
def test_bad_arguments_fail_at_construction(source, config, match):
    with pytest.raises(ValueError, match=match):
        reward_function(source, **config)


def test_bad_pool_settings_fail_at_construction():
    with pytest.raises(ValueError, match="timeout"):
        reward_function("math", timeout=0)
    with pytest.raises(ValueError, match="workers"):
        reward_function("math", workers=-1)


def test_importing_imports_no_torch():
    code = "import rewardlab.integrations.trl, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_details_are_cut_for_the_table():
    text = rk_trl._details_text({"log": "x" * 10_000})
    assert len(text) == rk_trl.DETAILS_CHARS and text.endswith("...")


def test_a_source_that_cannot_load_raises_at_the_first_call():
    fn = reward_function("rm:/nonexistent/reward-model", reference=None)  # the path is only read when built
    with pytest.raises(OSError):
        fn(prompts=["q"], completions=["a"])
