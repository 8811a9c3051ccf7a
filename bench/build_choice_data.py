"""Builds ``tests/data/choice/mmlu_pro_deepseek.jsonl.gz`` from the MMLU-Pro repository's released outputs.

MMLU-Pro (https://github.com/TIGER-AI-Lab/MMLU-Pro, MIT licence) released, in its history, the responses
of DeepSeek-V2 (``deepseek-chat``) to the 12,032 test questions with the prediction its own extraction read
(``pred``): ``eval_results/deepseek/<category>_result.json``, added in commit ff991b5 and updated (math,
physics) in eeeb46c, the commit read here. Each stored row keeps ``id`` (category/question_id),
``question_id``, ``category``, ``options``, ``answer`` (the gold letter), ``pred`` (the official
extraction's letter, ``null`` when its regex failed) and ``response``; all rows fit in the file.

    python bench/build_choice_data.py --repo GIT_DIR [--commit eeeb46c] [-o tests/data/choice/mmlu_pro_deepseek.jsonl.gz]

``GIT_DIR`` is the fetched repository's git directory (e.g. ``/work/.mirror/TIGER-AI-Lab+MMLU-Pro/repo``).

It writes the rows only. The classes of disagreement between ``choice`` and the official extraction are
predicates on the response text in ``tests/test_choice_mmlu_pro.py`` (``DIFFERENCES``), not lists derived from
``choice``'s own output, and the hand labels of rows the official regex could not read are in
``tests/data/choice/mmlu_pro_hand_labels.json`` (written by hand, not by this script).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "data" / "choice" / "mmlu_pro_deepseek.jsonl.gz"
COMMIT = "eeeb46ca13acc9e60ce45a8dc2fb141ee76600ab"
FOLDER = "eval_results/deepseek"
KEPT = ("question_id", "category", "options", "answer", "pred", "response")


def git(repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True
    ).stdout


def load_rows(repo: str, commit: str = COMMIT) -> list[dict]:
    """Every row of the released results at ``commit``, in category then file order, with an ``id``."""
    names = sorted(n for n in git(repo, "ls-tree", "--name-only", f"{commit}:{FOLDER}").split("\n") if n)
    rows = []
    for name in names:
        if not name.endswith("_result.json"):
            continue
        for row in json.loads(git(repo, "show", f"{commit}:{FOLDER}/{name}")):
            kept = {key: row[key] for key in KEPT}
            rows.append({"id": f"{row['category']}/{row['question_id']}", **kept})
    return rows


def write_rows(rows: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same rows give the same bytes
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
        for row in rows:
            f.write((json.dumps(row, ensure_ascii=False) + "\n").encode())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repo", required=True, help="git directory of TIGER-AI-Lab/MMLU-Pro")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    rows = load_rows(args.repo, args.commit)
    write_rows(rows, args.out)
    nulls = sum(row["pred"] is None for row in rows)
    print(f"{len(rows)} rows ({nulls} with pred null) -> {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
