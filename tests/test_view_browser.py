"""``rewardlab view`` in a real browser: the server as users start it (``python -m rewardlab.cli view``), Debian's
chromium driven by Playwright, on files the real commands wrote (``rewardlab score``, ``rewardlab eval``, a tiny
CPU RL run logging ``rollouts.jsonl``) plus hand-written hostile and malformed rows and an RL run's
entropy-collapse metrics.

Skips when Playwright is not installed or no chromium runs (``REWARDLAB_CHROMIUM``: the browser's path; else
``chromium`` / ``chromium-browser`` on PATH). Playwright's own browsers are never downloaded.

Slow: about 25 s on 2 cores, a third of it making the data (the RL run's imports). Every test saves a
full-page screenshot to ``REWARDLAB_ARTIFACTS`` (default ``tests/artifacts/view/``). With ``RK_SCREENSHOTS=DIR``
the README's screenshots are written there too (1400x900): ``view-table.png``, ``view-row.png``,
``view-eval.png``, ``view-rl.png``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from http_servers import view_server

from rewardlab.eval import load_benchmark

pytestmark = pytest.mark.slow

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])"
)


def _chromium() -> str | None:
    """``REWARDLAB_CHROMIUM`` when set, else chromium on PATH."""
    if os.environ.get("REWARDLAB_CHROMIUM"):
        return os.environ["REWARDLAB_CHROMIUM"] if Path(os.environ["REWARDLAB_CHROMIUM"]).exists() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM = _chromium()
if CHROMIUM is None:
    pytest.skip(
        "no chromium executable (REWARDLAB_CHROMIUM names a missing file, or none on PATH: apt-get install chromium)",
        allow_module_level=True,
    )

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("REWARDLAB_ARTIFACTS") or ROOT / "tests" / "artifacts" / "view")
SCREENSHOTS = Path(os.environ["RK_SCREENSHOTS"]) if os.environ.get("RK_SCREENSHOTS") else None
SOURCES = {"math.scored.jsonl", "eval-run", "rl-entropy", "rl-run", "xss.jsonl", "zz-malformed.jsonl"}
VIEWPORT = {"width": 1400, "height": 900}
TIMEOUT_MS = 15_000

XSS_COMPLETION = "<img src=x onerror=alert(1)> then <script>alert(2)</script> so \\boxed{<b>7</b>}"
MALFORMED_LINE = '{"id": "cut-off", "reward": 1.0, "completion": "half a li'

# A tiny RL run on the tiny model: 3 GRPO steps, a digit-counting reward source (rows with answers, errors
# and text after the answer), every sample logged (run.log_completions).
RL_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    torch.set_num_threads(1)
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.types import Record

    sys.path.insert(0, sys.argv[2])  # the tests folder: the rollout-log tests' digit-counting source
    from test_rl_rollout_log import DigitSource

    prompts = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(12)]
    cfg = load_config(preset="grpo", overrides=[
        "train.max_steps=3", "train.prompts_per_step=2", "rollout.n=4", "rollout.max_new_tokens=8",
        "train.per_device_train_batch_size=8", "reward.sources=[]", "reward.truncation=none", "train.report_to=none",
        "run.log_completions=8", f"run.output_dir={sys.argv[1]}",
    ])
    with RLTrainer(cfg, train_records=prompts, eval_records=[], reward_fns=(DigitSource(),), console=None) as tr:
        tr.train()
    """
)


def _entropy_metrics(steps: int = 8) -> list[dict]:
    """``metrics.jsonl`` of an RL run whose policy collapses: every entropy percentile falls, the share of
    near-deterministic tokens rises."""
    rows = []
    for step in range(1, steps + 1):
        scale = 1 - step / (steps + 2)
        quantiles = {f"entropy/p{p}": round(2 * scale * p / 100, 4) for p in (10, 25, 50, 75, 90)}
        share = {"entropy/near_deterministic": round(0.1 * step, 4)}
        usual = {"step": step, "loss": 1 / step, "reward": step / steps, "kl": 0.01 * step}
        rows.append(usual | {"entropy": 1.2 * scale} | quantiles | share)
    return rows


def _read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ----------------------------------------------------------------------------------------------------------
# Fixtures: the browser, the data, the server
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        try:
            chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        except Exception as exc:  # a broken install, a missing library: skip with what chromium said
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            pytest.skip(f"chromium ({CHROMIUM}) does not launch: {first}")
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def view_root(tmp_path_factory) -> Path:
    """One folder holding a scored file, an eval run, an RL run, a hostile file and a malformed one."""
    root = tmp_path_factory.mktemp("view")
    py = [sys.executable, "-m", "rewardlab.cli"]
    completions = root.parent / "completions.jsonl"
    _, problems = load_benchmark("sample:gsm8k", limit=6)
    with completions.open("w") as f:
        for problem in problems:  # two samples right, one wrong
            for answer in (problem.reference, problem.reference, "1"):
                f.write(
                    json.dumps({"problem_id": problem.id, "completion": f"So \\boxed{{{answer}}}."}) + "\n"
                )
    jobs = {
        "score": py
        + ["score", "data/math/sample.jsonl", "-o", str(root / "math.scored.jsonl"), "--verifier", "math"]
        + ["--workers", "0", "--no-progress"],
        "eval": py
        + ["eval", "--completions", str(completions), "--benchmark", "sample:gsm8k", "--limit", "6"]
        + ["-o", str(root / "eval-run"), "--workers", "0", "--bootstrap", "0", "--no-progress"],
        "rl": [sys.executable, "-c", RL_SCRIPT, str(root / "rl-run"), str(Path(__file__).parent)],
    }
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    procs = {
        name: subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name, cmd in jobs.items()
    }
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"{name} failed:\n{out}\n{err}"

    hostile = {
        "id": "<img src=x onerror=alert(3)>",
        "prompt": "<script>alert(4)</script> what is 3+4?",
        "completion": XSS_COMPLETION,
        "reference": "<b>7</b>",
        "reward": 1.0,
        "verifier": "<i>math</i>",
        "details": {"extracted": "<b>7</b>", "reason": "<script>alert(5)</script>"},
        "error": None,
    }
    failing = {**hostile, "id": "x2", "reward": 0.0, "error": "<img src=y onerror=alert(6)>: boom"}
    (root / "xss.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (hostile, failing)))
    ok = {"id": "fine", "completion": "4", "reward": 1.0, "error": None}
    (root / "rl-entropy").mkdir()
    (root / "rl-entropy" / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _entropy_metrics())
    )
    (root / "zz-malformed.jsonl").write_text(
        json.dumps(ok) + "\n" + MALFORMED_LINE + "\n" + json.dumps({**ok, "id": "fine-2"}) + "\n"
    )
    return root


@pytest.fixture(scope="module")
def server(browser, view_root):
    """``rewardlab view ROOT`` on a free port; yields ``(base_url, {source name: source id})``."""
    with view_server(view_root, set(SOURCES)) as running:
        yield running


@pytest.fixture
def page(browser, request):
    """A fresh page (1400x900) that fails the test on any dialog (an executed ``alert``) or uncaught script
    error, and saves a full-page screenshot when the test ends."""
    context = browser.new_context(viewport=VIEWPORT)
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    dialogs: list[str] = []
    errors: list[str] = []

    def on_dialog(dialog):
        dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    pg.on("dialog", on_dialog)
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    finally:
        context.close()
    assert not dialogs, f"a dialog fired (script from a row ran): {dialogs}"
    assert not errors, f"uncaught script errors: {errors}"


def readme_shot(pg, name: str) -> None:
    """The README's screenshot of a view (only with ``RK_SCREENSHOTS``)."""
    if SCREENSHOTS is not None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SCREENSHOTS / name))


def wait_rows(pg, where: str = "#rows") -> None:
    pg.locator(f"{where} .tabulator-row").first.wait_for()


def shown_ids(pg) -> list[str]:
    return pg.locator("#rows a.rowlink").all_inner_texts()


def expect_url(pg, pattern: str) -> None:
    pg.wait_for_url(re.compile(pattern))


# ----------------------------------------------------------------------------------------------------------
# Tests
# ----------------------------------------------------------------------------------------------------------
def test_scored_table_filters_rows_and_links(page, server, view_root):
    base, sids = server
    sid = sids["math.scored.jsonl"]
    rows = _read_rows(view_root / "math.scored.jsonl")

    page.goto(f"{base}/s/{sid}")
    wait_rows(page)
    expect = sync_api.expect
    expect(page.locator("#count")).to_have_text(f"{len(rows)} of {len(rows)} rows")
    expect(page.locator("#rows .tabulator-row")).to_have_count(min(50, len(rows)))

    # error filter: the URL says so, and the table holds exactly the file's rows with an error
    errors = [r for r in rows if r.get("error")]
    assert errors, "the shipped math sample should have rows without an answer"
    page.select_option("#filters select[name=error]", "any")
    page.click("#filters button[type=submit]")
    expect_url(page, r"[?&]error=any(&|$)")
    expect(page.locator("#count")).to_have_text(f"{len(errors)} of {len(rows)} rows")
    expect(page.locator("#rows .tabulator-row")).to_have_count(len(errors))
    assert sorted(shown_ids(page)) == sorted(r["id"] for r in errors)
    expect(page.locator("#filters select[name=error]")).to_have_value("any")  # the form keeps the filter
    readme_shot(page, "view-table.png")

    # a row's link opens its page
    first = page.locator("#rows a.rowlink").first
    row_id = first.inner_text()
    first.click()
    expect_url(page, rf"/s/{sid}/row/\d+$")
    i = int(page.url.rsplit("/", 1)[1])
    assert rows[i]["id"] == row_id
    expect(page.locator("#error")).to_have_text(rows[i]["error"])

    # a correct row: the verifier's answer is highlighted in the completion
    i, row = next(
        (i, r) for i, r in enumerate(rows) if r["reward"] == 1.0 and (r.get("details") or {}).get("extracted")
    )
    page.goto(f"{base}/s/{sid}/row/{i}")
    extracted = row["details"]["extracted"]
    expect(page.locator("#completion mark.answer")).to_have_text(extracted)
    expect(page.locator("#extracted")).to_have_text(extracted)
    assert page.locator("#completion").inner_text() == row["completion"]
    assert json.loads(page.locator("#details").inner_text()) == row["details"]
    readme_shot(page, "view-row.png")

    # a shared link with its filters in the query string shows the filtered table
    zero = [r for r in rows if isinstance(r.get("reward"), int | float) and r["reward"] <= 0]
    page.goto(f"{base}/s/{sid}?reward_max=0")
    wait_rows(page)
    expect(page.locator("#count")).to_have_text(f"{len(zero)} of {len(rows)} rows")
    expect(page.locator("#filters input[name=reward_max]")).to_have_value("0")
    expect(page.locator("#rows .tabulator-row")).to_have_count(min(50, len(zero)))
    assert set(shown_ids(page)) <= {r["id"] for r in zero}


def test_sorting_by_reward_puts_it_in_the_url(page, server, view_root):
    base, sids = server
    sid = sids["math.scored.jsonl"]
    rewards = [r["reward"] for r in _read_rows(view_root / "math.scored.jsonl")]
    page.goto(f"{base}/s/{sid}")
    wait_rows(page)
    header = page.locator("#rows .tabulator-col[tabulator-field=reward] .tabulator-col-title")
    cells = page.locator("#rows .tabulator-row .tabulator-cell[tabulator-field=reward]")

    header.click()
    expect_url(page, r"[?&]sort=reward(&|$)")
    sync_api.expect(cells.first).to_have_text(f"{min(rewards):g}")
    shown = [float(t) for t in cells.all_inner_texts()]
    assert shown == sorted(shown)

    header.click()
    expect_url(page, r"[?&]dir=desc(&|$)")
    sync_api.expect(cells.first).to_have_text(f"{max(rewards):g}")
    shown = [float(t) for t in cells.all_inner_texts()]
    assert shown == sorted(shown, reverse=True)

    page.reload()  # the sorted view is a link
    wait_rows(page)
    sync_api.expect(cells.first).to_have_text(f"{max(rewards):g}")

    # a filter applied after a header click keeps the sort
    page.click("#rows .tabulator-col[tabulator-field=row] .tabulator-col-title")
    expect_url(page, r"[?&]sort=row&dir=asc(&|$)")
    header.click()
    expect_url(page, r"[?&]sort=reward&dir=asc(&|$)")
    page.select_option("#filters select[name=error]", "none")
    page.click("#filters button[type=submit]")
    expect_url(page, r"[?&]error=none(&|$)")
    wait_rows(page)
    assert re.search(r"[?&]sort=reward(&|$)", page.url) and re.search(r"[?&]dir=asc(&|$)", page.url), page.url
    shown = [float(t) for t in cells.all_inner_texts()]
    assert shown == sorted(shown)


def test_eval_run_problems_then_one_problems_samples(page, server, view_root):
    base, sids = server
    sid = sids["eval-run"]
    samples = _read_rows(view_root / "eval-run" / "samples.jsonl")
    problems = list(dict.fromkeys(str(r["problem_id"]) for r in samples))
    expect = sync_api.expect

    page.goto(f"{base}/s/{sid}")
    wait_rows(page, "#problems")
    wait_rows(page)
    expect(page.locator("#problems .tabulator-row")).to_have_count(len(problems))
    expect(page.locator("#count")).to_have_text(f"{len(samples)} of {len(samples)} rows")

    chosen = problems[1]
    page.locator("#problems .tabulator-row").nth(1).click()
    expect_url(page, rf"[?&]problem={chosen}(&|$)")
    wait_rows(page)
    mine = [r for r in samples if str(r["problem_id"]) == chosen]
    expect(page.locator("#count")).to_have_text(f"{len(mine)} of {len(samples)} rows")
    assert shown_ids(page) == [chosen] * len(mine)
    expect(page.locator("#problem-label")).to_contain_text(chosen)
    readme_shot(page, "view-eval.png")


def test_rl_run_curves_and_two_steps_side_by_side(page, server, view_root):
    base, sids = server
    sid = sids["rl-run"]
    logged = _read_rows(view_root / "rl-run" / "rollouts.jsonl")
    steps = sorted({r["step"] for r in logged})
    assert len(steps) >= 2
    expect = sync_api.expect

    page.goto(f"{base}/s/{sid}")
    page.locator("#curves canvas").first.wait_for()
    boxes = page.locator("#keys input[type=checkbox]")
    assert boxes.count() > 3
    # the entropy panel is there exactly when the run logged entropy percentiles or the near-deterministic share
    metrics = _read_rows(view_root / "rl-run" / "metrics.jsonl")
    if any(k.startswith("entropy/") for r in metrics for k in r):
        page.locator("#entropy canvas").first.wait_for()
    else:
        expect(page.locator("#entropy")).to_be_hidden()
        assert page.locator("#entropy canvas").count() == 0
    # keep three curves: the choice goes to the URL and travels with the comparison
    checked = [b for b in boxes.all() if b.is_checked()]
    for box in checked[3:]:
        box.uncheck()
    expect(page.locator("#curves .curve")).to_have_count(3)
    expect_url(page, r"[?&]keys=")
    assert page.locator("#curves canvas").count() >= 3

    a, b = steps[-1], steps[0]  # not the defaults (first against last)
    page.select_option("#step-a", str(a))
    page.select_option("#step-b", str(b))
    page.click("#steps button[type=submit]")
    expect_url(page, rf"[?&]a={a}&b={b}(&|$)")
    for side, step in (("#side-a", a), ("#side-b", b)):
        expect(page.locator(f"{side} h3")).to_contain_text(f"step {step}:")
        expect(page.locator(f"{side} .sample")).to_have_count(sum(r["step"] == step for r in logged))
    expect(page.locator("#curves .curve")).to_have_count(3)
    expect(page.locator("#step-a")).to_have_value(str(a))
    readme_shot(page, "view-rl.png")

    # flagged only: every card shown has its flags listed
    page.check("#flagged")
    page.click("#steps button[type=submit]")
    expect_url(page, r"[?&]flagged=1(&|$)")
    expect(page.locator("#side-a h3")).to_contain_text(f"step {a}:")
    flagged = int(re.search(r"(\d+) flagged", page.locator("#side-a h3").inner_text()).group(1))
    expect(page.locator("#side-a .sample")).to_have_count(flagged)
    expect(page.locator("#side-a .sample.flagged")).to_have_count(flagged)
    for card in page.locator("#side-a .sample").all():
        assert card.locator("ul.flags li").count() >= 1


def test_rl_run_entropy_panel(page, server):
    base, sids = server
    expect = sync_api.expect
    page.goto(f"{base}/s/{sids['rl-entropy']}")
    page.locator("#curves canvas").first.wait_for()

    panel = page.locator("#entropy")
    expect(panel).to_be_visible()
    expect(panel.locator("h2")).to_contain_text("Entropy")
    expect(panel.locator(".curve")).to_have_count(2)
    expect(panel.locator("canvas")).to_have_count(2)
    percentiles, share = panel.locator(".curve").all()
    # one chart: the five percentiles, lowest first, and the mean; the other: the near-deterministic share
    labels = percentiles.locator(".u-legend .u-series .u-label").all_inner_texts()
    assert labels == ["step", "p10", "p25", "p50", "p75", "p90", "mean"]
    assert share.locator(".u-legend .u-series .u-label").all_inner_texts() == ["step", "near-deterministic"]
    expect(share.locator(".u-title")).to_contain_text("0.05 nats")

    # the panel's keys are in the picker but not among the default curves, which are the usual ones
    expect(page.locator("#keys input[value='entropy/p50']")).not_to_be_checked()
    checked = [b.get_attribute("value") for b in page.locator("#keys input:checked").all()]
    assert sorted(checked) == ["entropy", "kl", "reward"]
    expect(page.locator("#curves .curve")).to_have_count(3)
    # picking one still draws it as a curve of its own; the panel stays as it is
    page.check("#keys input[value='entropy/near_deterministic']")
    expect(page.locator("#curves .curve")).to_have_count(4)
    expect_url(page, r"[?&]keys=[^&]*entropy%2Fnear_deterministic")
    expect(panel.locator(".curve")).to_have_count(2)


def test_html_in_rows_is_shown_as_text(page, server):
    base, sids = server
    sid = sids["xss.jsonl"]
    page.goto(f"{base}/s/{sid}")
    wait_rows(page)
    sync_api.expect(page.locator("#rows .tabulator-row")).to_have_count(2)
    table = page.locator("#rows")
    assert table.locator("img, script, b, i").count() == 0
    assert "<img src=x onerror=alert(3)>" in shown_ids(page)
    assert "<img src=y onerror=alert(6)>" in table.inner_text()  # the error kind, as text
    assert page.locator("#filters select[name=verifier] option[value='<i>math</i>']").count() == 1

    page.locator("#rows a.rowlink").first.click()
    expect_url(page, rf"/s/{sid}/row/0$")
    completion = page.locator("#completion")
    sync_api.expect(completion).to_have_text(XSS_COMPLETION)
    sync_api.expect(completion.locator("mark.answer")).to_have_text("<b>7</b>")
    assert page.locator("main img, main script, main b").count() == 0
    assert "<script>alert(4)</script>" in page.locator("#prompt").inner_text()
    page.goto(f"{base}/s/{sid}/row/1")
    sync_api.expect(page.locator("#error")).to_have_text("<img src=y onerror=alert(6)>: boom")
    page.wait_for_timeout(300)  # an onerror handler would have fired by now


def test_malformed_line_is_a_row_with_its_text(page, server):
    base, sids = server
    sid = sids["zz-malformed.jsonl"]
    page.goto(f"{base}/s/{sid}")
    wait_rows(page)
    sync_api.expect(page.locator("#count")).to_have_text("3 of 3 rows")
    bad = page.locator("#rows .tabulator-row").nth(1)
    sync_api.expect(bad.locator(".tabulator-cell[tabulator-field=error]")).to_have_text("malformed row")

    page.select_option("#filters select[name=error]", "malformed row")
    page.click("#filters button[type=submit]")
    expect_url(page, r"[?&]error=malformed\+row(&|$)")
    sync_api.expect(page.locator("#count")).to_have_text("1 of 3 rows")
    page.locator("#rows a.rowlink").first.click()
    expect_url(page, rf"/s/{sid}/row/1$")
    sync_api.expect(page.locator("h1")).to_contain_text("Malformed row")
    sync_api.expect(page.locator("#raw")).to_have_text(MALFORMED_LINE)
    assert page.locator("a#next").count() == 1  # the page is whole: navigation still there
    page.click("a#next")
    expect_url(page, rf"/s/{sid}/row/2$")
    sync_api.expect(page.locator("#completion")).to_have_text("4")
    assert page.locator("a#next").count() == 0  # the last row links to no row after it
    assert page.locator("a#prev").count() == 1
