"""The ``http:`` reward source against a real HTTP server (the standard library's, in a thread): rewards read
back in order, and every failure (a server that hangs, answers 500 or 429, drops the connection, answers
malformed JSON, the wrong number of rewards, a reward that is not a number) an error row, nothing lost, the
run going on; through the Python API, ``rewardlab score``, ``rewardlab eval`` and RL's reward sources."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections import Counter

import pytest
from http_servers import JSONHandler, serving  # tests/http_servers.py (pytest puts tests/ on the path)
from time_bounds import HANG_S  # tests/time_bounds.py

from rewardlab.scoring import score_records
from rewardlab.types import Record
from rewardlab.verifiers.remote import HTTPRewardSource, is_remote, parse_answer, remote_url

SECRET = "sk-test-4f1c9a-never-written"
SLOW_S = 6.0
"""How long ``/slow`` takes: more than half of ``HANG_S``, the client's timeout in the test that uses it."""


class _Handler(JSONHandler):
    """One behaviour per path; the reward of a record is 1.0 when its completion equals its reference, and
    ``/id`` answers each record's id as its reward (to check the order)."""

    hits: Counter = Counter()
    auth: list[str | None] = []
    in_flight = 0
    max_in_flight = 0
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802
        body = self.read_json()
        path = self.path
        with self.lock:
            self.hits[path] += 1
            hit = self.hits[path]
            self.auth.append(self.headers.get("Authorization"))
            type(self).in_flight += 1
            type(self).max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._answer(path, body, hit)
        finally:
            with self.lock:
                type(self).in_flight -= 1

    def _answer(self, path, body, hit):
        records = body.get("records", [])
        rewards = [float(r["completion"] == r["reference"]) for r in records]
        if path == "/ok":
            return self.send_json(200, {"rewards": rewards})
        if path == "/id":
            time.sleep(random.uniform(0, 0.05))  # batches finish out of order
            return self.send_json(200, {"rewards": [r["id"] for r in records]})
        if path == "/results":
            results = [
                {"reward": x, "details": {"seen": r["completion"]}}
                for x, r in zip(rewards, records, strict=True)
            ]
            results[0] = {"error": "no answer found", "details": {"why": "empty"}}
            results[1] = {"score": 0.25}  # verl's compute_score dict
            return self.send_json(200, {"results": results})
        if path == "/slow":  # one request at a time takes most of the client's timeout
            time.sleep(SLOW_S)
            return self.send_json(200, {"rewards": [r["id"] for r in records]})
        if path == "/hang":
            time.sleep(30)  # a daemon thread: the client's timeout ends the wait, not this
            return self.send_json(200, {"rewards": rewards})
        if path == "/500-once" and hit == 1 or path == "/500":
            return self.send_json(500, {"detail": "internal error"})
        if path == "/500-once":
            return self.send_json(200, {"rewards": rewards})
        if path == "/429-once":
            if hit == 1:
                return self.send_json(429, {"detail": "slow down"}, {"Retry-After": "0"})
            return self.send_json(200, {"rewards": rewards})
        if path == "/400":
            return self.send_json(400, {"detail": "bad request"})
        if path == "/malformed":
            return self.send_raw(200, b'{"rewards": [1.0, ')
        if path == "/short":
            return self.send_json(200, {"rewards": rewards[:-1]})
        if path == "/drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        if path == "/nonnumber":
            return self.send_json(200, {"rewards": [1.0, "high", None, True, float("nan")][: len(records)]})
        if path == "/boom-batch":  # a batch holding a "boom" completion fails; the others are fine
            if any(r["completion"] == "boom" for r in records):
                return self.send_json(500, {"detail": "boom"})
            return self.send_json(200, {"rewards": rewards})
        if path == "/openrlhf":
            assert set(body) == {"query", "prompts", "labels"}
            out = [float(q.endswith(label)) for q, label in zip(body["query"], body["labels"], strict=True)]
            return self.send_json(200, {"rewards": out})
        return self.send_json(404, {"detail": "no such path"})


@pytest.fixture(scope="module")
def server():
    with serving(_Handler) as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh_counts():
    _Handler.hits = Counter()
    _Handler.auth = []
    _Handler.max_in_flight = 0


FAST = {"timeout": 30.0, "retries": 2, "backoff": 0.01}  # a timeout that only a hang reaches


def _records(n=4):
    # completions equal to their reference on even rows
    return [
        Record(id=i, prompt=f"q{i}", completion=str(i), reference=str(i if i % 2 == 0 else -1))
        for i in range(n)
    ]


def _score(url, n=4, **config):
    return score_records(_records(n), f"http:{url}", config={**FAST, **config})


# -- names ----------------------------------------------------------------------------------------------------
def test_names():
    assert is_remote("http:http://h:1/r") and is_remote("https://h/r") and not is_remote("math")
    assert remote_url("http:http://h:1/r") == "http://h:1/r"
    assert remote_url("http:https://h/r") == "https://h/r"
    assert remote_url("https://h/r") == "https://h/r"
    with pytest.raises(ValueError, match="http:URL"):
        remote_url("http:localhost:8000")
    with pytest.raises(ValueError, match="unknown key"):
        HTTPRewardSource("http://h/r", batchsize=3)
    with pytest.raises(ValueError, match="protocol"):
        HTTPRewardSource("http://h/r", protocol="grpc")


def test_answer_shapes():
    assert [r.reward for r in parse_answer({"rewards": [1, 0.5, None]}, 3)] == [1.0, 0.5, None]
    bad = parse_answer({"scores": [1]}, 2)
    assert len(bad) == 2 and all("expected 'rewards' or 'results'" in r.error for r in bad)
    assert bad[0] is not bad[1]
    assert "not a finite number" in parse_answer({"rewards": [float("inf")]}, 1)[0].error
    assert "not an object" in parse_answer({"results": [3]}, 1)[0].error


# -- the Python API -------------------------------------------------------------------------------------------
def test_rewards_come_back_in_order(server):
    results = _score(f"{server}/ok", n=5)
    assert [r.reward for r in results] == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert all(r.error is None for r in results)
    # many batches in flight, finishing out of order: each record still gets its own reward
    results = _score(f"{server}/id", n=23, batch_size=2, concurrency=4)
    assert [r.reward for r in results] == [float(i) for i in range(23)]
    assert _Handler.hits["/id"] == 12 and 1 < _Handler.max_in_flight <= 4


def _in_threads(source: HTTPRewardSource, shares: list[list[Record]]) -> list[list]:
    """``source.score_batch`` of each share, all at once from threads of their own (as the scoring engine
    calls an in-process source: one batch per request of ``rewardlab serve``)."""
    out: list[list | None] = [None] * len(shares)

    def call(i: int) -> None:
        out[i] = source.score_batch(shares[i])

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(len(shares))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(o is not None for o in out)
    return out  # type: ignore[return-value]


def test_threads_share_one_source(server):
    """Six threads score through one source at once: each gets its own rows' rewards, in order, and the
    concurrency limit holds across them."""
    source = HTTPRewardSource(f"http:{server}/id", **FAST, batch_size=2, concurrency=2)
    records = [Record(id=i, prompt="q", completion="c") for i in range(36)]
    shares = [records[k::6] for k in range(6)]
    try:
        out = _in_threads(source, shares)
    finally:
        source.close()
    for share, results in zip(shares, out, strict=True):
        assert [r.reward for r in results] == [float(r.id) for r in share]
    assert _Handler.hits["/id"] == 18 and 1 < _Handler.max_in_flight <= 2
    assert source.usage() == {"requests": 18, "retries": 0, "failures": 0}


@pytest.mark.slow  # about 2 x SLOW_S: the wait must outlast the timeout, which is at least HANG_S
def test_waiting_for_a_turn_is_not_the_requests_time(server):
    """Two threads, one request in flight at a time, each request most of the timeout: the second waits
    for the first, then has its whole timeout (a deadline counted from before the wait made it fail)."""
    source = HTTPRewardSource(f"http:{server}/slow", timeout=HANG_S, retries=0, concurrency=1)
    try:
        out = _in_threads(source, [[Record(id=1)], [Record(id=2)]])
    finally:
        source.close()
    assert [[r.reward for r in results] for results in out] == [[1.0], [2.0]], [o[0].error for o in out]
    assert _Handler.max_in_flight == 1


def test_results_shape_with_details_errors_and_scores(server):
    results = _score(f"{server}/results")
    assert results[0].error == "reward server: no answer found" and results[0].details == {"why": "empty"}
    assert results[1].reward == 0.25 and results[1].error is None
    assert results[2].reward == 1.0 and results[2].details == {"seen": "2"}


def test_a_hanging_server_times_out_as_error_rows(server):
    t0 = time.monotonic()
    results = _score(f"{server}/hang", timeout=0.5, retries=1)
    assert time.monotonic() - t0 < 10  # two attempts of 0.5 s, not the server's 30 s
    assert [r.error for r in results] == ["reward server: timeout after 0.5s (after 2 attempts)"] * 4
    assert [r.reward for r in results] == [0.0] * 4


def test_a_500_is_retried_and_then_an_error_row(server):
    assert [r.reward for r in _score(f"{server}/500-once")] == [1.0, 0.0, 1.0, 0.0]
    assert _Handler.hits["/500-once"] == 2
    results = _score(f"{server}/500")
    assert _Handler.hits["/500"] == 3  # the first attempt and 2 retries
    assert all(
        r.error.startswith("reward server: HTTP 500: ") and "after 3 attempts" in r.error for r in results
    )


def test_429_is_retried_and_400_is_not(server):
    assert [r.reward for r in _score(f"{server}/429-once")] == [1.0, 0.0, 1.0, 0.0]
    assert _Handler.hits["/429-once"] == 2
    results = _score(f"{server}/400")
    assert _Handler.hits["/400"] == 1
    assert results[0].error == 'reward server: HTTP 400: {"detail": "bad request"}'


@pytest.mark.parametrize(
    "path, error, hits",
    [
        ("/malformed", "reward server: malformed response: not JSON", 1),
        ("/short", "reward server: malformed response: 3 entries for 4 records", 1),
        ("/drop", "reward server: connection error: ", 3),
    ],
)
def test_broken_answers_are_error_rows(server, path, error, hits):
    results = _score(f"{server}{path}")
    assert len(results) == 4
    assert all(r.error.startswith(error) and r.reward == 0.0 for r in results)
    assert _Handler.hits[path] == hits


def test_a_reward_that_is_not_a_number_is_that_rows_error(server):
    results = _score(f"{server}/nonnumber", n=5)
    assert results[0].reward == 1.0 and results[0].error is None
    assert results[1].error == "reward server: reward is str 'high', not a number"
    assert results[2].reward is None and results[2].error is None  # null: a missing reward
    assert results[3].error == "reward server: reward is bool True, not a number"
    assert results[4].reward is None and results[4].error is None  # NaN: missing


def test_openrlhf_protocol(server):
    results = _score(f"{server}/openrlhf", protocol="openrlhf")
    assert [r.reward for r in results] == [1.0, 0.0, 1.0, 0.0]


def test_api_key_from_the_environment_only(server, monkeypatch):
    monkeypatch.setenv("RM_TOKEN", SECRET)
    source = HTTPRewardSource(f"http:{server}/ok", api_key_env="RM_TOKEN")
    assert source.score_batch(_records(2))[0].reward == 1.0
    assert _Handler.auth == [f"Bearer {SECRET}"]
    assert SECRET not in repr(source.client) and SECRET not in json.dumps(source.config)
    monkeypatch.delenv("RM_TOKEN")
    HTTPRewardSource(f"http:{server}/ok", api_key_env="RM_TOKEN").score_batch(_records(1))
    assert _Handler.auth[-1] is None  # unset: no header at all


def test_a_row_cannot_send_records_to_a_server_of_its_choosing(server):
    records = [{"completion": "1", "reference": "1", "verifier": f"http:{server}/ok"}]
    [result] = score_records(records, "math", workers=0)
    assert result.error.startswith("invalid record: a row's 'verifier' cannot name a reward server")
    assert _Handler.hits["/ok"] == 0


# -- rewardlab score ------------------------------------------------------------------------------------------
def _write_input(path, n):
    rows = [
        {"id": f"r{i}", "prompt": f"q{i}", "completion": "boom" if i == 3 else str(i), "reference": str(i)}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    return rows


def test_score_cli_end_to_end(server, tmp_path, monkeypatch, capsys):
    from rewardlab.cli import main

    monkeypatch.setenv("RM_TOKEN", SECRET)
    rows = _write_input(tmp_path / "in.jsonl", 9)
    out = tmp_path / "out.jsonl"
    argv = ["score", str(tmp_path / "in.jsonl"), "-o", str(out), "--verifier", f"http:{server}/boom-batch"]
    argv += ["--config", "batch_size=2", "--config", "retries=1", "--config", "backoff=0.01"]
    argv += ["--config", "api_key_env=RM_TOKEN", "--json", "--no-progress"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [w["id"] for w in written] == [r["id"] for r in rows] + [None]  # every row, in order
    # rows 2 and 3 share the batch with "boom": both are error rows; the run went on
    assert [w["reward"] for w in written[:9]] == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert [bool(w["error"]) for w in written] == [
        False,
        False,
        True,
        True,
        False,
        False,
        False,
        False,
        False,
        True,
    ]
    assert written[2]["error"].startswith("reward server: HTTP 500")
    assert summary["rows"] == 10 and summary["errors"] == {"reward server": 2, "invalid JSON": 1}
    assert summary["usage"] == {"requests": 5, "retries": 1, "failures": 1}
    record = json.loads((tmp_path / "out.jsonl.run.json").read_text())
    assert record["source"] == f"http:{server}/boom-batch" and record["config"]["api_key_env"] == "RM_TOKEN"
    assert record["usage"]["requests"] == 5
    everything = out.read_text() + json.dumps(record) + json.dumps(summary)
    assert SECRET not in everything and all(a == f"Bearer {SECRET}" for a in _Handler.auth)
    # resume: the kept rows are not posted again
    assert main([*argv, "--resume"]) == 0
    assert _Handler.hits["/boom-batch"] == 6  # nothing new to score


def test_score_cli_bad_config_is_one_line(server, tmp_path, capsys):
    from rewardlab.cli import main

    _write_input(tmp_path / "in.jsonl", 2)
    argv = [
        "score",
        str(tmp_path / "in.jsonl"),
        "-o",
        str(tmp_path / "o.jsonl"),
        "--verifier",
        f"http:{server}/ok",
    ]
    assert main([*argv, "--config", "batchsize=2"]) == 2
    assert "unknown key(s) batchsize" in capsys.readouterr().err
    assert (
        main(
            ["score", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o.jsonl"), "--verifier", "http:nope"]
        )
        == 2
    )
    assert "an http source is http:URL" in capsys.readouterr().err


# -- rewardlab eval -------------------------------------------------------------------------------------------
def test_eval_with_a_reward_server(server, tmp_path, capsys):
    from rewardlab.cli import main

    data = tmp_path / "problems.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"p{i}", "prompt": f"q{i}", "reference": str(i)}) + "\n" for i in range(3))
    )
    completions = tmp_path / "completions.jsonl"
    rows = [{"problem_id": f"p{i}", "completions": [str(i), "x"]} for i in range(3)]
    completions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["eval", "--completions", str(completions), "--benchmark", str(data), "--verifier"]
    argv += [
        f"http:{server}/ok",
        "--verifier-arg",
        "batch_size=4",
        "-o",
        str(tmp_path / "run"),
        "--bootstrap",
        "0",
    ]
    assert main(argv) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["num_samples"] == 6 and summary["metrics"]["pass@1"]["mean"] == pytest.approx(0.5)
    assert _Handler.hits["/ok"] == 2
    # the same with a server that fails: every sample an error, the evaluation still finishes
    argv[argv.index(f"http:{server}/ok")] = f"http:{server}/500"
    argv[argv.index("batch_size=4")] = "retries=0"
    argv[argv.index(str(tmp_path / "run"))] = str(tmp_path / "run2")
    assert main(argv) == 0
    samples = [json.loads(line) for line in (tmp_path / "run2" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 6 and all(s["error"].startswith("reward server: HTTP 500") for s in samples)


# -- RL reward sources ----------------------------------------------------------------------------------------
def test_rl_reward_sources(server):
    from rewardlab.rl.config import load_config
    from rewardlab.rl.rewards import RewardSources

    source = f"{{name: 'http:{server}/ok', weight: 2.0, kwargs: {{batch_size: 3, timeout: 30, retries: 0}}}}"
    cfg = load_config(preset="grpo", overrides=[f"reward.sources=[{source}, {{name: format, weight: 0.0}}]"])
    sources = RewardSources.from_config(cfg)
    try:
        scored = sources.score(_records(5))
    finally:
        sources.close()
    assert scored.rewards == [2.0, 0.0, 2.0, 0.0, 2.0] and scored.num_errors == 0
    assert scored.correct == [True, False, True, False, True]

    cfg = load_config(
        preset="grpo",
        overrides=[f"reward.sources=[{{name: 'http:{server}/hang', kwargs: {{timeout: 0.3, retries: 0}}}}]"],
    )
    sources = RewardSources.from_config(cfg)
    try:
        scored = sources.score(_records(3))
    finally:
        sources.close()
    assert scored.rewards == [0.0, 0.0, 0.0] and scored.num_errors == 3
    assert scored.errors == Counter({"reward server": 3})


@pytest.mark.parametrize(
    "source, message",
    [
        ("{name: 'http:localhost:8000'}", "an http source is http:URL"),
        (
            "{name: 'http://h/r', kwargs: {batchsize: 2}}",
            r"unknown key\(s\) batchsize in reward.sources\[0\].kwargs",
        ),
        (
            "{name: 'http://h/r', kwargs: {timeout: soon}}",
            r"reward.sources\[0\].kwargs.timeout: expected a number",
        ),
    ],
)
def test_rl_config_checks_http_sources(source, message):
    from rewardlab.rl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=message) as info:
        load_config(preset="grpo", overrides=[f"reward.sources=[{source}]"])
    assert "\n" not in str(info.value)
