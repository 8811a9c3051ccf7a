"""Builds the QA verifier's outside data from Natural Questions open (NQ-open dev, CC BY-SA 3.0).

Reads ``nq_open/NQ-open.dev.jsonl`` (3,610 questions with gold aliases) from a git mirror of
https://github.com/google-research-datasets/natural-questions and writes:

- ``tests/data/qa/nq_open_dev_predictions.jsonl.gz``: per question, its aliases and ten predictions built
  from them with realistic changes (case, articles, punctuation, Unicode spaces, extra words, a truncated
  alias, an alias of another question, curly quotes and dashes, a hedge), deterministic for a seed. The
  tests require SQuAD's and verl's figures on every one (tests/test_qa_references.py).
- ``data/qa/nq_open_sample.jsonl``: 200 questions in rewardlab's record shape (``id``, ``prompt``,
  ``reference`` = the alias list).

    .venv/bin/python bench/build_qa_data.py [--git-dir DIR] [--commit SHA] [--seed 0]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GIT_DIR = "/work/.mirror/google-research-datasets+natural-questions/repo"
COMMIT = "fb26a3073b1fe636c97302890a27b491d6530130"
SOURCE = "nq_open/NQ-open.dev.jsonl"
PREDICTIONS = ROOT / "tests" / "data" / "qa" / "nq_open_dev_predictions.jsonl.gz"
SAMPLE = ROOT / "data" / "qa" / "nq_open_sample.jsonl"
SAMPLE_SIZE = 200

UNICODE_SPACES = ("\u00a0", "\u2009", "\u202f", "\u3000", "\u2003")
EXTRA_WORDS = (
    "It was {}",
    "It is {}",
    "in {}",
    "{} (according to Wikipedia)",
    "known as {}",
    "{} in total",
    "{} in the United States",
    "I think {}",
)
PUNCTUATION = ("{}.", '"{}"', "{}!", "({})", "{}'s", "{}?", "'{}'", "{} -")
ARTICLES = ("the", "a", "an", "The", "A", "An")


def load_questions(git_dir: str, commit: str) -> list[dict]:
    text = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{SOURCE}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _article(alias: str, rng: random.Random) -> str:
    first, _, rest = alias.partition(" ")
    if first.lower() in ("the", "a", "an") and rest:
        return rest  # the article dropped
    return f"{rng.choice(ARTICLES)} {alias}"


def _unicode_space(alias: str, rng: random.Random) -> str:
    space = rng.choice(UNICODE_SPACES)
    return alias.replace(" ", space) if " " in alias else f"{space}{alias}{space}"


def _partial(alias: str, rng: random.Random) -> str:
    words = alias.split()
    if len(words) > 1:
        return " ".join(words[1:] if rng.random() < 0.5 else words[:-1])
    return alias[:-1] if len(alias) > 1 else alias + alias


def _unicode_punctuation(alias: str, rng: random.Random) -> str:
    if "'" in alias or "-" in alias:
        return alias.replace("'", "\u2019").replace("-", "\u2013")
    return f"\u201c{alias}\u201d" if rng.random() < 0.5 else f"{alias}\u2026"


def predictions_for(index: int, questions: list[dict], seed: int) -> dict[str, str]:
    """Ten predictions for question ``index``, each a realistic change of one of its aliases."""
    rng = random.Random(f"{seed}:{index}")
    aliases = questions[index]["answer"]
    alias = rng.choice(aliases)
    other = questions[(index + rng.randrange(1, len(questions))) % len(questions)]["answer"]
    wrong = rng.choice(other)
    return {
        "exact": alias,
        "case": rng.choice([alias.upper(), alias.lower(), alias.title()]),
        "article": _article(alias, rng),
        "punctuation": rng.choice(PUNCTUATION).format(alias),
        "unicode_space": _unicode_space(alias, rng),
        "extra_words": rng.choice(EXTRA_WORDS).format(alias),
        "partial": _partial(alias, rng),
        "wrong_entity": wrong,
        "unicode_punctuation": _unicode_punctuation(alias, rng),
        "hedge": rng.choice(["{} or {}", "{}, {}", "{} / {}", "{} and {}"]).format(
            *((alias, wrong) if rng.random() < 0.5 else (wrong, alias))
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--git-dir", default=DEFAULT_GIT_DIR, help="git directory of a natural-questions mirror"
    )
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    questions = load_questions(args.git_dir, args.commit)
    rows = [
        {
            "id": i,
            "question": q["question"],
            "answers": q["answer"],
            "predictions": predictions_for(i, questions, args.seed),
        }
        for i, q in enumerate(questions)
    ]
    PREDICTIONS.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same data gives the same bytes.
    with open(PREDICTIONS, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        for row in rows:
            out.write((json.dumps(row, ensure_ascii=False) + "\n").encode())

    sample = sorted(random.Random(args.seed).sample(range(len(questions)), SAMPLE_SIZE))
    SAMPLE.parent.mkdir(parents=True, exist_ok=True)
    with open(SAMPLE, "w", encoding="utf-8") as out:
        for i in sample:
            record = {
                "id": f"nq-open-dev-{i}",
                "prompt": questions[i]["question"],
                "reference": questions[i]["answer"],
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    n_predictions = sum(len(r["predictions"]) for r in rows)
    print(f"{len(rows)} questions, {n_predictions} predictions -> {PREDICTIONS.relative_to(ROOT)}")
    print(f"{len(sample)} records -> {SAMPLE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
