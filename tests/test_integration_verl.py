"""rewardlab.integrations.verl driven by verl's own code (verl 0.9.1, installed without its dependencies): the
legacy ``NaiveRewardManager`` and ``BatchRewardManager`` (``verl/workers/reward_manager/``), the reward loop's
``NaiveRewardManager`` loaded by ``verl.trainer.ppo.reward.load_reward_manager`` (the docs example), and
agreement with ``verl.utils.reward_score.default_compute_score``."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rewardlab.integrations import verl as rk_verl
from rewardlab.scoring import score_records
from rewardlab.types import Record, Result
from rewardlab.verifiers import VERIFIERS, Verifier, register_verifier

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "verl_reward.py"
KEYS = {"score", "acc", "pred", "error", "source", *rk_verl.DETAIL_KEYS}
ADD = "```python\nprint(sum(map(int, input().split())))\n```"
ADD_TESTS = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})


@pytest.fixture(scope="module")
def example():
    pytest.importorskip("verl.workers.reward_manager")
    spec = importlib.util.spec_from_file_location("verl_reward_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    rk_verl.close_pools()


def expected_reward(data_source: str, completion: str, ground_truth: Any, routes: Any = None) -> float:
    """What rewardlab itself gives the row: ``score_records`` with the route's source, settings, reference."""
    route = rk_verl.find_route(data_source, rk_verl.route_table(routes))
    if route is None:
        return 0.0
    record = Record(completion=completion, reference=route.convert(ground_truth))
    [result] = score_records([record], route.source, config=dict(route.settings), workers=0)
    return result.reward or 0.0


def manager_rows() -> list[tuple[str, str, str, Any]]:
    import numpy as np

    paris = {"target": np.array(["Paris", "City of Paris"])}  # parquet rows hold numpy arrays
    return [
        ("openai/gsm8k", "2+70?", "2 + 70 = 72\n#### 72", "72"),
        ("openai/gsm8k", "2+70?", "The answer is 72", "72"),  # no "#### N": verl's gsm8k format fails
        ("lighteval/MATH", "Half?", "It is $\\boxed{\\frac{1}{2}}$.", "\\frac12"),
        ("HuggingFaceH4/MATH-500", "2+2?", "\\boxed{3} or \\boxed{4}", "4"),  # hedged: 0 here
        ("searchR1_nq", "Capital?", "<think>...</think><answer> Paris </answer>", paris),
        ("searchR1_nq", "Capital?", "<answer>London</answer>", paris),
        ("no/such_source", "?", "x", "y"),
    ]


def check_reward_tensor(batch: Any, reward_tensor: Any, rewards: list[float]) -> None:
    """The reward sits at each row's last valid response token, zeros elsewhere (verl's layout)."""
    prompt_len = batch.batch["prompts"].shape[-1]
    lengths = batch.batch["attention_mask"][:, prompt_len:].sum(dim=-1).tolist()
    for i, (length, reward) in enumerate(zip(lengths, rewards, strict=True)):
        assert reward_tensor[i, length - 1].item() == pytest.approx(reward)
        assert reward_tensor[i].abs().sum().item() == pytest.approx(abs(reward))


# ---- verl's reward managers --------------------------------------------------------------------------------


def test_naive_reward_manager_gives_rewardlab_rewards(example, tiny_tokenizer):
    from verl.workers.reward_manager import NaiveRewardManager

    rows = manager_rows()
    batch = example.tiny_batch(rows, tiny_tokenizer)
    manager = NaiveRewardManager(tiny_tokenizer, num_examine=0, compute_score=rk_verl.compute_score)
    out = manager(batch, return_dict=True)

    expected = [expected_reward(ds, response, gt) for ds, _, response, gt in rows]
    assert expected == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    check_reward_tensor(batch, out["reward_tensor"], expected)
    info = out["reward_extra_info"]
    assert set(info) == KEYS and all(len(v) == len(rows) for v in info.values())
    assert info["score"] == expected
    assert info["acc"] == [True, False, True, False, True, False, False]
    assert info["pred"][0] == "72" and info["pred"][4] == "Paris"
    assert info["error"][1] == "no answer found"
    assert info["error"][6].startswith("unknown data_source 'no/such_source'")
    assert info["source"] == ["math"] * 4 + ["qa"] * 2 + [None]
    assert info["reason"][3].startswith("ambiguous")


def test_batch_reward_manager_scores_the_batch_with_reward_kwargs(example, tiny_tokenizer):
    from verl.workers.reward_manager import BatchRewardManager

    rows = [*manager_rows(), ("codecontests", "Add.", ADD, ADD_TESTS), ("my_data", "6*7?", "#### 42", "42")]
    routes = {"my_data": {"source": "math", "settings": {"mode": "gsm8k"}, "reference": "text"}}
    batch = example.tiny_batch(rows, tiny_tokenizer)
    manager = BatchRewardManager(
        tiny_tokenizer, num_examine=0, compute_score=rk_verl.compute_score_batch, routes=routes, workers=2
    )
    out = manager(batch, return_dict=True)

    expected = [expected_reward(ds, response, gt, routes) for ds, _, response, gt in rows]
    assert expected[-2:] == [1.0, 1.0]
    check_reward_tensor(batch, out["reward_tensor"], expected)
    info = out["reward_extra_info"]
    assert set(info) == KEYS and all(len(v) == len(rows) for v in info.values())
    assert info["score"] == expected and info["source"][-2:] == ["code", "math"]


def test_the_docs_example_runs_verls_reward_loop(example):
    """docs/examples/verl_reward.py: verl's ``load_reward_manager`` reads path=pkg://..., name and
    reward_kwargs (OmegaConf, as from YAML); the reward loop's manager calls compute_score from threads."""
    outputs = example.main()
    routes = example.CONFIG["reward"]["custom_reward_function"]["reward_kwargs"]["routes"]
    expected = [expected_reward(ds, response, gt, routes) for ds, _, response, gt in example.ROWS]
    assert [o["reward_score"] for o in outputs] == expected == [1.0, 0.0, 1.0, 1.0, 1.0]
    assert all(set(o["reward_extra_info"]) == KEYS for o in outputs)
    assert (
        example.__doc__
        and "reward.custom_reward_function.path=pkg://rewardlab.integrations.verl" in example.__doc__
    )


# ---- routes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data_source", "completion", "ground_truth", "score"),
    [
        ("openai/gsm8k", "48 / 2 = 24, 24 + 48 = 72\n#### 72", "72", 1.0),  # verl's gsm8k: the number
        ("openai/gsm8k", "#### 72", "Natalia sold 48/2 = 24 clips...\n#### 72", 1.0),  # a full solution
        ("openai/gsm8k", "#### 1,200", "1200", 1.0),
        ("openai/gsm8k", "#### 71", "72", 0.0),
        ("lighteval/MATH", "So $\\boxed{2\\sqrt{3}}$.", "\\sqrt{12}", 1.0),  # MATH's boxed answer string
        ("DigitalLearningGmbH/MATH-lighteval", "\\boxed{(1, 2)}", "(2, 1)", 0.0),
        ("lighteval/MATH", "The answer is 5", "5", 0.0),  # verl's MATH reward reads only a box
        ("aime2024", "Answer: 204", "204", 1.0),  # prefix route (verl: startswith("aime"))
        ("math_dapo", "so \\boxed{3}", "3", 1.0),
        ("numina_olympiads", "The answer is \\boxed{3}", "3", 1.0),
        ("searchR1_triviaqa", "<answer>the eiffel tower</answer>", {"target": ["Eiffel Tower"]}, 1.0),
        ("searchR1_hotpotqa", "Eiffel Tower", {"target": ["Eiffel Tower"]}, 0.0),  # Search-R1 needs a tag
        ("codecontests", ADD, ADD_TESTS, 1.0),
        ("apps", "print(3)", ADD_TESTS, 0.5),  # verl: continuous=True, the fraction of cases passed
    ],
)
def test_routes(data_source, completion, ground_truth, score):
    row = rk_verl.compute_score(data_source, completion, ground_truth, {"index": 0})
    assert set(row) == KEYS
    assert row["score"] == score == expected_reward(data_source, completion, ground_truth)
    assert row["acc"] is (score == 1.0)


def test_search_qa_reference_from_parquet():
    np = pytest.importorskip("numpy")
    assert rk_verl.qa_reference({"target": np.array(["Paris", "City of Paris"])}) == {
        "target": ["Paris", "City of Paris"]
    }
    row = rk_verl.compute_score(
        "searchR1_nq", "<answer>City of Paris</answer>", {"target": np.array(["Paris"])}
    )
    assert row["score"] == 0.0 and row["pred"] == "City of Paris"


def test_unknown_data_source_is_an_error_row_unless_a_default_is_set():
    row = rk_verl.compute_score("hiyouga/geometry3k", "\\boxed{3}", "3")  # deliberately not routed
    assert row["score"] == 0.0 and row["acc"] is False and row["source"] is None
    assert "unknown data_source 'hiyouga/geometry3k'" in row["error"]
    assert set(row) == KEYS
    row = rk_verl.compute_score("hiyouga/geometry3k", "\\boxed{3}", "3", default_source="math")
    assert (row["score"], row["source"], row["error"]) == (1.0, "math", None)


def test_routes_override_add_and_remove():
    gsm = {"source": "math", "settings": {"mode": "gsm8k"}, "reference": "text"}
    # a new data source, by name, by dict, and by Route with a function as converter
    assert rk_verl.compute_score("mine", "#### 5", "5", routes={"mine": gsm})["score"] == 1.0
    assert rk_verl.compute_score("mine", "It is 5.", "5", routes={"mine": "math"})["score"] == 1.0
    route = rk_verl.Route("math", {}, lambda gt: gt["answer"])
    assert rk_verl.compute_score("mine", "so 5", {"answer": "5"}, routes={"mine": route})["score"] == 1.0
    # an override of a built-in route: gsm8k without the "####" format requirement
    assert rk_verl.compute_score("openai/gsm8k", "It is 72.", "72")["score"] == 0.0
    relaxed = {"openai/gsm8k": {"source": "math", "reference": "text"}}
    assert rk_verl.compute_score("openai/gsm8k", "It is 72.", "72", routes=relaxed)["score"] == 1.0
    # None removes a route; a prefix route is found by its longest prefix
    removed = rk_verl.compute_score("openai/gsm8k", "#### 72", "72", routes={"openai/gsm8k": None})
    assert removed["error"].startswith("unknown data_source")
    table = rk_verl.route_table({"aime_hard*": "qa"})
    assert rk_verl.find_route("aime_hard_2025", table).source == "qa"
    assert rk_verl.find_route("aime2025", table).source == "math"


def test_omegaconf_reward_kwargs_are_read_like_dicts():
    omegaconf = pytest.importorskip("omegaconf")
    kwargs = omegaconf.OmegaConf.create(
        {
            "routes": {"mine": {"source": "math", "settings": {"mode": ["gsm8k"]}}},
            "detail_keys": ["reason", "method"],
        }
    )
    row = rk_verl.compute_score("mine", "#### 7", "7", **dict(kwargs))
    assert row["score"] == 1.0 and row["method"] == "numeric"


# ---- nothing raises --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"routes": ["not", "a", "mapping"]}, "invalid reward_kwargs: ValueError: routes maps"),
        (
            {"routes": {"openai/gsm8k": {"src": "math"}}},
            "invalid reward_kwargs: ValueError: routes['openai/gsm8k']",
        ),
        ({"routes": {"openai/gsm8k": {"source": "math", "reference": "nope"}}}, "invalid reward_kwargs"),
        (
            {"routes": {"openai/gsm8k": "no_such_verifier"}},
            "source error: no_such_verifier: UnknownNameError",
        ),
        (
            {"routes": {"openai/gsm8k": {"source": "math", "settings": {"mode": "bogus"}}}},
            "source error: math",
        ),
        ({"workers": -1}, "source error: math: ValueError: workers must be >= 0"),
    ],
)
def test_bad_settings_are_error_rows(kwargs, error):
    row = rk_verl.compute_score("openai/gsm8k", "#### 72", "72", **kwargs)
    assert set(row) == KEYS and row["score"] == 0.0 and row["error"].startswith(error), row["error"]


@pytest.mark.parametrize(
    ("data_source", "completion", "ground_truth", "error"),
    [
        ("openai/gsm8k", None, "72", "no answer found"),
        ("openai/gsm8k", "#### 72", None, "invalid reference"),
        ("openai/gsm8k", "#### 72", {"a": 1}, "invalid reference"),
        ("codecontests", ADD, "{not json", "invalid reference: codecontests: JSONDecodeError"),
        ("searchR1_nq", "<answer>x</answer>", {"answers": ["x"]}, "invalid reference"),
        ("searchR1_nq", "<answer>x</answer>", {"target": None}, "invalid reference"),
        (None, "#### 72", "72", "unknown data_source 'None'"),
    ],
)
def test_malformed_rows_are_error_rows(data_source, completion, ground_truth, error):
    row = rk_verl.compute_score(data_source, completion, ground_truth, extra_info="not a dict")
    assert set(row) == KEYS and row["score"] == 0.0 and row["error"].startswith(error), row["error"]


@pytest.fixture
def sleepy_verifier():
    name = "_verl_test_sleepy"

    @register_verifier(name)
    class Sleepy(Verifier):
        def verify(self, record: Record) -> Result:
            end = time.process_time() + 60  # a runaway check: timeouts count CPU time
            while record.completion_text == "hang" and time.process_time() < end:
                pass
            return Result(reward=1.0, details={"reason": "awake"})

    try:
        yield name
    finally:
        VERIFIERS.unregister(name)


def test_a_hanging_row_times_out_and_its_batch_scores(sleepy_verifier):
    start = time.monotonic()
    rows = rk_verl.compute_score_batch(
        ["s"] * 3, ["ok", "hang", "ok"], ["", "", ""], routes={"s": sleepy_verifier}, timeout=1.0, workers=2
    )
    assert time.monotonic() - start < 20
    assert [r["score"] for r in rows] == [1.0, 0.0, 1.0]
    assert rows[1]["error"] == "timeout" and rows[0]["reason"] == "awake"


def test_verls_own_timeout_mid_batch_drops_the_pool_and_the_next_row_scores(
    example, tiny_tokenizer, sleepy_verifier
):
    """NaiveRewardManager(compute_score_timeout=...) raises TimeoutError (SIGALRM) inside the pool's wait: that
    row is an error row, the half-read pool is closed, and the next row gets a fresh one."""
    from verl.workers.reward_manager import NaiveRewardManager

    rows = [("s", "?", "hang", ""), ("s", "?", "ok", "")]
    batch = example.tiny_batch(rows, tiny_tokenizer)
    routes = {"s": sleepy_verifier}

    def compute_score(**kw):
        if kw["solution_str"] != "hang":
            # The legitimate row builds a fresh pool (forks a worker) under verl's alarm: it gets room for a
            # loaded machine (verl's own SIGALRM timer, re-armed; verl disarms it after the call). Only the
            # hanging row, which sleeps 60 s, has the 0.5 s.
            signal.setitimer(signal.ITIMER_REAL, 30.0)
        return rk_verl.compute_score(**kw, routes=routes, timeout=30, workers=1)

    manager = NaiveRewardManager(
        tiny_tokenizer, num_examine=0, compute_score=compute_score, compute_score_timeout=0.5
    )
    out = manager(batch, return_dict=True)
    info = out["reward_extra_info"]
    assert info["score"] == [0.0, 1.0]
    assert info["error"][0].startswith("scoring failed: TimeoutError") and info["error"][1] is None


# ---- pools -------------------------------------------------------------------------------------------------


def _pools_for(name: str) -> list[Any]:
    return [p for key, p in rk_verl._POOLS.items() if key[0] == os.getpid() and key[1] == name]


def test_one_warm_pool_per_source_and_settings_in_this_process(sleepy_verifier):
    routes = {"s": sleepy_verifier}
    rk_verl.close_pools()
    rk_verl.compute_score("s", "a", "", routes=routes, workers=1)
    [pool] = _pools_for(sleepy_verifier)
    scorer = pool.scorer
    rk_verl.compute_score_batch(["s", "s"], ["a", "b"], ["", ""], routes=routes, workers=1)
    assert _pools_for(sleepy_verifier) == [pool] and pool.scorer is scorer  # reused, still warm
    rk_verl.close_pools()
    assert not _pools_for(sleepy_verifier)
    assert rk_verl.compute_score("s", "a", "", routes=routes, workers=1)["score"] == 1.0  # built again


@pytest.mark.skipif(not hasattr(os, "fork"), reason="this machine cannot have it: os.fork")
def test_a_forked_child_builds_its_own_pool_and_leaves_the_parents_alone(sleepy_verifier):
    routes = {"s": sleepy_verifier}
    rk_verl.close_pools()
    assert rk_verl.compute_score("s", "a", "", routes=routes, workers=1)["score"] == 1.0
    [pool] = _pools_for(sleepy_verifier)
    workers = [w.process.pid for w in pool.scorer._pool]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: score, close its pools as atexit would, drop the inherited ones
        code = 1
        try:
            row = rk_verl.compute_score("s", "b", "", routes=routes, workers=1)
            mine = _pools_for(sleepy_verifier)
            ok = row["score"] == 1.0 and len(mine) == 1 and mine[0] is not pool
            rk_verl.close_pools()
            rk_verl._POOLS.clear()
            # the inherited pool is garbage now: its Scorer's __del__ must not stop the parent's workers
            del pool
            gc.collect()
            os.write(write, b"ok" if ok else b"no")
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    assert os.read(read, 2) == b"ok"
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    assert rk_verl.compute_score("s", "c", "", routes=routes, workers=1)["score"] == 1.0
    assert pool.scorer is not None and [w.process.pid for w in pool.scorer._pool] == workers
    assert all(w.process.is_alive() for w in pool.scorer._pool)


def test_concurrent_calls_share_a_pool_and_get_their_own_rows():
    from concurrent.futures import ThreadPoolExecutor

    cases = [(f"#### {n}", str(n if n % 3 else n + 1)) for n in range(24)]
    with ThreadPoolExecutor(8) as executor:
        rows = list(executor.map(lambda c: rk_verl.compute_score("openai/gsm8k", c[0], c[1]), cases))
    assert [r["score"] for r in rows] == [0.0 if n % 3 == 0 else 1.0 for n in range(24)]
    assert [r["pred"] for r in rows] == [str(n) for n in range(24)]


def test_importing_the_integration_imports_no_torch_and_no_verl():
    code = "import sys, rewardlab.integrations.verl; print(sorted({'torch', 'verl'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# ---- agreement with verl's default_compute_score -------------------------------------------------------

AGREE = [
    ("openai/gsm8k", "so 48 + 24 = 72\n#### 72", "72"),
    ("openai/gsm8k", "#### 71", "72"),
    ("openai/gsm8k", "The answer is 72.", "72"),  # both need "#### N"
    ("openai/gsm8k", "#### 1,200", "1200"),
    ("openai/gsm8k", "#### -3", "-3"),
    ("openai/gsm8k", "#### 72\n#### 73", "73"),  # both read the last
    ("lighteval/MATH", "So $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
    ("lighteval/MATH", "\\boxed{\\dfrac{1}{2}}", "\\frac{1}{2}"),
    ("HuggingFaceH4/MATH-500", "\\boxed{5}", "6"),
    ("HuggingFaceH4/MATH-500", "It is 5.", "5"),  # both need a box
    ("searchR1_nq", "<answer>Paris</answer>", {"target": ["Paris"]}),
    ("searchR1_nq", "<answer>the Paris.</answer>", {"target": ["Paris"]}),
    ("searchR1_nq", "<answer>London</answer>", {"target": ["Paris"]}),
    ("searchR1_nq", "Paris", {"target": ["Paris"]}),  # both need a tag
    ("math_dapo", "Answer: 3", "3"),
    ("math_dapo", "so \\boxed{3}", "3"),
    ("math_dapo", "Answer: 4", "3"),
    ("numina_olympiads", "The answer is \\boxed{3}", "3"),
    ("numina_olympiads", "x = 4", "3"),
    ("codecontests", ADD, ADD_TESTS),
    ("codecontests", "print(3)", ADD_TESTS),
]

# Where they differ, each by design (docs/math.md, docs/qa.md): (row, verl's score, rewardlab's score).
DISAGREE = [
    (("openai/gsm8k", "#### 72.0", "72"), 0.0, 1.0),  # verl compares strings; rewardlab numbers: equal values
    (("lighteval/MATH", "\\boxed{3} or \\boxed{4}", "4"), 1.0, 0.0),  # verl reads the last box; a hedge here
    (("lighteval/MATH", "\\boxed{5}. Wait, that is wrong.", "5"), 1.0, 0.0),  # a retracted answer
    (("searchR1_nq", "<answer>London</answer><answer>Paris</answer>", {"target": ["Paris"]}), 1.0, 0.0),
    (
        ("searchR1_nq", "Final answer: Paris", {"target": ["Paris"]}),
        0.0,
        1.0,
    ),  # qa's read=tagged: answer lines
    (("math_dapo", "Answer: 4", "3"), -1.0, 0.0),  # DAPO's scale is +1/-1: only the verdict agrees
]


def _verl_score(data_source: str, completion: str, ground_truth: Any) -> tuple[float, bool]:
    from verl.utils.reward_score import default_compute_score

    out = default_compute_score(data_source, completion, ground_truth)
    if isinstance(out, dict):
        return float(out["score"]), bool(out["acc"])
    return float(out), float(out) == 1.0


def test_agreement_with_verls_default_compute_score():
    pytest.importorskip("verl.utils.reward_score")
    mine = rk_verl.compute_score_batch(*zip(*AGREE, strict=True))
    for row, result in zip(AGREE, mine, strict=True):
        verl_score, verl_acc = _verl_score(*row)
        assert result["acc"] is verl_acc, row
        if not row[0].startswith("math_dapo"):  # DAPO: +1/-1 there, 1/0 here
            assert result["score"] == verl_score, row


def test_documented_disagreements_with_verl():
    pytest.importorskip("verl.utils.reward_score")
    for row, verl_score, mine in DISAGREE:
        assert _verl_score(*row)[0] == verl_score, row
        assert rk_verl.compute_score(*row)["score"] == mine, row
