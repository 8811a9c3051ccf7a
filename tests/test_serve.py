"""``rewardlab serve``: rewardlab's ``http:`` source and OpenRLHF's own client against a real server (a
``rewardlab serve`` subprocess), the same rewards as ``rewardlab score``; bad requests answered 4xx in one
line while the server goes on; limits, auth, metrics, health; concurrent requests sharing one pool; a
hostile row held to the timeout without stalling other requests; SIGTERM answering the request in flight."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from fastapi.testclient import TestClient
from http_servers import stop_process  # tests/http_servers.py (pytest puts tests/ on the path)
from time_bounds import HANG_S, eventually  # tests/time_bounds.py

from rewardlab.cli import main
from rewardlab.scoring import Closed, Scorer, ScoringStream, score_records
from rewardlab.serve.app import RewardServer, app_of, build_app
from rewardlab.serve.protocols import completion_of, finite
from rewardlab.types import Record, Result

REPO = Path(__file__).resolve().parent.parent
HOSTILE = "\\boxed{" + "+".join(f"x^{{{k}}}" for k in range(10_000)) + "}"  # ~50 s in math-verify
TIMEOUT = 2.0

ROWS = [
    {
        "id": i,
        "prompt": f"What is {i} + {i}? ",
        "completion": f"It is \\boxed{{{(2 * i) % 9}}}.",
        "reference": str(2 * i),
    }
    for i in range(30)
]
ROWS[3]["completion"] = "no answer here"
ROWS[4]["completion"] = "\\boxed{1/2}"
ROWS[4]["reference"] = "0.5"
ROWS[5]["metadata"] = {"level": 3}
ROWS[6]["prompt"] = [{"role": "user", "content": "What is 12?"}]
ROWS[6]["completion"] = [{"role": "assistant", "content": "\\boxed{12}"}]
ROWS[6]["reference"] = "12"


# ----------------------------------------------------------------------------------------------------------
# Servers
# ----------------------------------------------------------------------------------------------------------
def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            chunk = os.read(proc.stdout.fileno(), 1)
            if not chunk:
                break
            line += chunk
        elif proc.poll() is not None:
            break
    return line.decode()


def start_server(*flags: str) -> tuple[subprocess.Popen, str]:
    """``rewardlab serve --verifier math`` on a free port; the process and its base URL, once it is ready."""
    command = [sys.executable, "-m", "rewardlab.cli", "serve", "--verifier", "math", "--port", "0", *flags]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    line = _read_line(proc, timeout=60)
    match = re.search(r"rewardlab serve: math at (http://127\.0\.0\.1:\d+) \(POST /score", line)
    if not match:
        stop_process(proc)
        raise AssertionError(f"no ready line: {line!r}")
    return proc, match.group(1)


@pytest.fixture(scope="module")
def server():
    proc, url = start_server("--workers", "2", "--timeout", str(TIMEOUT))
    yield url
    stop_process(proc)


@pytest.fixture(scope="module")
def client():
    """A test client of a small server: 5 rows and 4 KiB per request at most."""
    with TestClient(build_app("math", workers=1, timeout=TIMEOUT, max_rows=5, max_body_bytes=4096)) as c:
        yield c


def _hex(value: float | None) -> str | None:
    return None if value is None else float(value).hex()


def _metrics(c: TestClient, headers: dict | None = None) -> dict[str, float]:
    text = c.get("/metrics", headers=headers).text
    return {
        name: float(value)
        for name, value in (
            line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#")
        )
    }


# ----------------------------------------------------------------------------------------------------------
# The same rewards as `rewardlab score`, through rewardlab's and OpenRLHF's clients
# ----------------------------------------------------------------------------------------------------------
def test_http_source_round_trip_equals_local_scoring(server):
    local = score_records(ROWS, "math", workers=2, timeout=10)
    remote = score_records(ROWS, f"http:{server}/score", config={"batch_size": 7, "concurrency": 3})
    assert [_hex(r.reward) for r in remote] == [_hex(r.reward) for r in local]
    # The client prefixes a server's row errors (docs/remote.md); details come back as they were.
    assert [r.error for r in remote] == [f"reward server: {r.error}" if r.error else None for r in local]
    assert [json.dumps(r.details) for r in remote] == [json.dumps(r.details) for r in local]
    assert local[3].error == "no answer found" and local[6].reward == 1.0

    text_rows = [row for row in ROWS if isinstance(row["prompt"], str)]
    local = score_records(text_rows, "math", workers=2, timeout=10)
    remote = score_records(text_rows, f"http:{server}/get_reward", config={"protocol": "openrlhf"})
    assert [_hex(r.reward) for r in remote] == [_hex(r.reward) for r in local]


class _Engine:
    """Stands in for OpenRLHF's vLLM engine: "generates" a fixed response's token ids."""

    def __init__(self, tokenizer, response: str) -> None:
        self.ids = tokenizer(text=response, add_special_tokens=False)["input_ids"]
        self.response = response

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        output = SimpleNamespace(token_ids=self.ids, text=self.response, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


def test_openrlhf_trainer_client_gets_the_local_rewards(server, tiny_tokenizer):
    """OpenRLHF 0.11.2's own client (``openrlhf/utils/agent.py``: ``SingleTurnAgentExecutor.execute``, which
    tokenizes the prompt, decodes prompt + response tokens into the query and posts it with
    ``_fetch_rewards_via_http``) against the server: the reward of each rollout is the local one."""
    agent = pytest.importorskip("openrlhf.utils.agent", reason="OpenRLHF's client is optional")
    executor = agent.SingleTurnAgentExecutor(f"{server}/get_reward")
    # Scored whole, this query would state two answers (7 and 42) and get 0: the prompt must be cut off.
    long_prompt = "Think step by step. " * 40 + "An example answer: \\boxed{7}. What is 6 times 7? "
    cases = [
        ("What is 6 times 7? ", "It is \\boxed{42}.", "42", 200),
        ("What is 6 times 7? ", "It is \\boxed{41}.", "42", 200),
        ("What is 6 times 7? ", "I do not know.", "42", 200),
        (long_prompt, "So \\boxed{42}.", "42", 92),  # left-truncated prompt: the query starts mid-prompt
    ]
    for prompt, response, label, max_length in cases:
        params = SimpleNamespace(max_tokens=32, logprobs=None)
        engine = _Engine(tiny_tokenizer, response)
        out = asyncio.run(executor.execute(prompt, label, params, max_length, tiny_tokenizer, engine))
        want = score_records([{"prompt": prompt, "completion": response, "reference": label}], "math")[0]
        assert out["reward"] == [want.reward] and out["scores"] == [want.reward], (response, out["reward"])
        assert out["extra_logs"] == {"reward_error": [float(want.error is not None)]}
    # Many queries in one request (how the client shards a batch over several servers).
    queries = [p + r for p, r, _, _ in cases[:3]]
    answers = asyncio.run(executor._fetch_rewards_via_http(queries, [c[0] for c in cases[:3]], ["42"] * 3))
    assert answers[0]["rewards"] == [1.0, 0.0, 0.0] and answers[0]["errors"][2] == "no answer found"


def test_the_docs_example_runs():
    spec = importlib.util.spec_from_file_location(
        "openrlhf_remote", REPO / "docs/examples/openrlhf_remote.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main() == [1.0, 0.0, 0.0]


def test_completion_of_an_openrlhf_query():
    prompt = "System: be brief.\nUser: what is 2+2?\nAssistant: "
    assert completion_of(prompt + "4", prompt) == "4"
    assert completion_of(prompt[20:] + "4", prompt) == "4"  # the prompt's start was cut
    assert completion_of("something else entirely", prompt) == "something else entirely"
    assert completion_of("t: 4", prompt) == "t: 4"  # too short an overlap to mean a cut prompt
    assert completion_of("anything", "") == "anything"


# ----------------------------------------------------------------------------------------------------------
# Bad requests, limits, auth
# ----------------------------------------------------------------------------------------------------------
GOOD = {"records": [{"completion": "\\boxed{4}", "reference": "4"}]}


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/score", b"{", 400),
        ("/score", b"\xff\xfe", 400),
        ("/score", b"[1, 2]", 422),
        ("/score", b"{}", 422),
        ("/score", b'{"records": {"a": 1}}', 422),
        ("/score", b'{"records": [{"completion": "x"}, "row"]}', 422),
        ("/get_reward", b'{"query": "one string"}', 422),
        ("/get_reward", b'{"query": [1]}', 422),
        ("/get_reward", b'{"query": ["a"], "prompts": ["a", "b"]}', 422),
        ("/get_reward", b'{"query": ["a", "b"], "labels": ["x"]}', 422),
        ("/get_reward", b'{"query": ["a"], "labels": "x"}', 422),
        ("/score", json.dumps({"records": [{}] * 6}).encode(), 413),
        ("/get_reward", json.dumps({"query": ["a"] * 6}).encode(), 413),
        ("/score", json.dumps({"records": [{"completion": "x" * 5000}]}).encode(), 413),
        ("/nowhere", b"{}", 404),
    ],
)
def test_bad_requests_are_one_line_4xx_and_the_server_goes_on(client, path, body, status):
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error, str) and error and "\n" not in error and list(response.json()) == ["error"]
    assert client.post("/score", json=GOOD).json()["results"][0]["reward"] == 1.0


def test_a_body_streamed_past_the_limit_is_413(client):
    def chunks():  # no Content-Length: the limit holds while the body streams in
        for _ in range(10):
            yield b" " * 1000

    response = client.post("/score", content=chunks())
    assert response.status_code == 413 and "4096 bytes" in response.json()["error"]
    assert client.post("/score", json=GOOD).status_code == 200


def test_records_that_cannot_be_scored_are_error_rows(client):
    records = [
        {"completion": "\\boxed{4}", "reference": "4"},
        {"completion": "print(1)", "verifier": "code"},  # a client may not pick what the server runs
        {"completion": "\\boxed{4}", "verifier": 5},
        {"completion": "\\boxed{4}", "reference": "4", "verifier": "math"},
    ]
    results = client.post("/score", json={"records": records}).json()["results"]
    assert [r["reward"] for r in results] == [1.0, 0.0, 0.0, 1.0]
    assert results[1]["error"].startswith("invalid record: this server scores with 'math'")
    assert results[2]["error"].startswith("invalid record: 'verifier' must be a verifier name")
    with TestClient(build_app("math", workers=1, row_verifiers=True)) as c:
        results = c.post("/score", json={"records": [{"completion": "x", "verifier": "nope"}]}).json()[
            "results"
        ]
    assert results[0]["error"] == "unknown verifier: 'nope'"


def test_bearer_token(monkeypatch):
    monkeypatch.setenv("RK_SERVE_TEST_TOKEN", "s3cret-token")
    with TestClient(build_app("math", workers=1, token_env="RK_SERVE_TEST_TOKEN")) as c:
        for path, method in (("/score", "post"), ("/get_reward", "post"), ("/metrics", "get")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
                response = c.request(method, path, json=GOOD, headers=headers)
                assert response.status_code == 401 and response.json() == {
                    "error": "missing or wrong bearer token"
                }
        ok = {"Authorization": "Bearer s3cret-token"}
        assert c.post("/score", json=GOOD, headers=ok).json()["results"][0]["reward"] == 1.0
        assert c.get("/metrics", headers=ok).status_code == 200
        assert c.get("/health").status_code == 200  # load balancers probe without the token
        assert _metrics(c, ok)['rewardlab_serve_requests_total{endpoint="/score",status="401"}'] == 3
    monkeypatch.delenv("RK_SERVE_TEST_TOKEN")
    with TestClient(build_app("math", workers=1, token_env="RK_SERVE_TEST_TOKEN")) as c:
        assert c.post("/score", json=GOOD).status_code == 200
    with pytest.raises(ValueError, match="RK_SERVE_TEST_TOKEN"):
        build_app("math", workers=1, token_env="RK_SERVE_TEST_TOKEN", require_token=True)


# ----------------------------------------------------------------------------------------------------------
# Health, metrics, batching
# ----------------------------------------------------------------------------------------------------------
def test_health_and_metrics():
    with TestClient(build_app("math", workers=1, timeout=TIMEOUT)) as c:
        health = c.get("/health").json()
        assert health["ready"] and health["status"] == "ok" and health["source"] == "math"
        assert health["workers"] == 1 and health["pid"] == os.getpid()
        records = [{"completion": "\\boxed{4}", "reference": "4"}, {"completion": "none", "reference": "4"}]
        for _ in range(2):
            c.post("/score", json={"records": records})
        c.post("/get_reward", json={"query": ["Q? \\boxed{3}"], "prompts": ["Q? "], "labels": ["3"]})
        c.post("/score", content=b"{")
        m = _metrics(c)
    assert m['rewardlab_serve_requests_total{endpoint="/score",status="200"}'] == 2
    assert m['rewardlab_serve_requests_total{endpoint="/score",status="400"}'] == 1
    assert m['rewardlab_serve_requests_total{endpoint="/get_reward",status="200"}'] == 1
    assert m['rewardlab_serve_rows_total{endpoint="/score"}'] == 4
    assert m['rewardlab_serve_rows_total{endpoint="/get_reward"}'] == 1
    assert m['rewardlab_serve_row_errors_total{kind="no answer found"}'] == 2
    assert m['rewardlab_serve_request_duration_seconds_count{endpoint="/score"}'] == 3
    assert m['rewardlab_serve_request_duration_seconds_bucket{endpoint="/score",le="+Inf"}'] == 3
    assert m["rewardlab_serve_pool_workers"] == 1 and m["rewardlab_serve_queued_rows"] == 0
    assert m["rewardlab_serve_chunks_total"] == 3 and m["rewardlab_serve_chunk_rows_total"] == 5


class _HeldSource:
    """An in-process source (a reward model's place) recording each batch's size; the first batch waits for
    ``release`` (while other requests queue)."""

    name = "held"
    runs_in_process = True

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def score_batch(self, records):
        self.calls.append(len(records))
        if len(self.calls) == 1:
            self.started.set()
            self.release.wait(60)
        return [Result(reward=float(len(record.completion))) for record in records]


def test_concurrent_requests_to_an_in_process_source_share_one_batch():
    source = _HeldSource()
    stream = ScoringStream(Scorer(source, workers=1))
    first = stream.submit([Record(completion="a")])
    assert source.started.wait(30)  # the first batch is running: the next requests queue behind it
    later = [stream.submit([Record(completion="b" * n) for _ in range(n)]) for n in (1, 2, 3)]
    source.release.set()
    assert [r.reward for r in first.result(30)] == [1.0]
    assert [[r.reward for r in f.result(30)] for f in later] == [[1.0], [2.0, 2.0], [3.0, 3.0, 3.0]]
    assert source.calls == [1, 6]  # three requests, one batch
    stream.close()
    with pytest.raises(Closed):
        stream.submit([Record(completion="late")])


def test_a_full_queue_refuses_with_503():
    source = _HeldSource()
    server = RewardServer("math", workers=1, max_rows=2, max_queued_rows=3)
    server.pool.discard()
    # A pool that holds its first batch: the queue fills behind it.
    server.pool.stream = ScoringStream(Scorer(source, workers=1), max_queued_rows=3)
    app = app_of(server)
    with TestClient(app) as c, ThreadPoolExecutor(3) as pool:
        first = pool.submit(c.post, "/score", json={"records": [{"completion": "a"}]})
        assert source.started.wait(30)
        queued = pool.submit(c.post, "/score", json={"records": [{"completion": "b"}] * 2})
        # the second request waits in the queue
        assert eventually(lambda: server.pool.stream.queued_rows >= 2, 30), "the second request never queued"
        refused = c.post("/score", json={"records": [{"completion": "c"}] * 2})
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert "rows are waiting" in refused.json()["error"]
        source.release.set()
        assert first.result().status_code == 200 and queued.result().json()["results"][1]["reward"] == 1.0


def test_details_that_json_cannot_hold_are_text():
    assert finite({"a": float("nan"), "b": [float("inf"), 1.5], "c": {1, 2}}) == {
        "a": "nan",
        "b": ["inf", 1.5],
        "c": [1, 2],
    }


# ----------------------------------------------------------------------------------------------------------
# Timeouts and shutdown (real servers)
# ----------------------------------------------------------------------------------------------------------
def _post(url: str, records: list[dict]) -> tuple[float, list[dict]]:
    start = time.monotonic()
    response = httpx.post(url, json={"records": records}, timeout=60)
    response.raise_for_status()
    return time.monotonic() - start, response.json()["results"]


def test_a_hostile_row_times_out(server):
    _post(f"{server}/score", ROWS[:4])  # warm: the workers exist and the parser's caches are built
    seconds, results = _post(f"{server}/score", [ROWS[0], {"completion": HOSTILE, "reference": "1"}])
    assert [r["error"] for r in results] == [None, "timeout"] and results[1]["details"] == {
        "timeout_s": TIMEOUT
    }
    assert seconds < HANG_S, seconds  # killed at the 2 s timeout: scored to the end, it takes ~50 s


def test_a_hostile_row_does_not_stall_other_requests():
    # A server of its own whose timeout (60 s) outlasts every wait below: the clean requests must be answered
    # while the hostile row is still held (a server that stalled them behind it would answer them only at
    # its timeout), an order, not a stopwatch. The server is killed at the end, hostile row and all.
    proc, url = start_server("--workers", "2", "--timeout", "60")
    try:
        _post(f"{url}/score", ROWS[:4])  # warm
        clean = [{"completion": f"\\boxed{{{i}}}", "reference": str(i)} for i in range(4)]
        with ThreadPoolExecutor(6) as pool:
            hostile = pool.submit(
                _post, f"{url}/score", [clean[0], {"completion": HOSTILE, "reference": "1"}]
            )
            # in flight: the /metrics request asking and the hostile one
            in_flight = "rewardlab_serve_in_flight_requests 2"
            assert eventually(lambda: in_flight in httpx.get(f"{url}/metrics").text, 30), (
                "the hostile request never arrived"
            )
            others = [pool.submit(_post, f"{url}/score", clean) for _ in range(5)]
            for future in others:
                seconds, results = future.result(timeout=HANG_S + 20)
                assert [r["reward"] for r in results] == [1.0] * 4
                assert seconds < HANG_S, seconds
            assert not hostile.done()
            proc.kill()  # the workers die with it, once it is reaped (they watch for its pid to go)
            proc.wait(timeout=HANG_S)
    finally:
        stop_process(proc)


def test_sigterm_answers_the_request_in_flight_then_exits_0():
    proc, url = start_server("--workers", "1", "--timeout", str(TIMEOUT))
    try:
        _post(f"{url}/score", ROWS[:2])  # warm
        with ThreadPoolExecutor(1) as pool:
            request = pool.submit(_post, f"{url}/score", [{"completion": HOSTILE, "reference": "1"}, ROWS[0]])
            deadline = time.monotonic() + 20
            while "rewardlab_serve_in_flight_requests 2" not in httpx.get(f"{url}/metrics").text:
                assert time.monotonic() < deadline, "the request never arrived"
                time.sleep(0.05)  # in flight: this /metrics request and the slow one
            proc.send_signal(signal.SIGTERM)
            _, results = request.result(timeout=30)
        assert [r["error"] for r in results] == ["timeout", None]
        assert proc.wait(timeout=30) == 0
    finally:
        stop_process(proc)


# ----------------------------------------------------------------------------------------------------------
# The command line
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--verifier", "nope"], "unknown"),
        ([], "give --verifier NAME or --reward-model PATH"),
        (["--verifier", "math", "--workers", "0"], "--workers must be >= 1"),
        (["--verifier", "math", "--spare-workers", "-1"], "--spare-workers must be >= 0"),
        (["--verifier", "math", "--timeout", "nan"], "--timeout"),
        (["--verifier", "math", "--replicas", "2"], "need --ray-serve"),
        (["--verifier", "math", "--config", "nonsense_key=1"], "nonsense_key"),
        (["--verifier", "http:ftp://nowhere"], "http"),
    ],
)
def test_cli_errors_are_one_line_before_the_server_starts(argv, says, capsys):
    assert main(["serve", *argv, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rewardlab serve: error:") and says in err, err


def test_spare_workers_reach_the_pool():
    app = build_app("math", workers=1, spare_workers=3)
    assert app.state.server.pool.scorer.spare_workers == 3
    app.state.server.close()
    plain = build_app("math", workers=1).state.server.pool
    assert plain.scorer.spare_workers == 32  # on by default: SPARES_PER_WORKER per worker
    plain.close()


# ----------------------------------------------------------------------------------------------------------
# A reward model behind the server
# ----------------------------------------------------------------------------------------------------------


def test_a_reward_model_behind_the_server(rm_dir, one_torch_thread):
    from rewardlab.rewardmodels.sources import reward_model_source

    rows = [{"prompt": "Q: 1+1? ", "completion": c, "verifier": "math"} for c in ("2", "two", "It is 2.")]
    local = score_records([dict(r, verifier=None) for r in rows], reward_model_source(rm_dir), workers=1)
    with TestClient(build_app(reward_model=rm_dir, workers=1)) as c:
        assert c.get("/health").json()["source"] == f"reward_model:{rm_dir}"
        results = c.post("/score", json={"records": rows}).json()["results"]
    # A reward model scores every row: a row's verifier field is not read (as `rewardlab score --reward-model`).
    assert [_hex(r["reward"]) for r in results] == [_hex(r.reward) for r in local] and local[0].error is None
