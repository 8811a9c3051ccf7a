"""Benchmark: the ``choice`` verifier vs the official MMLU-Pro extraction on MMLU-Pro's released responses.

Rows: the 11,997 DeepSeek-V2 responses of ``tests/data/choice/mmlu_pro_deepseek.jsonl.gz`` (or, with ``--full
GIT_DIR``, the same rows read from the fetched TIGER-AI-Lab/MMLU-Pro repository). Operating point: one
process, one thread, ``ChoiceVerifier().score`` in a plain loop against the official regex extraction in a
plain loop, same rows, same run; rows/s of both and the ratio are printed.

Then, for each extractor, on all rows: how many rows it reads a letter on, its agreement with the official
``pred`` where that is a letter, and its accuracy against the gold letter (no letter counts as wrong; the
official scorer's random guess for a missing ``pred`` is left out). Extractors, transcribed with citations:

- ``official pred``: the stored ``pred`` (run_deepseek.py at ff991b5: ``answer is \\(?([ABCDEFGHIJ])\\)?``);
- ``official extract_answer``: evaluate_from_api.py at ef9890a, with its two fallbacks
  (tests/test_choice_mmlu_pro.py holds the transcription);
- ``lm-eval``: EleutherAI/lm-evaluation-harness, ``lm_eval/tasks/mmlu_pro/_default_template_yaml`` (commit
  068f6ff): ``regex_pattern: 'answer is \\(?([ABCDEFGHIJ])\\)?'`` then ``take_first``;
- ``simple-evals``: openai/simple-evals ``common.py`` (commit 01ac108): ``normalize_response``, then
  ``MULTILINGUAL_ANSWER_PATTERN_TEMPLATE`` with the English ``Answer\\s*:`` entry of
  ``MULTILINGUAL_ANSWER_REGEXES`` (the MMLU eval's loop), and ``ANSWER_PATTERN_MULTICHOICE`` (GPQA's); their
  letter class ``[A-D]`` widened to ``[A-J]`` for MMLU-Pro's ten options.

    python bench/score_choice.py [--full GIT_DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from build_choice_data import DEFAULT_OUT, load_rows  # noqa: E402
from test_choice_mmlu_pro import extract_answer, extract_answer_deepseek_run, read_letter  # noqa: E402

from rewardlab.types import Record  # noqa: E402
from rewardlab.verifiers.choice import ChoiceVerifier  # noqa: E402

# lm-eval, lm_eval/tasks/mmlu_pro/_default_template_yaml (068f6ff): the "custom-extract" filter's pattern.
LM_EVAL_PATTERN = re.compile(r"answer is \(?([ABCDEFGHIJ])\)?")
# openai/simple-evals, common.py (01ac108), letters widened from A-D to A-J.
SIMPLE_EVALS_MULTICHOICE = re.compile(r"(?i)Answer[ \t]*:[ \t]*\$?([A-J])\$?")
SIMPLE_EVALS_MULTILINGUAL = re.compile(r"(?i)(?=(?:{}[ \t]*([A-J])))".format(r"Answer\s*:"))


def lm_eval_extract(text: str) -> str | None:
    found = LM_EVAL_PATTERN.findall(text)  # RegexFilter: findall, then the first match (take_first)
    return found[0] if found else None


def simple_evals_normalize_response(response: str) -> str:
    # openai/simple-evals common.py normalize_response (01ac108), transcribed
    return (
        response.replace("**", "")
        .replace("$\\boxed{", "")
        .replace("}$", "")
        .replace("\\$", "")
        .replace("$\\text{", "")
        .replace("$", "")
        .replace("\\mathrm{", "")
        .replace("\\{", "")
        .replace("\\text", "")
        .replace("\\(", "")
        .replace("\\mathbf{", "")
        .replace("{", "")
        .replace("\\boxed", "")
    )


def simple_evals_mmlu_extract(text: str) -> str | None:
    match = SIMPLE_EVALS_MULTILINGUAL.search(simple_evals_normalize_response(text))
    return match.group(1).strip().upper() if match else None


def simple_evals_gpqa_extract(text: str) -> str | None:
    match = SIMPLE_EVALS_MULTICHOICE.search(text)
    return match.group(1).upper() if match else None


def load(full: str | None) -> list[dict]:
    if full:
        return load_rows(full)
    with gzip.open(DEFAULT_OUT, "rt") as f:
        return [json.loads(line) for line in f]


def choice_letters(rows: list[dict]) -> list[str | None]:
    verifier = ChoiceVerifier()
    letters = []
    for row in rows:
        record = Record(
            completion=row["response"], reference={"answer": row["answer"], "options": row["options"]}
        )
        letters.append(read_letter(verifier.score(record).details))
    return letters


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def table(rows: list[dict], letters: dict[str, list[str | None]]) -> None:
    with_pred = [i for i, row in enumerate(rows) if row["pred"] is not None]
    print(f"\n{'extractor':<28}{'reads':>8}{'agrees with official pred':>34}{'accuracy':>11}")
    for name, read in letters.items():
        answered = sum(letter is not None for letter in read)
        agree = sum(read[i] == rows[i]["pred"] for i in with_pred)
        correct = sum(letter == row["answer"] for letter, row in zip(read, rows, strict=True))
        print(
            f"{name:<28}{answered:>8}{f'{agree}/{len(with_pred)} ({agree / len(with_pred):.2%})':>34}"
            f"{correct / len(rows):>11.2%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", help="git directory of the fetched TIGER-AI-Lab/MMLU-Pro repository")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (best is kept)")
    args = parser.parse_args()
    rows = load(args.full)
    nulls = sum(row["pred"] is None for row in rows)
    print(f"{len(rows)} MMLU-Pro responses of DeepSeek-V2 ({nulls} with official pred null)")

    ours_s, ours = timed(lambda: choice_letters(rows), args.repeat)
    ref_s, _ = timed(lambda: [extract_answer_deepseek_run(row["response"]) for row in rows], args.repeat)
    full_s, official_full = timed(lambda: [extract_answer(row["response"]) for row in rows], 1)
    print("\nthroughput (one process, plain loops, best of runs):")
    print(f"  choice                          {len(rows) / ours_s:>10,.0f} rows/s")
    print(f"  official regex (run_deepseek)   {len(rows) / ref_s:>10,.0f} rows/s")
    print(
        f"  official extract_answer         {len(rows) / full_s:>10,.0f} rows/s  (with its fallbacks, one run)"
    )
    print(f"  ratio choice / official regex   {ref_s / ours_s:>10.4f}")
    print(f"  ratio choice / extract_answer   {full_s / ours_s:>10.3f}")

    read_null = sum(ours[i] is not None for i, row in enumerate(rows) if row["pred"] is None)
    print(f"\nwhere the official pred is null: choice reads {read_null} of {nulls}")
    table(
        rows,
        {
            "official pred (stored)": [row["pred"] for row in rows],
            "official extract_answer": official_full,
            "lm-eval mmlu_pro": [lm_eval_extract(row["response"]) for row in rows],
            "simple-evals mmlu (A-J)": [simple_evals_mmlu_extract(row["response"]) for row in rows],
            "simple-evals gpqa (A-J)": [simple_evals_gpqa_extract(row["response"]) for row in rows],
            "choice": ours,
        },
    )


if __name__ == "__main__":
    main()
