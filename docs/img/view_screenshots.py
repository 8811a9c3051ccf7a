"""Takes the README's screenshots of ``rewardlab view`` on real outputs: the math sample scored by the real
verifier, and the demo's eval run and GRPO run (``scripts/demo`` first).

    python docs/img/view_screenshots.py --demo runs/demo --seed 0

Needs Playwright (the ``dev`` extra) and a Chromium (Debian's ``chromium`` package; ``--chromium PATH``).
Writes ``docs/img/view-{table,row,eval,rl}.png``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from rewardlab.view.sources import discover

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
RL_KEYS = "reward,eval/pass@1,completions/clipped_ratio"


def prepare(folder: Path, demo: Path, seed: int) -> dict[str, int]:
    """The viewed folder (the scored sample, links to the demo's runs) and each source's id."""
    scored = folder / "math.scored.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "rewardlab.cli",
        "score",
        str(ROOT / "data/math/sample.jsonl"),
        "-o",
        str(scored),
    ]
    subprocess.run([*cmd, "--verifier", "math", "--workers", "0", "--no-progress"], check=True)
    (folder / "eval").symlink_to((demo / "eval").resolve())
    (folder / "grpo").symlink_to((demo / f"seed-{seed}" / "grpo").resolve())
    return {s.name: i for i, s in enumerate(discover(folder))}


def serve(folder: Path) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "rewardlab.cli", "view", str(folder), "--no-browser", "--port", "0"]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    return server, line.rsplit(" at ", 1)[1].strip().rstrip("/")


def shoot(url: str, ids: dict[str, int], chromium: str, steps: tuple[int, int]) -> None:
    shots = {
        "view-table": (f"/s/{ids['math.scored.jsonl']}?reward_max=0", None),
        "view-row": (f"/s/{ids['math.scored.jsonl']}/row/12", None),
        "view-eval": (f"/s/{ids['eval']}?problem=heldout-3", None),
        "view-rl": (f"/s/{ids['grpo']}?a={steps[0]}&b={steps[1]}&keys={RL_KEYS}", ".sample"),
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for name, (path, wait_for) in shots.items():
            page.goto(url + path)
            page.wait_for_load_state("networkidle")
            if wait_for:
                page.wait_for_selector(wait_for)
            if name == "view-rl":  # the curves and the first samples of both steps
                page.set_viewport_size({"width": 1400, "height": 1250})
            page.screenshot(path=str(OUT / f"{name}.png"))
            print(f"wrote {OUT / name}.png ({path})")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--demo", type=Path, default=ROOT / "runs/demo", help="scripts/demo's output folder")
    parser.add_argument("--seed", type=int, default=0, help="whose GRPO run to show")
    # step 24 of seed 0 holds a flagged sample: truncated, and still scored 1.0 by the math verifier
    parser.add_argument("--steps", default="1,24", help="the two steps compared")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    a, b = (int(s) for s in args.steps.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        ids = prepare(Path(tmp), args.demo, args.seed)
        server, url = serve(Path(tmp))
        try:
            shoot(url, ids, args.chromium, (a, b))
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
