"""IFEval scoring speed and agreement: rewardlab vs Google's reference checks (lm-eval's copy), same run.

Workload: the shipped sample (data/ifeval/sample.jsonl) plus generated IFEval rows (1-3 instructions
each, every instruction type) with generated responses. Both sides compute strict and loose verdicts
for every row, as lm-eval's ``process_results`` does; langdetect is seeded with 0 on both sides.

    .venv/bin/python bench/score_ifeval.py [--rows 1000] [--seed 0]

Needs lm-eval (``pip install --no-deps lm-eval``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load_test_module():
    spec = importlib.util.spec_from_file_location(
        "_ifeval_ref_tests", ROOT / "tests" / "test_ifeval_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_workload(n_rows: int, seed: int) -> list[dict]:
    tests = _load_test_module()
    rows = [json.loads(line) for line in (ROOT / "data" / "ifeval" / "sample.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    combos = tests.COMBOS + tests.LANGUAGE_COMBOS
    responses = tests._generated_responses(n_rows, seed)
    for i, response in enumerate(responses):
        chosen = rng.sample(combos, rng.randint(1, 3))
        ids = [c[0] for c in chosen]
        if len(set(ids)) < len(ids):
            chosen = chosen[:1]
        rows.append(
            {
                "key": 10_000 + i,
                "prompt": tests.PROMPT,
                "instruction_id_list": [c[0] for c in chosen],
                "kwargs": [dict(c[1]) for c in chosen],
                "response": response,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=1000, help="generated rows (the 58 sample rows are added)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from rewardlab.types import Record
    from rewardlab.verifiers.ifeval import IFEvalVerifier, ifeval_summary
    from rewardlab.verifiers.ifeval.reference import reference_verdicts

    rows = build_workload(args.rows, args.seed)
    records = [Record.from_dict(row) for row in rows]
    verifier = IFEvalVerifier()
    # Warm both sides (NLTK import and Punkt model, langdetect profiles) outside the timed loops.
    from rewardlab.verifiers.ifeval.text import detect_language, sentence_tokenizer

    sentence_tokenizer()
    detect_language("warm up the language profiles")
    verifier.score(records[0])
    reference_verdicts(rows[0], rows[0]["response"])

    start = time.perf_counter()
    theirs = [reference_verdicts(row, row["response"]) for row in rows]
    t_ref = time.perf_counter() - start

    start = time.perf_counter()
    results = verifier.score_batch(records)
    t_ours = time.perf_counter() - start

    diffs = []
    for row, result, ref in zip(rows, results, theirs, strict=True):
        ours = {
            "strict": [e["strict"] for e in result.details["instructions"]],
            "loose": [e["loose"] for e in result.details["instructions"]],
        }
        if ours != ref:
            diffs.append((row["key"], row["instruction_id_list"], ours, ref))

    n = len(rows)
    n_inst = sum(len(r["instruction_id_list"]) for r in rows)
    print(f"rows: {n} ({n_inst} instructions), strict + loose verdicts each")
    print(f"reference (lm-eval {_lm_eval_version()} ifeval): {t_ref:.2f} s  {n / t_ref:.0f} rows/s")
    print(f"rewardlab ifeval:                    {t_ours:.2f} s  {n / t_ours:.0f} rows/s")
    print(f"ratio (rewardlab / reference speed): {t_ref / t_ours:.2f}x")
    print(f"verdicts that differ: {len(diffs)} of {n} rows")
    for diff in diffs[:10]:
        print("  ", diff)
    summary = ifeval_summary(results)
    print(
        "accuracies: "
        + ", ".join(f"{k}={summary[k]:.3f}" for k in summary if k.endswith("_acc") and summary[k] is not None)
    )


def _lm_eval_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lm_eval")
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
