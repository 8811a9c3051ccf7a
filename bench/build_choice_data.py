"""Builds ``tests/data/choice/mmlu_pro_deepseek.jsonl.gz`` from the MMLU-Pro repository's released outputs.

MMLU-Pro (https://github.com/TIGER-AI-Lab/MMLU-Pro, MIT licence) released, in its history, the responses
of DeepSeek-V2 (``deepseek-chat``) to the 12,032 test questions with the prediction its own extraction read
(``pred``): ``eval_results/deepseek/<category>_result.json``, added in commit ff991b5 and updated (math,
physics) in eeeb46c, the commit read here. Each stored row keeps ``id`` (category/question_id),
``question_id``, ``category``, ``options``, ``answer`` (the gold letter), ``pred`` (the official
extraction's letter, ``null`` when its regex failed) and ``response``; all rows fit in the file.

    python bench/build_choice_data.py --repo GIT_DIR [--commit eeeb46c] [-o tests/data/choice/mmlu_pro_deepseek.jsonl.gz]

``GIT_DIR`` is the fetched repository's git directory (e.g. ``/work/.mirror/TIGER-AI-Lab+MMLU-Pro/repo``).

It also writes ``mmlu_pro_disagreements.json`` next to the rows: every row where the official ``pred`` is a
letter and ``choice`` does not read that letter, with the class of the disagreement (:func:`classify`). The
classes were checked by reading samples of each; ``tests/test_choice_mmlu_pro.py`` fails on any disagreement
not listed, and on a listed row that no longer disagrees.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
from pathlib import Path

from rewardlab.types import Record, Result
from rewardlab.verifiers.choice import ChoiceVerifier

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "data" / "choice" / "mmlu_pro_deepseek.jsonl.gz"
COMMIT = "eeeb46ca13acc9e60ce45a8dc2fb141ee76600ab"
FOLDER = "eval_results/deepseek"
ALLOWLIST = DEFAULT_OUT.with_name("mmlu_pro_disagreements.json")
OFFICIAL_FIRST = re.compile(r"answer is \(?([ABCDEFGHIJ])\)?")  # run_deepseek.py's pattern (see the tests)
CLASSES = {
    "hedge": "the final statement names two or more letters ('(A) and (E)', '(B) or (H)'); official takes the first",
    "superseded": "official takes an earlier statement; a later one names another letter",
    "letter_text_conflict": "the letter is followed by the text of another option ('(E). 3.6 g' with 3.6 g = J)",
    "final_names_no_option": "the final statement names a value or text that is no option ('the correct answer is 2500 J')",
    "negated_final": "the final statement denies an answer ('the correct answer is not listed among the options')",
    "letter_beyond_options": "official reads a letter past the record's option count",
    "official_word_initial": "official reads the first letter of a word ('answer is Hurler syndrome' -> H)",
}
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


def classify(row: dict, result: Result) -> str | None:
    """Why ``choice`` does not read the official ``pred`` on ``row`` (``None`` when it does, or pred is null)."""
    pred, details = row["pred"], result.details
    read = details.get("extracted") if "correct" in details and not _refused(details) else None
    if pred is None or read == pred:
        return None
    reason = details.get("reason") or ""
    by_reason = [
        (("two options", "several options"), "hedge"),
        (("with the text of option",), "letter_text_conflict"),
        (("negated",), "negated_final"),
        (("names no option letter", "box names no"), "final_names_no_option"),
        (("is not one of the",), "letter_beyond_options"),
    ]
    for words, name in by_reason:
        if any(word in reason for word in words):
            return name
    official = OFFICIAL_FIRST.search(row["response"])
    if official is not None and re.match(r"[a-z]", row["response"][official.end() :]):
        return "official_word_initial"
    if read is not None and official is not None and official.start() < details["extracted_span"][0]:
        return "superseded"
    return "unexplained"


def _refused(details: dict) -> bool:
    reason = details.get("reason") or ""
    return details.get("extracted") is None or not (details["correct"] or reason.startswith("read "))


def score_rows(rows: list[dict]) -> list[Result]:
    verifier = ChoiceVerifier()
    return [
        verifier.score(
            Record(completion=row["response"], reference={"answer": row["answer"], "options": row["options"]})
        )
        for row in rows
    ]


def write_allowlist(rows: list[dict], out: Path) -> dict[str, int]:
    listed = {row["id"]: classify(row, result) for row, result in zip(rows, score_rows(rows), strict=True)}
    listed = {key: name for key, name in listed.items() if name is not None}
    out.write_text(json.dumps(dict(sorted(listed.items())), indent=0) + "\n")
    counts: dict[str, int] = {}
    for name in listed.values():
        counts[name] = counts.get(name, 0) + 1
    return counts


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
    counts = write_allowlist(rows, args.out.with_name(ALLOWLIST.name))
    print(f"disagreements with the official pred, by class -> {ALLOWLIST.name}: {counts}")


if __name__ == "__main__":
    main()
