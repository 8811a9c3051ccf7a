"""The judge's ``openai`` backend against a real HTTP server that imitates ``/v1/chat/completions`` (the
standard library's, in a thread): chat messages with no local template or tokenizer, soft scores from the
server's token log-probabilities, the concurrency limit, retries, timeouts, 4xx not retried, failed
requests as error rows, the cache, usage totals, the API key from the environment only, and ``rm judge
--backend openai`` end to end. A real ``vllm serve`` is in tests/test_rollout_vllm.py."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter

import pytest
from http_servers import JSONHandler, serving  # tests/http_servers.py (pytest puts tests/ on the path)

from rewardlab.rewardmodels.judge import LLMJudge
from rewardlab.rewardmodels.judge.judge import span_probability
from rewardlab.rewardmodels.judge.parse import parse_verdict
from rewardlab.types import Record

SECRET = "sk-judge-93be11-never-written"
LOGPROB = -0.2


class _ChatHandler(JSONHandler):
    """``/<behaviour>/v1/...``: ``ok``; ``slow`` (0.15 s per request); ``hang`` (30 s); ``flaky`` (503 on a
    request's first attempt); ``poison`` (500 when the response under judgment says POISON); ``bad`` (400);
    ``one`` (ignores ``n``); ``plain`` (no log-probabilities, no usage). The judge says yes when the response
    says RIGHT."""

    bodies: list[dict] = []
    hits: Counter = Counter()
    auth: list[str | None] = []
    in_flight = 0
    max_in_flight = 0
    lock = threading.Lock()

    def do_GET(self):  # noqa: N802
        self.send_json(200, {"object": "list", "data": [{"id": "judge-model", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        body = self.read_json()
        behaviour = self.path.split("/")[1]
        with self.lock:
            self.bodies.append(body)
            self.hits[behaviour] += 1
            self.hits[json.dumps(body, sort_keys=True)] += 1
            first = self.hits[json.dumps(body, sort_keys=True)] == 1
            self.auth.append(self.headers.get("Authorization"))
            type(self).in_flight += 1
            type(self).max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._answer(behaviour, body, first)
        finally:
            with self.lock:
                type(self).in_flight -= 1

    def _answer(self, behaviour, body, first):
        user = body["messages"][-1]["content"]
        if behaviour == "slow":
            time.sleep(0.15)
        if behaviour == "hang":
            time.sleep(30)  # a daemon thread: the client's timeout ends the wait, not this
        if behaviour == "flaky" and first:
            return self.send_json(503, {"error": {"message": "overloaded"}})
        if behaviour == "poison" and "POISON" in user:
            return self.send_json(500, {"error": {"message": "engine died"}})
        if behaviour == "bad":
            return self.send_json(400, {"error": {"message": "max_tokens is too large"}})
        verdict = "yes" if "RIGHT" in user else "no"
        tokens = ["The answer", " is fine.", " Verdict", ":", f" {verdict}"]
        n = 1 if behaviour == "one" else body.get("n", 1)
        choices = []
        for i in range(n):
            choice = {
                "index": i,
                "message": {"role": "assistant", "content": "".join(tokens)},
                "finish_reason": "stop",
            }
            if body.get("logprobs") and behaviour != "plain":
                choice["logprobs"] = {
                    "content": [{"token": t, "logprob": LOGPROB, "bytes": None} for t in tokens]
                }
            choices.append(choice)
        answer = {"id": "x", "object": "chat.completion", "model": body["model"], "choices": choices}
        if behaviour != "plain":
            answer["usage"] = {"prompt_tokens": 100, "completion_tokens": 5 * n, "total_tokens": 100 + 5 * n}
        self.send_json(200, answer)


@pytest.fixture(scope="module")
def server():
    with serving(_ChatHandler) as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    _ChatHandler.bodies, _ChatHandler.hits, _ChatHandler.auth = [], Counter(), []
    _ChatHandler.max_in_flight = 0
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _judge(server, behaviour="ok", model="judge-model", **options):
    api = {"base_url": f"{server}/{behaviour}/v1", "backoff": 0.01, "timeout": 30.0}  # only a hang reaches it
    api.update({k: options.pop(k) for k in list(options) if k in _API_FIELDS})
    return LLMJudge(model, backend="openai", backend_kwargs=api, mode="binary", **options)


_API_FIELDS = {
    "api_key_env",
    "concurrency",
    "timeout",
    "retries",
    "backoff",
    "cache",
    "logprobs",
    "n_per_request",
    "price_prompt",
    "price_completion",
    "budget_usd",
}


def _records(*completions):
    return [Record(prompt=f"Q{i}?", completion=c) for i, c in enumerate(completions)]


def test_messages_verdicts_and_soft_scores(server):
    judge = _judge(
        server, model=None, k=3, temperature=0.7, seed=5, max_new_tokens=64, system_prompt="Be fair."
    )
    assert judge.tokenizer is None  # no local tokenizer is needed, or loaded
    right, wrong = judge.score_batch(_records("RIGHT: 4", "3"))
    p = math.exp(LOGPROB)  # the verdict's span is the value, " yes": one token
    assert right.reward == 1.0 and right.details["votes"] == ["yes"] * 3
    assert right.details["soft_score"] == pytest.approx(p)
    assert wrong.reward == 0.0 and wrong.details["soft_score"] == pytest.approx(1 - p)
    # the two requests run at once, so they may arrive in either order
    (body,) = [b for b in _ChatHandler.bodies if "RIGHT: 4" in b["messages"][-1]["content"]]
    assert body["model"] == "judge-model"  # the first model GET /models lists
    assert body["n"] == 3 and body["temperature"] == 0.7 and body["seed"] == 5 and body["max_tokens"] == 64
    assert body["logprobs"] is True
    system, user = body["messages"]
    assert system == {"role": "system", "content": "Be fair."} and user["role"] == "user"
    assert "[The Start of the Response]\nRIGHT: 4\n" in user["content"]  # the template, no chat markup
    assert "<|im_start|>" not in user["content"]
    judge.close()


def test_span_probability_reads_the_verdicts_tokens():
    text = "Verdict: yes"
    verdict = parse_verdict(text, "binary")
    assert span_probability(["Verdict", ":", " y", "es"], [-1.0, -1.0, -0.5, -0.25], text, verdict) == (
        pytest.approx(math.exp(-0.75))
    )
    # tokens that do not spell the text (byte pieces, stripped spaces): no soft score, not a guess
    assert span_probability(["Verdict", ":", "yes"], [0.0, 0.0, -0.5], text, verdict) is None


def test_without_logprobs_the_verdict_still_counts(server):
    judge = _judge(server, "plain")
    [result] = judge.score_batch(_records("RIGHT"))
    assert result.reward == 1.0 and "soft_score" not in result.details
    assert judge.usage()["prompt_tokens"] == 0  # the server reported no usage
    judge = _judge(server, "ok", logprobs=False)
    judge.score_batch(_records("RIGHT"))
    assert "logprobs" not in _ChatHandler.bodies[-1]


def test_concurrency_limit(server):
    judge = _judge(server, "slow", concurrency=3)
    results = judge.score_batch(_records(*[f"RIGHT {i}" for i in range(12)]))
    assert [r.reward for r in results] == [1.0] * 12
    assert _ChatHandler.hits["slow"] == 12 and _ChatHandler.max_in_flight == 3


def test_retries_and_failed_requests_as_error_rows(server):
    judge = _judge(server, "flaky", retries=2)
    assert [r.reward for r in judge.score_batch(_records("RIGHT", "x"))] == [1.0, 0.0]
    assert _ChatHandler.hits["flaky"] == 4 and judge.usage()["retries"] == 2
    judge = _judge(server, "poison", retries=1)
    results = judge.score_batch(_records("RIGHT", "POISON", "no"))
    assert results[0].reward == 1.0 and results[2].reward == 0.0 and results[2].error is None
    assert results[1].reward == 0.0
    assert (
        results[1].error.startswith("judge request failed: HTTP 500: ")
        and "(after 2 attempts)" in results[1].error
    )
    usage = judge.usage()
    assert usage["failures"] == 1 and usage["retries"] == 1 and usage["requests"] == 3


def test_timeout_and_400_not_retried(server):
    judge = _judge(server, "hang", timeout=0.3, retries=1)
    t0 = time.monotonic()
    [result] = judge.score_batch(_records("RIGHT"))
    assert time.monotonic() - t0 < 10  # two attempts of 0.3 s, not the server's 30 s
    assert result.error == "judge request failed: timeout after 0.3s (after 2 attempts)"
    judge = _judge(server, "bad", retries=3)
    results = judge.score_batch(_records("a", "b"))
    assert _ChatHandler.hits["bad"] == 2  # once per row: a 400 is not retried
    assert all(r.error.startswith("judge request failed: HTTP 400: ") for r in results)
    assert "max_tokens is too large" in results[0].error


def test_identical_requests_are_sent_once(server, tmp_path):
    judge = _judge(server)
    rows = _records("RIGHT", "RIGHT")
    rows[1].prompt = rows[0].prompt  # the same judge prompt twice
    first, second = judge.score_batch(rows)
    assert _ChatHandler.hits["ok"] == 1 and first.details == second.details
    judge.score_batch(rows)  # a repeated batch: from the cache
    assert _ChatHandler.hits["ok"] == 1
    assert judge.usage() == {
        "requests": 1,
        "cached": 3,
        "retries": 0,
        "failures": 0,
        "prompt_tokens": 100,
        "completion_tokens": 5,
    }
    # on disk: a second run (a new judge) pays nothing
    cache = tmp_path / "cache" / "judge.sqlite"
    _judge(server, cache=str(cache)).score_batch(rows)
    assert _ChatHandler.hits["ok"] == 2
    again = _judge(server, cache=str(cache))
    assert again.score_batch(rows)[0].reward == 1.0 and _ChatHandler.hits["ok"] == 2
    assert again.usage()["cached"] == 2 and again.usage()["requests"] == 0
    # off: every row its own request
    _judge(server, cache="off").score_batch(rows)
    assert _ChatHandler.hits["ok"] == 4


def test_a_failed_request_is_not_cached(server):
    judge = _judge(server, "flaky", retries=0)
    assert judge.score_batch(_records("RIGHT"))[0].error.startswith("judge request failed: HTTP 503")
    assert judge.score_batch(_records("RIGHT"))[0].reward == 1.0  # asked again, and this time answered


def test_a_server_that_ignores_n_is_asked_per_sample(server):
    judge = _judge(server, "one", k=3, temperature=1.0, seed=7)
    [result] = judge.score_batch(_records("RIGHT"))
    assert result.details["n_samples"] == 3 and result.reward == 1.0
    assert sorted(b["seed"] for b in _ChatHandler.bodies) == [7, 8, 9]  # distinct seeds, distinct samples
    judge = _judge(server, "ok", k=2, n_per_request=False)
    judge.score_batch(_records("x"))
    assert [b["n"] for b in _ChatHandler.bodies[3:]] == [1, 1]


def test_api_key_only_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    judge = _judge(server)
    judge.score_batch(_records("RIGHT"))
    assert _ChatHandler.auth == [f"Bearer {SECRET}"]
    assert SECRET not in repr(judge.backend.client) and SECRET not in repr(judge.backend.config)
    monkeypatch.setenv("MY_JUDGE_KEY", "other")
    _judge(server, api_key_env="MY_JUDGE_KEY").score_batch(_records("x"))
    assert _ChatHandler.auth[-1] == "Bearer other"
    monkeypatch.delenv("OPENAI_API_KEY")
    _judge(server).score_batch(_records("y"))
    assert _ChatHandler.auth[-1] is None  # a local server: no header


def test_rm_judge_cli_end_to_end(server, tmp_path, monkeypatch, capsys):
    from rewardlab.cli import main

    monkeypatch.setenv("JUDGE_KEY", SECRET)
    data = tmp_path / "in.jsonl"
    rows = [
        {"id": i, "prompt": "Q?", "completion": c} for i, c in enumerate(["RIGHT", "x", "RIGHT", "POISON"])
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    out = tmp_path / "out.jsonl"
    argv = [
        "rm",
        "judge",
        str(data),
        "-o",
        str(out),
        "--backend",
        "openai",
        "--base-url",
        f"{server}/poison/v1",
    ]
    argv += ["--mode", "binary", "--k", "2", "--concurrency", "2", "--retries", "1", "--backoff", "0.01"]
    argv += ["--api-key-env", "JUDGE_KEY", "--batch-size", "2", "--no-progress"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [w["id"] for w in written] == [0, 1, 2, 3, None]
    assert [w["reward"] for w in written] == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert written[3]["error"].startswith("judge request failed: HTTP 500")
    assert written[4]["error"] == "invalid JSON at line 5"
    assert report["rows"] == 5 and report["errors"] == 2
    # rows 0 and 2 are the same request: sent once
    assert report["usage"] == {
        "requests": 4,
        "cached": 1,
        "retries": 1,
        "failures": 1,
        "prompt_tokens": 200,
        "completion_tokens": 20,
    }
    record = json.loads((tmp_path / "out.jsonl.run.json").read_text())
    assert record["usage"] == report["usage"] and record["backend"] == "openai"
    assert all(a == f"Bearer {SECRET}" for a in _ChatHandler.auth)
    assert SECRET not in out.read_text() + json.dumps(record) + json.dumps(report)
    # a resume with other speed settings continues the run
    assert main([*argv, "--concurrency", "4", "--resume"]) == 0


def test_rm_judge_cli_flag_checks(server, tmp_path, capsys):
    from rewardlab.cli import main

    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"prompt": "Q", "completion": "A"}) + "\n")
    out = str(tmp_path / "out.jsonl")
    assert main(["rm", "judge", str(data), "-o", out, "--model", "m", "--concurrency", "2"]) == 2
    assert "--concurrency: only with --backend openai" in capsys.readouterr().err
    assert main(["rm", "judge", str(data), "-o", out]) == 2
    assert "--model is needed with --backend hf" in capsys.readouterr().err
    assert (
        main(["rm", "judge", str(data), "-o", out, "--backend", "openai", "--base-url", "localhost:8000"])
        == 2
    )
    assert "base_url must be an http" in capsys.readouterr().err
    (tmp_path / "not-a-db").write_text("plain text")
    argv = ["rm", "judge", str(data), "-o", out, "--backend", "openai", "--cache", str(tmp_path / "not-a-db")]
    assert main(argv) == 2
    assert "as a response cache: file is not a database" in capsys.readouterr().err


def test_no_server_makes_every_row_an_error_row(free_port):
    judge = LLMJudge(None, backend="openai", backend_kwargs={"base_url": f"http://127.0.0.1:{free_port}/v1",
                     "retries": 1, "backoff": 0.01}, mode="binary")  # fmt: skip
    results = judge.score_batch(_records("a", "b"))
    assert [r.reward for r in results] == [0.0, 0.0]
    assert all(
        r.error.startswith("judge request failed: cannot list the server's models: connection error")
        for r in results
    )
    judge = _judge(f"http://127.0.0.1:{free_port}", retries=1)
    results = judge.score_batch(_records("a", "b"))
    assert all(r.error.startswith("judge request failed: connection error") for r in results)
    assert "(after 2 attempts)" in results[0].error and judge.usage()["failures"] == 2


# ---- cost and budget (rewardlab.rewardmodels.judge.cost, enforced by the openai backend) -------------------------
def test_cost_and_a_budget_that_stops_the_judge(server):
    # 100 prompt + 5 completion tokens a request at $2 / $4 per 1M: $0.00022 a request
    judge = _judge(server, concurrency=2, price_prompt=2.0, price_completion=4.0, budget_usd=0.0005)
    results = judge.score_batch(_records(*[f"RIGHT {i}" for i in range(6)]))
    # chunks of 2: $0.00044 after the first (< budget), $0.00088 after the second: nothing more is sent
    assert _ChatHandler.hits["ok"] == 4
    assert [r.reward for r in results] == [1.0] * 4 + [0.0] * 2
    assert [r.error for r in results[4:]] == ["judge budget exhausted: spent $0.0009 of $0.0005"] * 2
    assert judge.usage()["cost_usd"] == pytest.approx(4 * 0.00022)
    # without a budget the cost is still counted
    judge = _judge(server, price_prompt=2.0, price_completion=4.0)
    judge.score_batch(_records("x"))
    assert judge.usage()["cost_usd"] == pytest.approx(0.00022)


def test_prices_file_table_and_bad_prices(tmp_path):
    from rewardlab.rewardmodels.judge.cost import (
        BUILT_IN_PRICES,
        Price,
        load_prices,
        lookup_price,
        resolve_price,
    )
    from rewardlab.rewardmodels.judge.remote import ChatAPIConfig

    yaml_file = tmp_path / "prices.yaml"
    yaml_file.write_text("my-judge:\n  prompt: 0.5\n  completion: 1.5\n")
    json_file = tmp_path / "prices.json"
    json_file.write_text(json.dumps({"other": {"prompt": 1, "completion": 2}}))
    assert load_prices(yaml_file) == {"my-judge": Price(0.5, 1.5)}
    assert load_prices(json_file)["other"].cost(1_000_000, 500_000) == pytest.approx(2.0)
    assert resolve_price("my-judge", None, str(yaml_file)) == Price(0.5, 1.5)
    assert resolve_price("gpt-4o", Price(9, 9), str(yaml_file)) == Price(9, 9)  # the run's own price first
    assert lookup_price("openai/gpt-4o-2024-08-06", BUILT_IN_PRICES) == BUILT_IN_PRICES["gpt-4o"]
    assert lookup_price("gpt-4o-mini-2024-07-18", BUILT_IN_PRICES) == BUILT_IN_PRICES["gpt-4o-mini"]
    assert lookup_price("gpt-4", BUILT_IN_PRICES) is None and lookup_price(None, BUILT_IN_PRICES) is None
    (tmp_path / "bad.yaml").write_text("m:\n  prompt: cheap\n  completion: 1\n")
    with pytest.raises(ValueError, match="bad.yaml: m: a price's prompt must be a number"):
        load_prices(tmp_path / "bad.yaml")
    with pytest.raises(ValueError, match="cannot read the prices file"):
        load_prices(tmp_path / "missing.yaml")
    with pytest.raises(ValueError, match="together"):
        ChatAPIConfig(price_prompt=1.0)
    with pytest.raises(ValueError, match="budget_tokens must be > 0"):
        ChatAPIConfig(budget_tokens=0)


def test_rm_judge_cli_budget_and_price_flags(server, tmp_path, capsys):
    from rewardlab.cli import main

    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": "Q?", "completion": f"RIGHT {i}"}) + "\n" for i in range(5))
    )
    out = tmp_path / "out.jsonl"
    argv = ["rm", "judge", str(data), "-o", str(out), "--backend", "openai", "--base-url", f"{server}/ok/v1"]
    argv += ["--model", "judge-model", "--mode", "binary", "--concurrency", "1", "--no-progress"]
    argv += ["--price-prompt", "2", "--price-completion", "4", "--budget-usd", "0.0004"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [w["error"] for w in written] == [None, None] + [
        "judge budget exhausted: spent $0.0004 of $0.0004"
    ] * 3
    assert report["usage"]["cost_usd"] == pytest.approx(2 * 0.00022) and _ChatHandler.hits["ok"] == 2
    assert main([*argv[:-6], "--budget-usd", "1"]) == 2  # a budget in USD needs a price
    assert "budget_usd needs the judge model's price" in capsys.readouterr().err
