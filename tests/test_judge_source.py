"""The ``rubric`` and ``judge`` reward sources end to end against a real HTTP server imitating an
OpenAI-compatible judge (tests/http_servers.py), whose verdicts follow the criterion and the response: every
criterion of every row of a batch in one backend call, a repeated criterion answered once (server hits
counted), an SQLite cache that makes a re-run free, a budget that stops sending (rows after it are error rows,
the server saw at most one chunk more), a flaky server retried, a failed request or an unparseable judgment
as that row's error, RaR-Implicit, the generative verifier (GenRM's prompt with a reference, P(yes)),
``rewardlab score --verifier rubric`` through the CLI, the serve app and RL's ``build_source``, and the
imports of score / serve staying free of torch. The formulas themselves: tests/test_rubric.py."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from http_servers import JSONHandler, serving  # tests/http_servers.py (pytest puts tests/ on the path)

from rewardlab.rewardmodels.judge.sources import JudgeSource, RubricSource
from rewardlab.types import Record

ROOT = Path(__file__).resolve().parents[1]
P_VERDICT = 0.8
"""The probability the server gives to its verdict's token (every other token: 1)."""
PROMPT_TOKENS, COMPLETION_TOKENS = 100, 10
"""What the server reports per request (completion tokens per choice)."""

_SECTIONS = re.compile(r"\[Question\]\n(.*?)\n\n\[Response\]\n(.*?)\n\n\[Criterion\]\n(.*?)\n\n", re.S)


def _keyword(text: str) -> str:
    """The criterion's subject: its last upper-case word."""
    words = re.findall(r"\b[A-Z]{2,}\b", text)
    return words[-1] if words else ""


class _Judge(JSONHandler):
    """An OpenAI-compatible judge at ``/<behaviour>/v1``: ``ok``; ``flaky`` (503 on a request's first attempt);
        ``poison`` (500 when the response says POISON); ``split`` (every other sample of a request
    says the opposite). A criterion is met when the response has the criterion's
        last upper-case word; a pitfall ("Does not mention K") is made when it lacks it, ("Recommends K") when it
        has it; a criterion saying UNPARSEABLE gets no verdict. With a reference the answer is correct when the
        response contains it; the pointwise binary template: when the response says RIGHT. The implicit rubric:
        ``Score: 1 + 3 x (criteria whose word the response has)``."""

    bodies: list[dict] = []
    hits: Counter = Counter()
    lock = threading.Lock()

    def do_GET(self):  # noqa: N802
        self.send_json(200, {"object": "list", "data": [{"id": "judge-model", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        body = self.read_json()
        behaviour = self.path.split("/")[1]
        key = json.dumps(body, sort_keys=True)
        with self.lock:
            self.bodies.append(body)
            self.hits[behaviour] += 1
            self.hits[key] += 1
            first = self.hits[key] == 1
        user = body["messages"][-1]["content"]
        if behaviour == "flaky" and first:
            return self.send_json(503, {"error": {"message": "overloaded"}})
        if behaviour == "poison" and "POISON" in user:
            return self.send_json(500, {"error": {"message": "engine died"}})
        reasoning, first_verdict = _judgment(user)
        n = body.get("n", 1)
        choices = []
        for i in range(n):
            verdict = first_verdict
            if behaviour == "split" and i % 2 and verdict:  # every other sample says the opposite
                verdict = "no" if verdict == "yes" else "yes"
            tokens = [reasoning, " Verdict", ":", f" {verdict}"] if verdict else [reasoning]
            choice = {"index": i, "message": {"role": "assistant", "content": "".join(tokens)}}
            if body.get("logprobs"):
                logprobs = [0.0] * (len(tokens) - 1) + [math.log(P_VERDICT) if verdict else 0.0]
                choice["logprobs"] = {
                    "content": [{"token": t, "logprob": lp} for t, lp in zip(tokens, logprobs, strict=True)]
                }
            choices.append(choice)
        usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS * n}
        self.send_json(200, {"object": "chat.completion", "choices": choices, "usage": usage})


def _judgment(user: str) -> tuple[str, str | None]:
    if "[Rubric]" in user:
        response = user.split("[Response]\n", 1)[1].split("\n\n", 1)[0]
        lines = user.split("[Rubric]\n", 1)[1].split("\n\n", 1)[0].splitlines()
        met = sum(_keyword(line) in response for line in lines)
        return f"Holistically. Score: {min(10, 1 + 3 * met)}/10", None
    if "[Reference Answer]" in user:
        reference = user.split("[Reference Answer]\n", 1)[1].split("\n\n", 1)[0]
        response = user.split("[Response]\n", 1)[1].split("\n\n", 1)[0]
        return "Checked against the reference.", "yes" if reference in response else "no"
    match = _SECTIONS.search(user)
    if match is None:  # the pointwise binary template
        return "Judged.", "yes" if "RIGHT" in user else "no"
    _, response, criterion = match.groups()
    if "UNPARSEABLE" in criterion:
        return "I cannot decide.", None
    present = _keyword(criterion) in response
    if "describes a pitfall" in user:
        made = not present if criterion.startswith("Does not mention") else present
        return "Looked for the mistake.", "yes" if made else "no"
    return "Looked for it.", "yes" if present else "no"


@pytest.fixture(scope="module")
def server():
    with serving(_Judge) as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    _Judge.bodies, _Judge.hits = [], Counter()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _settings(server, behaviour="ok", **options):
    return {"base_url": f"{server}/{behaviour}/v1", "model": "judge-model", "backoff": 0.01, **options}


def _row(response, rubric, prompt="Q?", **fields):
    return Record(prompt=prompt, completion=response, metadata={"rubric": rubric, **fields})


RUBRIC = [
    {"title": "Capital", "description": "Essential Criteria: Names PARIS.", "weight": 5},
    {"title": "River", "description": "Important Criteria: Mentions the SEINE.", "weight": 3},
    {"title": "Extra", "description": "Optional Criteria: Mentions the LOUVRE.", "weight": 2},
    {"title": "Country", "description": "Pitfall Criteria: Does not mention FRANCE.", "weight": -1},
]


class _Counting:
    """Wraps a backend's generate: how many calls, and how many prompts each."""

    def __init__(self, backend):
        self.backend, self.calls = backend, []

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate(self, prompts, params):
        self.calls.append(len(prompts))
        return self.backend.generate(prompts, params)


# ---- RaR-Explicit ----------------------------------------------------------------------------------------------
def test_explicit_rows_in_one_generate_with_details(server):
    source = RubricSource(**_settings(server))
    source.judge.backend = counting = _Counting(source.judge.backend)
    rows = [
        _row("PARIS on the SEINE, in FRANCE.", RUBRIC),  # all met, pitfall avoided
        _row("PARIS.", RUBRIC),  # (5 + 0 + 0 - 1) / 10: no river, no France
        _row("LOUVRE", [{"criterion": "Mentions the LOUVRE", "weight": 1}]),
    ]
    results = source.score_batch(rows)
    assert counting.calls == [9]  # every criterion of every row, one call
    assert [r.error for r in results] == [None] * 3
    assert [r.reward for r in results] == [pytest.approx(8 / 10), pytest.approx(4 / 10), 1.0]
    details = results[1].details
    assert details["aggregation"] == "explicit" and details["rubric_score"] == pytest.approx(0.4)
    assert [c["met"] for c in details["criteria"]] == [True, False, False, True]  # pitfall made: met
    first = details["criteria"][0]
    assert set(first) == {"criterion", "weight", "category", "gate", "met", "probability", "verdict_text"}
    assert first["criterion"] == "Names PARIS." and first["category"] == "essential" and first["weight"] == 5
    assert first["probability"] == pytest.approx(P_VERDICT)  # P(yes) from the verdict token
    assert details["criteria"][1]["probability"] == pytest.approx(1 - P_VERDICT)
    assert first["verdict_text"] == "Looked for it. Verdict: yes"
    # the pitfall went to the pitfall prompt, the others to the criterion prompt, both in the demos' layout
    users = [b["messages"][-1]["content"] for b in _Judge.bodies]
    assert sum("describes a pitfall" in u for u in users) == 2
    assert (
        "[Question]\nQ?\n\n[Response]\nPARIS.\n\n[Criterion]\nNames PARIS.\n\nDoes the response meet"
        in "".join(users)
    )
    usage = source.usage()
    assert usage["requests"] == 9 and usage["prompt_tokens"] == 9 * PROMPT_TOKENS and "cost_usd" not in usage
    source.close()


def test_soft_reward_and_the_first_row(server):
    source = RubricSource(**_settings(server, reward_from="soft"))
    [result] = source.score_batch([_row("PARIS.", RUBRIC)])
    p = P_VERDICT
    # P(yes): PARIS p, SEINE 1-p, LOUVRE 1-p; the pitfall made with p: (5p + 3(1-p) + 2(1-p) - p) / 10
    assert result.reward == pytest.approx((5 * p + 5 * (1 - p) - p) / 10)


def test_a_repeated_criterion_is_one_request(server):
    source = RubricSource(**_settings(server))
    shared = [{"criterion": "Names PARIS", "weight": 1}, {"criterion": "Mentions the SEINE", "weight": 2}]
    rows = [
        # the same question and response in two rows (other ids, metadata, weights): the same requests
        Record(id=1, prompt="Q?", completion="PARIS", metadata={"rubric": shared, "source": "a"}),
        Record(
            id=2,
            prompt="Q?",
            completion="PARIS",
            reference="x",
            metadata={"rubric": [{**shared[0], "weight": 7}]},
        ),
        # a criterion twice in one rubric
        _row("SEINE", [shared[1], shared[1], {"criterion": "Names PARIS", "weight": 1}], prompt="Q2?"),
    ]
    results = source.score_batch(rows)
    assert [r.reward for r in results] == [pytest.approx(1 / 3), 1.0, pytest.approx(4 / 5)]
    # 6 criterion prompts, 2 + 2 distinct: 4 requests, 2 answered by the cache
    assert _Judge.hits["ok"] == 4
    assert source.usage()["requests"] == 4 and source.usage()["cached"] == 2
    source.score_batch(rows)  # the whole batch again: free
    assert _Judge.hits["ok"] == 4 and source.usage()["cached"] == 8


def test_an_sqlite_cache_makes_a_rerun_free(server, tmp_path):
    cache = str(tmp_path / "judge.sqlite")
    rows = [_row(f"PARIS {i}", RUBRIC) for i in range(3)]
    first = RubricSource(**_settings(server, cache=cache))
    rewards = [r.reward for r in first.score_batch(rows)]
    first.close()
    assert _Judge.hits["ok"] == 12
    again = RubricSource(**_settings(server, cache=cache))
    assert [r.reward for r in again.score_batch(rows)] == rewards
    usage = again.usage()
    assert _Judge.hits["ok"] == 12 and usage["requests"] == 0 and usage["cached"] == 12  # hit rate 100%


def test_budget_stops_sending(server):
    # 100 prompt + 10 completion tokens at $1 / $2 per 1M: $0.00012 a request; $0.0005 is spent after the 5th.
    # Chunks of concurrency 2: after 4 requests $0.00048 < budget, so the third chunk goes (6 sent), then none.
    price = {"prompt": 1.0, "completion": 2.0}
    source = RubricSource(**_settings(server, concurrency=2, price=price, budget_usd=0.0005))
    rows = [_row(f"PARIS {i}", RUBRIC[:2]) for i in range(10)]  # 2 criteria a row, 20 prompts
    results = source.score_batch(rows)
    assert _Judge.hits["ok"] == 6  # the overshoot: at most one chunk past the budget
    assert [r.error is None for r in results] == [True] * 3 + [False] * 7
    assert all(r.error == "judge budget exhausted: spent $0.0007 of $0.0005" for r in results[3:])
    assert all(r.reward == 0.0 for r in results[3:])
    usage = source.usage()
    assert usage["cost_usd"] == pytest.approx(6 * 0.00012)
    assert usage["cost_usd"] - 0.0005 <= 2 * 0.00012  # spent <= budget + one chunk
    # cached answers are still served; new requests are not sent
    again = source.score_batch(rows[:4])
    assert [r.error is None for r in again] == [True, True, True, False] and _Judge.hits["ok"] == 6


def test_token_budget_and_a_missing_price(server):
    source = RubricSource(**_settings(server, concurrency=1, budget_tokens=220))
    results = source.score_batch([_row(f"PARIS {i}", RUBRIC[:1]) for i in range(4)])
    assert _Judge.hits["ok"] == 2  # 110 tokens a request: spent after the second
    assert [r.error for r in results[2:]] == ["judge budget exhausted: spent 220 of 220 tokens"] * 2
    with pytest.raises(ValueError, match="budget_usd needs the judge model's price"):
        RubricSource(**_settings(server, budget_usd=1.0))
    priced = RubricSource(
        **_settings(server, model="gpt-4o-mini-2024-07-18", budget_usd=1.0)
    )  # the built-in table
    priced.score_batch([_row("PARIS", RUBRIC[:1])])
    assert priced.usage()["cost_usd"] == pytest.approx((100 * 0.15 + 10 * 0.60) / 1e6)


def test_retries_failed_requests_and_missing_verdicts_are_row_errors(server):
    source = RubricSource(**_settings(server, "flaky", retries=1))
    assert [
        r.reward for r in source.score_batch([_row("PARIS on the SEINE with the LOUVRE, FRANCE", RUBRIC)])
    ] == [1.0]
    assert _Judge.hits["flaky"] == 8 and source.usage()["retries"] == 4
    source = RubricSource(**_settings(server, "poison", retries=0))
    rows = [
        _row("PARIS", RUBRIC[:1]),
        _row("POISON PARIS", RUBRIC[:2]),
        _row("PARIS", [RUBRIC[0], {"criterion": "Is UNPARSEABLE", "weight": 1}]),
        _row("PARIS", "no rubric here"),
        Record(prompt="Q?", completion="PARIS"),
        Record(prompt="Q?", completion="PARIS", reference=json.dumps(RUBRIC[:1])),  # the reference as rubric
    ]
    results = source.score_batch(rows)
    assert [r.reward for r in results] == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert results[1].error.startswith("criterion 0 ('Names PARIS.'): judge request failed: HTTP 500")
    assert results[1].details["criteria"][0]["met"] is None and results[1].details["rubric_score"] is None
    assert results[2].error == "criterion 1 ('Is UNPARSEABLE'): no verdict: no binary verdict found"
    assert results[2].details["criteria"][0]["met"] is True  # what was judged is kept
    assert results[3].error.startswith("rubric error: the rubric is a string but not JSON")
    assert results[4].error == "rubric error: the row has no 'rubric' field and its reference is not a rubric"


def test_a_tie_counts_against_the_response(server):
    source = RubricSource(**_settings(server, "split", k=2, temperature=1.0))
    [result] = source.score_batch([_row("PARIS on the SEINE with the LOUVRE, FRANCE", RUBRIC)])
    # every criterion's two samples disagree: unmet, and the pitfall made; (0 - 1) / 10 clipped to 0
    assert [c["met"] for c in result.details["criteria"]] == [False, False, False, True]
    assert result.reward == 0.0 and result.error is None
    assert [c["probability"] for c in result.details["criteria"]] == [pytest.approx(0.5)] * 4


def test_a_backend_that_loses_prompts_fails_every_row():
    class Short:
        takes_messages = True

        def generate(self, prompts, params):
            return []

    source = RubricSource(base_url="http://127.0.0.1:9/v1", model="m")
    source.judge.backend = Short()
    [result] = source.score_batch([_row("PARIS", RUBRIC[:2])])
    assert result.error == (
        "criterion 0 ('Names PARIS.'): judge request failed: the backend returned 0 results for 2 prompts"
    )


# ---- RaR-Implicit ----------------------------------------------------------------------------------------------
def test_implicit_one_prompt_per_row_with_the_whole_rubric(server):
    source = RubricSource(**_settings(server, aggregation="implicit"))
    results = source.score_batch([_row("PARIS on the SEINE", RUBRIC), _row("x", "[]")])
    assert _Judge.hits["ok"] == 1
    # the rubric as a list: PARIS, SEINE (and FRANCE's pitfall line does not match): score 1 + 3 x 2 = 7
    assert results[0].reward == pytest.approx((7 - 1) / 9)
    details = results[0].details
    assert details["aggregation"] == "implicit" and details["rubric_score"] == results[0].reward
    assert details["score"] == 7.0 and [c["met"] for c in details["criteria"]] == [None] * 4
    user = _Judge.bodies[0]["messages"][-1]["content"]
    assert "[Rubric]\n1. (essential, weight 5) Names PARIS.\n" in user
    assert "4. (pitfall, weight -1, a mistake to avoid) Does not mention FRANCE." in user
    assert results[1].error == "rubric error: the rubric has no criteria"


# ---- the generative verifier -------------------------------------------------------------------------------------
def test_judge_source_uses_genrm_with_a_reference(server):
    source = JudgeSource(**_settings(server, reward_from="soft"))
    results = source.score_batch(
        [
            Record(prompt="2+2?", completion="It is 4.", reference="4"),
            Record(prompt="2+2?", completion="It is 5.", reference=4),
            Record(prompt="Say hi.", completion="RIGHT"),
            Record(prompt="Say hi.", completion="nope", reference=""),
        ]
    )
    assert [r.details["template"] for r in results] == ["genrm_verify", "genrm_verify", "binary", "binary"]
    assert [r.details["verdict"] for r in results] == ["yes", "no", "yes", "no"]
    p = P_VERDICT
    assert [r.reward for r in results] == [pytest.approx(x) for x in (p, 1 - p, p, 1 - p)]  # P(yes)
    users = {b["messages"][-1]["content"] for b in _Judge.bodies}
    genrm = [u for u in users if "[Reference Answer]\n4\n" in u]
    assert len(genrm) == 2 and all("Is the answer correct?" in u for u in genrm)
    plain = JudgeSource(**_settings(server))
    assert [r.reward for r in plain.score_batch([Record(prompt="q", completion="a", reference="a")])] == [1.0]


# ---- the ways in: RL, the CLI, serve ---------------------------------------------------------------------------
def test_build_source_and_check_source_through_rl(server):
    from rewardlab.config import ConfigError
    from rewardlab.rl.sources import build_source, check_source, source_kind

    source = build_source("rubric", _settings(server), run={})
    assert isinstance(source, RubricSource) and source.runs_in_process
    assert isinstance(build_source("judge", _settings(server)), JudgeSource)  # also outside a run
    assert not source_kind("rubric").run_only and not source_kind("judge").scored_by_engine
    check_source("rubric", _settings(server, aggregation="implicit"), "reward.sources[0]")
    for config, message in [
        ({"base_url": "http://x/v1", "aggregtion": "implicit"}, "unknown setting 'aggregtion'"),
        ({}, "the judge needs base_url"),
        ({"base_url": "http://x/v1", "aggregation": "both"}, "aggregation must be"),
        ({"base_url": "http://x/v1", "budget_usd": -1}, "budget_usd must be > 0"),
        ({"base_url": "http://x/v1", "price": {"prompt": 1}}, "a price is"),
        ({"backend": "hf"}, "needs model"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)) as err:
            check_source("rubric", config, "reward.sources[0]")
        assert str(err.value).startswith("reward.sources[0].kwargs: rubric: ")


def test_rewardlab_score_verifier_rubric_end_to_end(server, tmp_path, capsys):
    from rewardlab.cli import main

    data = tmp_path / "in.jsonl"
    rows = [
        {"id": 0, "prompt": "Capital?", "completion": "PARIS on the SEINE in FRANCE", "rubric": RUBRIC},
        {"id": 1, "prompt": "Capital?", "completion": "PARIS", "rubric": RUBRIC},
        {"id": 2, "prompt": "Capital?", "completion": "PARIS"},  # no rubric: an error row
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    argv = ["score", str(data), "-o", str(out), "--verifier", "rubric", "--json", "--no-progress"]
    argv += ["--config", f"base_url={server}/ok/v1", "--config", "model=judge-model"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [w["reward"] for w in written] == [pytest.approx(0.8), pytest.approx(0.4), 0.0]
    assert written[1]["details"]["criteria"][3]["met"] is True and written[1]["rubric"] == RUBRIC
    assert written[2]["error"].startswith("rubric error: the row has no 'rubric' field")
    assert _Judge.hits["ok"] == 8 and summary["usage"]["requests"] == 8
    # score's summary has the rubric tally (RubricSource.summary_tallies), worked out by hand from the rows
    tally = summary["rubric"]
    assert (tally["samples"], tally["errors"]) == (2, 1)
    assert tally["mean_rubric_score"] == pytest.approx((0.8 + 0.4) / 2)
    shares = {name: c["mean_share_met"] for name, c in tally["categories"].items()}
    assert shares == {"essential": 1.0, "important": 0.5, "optional": 0.0, "pitfall": 0.5}


def test_an_rl_run_logs_the_judges_usage(server):
    """The RL reward sources report a judge's run totals as ``usage/<source>/<key>`` (requests counted by the
    server), so a run's metrics show what the judge cost; sources without usage add nothing."""
    from rewardlab.rl.rewards import RewardSources
    from rewardlab.verifiers import get_verifier

    rubric = RubricSource(**_settings(server, price={"prompt": 1.0, "completion": 2.0}))
    sources = RewardSources([(rubric, 1.0), (get_verifier("qa"), 1.0)])
    sources.score([_row("PARIS and the SEINE", RUBRIC, reference="x"), _row("PARIS", RUBRIC, reference="x")])
    metrics = sources.usage_metrics()
    assert metrics["usage/rubric/requests"] == _Judge.hits["ok"] == 8
    assert metrics["usage/rubric/prompt_tokens"] > 0 and metrics["usage/rubric/cost_usd"] > 0
    assert not [k for k in metrics if not k.startswith("usage/rubric/")]
    sources.close()


def test_the_serve_app_serves_rubric(server):
    from fastapi.testclient import TestClient

    from rewardlab.serve.app import build_app

    with TestClient(build_app("rubric", config=_settings(server), workers=1)) as client:
        records = [{"prompt": "Q?", "completion": "PARIS", "metadata": {"rubric": RUBRIC}}]
        answer = client.post("/score", json={"records": records}).json()
    assert answer["results"][0]["reward"] == pytest.approx(0.4)


def test_score_and_serve_stay_light():
    code = (
        "import sys\n"
        "import rewardlab.cli.score, rewardlab.serve.app\n"
        "from rewardlab.verifiers import get_source\n"
        "s = get_source('rubric', base_url='http://127.0.0.1:9/v1', model='m')\n"
        "j = get_source('judge', base_url='http://127.0.0.1:9/v1')\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
