"""`rewardlab view`: the row index, hack flags, data of each source kind, the web app and the CLI.

Every file is small and written to tmp_path; scored files come from the real `rewardlab score` and eval runs
from the real `evaluate_completions`, so the viewer is checked against what the tools write.
"""

from __future__ import annotations

import html
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from http_servers import stop_process

from rewardlab.cli import main
from rewardlab.eval.metrics import pass_at_k_single
from rewardlab.types import Record
from rewardlab.verifiers import get_verifier
from rewardlab.view import data as D
from rewardlab.view import flags as F
from rewardlab.view import rows as R
from rewardlab.view.app import create_app
from rewardlab.view.rows import MALFORMED, SCORED_COLUMNS, Column, Query, RowIndex, error_kind
from rewardlab.view.sources import discover

REPO = Path(__file__).resolve().parents[1]
MATH_SAMPLE = REPO / "data" / "math" / "sample.jsonl"
MARK = re.compile(r'<mark class="answer"[^>]*>(.*?)</mark>', re.S)


def _write(path: Path, lines: list) -> Path:
    """Each item a line: dicts as JSON, strings as written."""
    path.write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines))
    return path


def _append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


@pytest.fixture
def force_orjson(monkeypatch):
    """Every index built by orjson, as when DuckDB cannot read a file."""
    monkeypatch.setattr(R, "_duckdb_columns", lambda *args: None)


@pytest.fixture(scope="module")
def math_verifier():
    return get_verifier("math")


def _details(verifier, completion: str, reference: str) -> tuple[float, dict]:
    result = verifier.score(Record(prompt="p", completion=completion, reference=reference))
    return result.reward, result.details


# ----------------------------------------------------------------------------------------------------------
# RowIndex
# ----------------------------------------------------------------------------------------------------------
MIXED = [
    {"id": "a", "reward": 1.0, "completion": 'He said "yes"\nthen stopped'},
    "not json",
    "",
    "   ",
    {"id": "b", "reward": 0, "error": "timeout: after 5s", "verifier": "code"},
    '{"id": "t", "reward": 0.5',
    "[1,2]",
    '{"a":1}{"b":2}',
    "\t",
    {"id": "c", "reward": None, "completion": "e\u0301 👍🏽 Café"},
]


@pytest.mark.parametrize("path_kind", ["duckdb", "orjson"])
def test_rows_in_order_malformed_in_place_blank_lines_skipped(tmp_path, monkeypatch, path_kind):
    if path_kind == "orjson":
        monkeypatch.setattr(R, "_duckdb_columns", lambda *args: None)
    index = RowIndex(_write(tmp_path / "rows.jsonl", MIXED))
    assert len(index) == 7
    # file lines (from 1) of the rows: blank and whitespace-only lines 3, 4 and 9 are not rows
    assert index.line_numbers.tolist() == [1, 2, 5, 6, 7, 8, 10]
    assert index.column("id").tolist() == ["a", None, "b", None, None, None, "c"]
    kinds = index.error_kinds().tolist()
    assert kinds == ["", MALFORMED, "timeout", MALFORMED, MALFORMED, MALFORMED, ""]
    for i, raw in [(1, "not json"), (3, '{"id": "t", "reward": 0.5'), (4, "[1,2]"), (5, '{"a":1}{"b":2}')]:
        row = index.row(i)
        assert row["_malformed"] and row["_line"] == raw and error_kind(row["error"]) == MALFORMED
    assert index.row(0)["completion"] == 'He said "yes"\nthen stopped'
    assert index.row(6)["id"] == "c" and index.row(6)["reward"] is None
    assert index.facets()["error"] == {MALFORMED: 4, "": 2, "timeout": 1}


def test_duckdb_and_orjson_give_the_same_columns(tmp_path, monkeypatch):
    extra = [
        {"id": 7, "reward": 0, "completion": [{"role": "assistant", "content": "hi"}], "error": {"k": 1}},
        {"id": 1.5, "reward": True, "prompt": "ünïcode ✓", "verifier": "math"},
        {"reward": -2.5, "completion": ""},
        {"id": "z"},
        "{}",
        "null",
    ]
    path = _write(tmp_path / "rows.jsonl", MIXED + extra)
    columns = (*SCORED_COLUMNS, Column("step", "step", "number"))
    used = []
    real = R._duckdb_columns

    def spy(*args):
        result = real(*args)
        used.append(result is not None)
        return result

    monkeypatch.setattr(R, "_duckdb_columns", spy)
    duck = RowIndex(path, columns)
    assert used == [True]  # the first index really came from DuckDB
    monkeypatch.setattr(R, "_duckdb_columns", lambda *args: None)
    py = RowIndex(path, columns)
    assert len(duck) == len(py) == 13
    np.testing.assert_array_equal(duck.line_numbers, py.line_numbers)
    np.testing.assert_array_equal(duck.starts, py.starts)
    np.testing.assert_array_equal(duck._cols.malformed, py._cols.malformed)
    for c in columns:
        a, b = duck.column(c.name), py.column(c.name)
        assert a.dtype == b.dtype, c.name
        np.testing.assert_array_equal(a, b, err_msg=c.name)
    assert duck.error_kinds().tolist() == py.error_kinds().tolist()
    # character lengths, not bytes; a chat completion's length is its JSON's
    assert duck.column("completion_chars")[6] == len("e\u0301 👍🏽 Café")
    assert duck.column("prompt_chars")[8] == len("ünïcode ✓")


def test_refresh_indexes_appended_lines_and_starts_over_on_replace(tmp_path):
    path = _write(tmp_path / "rows.jsonl", [{"id": "a", "reward": 1}, {"id": "b", "reward": 0}])
    index = RowIndex(path)
    by_reward = index.query(Query(sort="reward"))
    assert by_reward.tolist() == [1, 0]
    assert index.query(Query(sort="reward")) is by_reward  # cached
    assert index.refresh() is False

    _append(path, '{"id": "c", "rew')  # a line still being written waits
    index.refresh()
    assert len(index) == 2 and index.query(Query(sort="reward")) is by_reward
    _append(path, 'ard": 0.5}\n\n  \n{"id": "d", "reward": -1}\nnot json\n')
    assert index.refresh() is True
    assert index.column("id").tolist() == ["a", "b", "c", "d", None]
    assert index.line_numbers.tolist() == [1, 2, 3, 6, 7]
    assert index.error_kinds().tolist() == ["", "", "", "", MALFORMED]
    assert index.row(2) == {"id": "c", "reward": 0.5}
    fresh = index.query(Query(sort="reward"))
    assert fresh is not by_reward and fresh.tolist() == [3, 1, 2, 0, 4]  # the cache was dropped
    assert index.query(Query(q="rewARD")).tolist() == [0, 1, 2, 3]

    path.write_text('{"id": "x", "reward": 0.25}\n')  # the same file, rewritten shorter
    assert index.refresh() is True
    assert index.column("id").tolist() == ["x"] and index.line_numbers.tolist() == [1]
    assert index.query(Query(sort="reward")).tolist() == [0]
    assert index.row(0) == {"id": "x", "reward": 0.25}

    other = _write(tmp_path / "new.jsonl", [{"id": f"n{i}", "reward": i} for i in range(5)])
    os.replace(other, path)  # a new file in its place (a new inode), longer
    index.refresh()
    assert index.column("id").tolist() == [f"n{i}" for i in range(5)]
    assert index.query(Query(reward_min=3)).tolist() == [3, 4]


def _filter_file(tmp_path: Path) -> Path:
    return _write(
        tmp_path / "rows.jsonl",
        [
            {"id": "a", "reward": 1.0, "completion": 'He said "yes"\nthen stopped', "step": 1},
            {"id": "b", "reward": 0.0, "error": "timeout: after 5s", "verifier": "code", "step": 2},
            {"id": "c", "reward": 0.5, "error": "no answer found", "completion": "x", "step": 2},
            {"id": "d", "completion": "Café au lait", "step": 3},
            "not json at all",
            {"id": "e", "reward": 0, "verifier": "math", "completion": "ends", "step": 2.0},
            {"id": "f", "reward": None, "completion": "starts"},
        ],
    )


@pytest.mark.parametrize("path_kind", ["duckdb", "orjson"])
def test_filters_and_sorts(tmp_path, monkeypatch, path_kind):
    if path_kind == "orjson":
        monkeypatch.setattr(R, "_duckdb_columns", lambda *args: None)
    columns = (*SCORED_COLUMNS, Column("step", "step", "number"))
    index = RowIndex(_filter_file(tmp_path), columns, default={"verifier": "math"})

    def rows(**kw):
        return index.query(Query(**kw)).tolist()

    # a missing or null reward is NaN: no reward filter keeps it
    assert np.isnan(index.column("reward")[[3, 4, 6]]).all()
    assert rows(reward_min=0.5) == [0, 2]
    assert rows(reward_max=0) == [1, 5]
    assert rows(reward_min=0, reward_max=0.5) == [1, 2, 5]
    assert rows(reward_min=-1e9) == [0, 1, 2, 5]
    # errors
    assert rows(error="any") == [1, 2, 4]
    assert rows(error="none") == [0, 3, 5, 6]
    assert rows(error="timeout") == [1]
    assert rows(error="no answer found") == [2]
    assert rows(error=MALFORMED) == [4]
    assert rows(error="nonesuch") == []
    # verifier: the row's own, else the run's default
    assert rows(verifier="code") == [1]
    math_rows = rows(verifier="math")
    assert {0, 2, 3, 5, 6} <= set(math_rows) and 1 not in math_rows
    # free text: case-insensitive, quotes and newlines as written in the row (JSON-escaped on disk)
    assert rows(q='said "yes"\nthen') == [0]
    assert rows(q='SAID "YES"') == [0]
    assert rows(q="café") == [3]  # json.dumps wrote it as \u00e9
    assert rows(q="TIMEOUT: after") == [1]
    assert rows(q="at all") == [4]
    assert rows(q="nothing like this") == []
    # a newline cannot join the end of one line to the start of the next
    assert rows(q='"step": 1}\n{"id": "b"') == []
    assert rows(q="ends\n") == []
    # equals on a number column
    assert rows(equals={"step": "2"}) == [1, 2, 5]
    assert rows(equals={"step": "2.0"}) == [1, 2, 5]
    assert rows(equals={"step": "two"}) == []
    assert rows(equals={"id": "c"}) == [2]
    assert rows(equals={"step": "2"}, reward_max=0) == [1, 5]
    # sorts: NaN rewards last either way, stable
    assert rows(sort="reward") == [1, 5, 2, 0, 3, 4, 6]
    assert rows(sort="reward", desc=True) == [0, 2, 1, 5, 3, 4, 6]
    assert rows(sort="id") == [4, 0, 1, 2, 3, 5, 6]
    assert rows(sort="id", desc=True) == [6, 5, 3, 2, 1, 0, 4]
    assert rows(desc=True) == [6, 5, 4, 3, 2, 1, 0]
    assert rows(sort="error", error="any") == [4, 2, 1]
    assert rows(sort="reward", error="none", desc=True) == [0, 5, 3, 6]
    # the result is cached until a refresh changes the file
    first = index.query(Query(error="any", sort="reward"))
    assert index.query(Query(error="any", sort="reward")) is first
    assert index.facets()["verifier"] == {"math": 6, "code": 1}


PROMPTS = [
    {"id": "a", "reward": 1, "prompt": "abc"},
    {"id": "b", "reward": 0},
    {"id": "c", "reward": 0, "prompt": ""},
    {"id": "d", "reward": 1, "prompt": None},
    {"id": "e", "reward": 0, "prompt": "hello world"},
]


@pytest.mark.parametrize("path_kind", ["duckdb", "orjson"])
def test_a_missing_prompt_has_no_length_and_sorts_last(tmp_path, monkeypatch, path_kind):
    if path_kind == "orjson":
        monkeypatch.setattr(R, "_duckdb_columns", lambda *args: None)
    index = RowIndex(_write(tmp_path / "rows.jsonl", PROMPTS))
    np.testing.assert_array_equal(index.column("prompt_chars"), [3, np.nan, 0, np.nan, 11])
    # an empty prompt is 0 long; a missing or null one has no length, last in either order
    assert index.query(Query(sort="prompt_chars")).tolist() == [2, 0, 4, 1, 3]
    assert index.query(Query(sort="prompt_chars", desc=True)).tolist() == [4, 0, 2, 1, 3]


def test_a_missing_prompt_length_is_blank_in_the_table(tmp_path):
    client = TestClient(create_app(_write(tmp_path / "rows.jsonl", PROMPTS)))
    assert [r["prompt_chars"] for r in _all_rows(client)] == [3, None, 0, None, 11]
    by_length = _all_rows(client, sort="prompt_chars", dir="desc")
    assert [(r["id"], r["prompt_chars"]) for r in by_length] == [
        ("e", 11), ("a", 3), ("c", 0), ("b", None), ("d", None)
    ]  # fmt: skip


def test_error_kind():
    assert error_kind(None) == "" and error_kind("") == ""
    assert error_kind("timeout: after 5s") == "timeout"
    assert error_kind("no answer found") == "no answer found"
    assert error_kind({"code": 3}) == '{"code"'


# ----------------------------------------------------------------------------------------------------------
# flags
# ----------------------------------------------------------------------------------------------------------
def test_answer_span():
    text = "So the answer is \\boxed{42}."
    span = F.answer_span(text, {"extracted": "42", "extracted_span": [17, 27]})
    assert text[slice(*span)] == "42"
    # a span whose text does not hold `extracted`: the span as reported
    assert F.answer_span(text, {"extracted": "41", "extracted_span": [17, 27]}) == (17, 27)
    # no span: the last occurrence of `extracted`
    text2 = "42 is wrong; 42 is what I say"
    assert F.answer_span(text2, {"extracted": "42"}) == (13, 15)
    # nothing to place
    assert F.answer_span(text, {"extracted": "7"}) is None
    assert F.answer_span(text, {}) is None
    assert F.answer_span(text, None) is None
    assert F.answer_span(text, {"extracted_span": [5, 99]}) is None
    assert F.answer_span(text, {"extracted_span": [-1, 3]}) is None
    assert F.answer_span(text, {"extracted_span": [9, 9]}) is None
    # out of range, but `extracted` is in the text: its last occurrence
    assert F.answer_span(text, {"extracted": "42", "extracted_span": [17, 99]}) == (24, 26)


def test_answer_span_of_chat_completions(math_verifier):
    # the verifier reads the last message; the page shows every message joined
    messages = [
        {"role": "assistant", "content": "Calling the calculator on 6*7"},
        {"role": "tool", "content": "42"},
        {"role": "assistant", "content": "So \\boxed{42}."},
    ]
    result = math_verifier.score(Record(prompt="6*7?", completion=messages, reference="42"))
    assert result.reward == 1.0
    text = F.completion_text(messages)
    span = F.answer_span(messages, result.details)
    assert text[slice(*span)] == "42" and span[0] > text.rindex("So")
    assert F.sample_flags({"completion": messages, "details": result.details, "reward": 1.0}) == []

    message = {"role": "assistant", "content": "It is \\boxed{42}"}
    result = math_verifier.score(Record(prompt="6*7?", completion=message, reference="42"))
    assert F.completion_text(message) == "It is \\boxed{42}"
    assert F.completion_text(message)[slice(*F.answer_span(message, result.details))] == "42"
    assert F.sample_flags({"completion": message, "details": result.details, "reward": 1.0}) == []


def test_text_after_answer(math_verifier):
    for completion in [
        "The answer is $\\boxed{36}$.",
        "So the answer is \\boxed{36}",
        "\\[\\boxed{36}\\]",
        "#### 36",
        "<think>6*6</think><answer>36</answer>",
        "The answer is **36**.",
    ]:
        reward, details = _details(math_verifier, completion, "36")
        span = F.answer_span(completion, details)
        assert reward == 1.0 and completion[slice(*span)] == "36", completion
        assert F.text_after_answer(completion, span) is None, completion
        assert F.sample_flags({"completion": completion, "details": details, "reward": reward}) == []
    assert F.text_after_answer("x", None) is None

    # the demo's historic hack: glued braces after the box, cut off at the length limit
    hack = "\\boxed{59}{94}{7"
    reward, details = _details(math_verifier, hack, "59")
    span = F.answer_span(hack, details)
    assert hack[slice(*span)] == details["extracted"] == "59"
    assert F.text_after_answer(hack, span) == "{94}{7"
    found = F.sample_flags({"completion": hack, "details": details, "reward": reward, "truncated": True})
    assert any(f.startswith("text_after_answer") and "{94}{7" in f for f in found), found
    # had it been rewarded (as it was in the demo), the truncation flag joins in
    found = F.sample_flags({"completion": hack, "details": details, "reward": 1.0, "finish_reason": "length"})
    assert [f.split(":")[0] for f in found] == ["truncated_rewarded", "text_after_answer"]

    after = "The answer is \\boxed{12}. But actually, let me reconsider everything here."
    _, details = _details(math_verifier, after, "12")
    assert F.text_after_answer(after, F.answer_span(after, details)).startswith("But actually")


def _sample(verifier, completion: str, reference: str, **extra) -> dict:
    reward, details = _details(verifier, completion, reference)
    sample = {
        "completion": completion,
        "reward": reward,
        "details": details,
        "answer": details.get("extracted"),
    }
    return {**sample, **extra}


def test_group_flags(math_verifier):
    honest = [
        _sample(math_verifier, "First I add the two numbers, so the total is \\boxed{7}.", "7"),
        _sample(math_verifier, "Adding them I get three, hence the answer is \\boxed{3}.", "7"),
        _sample(math_verifier, "Counting one by one up to the end, I reach \\boxed{4}.", "7"),
        _sample(math_verifier, "Four plus three makes seven, so the result is \\boxed{7}.", "7"),
    ]
    assert [s["reward"] for s in honest] == [1.0, 0.0, 0.0, 1.0]
    assert F.group_flags(honest) == [[], [], [], []]

    long_text = "I reason for a while about this problem and conclude \\boxed{7}."
    duplicated = [
        _sample(math_verifier, long_text, "7"),
        _sample(math_verifier, long_text, "7"),
        _sample(math_verifier, "Something else entirely, which ends with \\boxed{5}.", "7"),
    ]
    names = [[f.split(":")[0] for f in flags] for flags in F.group_flags(duplicated)]
    assert names == [["duplicate_in_group"], ["duplicate_in_group"], []]

    truncated = [
        {**_sample(math_verifier, "The sum is \\boxed{7}", "7"), "truncated": True},
        {**_sample(math_verifier, "The sum is \\boxed{7}, written out", "7"), "finish_reason": "length"},
        {**_sample(math_verifier, "The sum is \\boxed{8}", "7"), "truncated": True},
    ]
    flags = F.group_flags(truncated)
    assert any(f.startswith("truncated_rewarded") for f in flags[0])
    assert any(f.startswith("truncated_rewarded") for f in flags[1])
    assert not any(f.startswith("truncated_rewarded") for f in flags[2])  # reward 0

    # reward 1.0 for an answer another sample of the group got 0 for: the reward came from elsewhere
    group = [
        {"completion": "a long reasoning that ends with the number 5", "answer": "5", "reward": 1.0},
        {"completion": "another reasoning, also ending with 5", "answer": "5", "reward": 0.0},
        {"completion": "a third try with answer 6", "answer": "6", "reward": 0.0},
        {"completion": "a fourth one: 8", "answer": "8", "reward": 0.0},
    ]
    flags = F.group_flags(group)
    assert [[f.split(":")[0] for f in fl] for fl in flags] == [["reward_without_new_answer"], [], [], []]
    assert "'5'" in flags[0][0] and "median 0" in flags[0][0]
    # a high median (most of the group rewarded): no flag
    group_high = [{**s, "reward": r} for s, r in zip(group, [1.0, 0.0, 1.0, 1.0], strict=True)]
    assert F.group_flags(group_high) == [[], [], [], []]


# ----------------------------------------------------------------------------------------------------------
# a scored file, end to end
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    out = tmp_path_factory.mktemp("scored") / "math.scored.jsonl"
    rc = main(
        ["score", str(MATH_SAMPLE), "-o", str(out), "--verifier", "math", "--workers", "0", "--no-progress"]
    )
    assert rc == 0 and out.is_file() and Path(str(out) + ".run.json").is_file()
    return out, [json.loads(line) for line in out.read_text().splitlines()]


def _all_rows(client: TestClient, sid: int = 0, **params) -> list[dict]:
    body = client.get(f"/api/s/{sid}/rows", params={"size": 500, **params}).json()
    assert body["last_row"] == len(body["data"])
    return body["data"]


def test_scored_file_pages_and_filters(scored):
    out, rows = scored
    client = TestClient(create_app(out))
    response = client.get("/", follow_redirects=False)
    assert response.status_code in (302, 307) and response.headers["location"] == "/s/0"
    assert client.get("/s/0").status_code == 200

    data = _all_rows(client)
    assert [r["id"] for r in data] == [r["id"] for r in rows] and data[0]["verifier"] == "math"
    with_errors = _all_rows(client, error="any")
    assert with_errors and [r["id"] for r in with_errors] == [r["id"] for r in rows if r["error"]]
    zero = _all_rows(client, reward_max=0)
    assert zero and [r["id"] for r in zero] == [r["id"] for r in rows if r["reward"] == 0]
    assert all(r["reward"] == 0 for r in zero)
    assert [r["id"] for r in _all_rows(client, reward_min=1)] == [r["id"] for r in rows if r["reward"] == 1]
    assert [r["id"] for r in _all_rows(client, verifier="math")] == [r["id"] for r in rows]
    assert _all_rows(client, verifier="code") == []
    desc = _all_rows(client, sort="reward", dir="desc")
    assert [r["reward"] for r in desc] == sorted((r["reward"] for r in rows), reverse=True)
    page = client.get("/api/s/0/rows", params={"page": 2, "size": 7}).json()
    assert page["last_page"] == -(-len(rows) // 7) and [r["row"] for r in page["data"]] == list(range(7, 14))
    assert client.get("/api/s/0/rows", params={"reward_min": "high"}).status_code == 400
    facets = client.get("/api/s/0/facets").json()
    assert facets["verifier"] == {"math": len(rows)}
    assert sum(facets["error"].values()) == len(rows)


def test_one_source_redirect_keeps_the_query_string(scored):
    client = TestClient(create_app(scored[0]))
    response = client.get("/?error=timeout&sort=reward&dir=desc", follow_redirects=False)
    assert response.status_code in (302, 307)
    assert response.headers["location"] == "/s/0?error=timeout&sort=reward&dir=desc"
    assert client.get("/", follow_redirects=False).headers["location"] == "/s/0"
    assert client.get("/?q=a%20b%26c", follow_redirects=False).headers["location"] == "/s/0?q=a%20b%26c"


def test_scored_row_pages_mark_the_extracted_answer(scored):
    out, rows = scored
    client = TestClient(create_app(out))
    correct = [i for i, r in enumerate(rows) if r["reward"] == 1.0]
    assert len(correct) > 10
    for i in correct:
        page = client.get(f"/s/0/row/{i}")
        assert page.status_code == 200
        marks = [html.unescape(m) for m in MARK.findall(page.text)]
        assert marks == [rows[i]["details"]["extracted"]], (i, rows[i]["completion"])
        # an honest correct answer raises no flag (<answer>4</answer> included)
        assert 'id="flags"' not in page.text, (i, rows[i]["completion"])
    assert client.get("/s/0/row/99999").status_code == 404
    assert client.get("/s/0/row/-1").status_code == 404
    assert client.get("/s/7").status_code == 404
    assert client.get("/s/7/row/0").status_code == 404
    assert client.get("/api/s/7/rows").status_code == 404


def test_malformed_row_page(scored, tmp_path):
    out, rows = scored
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(out.read_bytes())
    _append(copy, '{"id": "broken", "reward": 1, <oops>\n')
    client = TestClient(create_app(copy))
    data = _all_rows(client, error=MALFORMED)
    assert [(r["row"], r["line"]) for r in data] == [(len(rows), len(rows) + 1)]
    assert data[0]["preview"].startswith('{"id": "broken"')
    page = client.get(f"/s/0/row/{len(rows)}")
    assert page.status_code == 200 and "Malformed row" in page.text
    assert '{"id": "broken", "reward": 1, <oops>' in html.unescape(page.text)
    assert "<oops>" not in page.text  # escaped


def test_html_is_escaped(tmp_path):
    evil = "Hello <script>alert(1)</script> and \\boxed{<b>1</b>}"
    path = _write(
        tmp_path / "evil.jsonl",
        [
            {
                "id": "<img src=x onerror=alert(2)>",
                "prompt": "<script>alert(3)</script>",
                "completion": evil,
                "reference": "<i>1</i>",
                "reward": 0.0,
                "error": "<script>alert(4)</script>: bad",
                "details": {"extracted": "<b>1</b>", "reason": "<script>alert(5)</script>"},
            }
        ],
    )
    client = TestClient(create_app(path))
    page = client.get("/s/0/row/0").text
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>1</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert [html.unescape(m) for m in MARK.findall(page)] == ["<b>1</b>"]
    assert "<script>alert" not in client.get("/s/0").text
    row = client.get("/api/s/0/rows").json()["data"][0]
    assert row["preview"] == evil and row["id"] == "<img src=x onerror=alert(2)>"


def test_run_record_renames_fields_and_sets_the_default_verifier(tmp_path):
    path = _write(
        tmp_path / "out.jsonl",
        [
            {"id": 1, "question": "6*7?", "response": "So \\boxed{42}.", "answer": "42", "reward": 1.0,
             "details": {"extracted": "42", "extracted_span": [3, 13]}},
            {"id": 2, "question": "1+1?", "response": "2", "answer": "2", "reward": 1.0, "verifier": "other"},
        ],
    )  # fmt: skip
    record = {
        "source": "math",
        "field_map": {"prompt": "question", "completion": "response", "reference": "answer"},
    }
    (tmp_path / "out.jsonl.run.json").write_text(json.dumps(record))
    client = TestClient(create_app(path))
    assert [r["row"] for r in _all_rows(client, verifier="math")] == [0]
    assert [r["row"] for r in _all_rows(client, verifier="other")] == [1]
    data = _all_rows(client)
    assert data[0]["preview"] == "So \\boxed{42}." and data[0]["completion_chars"] == len("So \\boxed{42}.")
    page = client.get("/s/0/row/0").text
    assert MARK.findall(page) == ["42"] and "6*7?" in page


# ----------------------------------------------------------------------------------------------------------
# an eval run
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def eval_run(tmp_path_factory):
    from rewardlab.eval import EvalConfig, evaluate_completions, load_benchmark, report

    run = tmp_path_factory.mktemp("eval") / "run"
    bench, problems = load_benchmark("sample:math500", limit=3)
    answers = [["5", "4", "5", "6"], ["8", "8", "7", "9"], ["0.75", "\\frac{3}{4}", "3/4", "1"]]
    rows = [
        {"problem_id": p.id, "completion": f"Reasoning... so \\boxed{{{a}}}."}
        for p, given in zip(problems, answers, strict=True)
        for a in given
    ]
    config = EvalConfig(ks=[1, 2, 4], workers=1, bootstrap=0)
    with pytest.MonkeyPatch.context() as patch:  # the plot (matplotlib) is no business of the viewer
        patch.setattr(report, "plot_pass_at_k", lambda summary, path: None)
        evaluate_completions(bench, problems, rows, config=config, run_dir=run)
    return run, problems


def test_eval_run_problems_and_samples(eval_run):
    run, problems = eval_run
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    client = TestClient(create_app(run))
    assert client.get("/", follow_redirects=False).headers["location"] == "/s/0"
    assert client.get("/s/0").status_code == 200
    body = client.get("/api/s/0/problems").json()
    assert body["summary"]["ks"] == [1, 2, 4]
    by_id = {p["id"]: p for p in body["data"]}
    assert list(by_id) == [p.id for p in problems]
    for problem in problems:
        mine = [s for s in samples if s["problem_id"] == problem.id]
        n, c = len(mine), sum(bool(s["correct"]) for s in mine)
        got = by_id[problem.id]
        assert (got["samples"], got["correct"]) == (n, c)
        for k in (1, 2, 4):
            assert got[f"pass@{k}"] == pytest.approx(pass_at_k_single(n, c, k))
        assert got["maj@1"] == pytest.approx(got["pass@1"])
    assert [by_id[p.id]["correct"] for p in problems] == [2, 1, 3]
    # the run's own maj@4 (equivalent forms vote together): right, wrong, right
    assert [by_id[p.id]["maj@4"] for p in problems] == [1.0, 0.0, 1.0]
    mean = body["summary"]["metrics"]["pass@1"]["mean"]
    assert mean == pytest.approx(np.mean([by_id[p.id]["pass@1"] for p in problems]))

    chosen = problems[1].id
    data = _all_rows(client, problem=chosen)
    assert [r["row"] for r in data] == [i for i, s in enumerate(samples) if s["problem_id"] == chosen]
    assert [r["answer"] for r in data] == ["8", "8", "7", "9"]
    assert _all_rows(client, problem="nonesuch") == []

    i = data[2]["row"]
    page = client.get(f"/s/0/row/{i}")
    assert page.status_code == 200
    prompt = re.search(r'<pre id="prompt">(.*?)</pre>', page.text, re.S)
    assert prompt and html.unescape(prompt.group(1)) == problems[1].prompt
    assert [html.unescape(m) for m in MARK.findall(page.text)] == ["7"]


# ----------------------------------------------------------------------------------------------------------
# an RL run
# ----------------------------------------------------------------------------------------------------------
def _rollout(step, group, index, completion, reward, answer, **extra) -> dict:
    row = {
        "step": step,
        "group": group,
        "index": index,
        "prompt": f"problem {group}",
        "completion": completion,
        "reference": "7",
        "reward": reward,
        "shaped_reward": reward,
        "rewards": {"math": reward},
        "advantage": reward - 0.5,
        "length": len(completion),
        "truncated": False,
        "correct": reward == 1.0,
        "answer": answer,
        "details": {"extracted": answer} if answer else {},
        "error": None,
        "finish_reason": "stop",
    }
    return {**row, **extra}


def _rl_run(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    _write(
        folder / "metrics.jsonl",
        [
            {"step": 1, "reward/mean": 0.25, "loss": 1.5},
            {"event": "checkpoint", "step": 1, "path": "checkpoints/step-1"},
            "not json {",
            {"step": 2, "reward/mean": 0.5, "loss": 1.25, "kl": 0.01},
            {"loss": 3.0},
        ],
    )
    long_text = "A long and careful reasoning that ends with the answer 7"
    _write(
        folder / "rollouts.jsonl",
        [
            _rollout(1, 0, 0, "reasoning ends with 7", 1.0, "7"),
            _rollout(1, 0, 1, "reasoning ends with 3", 0.0, "3"),
            # step 2, group 0: an honest group
            _rollout(2, 0, 0, "First I add them and the total comes to 7", 1.0, "7"),
            _rollout(2, 0, 1, "First I multiply them and the result is 12", 0.0, "12"),
            _rollout(2, 0, 2, "Counting them one at a time gives 6", 0.0, "6"),
            # step 2, group 1: two copies, a truncated reward, the same answer rewarded 1 and 0
            _rollout(2, 1, 0, long_text, 1.0, "7", truncated=True, finish_reason="length"),
            _rollout(2, 1, 1, long_text, 0.0, "7"),
            _rollout(2, 1, 2, "A different attempt that lands on 9", 0.0, "9"),
            _rollout(2, 1, 3, "Yet another attempt that lands on 8", 0.0, "8"),
        ],
    )
    return folder


def _snapshot(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, p.stat().st_size, p.is_dir())
        for p in sorted(root.rglob("*"))
    }


def test_rl_run_metrics_steps_samples_and_a_run_in_progress(tmp_path):
    run = _rl_run(tmp_path / "rl")
    before = _snapshot(tmp_path)
    client = TestClient(create_app(run))
    assert client.get("/", follow_redirects=False).headers["location"] == "/s/0"
    assert client.get("/s/0").status_code == 200

    metrics = client.get("/api/s/0/metrics").json()
    assert metrics["steps"] == [1, 2]
    assert metrics["series"]["loss"] == [1.5, 1.25]
    assert metrics["series"]["reward/mean"] == [0.25, 0.5]
    assert metrics["series"]["kl"] == [None, 0.01]
    assert metrics["malformed"] == 2  # the broken line, the row without a step; the event is no metric
    assert metrics["entropy"] is None  # a run from before the entropy percentiles: no entropy panel
    assert client.get("/api/s/0/steps").json() == {"steps": [1, 2]}

    body = client.get("/api/s/0/samples", params={"step": 2}).json()
    samples = body["samples"]
    assert body["step"] == 2 and len(samples) == 7
    assert all(s["step"] == 2 for s in samples)
    flags = {(s["group"], s["index"]): [f.split(":")[0] for f in s["flags"]] for s in samples}
    assert flags[(0, 0)] == flags[(0, 1)] == flags[(0, 2)] == []
    assert set(flags[(1, 0)]) == {"truncated_rewarded", "duplicate_in_group", "reward_without_new_answer"}
    assert flags[(1, 1)] == ["duplicate_in_group"]
    assert flags[(1, 2)] == flags[(1, 3)] == []
    marked = [p["text"] for p in samples[0]["parts"] if p["answer"]]
    assert marked == ["7"]
    assert client.get("/api/s/0/samples", params={"step": 9}).json()["samples"] == []
    assert [r["step"] for r in _all_rows(client, step=1)] == [1, 1]
    assert client.get("/s/0/row/3").status_code == 200

    for _ in range(3):  # pages again and again: still nothing written
        for url in (
            "/",
            "/s/0",
            "/s/0/row/0",
            "/api/s/0/rows",
            "/api/s/0/facets",
            "/api/s/0/metrics",
            "/api/s/0/steps",
            "/api/s/0/samples?step=1",
            "/api/s/0/rows?q=careful&sort=reward",
        ):
            assert client.get(url).status_code in (200, 307), url  # fmt: skip
    assert _snapshot(tmp_path) == before

    # the run goes on: step 3 is logged
    time.sleep(0.01)
    _append(run / "metrics.jsonl", json.dumps({"step": 3, "reward/mean": 1.0, "loss": 1.0}) + "\n")
    _append(run / "rollouts.jsonl", json.dumps(_rollout(3, 0, 0, "Finally the answer is 7", 1.0, "7")) + "\n")
    assert client.get("/api/s/0/metrics").json()["steps"] == [1, 2, 3]
    assert client.get("/api/s/0/steps").json() == {"steps": [1, 2, 3]}
    step3 = client.get("/api/s/0/samples", params={"step": 3}).json()["samples"]
    assert len(step3) == 1 and "".join(p["text"] for p in step3[0]["parts"]) == "Finally the answer is 7"
    assert len(_all_rows(client)) == 10
    # a step being written (no newline yet) waits
    _append(run / "rollouts.jsonl", json.dumps(_rollout(4, 0, 0, "half", 0.0, None))[:40])
    assert client.get("/api/s/0/steps").json() == {"steps": [1, 2, 3]}


def test_rl_run_entropy_panel_keys(tmp_path):
    """The entropy panel's series: percentiles lowest first (p5 before p10: by number, not text), the mean, the
    near-deterministic share; steps from before they were logged are gaps."""
    run = tmp_path / "rl"
    run.mkdir()
    percentiles = {f"entropy/p{p}": p / 100 for p in (90, 10, 50, 5, 75, 25)}
    _write(
        run / "metrics.jsonl",
        [
            {"step": 1, "loss": 1.0, "entropy": 0.9},
            {"step": 2, "loss": 0.9, "entropy": 0.5, **percentiles, "entropy/near_deterministic": 0.25},
            {"step": 3, "loss": 0.8, "entropy": 0.4, **percentiles, "entropy/near_deterministic": 0.5},
        ],
    )
    metrics = TestClient(create_app(run)).get("/api/s/0/metrics").json()
    assert metrics["entropy"] == {
        "percentiles": [{"key": f"entropy/p{p}", "p": p} for p in (5, 10, 25, 50, 75, 90)],
        "mean": "entropy",
        "near_deterministic": "entropy/near_deterministic",
    }
    assert metrics["series"]["entropy/p50"] == [None, 0.5, 0.5]
    assert metrics["series"]["entropy/near_deterministic"] == [None, 0.25, 0.5]

    # each part alone; neither percentiles nor the share: no panel, even with the mean logged
    assert D.entropy_panel(["entropy/near_deterministic", "loss"]) == {
        "percentiles": [],
        "mean": None,
        "near_deterministic": "entropy/near_deterministic",
    }
    assert D.entropy_panel(["entropy/p50"]) == {
        "percentiles": [{"key": "entropy/p50", "p": 50}],
        "mean": None,
        "near_deterministic": None,
    }
    assert D.entropy_panel(["entropy", "entropy/pmax", "loss", "kl"]) is None


# ----------------------------------------------------------------------------------------------------------
# sources
# ----------------------------------------------------------------------------------------------------------
def test_discover_and_the_index_page(tmp_path, scored, eval_run):
    root = tmp_path / "runs"
    root.mkdir()
    (root / "a.scored.jsonl").write_bytes(scored[0].read_bytes())
    _write(root / "plain.jsonl", [{"id": 1, "prompt": "no reward here"}])
    _write(root / "blank_first.jsonl", ["", {"id": 1, "reward": 0.5}])
    (root / "notes.txt").write_text("hello")
    eval_dir = root / "evals" / "math500"
    eval_dir.mkdir(parents=True)
    for name in ("samples.jsonl", "summary.json", "problems.jsonl"):
        (eval_dir / name).write_bytes((eval_run[0] / name).read_bytes())
    _rl_run(root / "rl" / "grpo")
    (root / "rl" / "grpo" / "checkpoints").mkdir()
    (root / "checkpoints").mkdir()
    _write(root / "checkpoints" / "hidden.jsonl", [{"reward": 1.0}])
    _rl_run(root / "checkpoints" / "old-run")

    found = discover(root)
    assert [(s.kind, s.name) for s in found] == [
        ("scored", "a.scored.jsonl"),
        ("scored", "blank_first.jsonl"),
        ("eval", "evals/math500"),
        ("rl", "rl/grpo"),
    ]
    assert [s.kind for s in discover(root / "rl" / "grpo")] == ["rl"]
    assert [s.kind for s in discover(root / "a.scored.jsonl")] == ["scored"]
    with pytest.raises(FileNotFoundError):
        discover(root / "missing")

    before = _snapshot(root)
    client = TestClient(create_app(root))
    index = client.get("/")
    assert index.status_code == 200 and "4 sources" in index.text
    for i, source in enumerate(found):
        assert f'href="/s/{i}">{source.name}</a>' in index.text
        assert client.get(f"/s/{i}").status_code == 200
    assert len(_all_rows(client, 0)) == len(scored[1])
    assert client.get("/api/s/2/problems").json()["data"]
    assert client.get("/api/s/3/steps").json() == {"steps": [1, 2]}
    assert "plain.jsonl" not in index.text and "hidden" not in index.text
    assert _snapshot(root) == before


# ----------------------------------------------------------------------------------------------------------
# the CLI
# ----------------------------------------------------------------------------------------------------------
def test_cli_missing_path_is_one_line_error(tmp_path, capsys):
    assert main(["view", str(tmp_path / "missing.jsonl"), "--no-browser"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rewardlab view: error: ") and "missing.jsonl" in err[0]


def test_cli_port_in_use_is_one_line_error(tmp_path, capsys):
    path = _write(tmp_path / "rows.jsonl", [{"id": 1, "reward": 1.0}])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["view", str(path), "--port", str(port), "--no-browser"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rewardlab view: error: cannot listen on")
    assert str(port) in err[0]


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None and not select.select([proc.stdout], [], [], 0)[0]:
            break
        if select.select([proc.stdout], [], [], min(left, 0.5))[0]:
            chunk = os.read(proc.stdout.fileno(), 1)
            if not chunk:
                break
            line += chunk
    return line.decode()


def test_cli_serves_a_real_server(tmp_path):
    path = _write(tmp_path / "rows.jsonl", [{"id": "a", "reward": 1.0}, {"id": "b", "reward": 0.0}])
    proc = subprocess.Popen(
        [sys.executable, "-m", "rewardlab.cli", "view", str(path), "--no-browser", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        line = _read_line(proc, timeout=60)
        match = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
        assert match, (line, proc.poll())
        url = match.group(1)
        assert "1 source under" in line
        body = None
        for _ in range(100):  # the socket listens before uvicorn serves: retry briefly
            try:
                body = httpx.get(url + "api/s/0/rows", timeout=30).json()
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert body and [r["id"] for r in body["data"]] == ["a", "b"]
        assert httpx.get(url, timeout=30).status_code in (302, 307)
    finally:
        stop_process(proc)
