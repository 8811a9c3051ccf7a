"""`rewardlab view`'s curriculum panel (issue 50): which ``curriculum/`` keys of an RL run's ``metrics.jsonl``
it plots (``data.curriculum_panel``), the JSON the RL page fetches, and the panel drawn in a real browser
(Debian's chromium through Playwright, as tests/test_view_browser.py; a few seconds: no run is made, the
metrics are written by hand).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from http_servers import view_server

from rewardlab.view import data as D
from rewardlab.view.app import create_app

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["alpha", "digits-4", "digits1"]  # sorted: "-" before "1"


def _curriculum_metrics(steps: int = 6) -> list[dict]:
    """``metrics.jsonl`` of an RL run with every curriculum key: AdaRFT's target difficulty rising and the
    drawn difficulty following it, the prefix fraction falling 1 -> 0, hints, a high-variance share, and three
    sources whose sampling probabilities (sum 1), bandit scores and drawn shares move. Written out of source
    order, so the panel's order is its own."""
    rows = []
    for step in range(1, steps + 1):
        t = (step - 1) / (steps - 1)
        p = {"digits1": 0.5 - 0.3 * t, "alpha": 0.25, "digits-4": 0.25 + 0.3 * t}
        rows.append(
            {
                "step": step,
                "loss": 1 / step,
                "reward": t,
                "kl": 0.01 * step,
                "curriculum/target_difficulty": 20 + 40 * t,
                "curriculum/drawn_difficulty": 18 + 40 * t,
                "curriculum/prefix_fraction": 1 - t,
                "curriculum/hint_groups": steps - step,
                "curriculum/hint_samples": 4 * (steps - step),
                "curriculum/hint_fraction": 0.5 * (1 - t),
                "curriculum/hint_solved": 0.25 + 0.5 * t,
                "curriculum/high_p_share": 0.2 + 0.1 * t,
                **{f"curriculum/p/{s}": v for s, v in p.items()},
                **{f"curriculum/score/{s}": v + 0.1 for s, v in p.items()},
                **{f"curriculum/drawn/{s}": v for s, v in p.items()},
            }
        )
    return rows


def _write_run(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _family(name: str, sources: list[str]) -> list[dict]:
    return [{"key": f"curriculum/{name}/{s}", "source": s} for s in sources]


FULL_PANEL = {
    "difficulty": [
        {"key": "curriculum/target_difficulty", "label": "target difficulty"},
        {"key": "curriculum/drawn_difficulty", "label": "drawn difficulty"},
    ],
    "shares": [
        {"key": "curriculum/prefix_fraction", "label": "prefix fraction"},
        {"key": "curriculum/hint_fraction", "label": "hint fraction"},
        {"key": "curriculum/hint_solved", "label": "hint solved"},
        {"key": "curriculum/high_p_share", "label": "high-p share"},
    ],
    "hints": [
        {"key": "curriculum/hint_groups", "label": "hinted groups"},
        {"key": "curriculum/hint_samples", "label": "hinted samples"},
    ],
    "p": _family("p", SOURCES),
    "score": _family("score", SOURCES),
    "drawn": _family("drawn", SOURCES),
}


# ----------------------------------------------------------------------------------------------------------
# curriculum_panel
# ----------------------------------------------------------------------------------------------------------
def test_no_curriculum_key_no_panel():
    assert D.curriculum_panel([]) is None
    assert D.curriculum_panel(["loss", "reward", "entropy/p50", "kl"]) is None
    # near misses: not under curriculum/
    assert (
        D.curriculum_panel(["curriculum", "curriculum_step", "rewards/curriculum/mean", "p/digits1"]) is None
    )


def test_every_key_in_its_group_sources_sorted():
    keys = sorted({k for row in _curriculum_metrics() for k in row if k != "step"})
    assert D.curriculum_panel(keys) == FULL_PANEL
    # the order keys come in does not matter
    assert D.curriculum_panel(list(reversed(keys))) == FULL_PANEL


def test_families_split_and_an_odd_source_name():
    panel = D.curriculum_panel(
        ["curriculum/score/zeta", "curriculum/p/digits-4", "curriculum/p/b_2", "curriculum/p/A", "loss"]
    )
    assert panel == {
        "difficulty": [],
        "shares": [],
        "hints": [],
        "p": [
            {"key": "curriculum/p/A", "source": "A"},
            {"key": "curriculum/p/b_2", "source": "b_2"},
            {"key": "curriculum/p/digits-4", "source": "digits-4"},
        ],
        "score": [{"key": "curriculum/score/zeta", "source": "zeta"}],
        "drawn": [],
    }
    # a family's name alone is no source; a name after it is all the source's, slashes included
    panel = D.curriculum_panel(["curriculum/p/", "curriculum/drawn/math/gsm8k"])
    assert panel["p"] == []
    assert panel["drawn"] == [{"key": "curriculum/drawn/math/gsm8k", "source": "math/gsm8k"}]


def test_scalars_alone_and_a_key_the_panel_does_not_plot():
    assert D.curriculum_panel(["curriculum/prefix_fraction", "loss"]) == {
        "difficulty": [],
        "shares": [{"key": "curriculum/prefix_fraction", "label": "prefix fraction"}],
        "hints": [],
        "p": [],
        "score": [],
        "drawn": [],
    }
    # drawn difficulty without the target: only what was logged
    panel = D.curriculum_panel(["curriculum/drawn_difficulty"])
    assert panel["difficulty"] == [{"key": "curriculum/drawn_difficulty", "label": "drawn difficulty"}]
    # a curriculum key of a kind it does not know: a panel (the run has a curriculum), with nothing in it
    panel = D.curriculum_panel(["curriculum/new_thing"])
    assert panel is not None and not any(panel.values())


def test_metric_series_carries_the_panel():
    rows = _curriculum_metrics(3)
    metrics = D.metric_series(rows)
    assert metrics["curriculum"] == FULL_PANEL
    assert metrics["entropy"] is None
    assert metrics["series"]["curriculum/p/digits-4"] == [0.25, 0.4, 0.55]
    plain = D.metric_series([{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}])
    assert plain["curriculum"] is None


# ----------------------------------------------------------------------------------------------------------
# Through the app: the JSON the RL page fetches, the page's container
# ----------------------------------------------------------------------------------------------------------
def test_rl_page_json_has_the_curriculum_panel(tmp_path):
    rows = _curriculum_metrics(4)
    # a step from before the curriculum logged (a resumed run): its curriculum series have a gap there
    rows.insert(0, {"step": 0, "loss": 2.0})
    run = _write_run(tmp_path / "rl", rows)
    client = TestClient(create_app(run))
    page = client.get("/s/0")
    assert page.status_code == 200
    section = re.search(r'<section id="curriculum" hidden>(.*?)</section>', page.text, re.S)
    assert section, "the RL page has a hidden curriculum container"
    assert "Curriculum" in section.group(1) and 'id="curriculum-curves"' in section.group(1)

    metrics = client.get("/api/s/0/metrics").json()
    assert metrics["steps"] == [0, 1, 2, 3, 4]
    assert metrics["curriculum"] == FULL_PANEL
    for group in FULL_PANEL.values():  # every key it names is a series the page has
        for item in group:
            assert item["key"] in metrics["series"]
    assert metrics["series"]["curriculum/prefix_fraction"][0] is None
    assert metrics["series"]["curriculum/prefix_fraction"][1:] == pytest.approx([1, 2 / 3, 1 / 3, 0])
    for i in range(1, 5):  # the probabilities of each step sum to 1
        assert sum(metrics["series"][f"curriculum/p/{s}"][i] for s in SOURCES) == pytest.approx(1)


def test_rl_page_json_without_a_curriculum(tmp_path):
    run = _write_run(tmp_path / "rl", [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5, "reward": 1.0}])
    metrics = TestClient(create_app(run)).get("/api/s/0/metrics").json()
    assert metrics["curriculum"] is None


# ----------------------------------------------------------------------------------------------------------
# In a browser
# ----------------------------------------------------------------------------------------------------------
def _chromium() -> str | None:
    if os.environ.get("REWARDLAB_CHROMIUM"):
        return os.environ["REWARDLAB_CHROMIUM"] if Path(os.environ["REWARDLAB_CHROMIUM"]).exists() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])"
    )
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no chromium executable (REWARDLAB_CHROMIUM names a missing file, or none on PATH)")
    with sync_api.sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        except Exception as exc:  # a broken install, a missing library: skip with what chromium said
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            pytest.skip(f"chromium ({chromium}) does not launch: {first}")
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``rewardlab view`` on three RL runs: every curriculum key, none, and curriculum keys with no usual
    metric (the default picker falls back to the first keys). Yields ``(base_url, {name: sid})``."""
    root = tmp_path_factory.mktemp("view-curriculum")
    _write_run(root / "rl-curriculum", _curriculum_metrics())
    _write_run(root / "rl-plain", [{"step": s, "loss": 1 / s, "reward": s / 3} for s in (1, 2, 3)])
    bare = [
        {k: v for k, v in r.items() if k not in ("loss", "reward", "kl")} | {"lr": 0.1, "zz": 1.0}
        for r in _curriculum_metrics()
    ]
    _write_run(root / "rl-bare", bare)
    with view_server(root, {"rl-curriculum", "rl-plain", "rl-bare"}) as running:
        yield running


@pytest.fixture
def page(browser):
    """A fresh page that fails the test on an uncaught script error."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, f"uncaught script errors: {errors}"


def _legend(chart) -> list[str]:
    return chart.locator(".u-legend .u-series .u-label").all_inner_texts()


@pytest.mark.slow  # a browser, as every test of tests/test_view_browser.py
def test_browser_draws_the_curriculum_panel(page, server):
    from playwright.sync_api import expect

    base, sids = server
    page.goto(f"{base}/s/{sids['rl-curriculum']}")
    page.locator("#curves canvas").first.wait_for()
    panel = page.locator("#curriculum")
    expect(panel).to_be_visible()
    expect(panel.locator("h2")).to_contain_text("Curriculum")
    expect(panel.locator("h2 .muted")).to_contain_text("sampling probability")
    expect(panel.locator(".curve")).to_have_count(5)
    probability, drawn, score, scalars, hints = panel.locator(".curve").all()
    for chart in (probability, drawn, score):  # one line a source, named, sorted
        assert _legend(chart) == ["step", *SOURCES]
    expect(probability.locator(".u-title")).to_contain_text("probability")
    expect(score.locator(".u-title")).to_contain_text("score")
    assert _legend(scalars) == [
        "step",
        "prefix fraction",
        "hint fraction",
        "hint solved",
        "high-p share",
        "target difficulty",
        "drawn difficulty",
    ]
    # difficulty on an axis of its own: x, the shares' y and the difficulty's y
    expect(scalars.locator(".u-axis")).to_have_count(3)
    assert _legend(hints) == ["step", "hinted groups", "hinted samples"]

    # the panel's keys are in the picker, not among the default curves
    expect(page.locator("#keys input[value='curriculum/p/digits1']")).not_to_be_checked()
    checked = [b.get_attribute("value") for b in page.locator("#keys input:checked").all()]
    assert sorted(checked) == ["kl", "reward"]


@pytest.mark.slow  # a browser, as every test of tests/test_view_browser.py
def test_browser_no_curriculum_no_panel_and_the_fallback_skips_its_keys(page, server):
    from playwright.sync_api import expect

    base, sids = server
    page.goto(f"{base}/s/{sids['rl-plain']}")
    page.locator("#curves canvas").first.wait_for()
    expect(page.locator("#curriculum")).to_be_hidden()
    assert page.locator("#curriculum canvas").count() == 0

    # no usual metric: the fallback's first keys, sorted, would be curriculum/...; the panel draws those
    page.goto(f"{base}/s/{sids['rl-bare']}")
    page.locator("#curriculum canvas").first.wait_for()
    checked = [b.get_attribute("value") for b in page.locator("#keys input:checked").all()]
    assert checked == ["lr", "zz"]
    expect(page.locator("#curves .curve")).to_have_count(2)
