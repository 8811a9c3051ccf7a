"""Rubric-scored rows (``details["criteria"]``, the shape of the ``rubric`` reward source) in ``rewardlab view``
and ``rewardlab eval``.

The viewer is served as users start it (``rewardlab view`` in a process, tests/http_servers.view_server) over
hand-written rows: a scored file, an RL run, rows without criteria, a judge's row. Expected values are
computed by hand in the comments (the mean share met per category is a mean over rows of each row's share,
criteria without a verdict left out). Eval runs a fake rubric source registered as a reward-source kind from
this file (``test_rubric``), so the run resolves it through the kind registry, as it will ``rubric`` and
``judge``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from http_servers import JSONHandler, serving, view_server

from rewardlab.cli import main
from rewardlab.eval.metrics import pass_at_k_single
from rewardlab.rewardmodels.judge import criteria as C
from rewardlab.types import Result
from rewardlab.verifiers import VERIFIERS
from rewardlab.verifiers.sources import SourceKind, register_source_kind
from rewardlab.view import rows as R
from rewardlab.view.app import create_app
from rewardlab.view.rows import SCORED_COLUMNS, RowIndex

REPO = Path(__file__).resolve().parents[1]
XSS = "<script>alert(1)</script> cites a source"


def _criterion(text, category, weight, met, probability=None, gate=False, verdict_text=""):
    return {"criterion": text, "weight": weight, "category": category, "gate": gate, "met": met,
            "probability": probability, "verdict_text": verdict_text}  # fmt: skip


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((json.dumps(r) if isinstance(r, dict) else r) + "\n" for r in rows))
    return path


# Row a: essential 1/1, important 0/1, optional only without a verdict, pitfall 0/1.
CRITERIA_A = [
    _criterion("States that the answer is 42", "essential", 5, True, 0.93, True, "Yes: it says 42."),
    _criterion("Shows the steps", "important", 3, False, 0.2, verdict_text="No <b>steps</b> are shown."),
    _criterion(XSS, "optional", 1, None, verdict_text="I cannot tell."),
    _criterion("Claims the answer is 41", "pitfall", -2, False, 0.05),
]
# Row b: essential 1/2, important 1/1, no category 1/1.
CRITERIA_B = [
    _criterion("States that the answer is 42", "essential", 5, False, 0.1),
    _criterion("Names the unit", "essential", 4, True, 0.8),
    _criterion("Shows the steps", "important", 3, True),
    _criterion("Is polite", "", 1, True),
]
# Row e: important only without a verdict (a "met" that is not a boolean is no verdict).
CRITERIA_E = [_criterion("Shows the steps", "important", 3, "yes")]
SCORED = [
    {"id": "a", "prompt": "6*7?", "completion": "It is 42.", "reward": 0.6, "verifier": "rubric",
     "details": {"criteria": CRITERIA_A, "aggregation": "explicit", "rubric_score": 0.7}},
    {"id": "b", "prompt": "6*7?", "completion": "41 meters", "reward": 0.25, "verifier": "rubric",
     "details": {"criteria": CRITERIA_B, "aggregation": "implicit", "rubric_score": 0.25}},
    {"id": "c", "prompt": "2+2?", "completion": "\\boxed{4}", "reward": 1.0, "verifier": "math",
     "details": {"extracted": "4"}, "criteria": "a top-level field: no criteria of a rubric"},
    {"id": "d", "prompt": "6*7?", "completion": "?", "reward": 0.0, "verifier": "rubric",
     "error": "judge error: the server timed out", "details": {}},
    {"id": "e", "prompt": "6*7?", "completion": "42", "reward": 0.5, "verifier": "rubric",
     "details": {"criteria": CRITERIA_E, "aggregation": "explicit", "rubric_score": 0.5}},
    # an error row with criteria (eval's sample cut off at the length limit): left out, counted
    {"id": "f", "prompt": "6*7?", "completion": "42 and then", "reward": 0.0, "verifier": "rubric",
     "error": "truncated: the completion hit the generation limit", "details": {"criteria": CRITERIA_B,
     "aggregation": "explicit", "rubric_score": 1.0}},
]  # fmt: skip
# By hand (mean over rows of each row's share met, among criteria with a verdict):
EXPECTED = {
    "samples": 3,  # a, b, e (d and f have an error, c no criteria)
    "errors": 2,
    "mean_rubric_score": (0.7 + 0.25 + 0.5) / 3,
    "rubric_scored": 3,
    "categories": {
        # a: 1/1, b: 1/2 -> 0.75 (pooled, 2 of 3, would be 0.667)
        "essential": {"mean_share_met": 0.75, "samples": 2, "criteria": 3, "met": 2, "not_met": 1, "no_verdict": 0},
        # a: 0/1, b: 1/1, e: none with a verdict -> 0.5 over 2 rows
        "important": {"mean_share_met": 0.5, "samples": 2, "criteria": 3, "met": 1, "not_met": 1, "no_verdict": 1},
        "optional": {"mean_share_met": None, "samples": 0, "criteria": 1, "met": 0, "not_met": 0, "no_verdict": 1},
        "pitfall": {"mean_share_met": 0.0, "samples": 1, "criteria": 1, "met": 0, "not_met": 1, "no_verdict": 0},
        C.NO_CATEGORY: {"mean_share_met": 1.0, "samples": 1, "criteria": 1, "met": 1, "not_met": 0, "no_verdict": 0},
    },
}  # fmt: skip
JUDGE_ROW = {
    "id": "j", "prompt": "6*7?", "completion": "42", "reward": 1.0, "verifier": "judge",
    "details": {"mode": "binary", "verdict": "yes", "votes": ["yes", "no", "yes"], "soft_score": 0.8125,
                "outputs": ["<b>Correct</b>, verdict: yes", "verdict: no", "verdict: yes"]},
}  # fmt: skip
PLAIN = [
    {"id": "p", "prompt": "2+2?", "completion": "\\boxed{4}", "reward": 1.0, "verifier": "math",
     "details": {"extracted": "4"}},
]  # fmt: skip


def _rollout(step, group, index, reward, criteria):
    details = {"criteria": criteria, "aggregation": "explicit", "rubric_score": reward} if criteria else {}
    return {"step": step, "group": group, "index": index, "prompt": "6*7?", "completion": f"try {index}",
            "reference": "42", "reward": reward, "rewards": {"rubric": reward}, "advantage": 0.0, "length": 3,
            "truncated": False, "correct": reward == 1.0, "answer": None, "details": details, "error": None}  # fmt: skip


RL_ROWS = [
    # step 1: essential 0/1 and 1/1 -> 0.5
    _rollout(1, 0, 0, 0.0, [_criterion("States 42", "essential", 5, False)]),
    _rollout(1, 0, 1, 1.0, [_criterion("States 42", "essential", 5, True)]),
    # step 2: essential 2/2 -> 1.0; important 1/2 and 0/1 -> 0.25
    _rollout(2, 0, 0, 1.0, [_criterion("States 42", "essential", 5, True), _criterion("Steps", "important", 3, True),
                            _criterion("Units", "important", 2, False)]),
    _rollout(2, 0, 1, 0.5, [_criterion("States 42", "essential", 5, True), _criterion("Steps", "important", 3, False)]),
]  # fmt: skip
# all steps: essential 0, 1, 1, 1 -> 0.75; important 0.5, 0 -> 0.25


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    folder = tmp_path_factory.mktemp("view-rubric")
    _write(folder / "rubric.scored.jsonl", SCORED)
    _write(folder / "judge.scored.jsonl", [JUDGE_ROW])
    _write(folder / "plain.scored.jsonl", PLAIN)
    rl = folder / "rl-rubric"
    rl.mkdir()
    _write(rl / "metrics.jsonl", [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.75}])
    _write(rl / "rollouts.jsonl", RL_ROWS)
    return folder


@pytest.fixture(scope="module")
def server(root):
    with view_server(
        root, {"rubric.scored.jsonl", "judge.scored.jsonl", "plain.scored.jsonl", "rl-rubric"}
    ) as s:
        yield s


def _get(server, path: str, **params) -> httpx.Response:
    url, _ = server
    response = httpx.get(url + path, params=params, timeout=30)
    assert response.status_code == 200, (path, response.text[:500])
    return response


CRITERION_ROW = re.compile(r'<tr class="criterion">(.*?)</tr>', re.S)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)


def _criteria_table(page: str) -> list[dict]:
    """The criteria table's rows as text: the cells, the verdict's class, the judge's collapsible text."""
    out = []
    for row in CRITERION_ROW.findall(page):
        cells = CELL.findall(row)
        verdict_class = re.search(r'<td class="verdict ([^"]*)">', row).group(1)
        judge = re.search(
            r"<details><summary>verdict text</summary><pre>(.*?)</pre></details>", cells[7], re.S
        )
        out.append(
            {
                "text": html.unescape(cells[1]),
                "category": html.unescape(cells[2]),
                "weight": cells[3],
                "gate": cells[4],
                "verdict": cells[5],
                "class": verdict_class,
                "probability": cells[6],
                "verdict_text": html.unescape(judge.group(1)) if judge else "",
            }
        )
    return out


# ----------------------------------------------------------------------------------------------------------
# the viewer
# ----------------------------------------------------------------------------------------------------------
def test_the_row_page_shows_every_criterion_and_its_verdict(server):
    sid = server[1]["rubric.scored.jsonl"]
    page = _get(server, f"/s/{sid}/row/0").text
    expected_verdicts = [("met", "ok"), ("not met", "bad"), ("no verdict", "unknown"), ("not met", "bad")]
    table = _criteria_table(page)
    assert [t["text"] for t in table] == [c["criterion"] for c in CRITERIA_A]
    assert [(t["verdict"], t["class"]) for t in table] == expected_verdicts
    assert [t["category"] for t in table] == ["essential", "important", "optional", "pitfall"]
    assert [t["weight"] for t in table] == ["5", "3", "1", "-2"]
    assert [t["gate"] for t in table] == ["gate", "", "", ""]
    assert [t["probability"] for t in table] == ["0.930", "0.200", "", "0.050"]
    assert [t["verdict_text"] for t in table] == [c["verdict_text"] for c in CRITERIA_A]
    # untrusted text is text: the criterion's <script> and the judge's <b> are escaped
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "No <b>steps</b>" not in page
    met = html.unescape(re.search(r'<p class="muted" id="criteria-met">(.*?)</p>', page, re.S).group(1))
    assert (
        met
        == "met: essential 1 of 1 · important 0 of 1 · optional 0 of 0 (1 without a verdict) · pitfall 0 of 1"
    )
    assert "score 0.7" in page and "explicit aggregation" in page

    # row b: a criterion without a category; row e: a "met" that is not a boolean is no verdict
    table_b = _criteria_table(_get(server, f"/s/{sid}/row/1").text)
    assert [(t["category"], t["verdict"]) for t in table_b] == [
        ("essential", "not met"), ("essential", "met"), ("important", "met"), (C.NO_CATEGORY, "met")
    ]  # fmt: skip
    assert [t["verdict"] for t in _criteria_table(_get(server, f"/s/{sid}/row/4").text)] == ["no verdict"]


def test_rows_without_criteria_render_as_before(server, root):
    for name, row in (("rubric.scored.jsonl", 2), ("rubric.scored.jsonl", 3), ("plain.scored.jsonl", 0)):
        page = _get(server, f"/s/{server[1][name]}/row/{row}").text
        assert 'id="criteria"' not in page and "<h2>Rubric" not in page and 'id="judge"' not in page
    # the page of a row without criteria is the page the viewer rendered before criteria existed: the same
    # sections, in the same order
    page = _get(server, f"/s/{server[1]['plain.scored.jsonl']}/row/0").text
    assert re.findall(r"<h2>([^<]*)</h2>", page) == [
        "Prompt", "Completion", "Reference", "Details", "Other fields"
    ]  # fmt: skip
    plain = _get(server, f"/api/s/{server[1]['plain.scored.jsonl']}/criteria").json()
    assert plain == {"summary": {}, "steps": {}}
    rows = _get(server, f"/api/s/{server[1]['plain.scored.jsonl']}/rows").json()["data"]
    assert rows[0]["rubric_score"] is None and rows[0]["reward"] == 1.0
    assert _get(server, f"/api/s/{server[1]['plain.scored.jsonl']}/facets").json()["columns"] == {
        "rubric_score": 0
    }


def test_the_summary_is_the_mean_share_met_per_category(server):
    body = _get(server, f"/api/s/{server[1]['rubric.scored.jsonl']}/criteria").json()
    summary = body["summary"]
    assert list(summary["categories"]) == list(EXPECTED["categories"])  # Rubrics as Rewards' order
    assert summary["mean_rubric_score"] == pytest.approx(EXPECTED["mean_rubric_score"])
    assert {k: v for k, v in summary.items() if k != "mean_rubric_score"} == {
        k: v for k, v in EXPECTED.items() if k != "mean_rubric_score"
    }
    assert body["steps"] == {}  # a scored file has no steps
    # the page that shows it
    assert (
        '<section id="criteria" hidden></section>'
        in _get(server, f"/s/{server[1]['rubric.scored.jsonl']}").text
    )


def test_the_rl_page_summary_per_step(server):
    sid = server[1]["rl-rubric"]
    body = _get(server, f"/api/s/{sid}/criteria").json()
    shares = {k: v["mean_share_met"] for k, v in body["summary"]["categories"].items()}
    assert shares == {"essential": 0.75, "important": 0.25}
    by_step = {
        s: {k: v["mean_share_met"] for k, v in e["categories"].items()} for s, e in body["steps"].items()
    }
    assert by_step == {"1": {"essential": 0.5}, "2": {"essential": 1.0, "important": 0.25}}
    assert body["summary"]["mean_rubric_score"] == pytest.approx((0.0 + 1.0 + 1.0 + 0.5) / 4)
    assert '<section id="criteria" hidden></section>' in _get(server, f"/s/{sid}").text
    assert [r["rubric_score"] for r in _get(server, f"/api/s/{sid}/rows", sort="rubric_score").json()["data"]] == [
        0.0, 0.5, 1.0, 1.0
    ]  # fmt: skip


def test_the_row_list_gets_a_rubric_score_column(server):
    sid = server[1]["rubric.scored.jsonl"]
    rows = _get(server, f"/api/s/{sid}/rows").json()["data"]
    assert [r["rubric_score"] for r in rows] == [0.7, 0.25, None, None, 0.5, 1.0]
    desc = _get(server, f"/api/s/{sid}/rows", sort="rubric_score", dir="desc").json()["data"]
    assert [r["id"] for r in desc] == ["f", "a", "e", "b", "c", "d"]  # rows without a score last either way
    assert _get(server, f"/api/s/{sid}/facets").json()["columns"] == {"rubric_score": 4}
    js = _get(server, "/static/view.js").text
    assert 'field: "rubric_score"' in js  # the column the page shows when some rows have a score


def test_a_judge_row_shows_its_verdict_votes_and_outputs(server):
    page = _get(server, f"/s/{server[1]['judge.scored.jsonl']}/row/0").text
    judge = re.search(r'<table class="plain judge" id="judge">(.*?)</table>', page, re.S).group(1)
    cells = dict(re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", judge))
    assert cells == {"verdict": "yes", "votes": "yes, no, yes", "soft score": "0.8125"}
    outputs = re.findall(
        r'<details class="judge-output"><summary>judgment \d+</summary><pre>(.*?)</pre>', page, re.S
    )
    assert [html.unescape(o) for o in outputs] == JUDGE_ROW["details"]["outputs"]
    assert "<b>Correct</b>" not in page
    assert 'id="criteria"' not in page


@pytest.mark.parametrize(
    ("details", "score"),
    [({"rubric_score": 0.5}, 0.5), ({"rubric_score": "0.25"}, 0.25), ({"rubric_score": True}, 1.0),
     ({"rubric_score": {"a": 1}}, None), ({"rubric_score": [1]}, None), ({"rubric_score": None}, None),
     ({"extracted": "4"}, None), ("text", None), ([1, 2], None), (None, None)],
)  # fmt: skip
def test_duckdb_and_orjson_read_the_nested_score_alike(tmp_path, monkeypatch, details, score):
    """The rubric score is a field of ``details``: DuckDB's struct column and orjson's reading agree on every
    shape ``details`` can have (numbers, booleans and numeric text are scores, as for ``reward``)."""
    path = _write(
        tmp_path / "rows.jsonl", [{"id": "x", "reward": 1, "details": details}, {"id": "y", "reward": 0}]
    )
    used = []
    real = R._duckdb_columns
    monkeypatch.setattr(R, "_duckdb_columns", lambda *a: used.append(real(*a) is not None) or real(*a))
    duck = RowIndex(path, SCORED_COLUMNS).column("rubric_score").tolist()
    assert used == [True]  # DuckDB really read it
    monkeypatch.setattr(R, "_duckdb_columns", lambda *args: None)
    py = RowIndex(path, SCORED_COLUMNS).column("rubric_score").tolist()
    assert [None if v != v else v for v in duck] == [None if v != v else v for v in py] == [score, None]


def test_the_summary_follows_a_run_in_progress(tmp_path):
    run = tmp_path / "rl"
    run.mkdir()
    _write(run / "rollouts.jsonl", RL_ROWS[:2])
    client = TestClient(create_app(run))
    first = client.get("/api/s/0/criteria").json()
    assert first["summary"]["categories"]["essential"]["mean_share_met"] == 0.5
    with (run / "rollouts.jsonl").open("a") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in RL_ROWS[2:]))
    again = client.get("/api/s/0/criteria").json()
    assert again["summary"]["categories"]["essential"]["mean_share_met"] == 0.75
    assert set(again["steps"]) == {"1", "2"}


# ----------------------------------------------------------------------------------------------------------
# the tally itself
# ----------------------------------------------------------------------------------------------------------
def test_the_tally_matches_the_hand_computed_summary():
    tally = C.CriteriaTally()
    assert tally.to_dict() == {} and tally.format() == ""
    for row in SCORED:
        tally.add(row)
    got = tally.to_dict()
    assert got.pop("mean_rubric_score") == pytest.approx(EXPECTED["mean_rubric_score"])
    assert got == {k: v for k, v in EXPECTED.items() if k != "mean_rubric_score"}
    lines = tally.format().splitlines()
    assert (
        lines[0]
        == "rubric       3 samples with criteria (2 with an error left out), mean rubric score 0.4833"
    )
    assert lines[2] == "  essential     75.0%  (2 samples, 3 criteria)"
    assert lines[3] == "  important     50.0%  (2 samples, 3 criteria, 1 without a verdict)"
    assert lines[4] == "  optional        n/a  (0 samples, 1 criteria, 1 without a verdict)"


# ----------------------------------------------------------------------------------------------------------
# eval with a rubric source: through the reward-source kind registry
# ----------------------------------------------------------------------------------------------------------
BUILT: list[dict] = []


class FakeRubric:
    """A rubric source: criterion 1 (essential) is met when the completion says ``42``, criterion 2 (important)
    when it says ``because``, criterion 3 (pitfall) when it says ``41``; no verdict on criterion 2 when it says
    ``maybe``. Reward: the weights met over the positive weights, clipped at 0 (explicit aggregation)."""

    name = "test_rubric"

    def __init__(self, **config):
        BUILT.append(config)
        self.config = config

    def score_batch(self, records):
        return [self._score(r) for r in records]

    def _score(self, record):
        if "ERROR" in record.completion:
            return Result.failure("judge error: the fake judge refused")
        text = record.completion
        steps = None if "maybe" in text else "because" in text
        criteria = [
            _criterion("Says 42", "essential", 4, "42" in text),
            _criterion("Explains", "important", 2, steps),
            _criterion("Says 41", "pitfall", -2, "41" in text),
        ]
        earned = sum(c["weight"] for c in criteria if c["met"] is True)
        score = max(0.0, earned / 6)
        return Result(
            reward=score, details={"criteria": criteria, "aggregation": "explicit", "rubric_score": score}
        )


class HookedRubric(FakeRubric):
    """The same, with its own summaries: a tally under ``rubric`` replaces eval's, another one is added."""

    name = "test_rubric_hooked"

    @classmethod
    def summary_tallies(cls):
        return {"rubric": _CountTally("hooked rubric"), "extra": _CountTally("extra")}


class _CountTally:
    def __init__(self, label):
        self.label, self.n = label, 0

    def add(self, row):
        self.n += 1

    def to_dict(self):
        return {"rows": self.n}

    def format(self):
        return f"{self.label}: {self.n} rows"


register_source_kind(
    SourceKind(spelling="test_rubric", names=("test_rubric",), build=FakeRubric, argument="none")
)
register_source_kind(
    SourceKind(
        spelling="test_rubric_hooked", names=("test_rubric_hooked",), build=HookedRubric, argument="none"
    )
)

# problem p1: "42 because" (6/6 = 1.0), "42" (4/6), "41" (0); p2: "42 maybe" (4/6, no verdict on "Explains"),
# "ERROR" (an error row), "42 because 41" (4/6)
COMPLETIONS = [
    {"problem_id": "p1", "completions": ["42 because", "42", "41"]},
    {"problem_id": "p2", "completions": ["42 maybe", "ERROR", "42 because 41"]},
]


def _eval(tmp_path, verifier="test_rubric", *extra) -> dict:
    bench = _write(tmp_path / "bench.jsonl", [{"id": "p1", "prompt": "6*7?", "reference": "42"},
                                              {"id": "p2", "prompt": "7*6?", "reference": "42"}])  # fmt: skip
    completions = _write(tmp_path / "completions.jsonl", COMPLETIONS)
    out = tmp_path / f"run-{verifier}-{len(extra)}"
    argv = ["eval", "--completions", str(completions), "--benchmark", str(bench), "--verifier", verifier,
            "--verifier-arg", "judge_model=tiny", "--verifier-arg", "k=3", "-o", str(out), "--no-progress",
            "--bootstrap", "0", "--workers", "0", *extra]  # fmt: skip
    assert main(argv) == 0
    return json.loads((out / "summary.json").read_text()) | {
        "_report": (out / "report.md").read_text(),
        "_out": out,
    }


def test_eval_scores_with_a_source_kind_and_reports_the_rubric(tmp_path, capsys):
    assert "test_rubric" not in VERIFIERS  # a kind of source name, not a verifier
    BUILT.clear()
    summary = _eval(tmp_path)
    assert BUILT == [{"judge_model": "tiny", "k": 3}]  # --verifier-arg reached the kind's builder
    rubric = summary["tallies"]["rubric"]
    # essential: p1 1, 1, 0; p2 1, 1 -> 4/5; important: 1, 0, 0, (none), 1 -> 2/4; pitfall: 0, 0, 1, 0, 1 -> 2/5
    assert {k: v["mean_share_met"] for k, v in rubric["categories"].items()} == {
        "essential": 0.8, "important": 0.5, "pitfall": 0.4
    }  # fmt: skip
    assert rubric["categories"]["important"]["no_verdict"] == 1
    assert (rubric["samples"], rubric["errors"]) == (5, 1)
    assert rubric["mean_rubric_score"] == pytest.approx((1 + 4 / 6 + 0 + 4 / 6 + 4 / 6) / 5)
    # the report and the printed summary say it
    assert "rubric       5 samples with criteria (1 with an error left out)" in summary["_report"]
    assert "  essential     80.0%  (5 samples, 5 criteria)" in capsys.readouterr().out
    # a graded reward solves only at the threshold (1.0): p1 has 1 of 3, p2 none
    assert summary["metrics"]["pass@1"]["mean"] == pytest.approx((pass_at_k_single(3, 1, 1) + 0) / 2)
    assert summary["metrics"]["mean_reward"]["mean"] == pytest.approx(
        ((1 + 4 / 6 + 0) / 3 + (4 / 6 + 0 + 4 / 6) / 3) / 2
    )


def test_eval_correct_threshold_counts_graded_rewards(tmp_path):
    summary = _eval(tmp_path, "test_rubric", "--correct-threshold", "0.6")
    # rewards >= 0.6: p1 2 of 3 (1.0, 0.667), p2 2 of 3 (0.667, error, 0.667)
    expected = (pass_at_k_single(3, 2, 1) + pass_at_k_single(3, 2, 1)) / 2
    assert summary["metrics"]["pass@1"]["mean"] == pytest.approx(expected)
    assert summary["config"]["correct_threshold"] == 0.6


def test_eval_uses_the_source_s_own_summary_tallies(tmp_path):
    summary = _eval(tmp_path, "test_rubric_hooked")
    assert summary["tallies"] == {"rubric": {"rows": 6}, "extra": {"rows": 6}}  # every sample, errors too
    assert "hooked rubric: 6 rows" in summary["_report"] and "extra: 6 rows" in summary["_report"]
    assert "mean share per sample" not in summary["_report"]


def test_eval_of_a_verifier_without_criteria_reports_no_rubric(tmp_path):
    bench = _write(tmp_path / "bench.jsonl", [{"id": "p1", "prompt": "2+2?", "reference": "4"}])
    completions = _write(
        tmp_path / "completions.jsonl", [{"problem_id": "p1", "completions": ["\\boxed{4}"]}]
    )
    out = tmp_path / "run"
    argv = ["eval", "--completions", str(completions), "--benchmark", str(bench), "--verifier", "math", "-o",
            str(out), "--no-progress", "--bootstrap", "0", "--workers", "0"]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "tallies" not in summary and "Source summaries" not in (out / "report.md").read_text()


def test_the_eval_run_of_a_rubric_source_in_the_viewer(tmp_path):
    summary = _eval(tmp_path)
    client = TestClient(create_app(summary["_out"]))
    body = client.get("/api/s/0/criteria").json()
    assert body["summary"] == summary["tallies"]["rubric"]  # the viewer and eval agree
    rows = client.get("/api/s/0/rows", params={"size": 10}).json()["data"]
    scores = [r["rubric_score"] for r in rows]
    assert scores[4] is None and scores[:4] + scores[5:] == pytest.approx([1, 4 / 6, 0, 4 / 6, 4 / 6])
    table = _criteria_table(client.get("/s/0/row/3").text)  # "42 maybe"
    assert [(t["text"], t["verdict"]) for t in table] == [
        ("Says 42", "met"), ("Explains", "no verdict"), ("Says 41", "not met")
    ]  # fmt: skip


def test_eval_completions_with_a_source_kind_imports_no_torch(tmp_path):
    """``eval --completions`` stays light with a kind of source name registered (the real ``rubric`` and
    ``judge`` kinds are registered by importing ``rewardlab.rewardmodels.sources``)."""
    bench = _write(tmp_path / "bench.jsonl", [{"id": "p1", "prompt": "6*7?", "reference": "42"}])
    completions = _write(
        tmp_path / "completions.jsonl", [{"problem_id": "p1", "completions": ["42 because"]}]
    )
    code = (
        "import sys\n"
        "import rewardlab.eval\n"  # the eval package alone knows the reward-model floor's kinds of source name
        "from rewardlab.verifiers.sources import source_kind\n"
        "assert source_kind('rubric', in_run=False).spelling == 'rubric'\n"
        "assert source_kind('judge', in_run=False).spelling == 'judge'\n"
        f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "import test_view_rubric\n"  # registers test_rubric
        "from rewardlab.cli import main\n"
        f"rc = main(['eval', '--completions', {str(completions)!r}, '--benchmark', {str(bench)!r}, '--verifier', "
        f"'test_rubric', '-o', {str(tmp_path / 'run')!r}, '--no-progress', '--bootstrap', '0', '--workers', '0'])\n"
        "assert rc == 0\n"
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert "rubric" in json.loads((tmp_path / "run" / "summary.json").read_text())["tallies"]


# ----------------------------------------------------------------------------------------------------------
# eval with the real `rubric` kind (rewardmodels/judge/sources.py), judged by a real HTTP server
# ----------------------------------------------------------------------------------------------------------
RESPONSES = {"RESP-1: ALPHA and BETA": 1.0, "RESP-2: ALPHA with GAMMA": (5 - 2) / 8, "RESP-3: nothing": 0.0}
"""Each response and its reward by hand: ALPHA essential 5, BETA important 3, GAMMA a pitfall -2 (made when the
response recommends GAMMA); the earned weights over the positive ones (8), clipped to [0, 1]."""
KEYWORDS = ("ALPHA", "BETA", "GAMMA")


class _CriterionJudge(JSONHandler):
    """An OpenAI-compatible judge: it finds which known response the prompt shows and which keyword the
    criterion names (the keyword left once the response is taken out), and says yes when the response has it
    (a pitfall's yes: the mistake was made). Template-agnostic: it reads no section headers."""

    def do_GET(self):  # noqa: N802
        self.send_json(200, {"object": "list", "data": [{"id": "judge-model", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        user = self.read_json()["messages"][-1]["content"]
        response = next(r for r in RESPONSES if r in user)
        keyword = next(k for k in KEYWORDS if k in user.replace(response, ""))
        verdict = "yes" if keyword in response else "no"
        message = {"role": "assistant", "content": f"Checked {keyword}. Verdict: {verdict}"}
        self.send_json(200, {"object": "chat.completion", "choices": [{"index": 0, "message": message}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 5}})  # fmt: skip


def test_eval_with_the_rubric_kind_judged_over_http(tmp_path):
    rubric = [
        {"criterion": "Mentions ALPHA", "weight": 5, "category": "essential"},
        {"criterion": "Mentions BETA", "weight": 3, "category": "important"},
        {"criterion": "Recommends GAMMA", "weight": -2, "category": "pitfall"},
    ]
    bench = _write(tmp_path / "bench.jsonl", [{"id": "p1", "prompt": "Which letters?", "reference": rubric}])
    completions = _write(
        tmp_path / "completions.jsonl", [{"problem_id": "p1", "completions": list(RESPONSES)}]
    )
    out = tmp_path / "run"
    with serving(_CriterionJudge) as url:
        argv = ["eval", "--completions", str(completions), "--benchmark", str(bench), "--verifier", "rubric",
                "--verifier-arg", f"base_url={url}/v1", "--verifier-arg", "logprobs=false", "-o", str(out),
                "--no-progress", "--bootstrap", "0", "--workers", "0"]  # fmt: skip
        assert main(argv) == 0
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert [s["error"] for s in samples] == [None, None, None]
    assert [s["reward"] for s in samples] == pytest.approx(list(RESPONSES.values()))
    summary = json.loads((out / "summary.json").read_text())
    rubric_tally = summary["tallies"]["rubric"]
    # essential: 1, 1, 0; important: 1, 0, 0; pitfall made: 0, 1, 0
    shares = {k: v["mean_share_met"] for k, v in rubric_tally["categories"].items()}
    assert shares == pytest.approx({"essential": 2 / 3, "important": 1 / 3, "pitfall": 1 / 3})
    assert rubric_tally["mean_rubric_score"] == pytest.approx(sum(RESPONSES.values()) / 3)
    assert summary["metrics"]["pass@1"]["mean"] == pytest.approx(1 / 3)  # only the full score solves
    # the viewer shows the run's criteria and verdicts
    client = TestClient(create_app(out))
    table = _criteria_table(client.get("/s/0/row/1").text)
    assert [(t["text"], t["category"], t["verdict"]) for t in table] == [
        ("Mentions ALPHA", "essential", "met"), ("Mentions BETA", "important", "not met"),
        ("Recommends GAMMA", "pitfall", "met"),
    ]  # fmt: skip
    assert [t["verdict_text"] for t in table] == [
        "Checked ALPHA. Verdict: yes", "Checked BETA. Verdict: no", "Checked GAMMA. Verdict: yes"
    ]  # fmt: skip
    assert client.get("/api/s/0/criteria").json()["summary"] == rubric_tally


# ----------------------------------------------------------------------------------------------------------
# in a browser (slow, as the viewer's other browser tests: tests/test_view_browser.py)
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_pages_in_a_browser(server):
    """The table's rubric column, the summary tables of the scored file and the RL run, the criteria table's
    folded judge text; no script from a row runs (the criterion holding ``<script>``)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])"
    )
    chromium = (
        os.environ.get("REWARDLAB_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if not chromium or not Path(chromium).exists():
        pytest.skip("no chromium executable (REWARDLAB_CHROMIUM names a missing file, or none on PATH)")
    base, sids = server
    expect = sync_api.expect
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(15_000)
        problems: list[str] = []
        page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("pageerror", lambda exc: problems.append(f"script error: {exc}"))

        page.goto(f"{base}/s/{sids['rubric.scored.jsonl']}")
        page.locator("#rows .tabulator-row").first.wait_for()
        expect(page.locator('#rows .tabulator-col[tabulator-field="rubric_score"]')).to_be_visible()
        cells = page.locator('#rows .tabulator-row .tabulator-cell[tabulator-field="rubric_score"]')
        expect(cells).to_have_text(["0.7", "0.25", "", "", "0.5", "1"])
        summary = page.locator("#criteria-summary tbody tr")
        expect(summary.locator("td:first-child")).to_have_text(list(EXPECTED["categories"]))
        shares = {
            cat: ("—" if e["mean_share_met"] is None else f"{100 * e['mean_share_met']:.1f}%")
            for cat, e in EXPECTED["categories"].items()
        }
        for category, share in shares.items():
            expect(page.locator(f'#criteria-summary tr[data-category="{category}"] td.share')).to_have_text(
                share
            )

        page.goto(f"{base}/s/{sids['plain.scored.jsonl']}")  # no criteria: no column, no summary
        page.locator("#rows .tabulator-row").first.wait_for()
        page.wait_for_load_state("networkidle")
        expect(page.locator('#rows .tabulator-col[tabulator-field="rubric_score"]')).to_be_hidden()
        expect(page.locator("#criteria")).to_be_hidden()

        page.goto(f"{base}/s/{sids['rl-rubric']}?a=1&b=2")
        row = page.locator('#criteria-summary tr[data-category="important"] td.share')
        expect(row).to_have_text(["25.0%", "—", "25.0%"])  # all steps, step 1, step 2
        expect(page.locator('#criteria-summary tr[data-category="essential"] td.share')).to_have_text(
            ["75.0%", "50.0%", "100.0%"]
        )

        page.goto(f"{base}/s/{sids['rubric.scored.jsonl']}/row/0")
        judge_text = page.locator("#criteria tr.criterion").nth(1).locator("details pre")
        expect(judge_text).to_be_hidden()
        page.locator("#criteria tr.criterion").nth(1).locator("summary").click()
        expect(judge_text).to_have_text("No <b>steps</b> are shown.")
        expect(page.locator("#criteria tr.criterion").nth(2).locator("td.criterion-text")).to_have_text(XSS)
        browser.close()
    assert not problems, problems
