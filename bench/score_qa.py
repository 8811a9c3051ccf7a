"""QA scoring speed and agreement: rewardlab's ``qa`` vs SQuAD v1.1's script and verl's Search-R1 reward.

Workload: NQ-open dev, 3,610 real questions with their gold aliases, ten predictions each built from the
aliases (``bench/build_qa_data.py``; tests/data/qa/README.md): 36,100 rows. Both sides read the same rows in
the same run, one process, one thread:

- ``qa`` (``QAVerifier.score`` on ``Record``s, em and f1 modes) on the completion in Search-R1's format
  (``<think>...</think>\\n<answer> X </answer>``): reading the answer, the figures, the refusals and the
  ``details`` dict included;
- SQuAD's ``metric_max_over_ground_truths`` with ``exact_match_score`` / ``f1_score`` on the bare
  prediction (no reading: the script gets the answer already extracted), and verl's ``compute_score`` (em)
  on the same Search-R1 completion, each as a plain Python loop (transcribed in tests/test_qa_references.py).

Then the agreement tables (every disagreement class, each by design: docs/qa.md).

    .venv/bin/python bench/score_qa.py [--questions 3610] [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
from pathlib import Path

from _timing import best_of

ROOT = Path(__file__).resolve().parents[1]


def _load_reference_module():
    spec = importlib.util.spec_from_file_location("_qa_ref_tests", ROOT / "tests" / "test_qa_references.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=3610, help="NQ-open dev questions (10 rows each)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per side; the best is kept")
    args = parser.parse_args()

    from rewardlab.types import Record
    from rewardlab.verifiers.qa import QAVerifier

    ref = _load_reference_module()
    rows = ref.load_rows()[: args.questions]
    items = [(p, r["answers"]) for r in rows for p in r["predictions"].values()]
    solutions = [(ref.SEARCH_R1.format(p), {"target": golds}) for p, golds in items]
    records = [
        Record(completion=s, reference=golds) for (s, _), (_, golds) in zip(solutions, items, strict=True)
    ]
    n = len(records)
    print(
        f"{n} rows ({len(rows)} NQ-open dev questions x 10 predictions), one process, one thread, "
        f"Python {platform.python_version()}, best of {args.repeat}"
    )

    def squad(metric):
        return lambda: [ref.metric_max_over_ground_truths(metric, p, golds) for p, golds in items]

    timings = {}
    for mode, metric in (("em", ref.squad_exact_match_score), ("f1", ref.squad_f1_score)):
        verifier = QAVerifier(mode=mode)
        timings[mode] = (
            best_of(args.repeat, lambda v=verifier: [v.score(r) for r in records]),
            best_of(args.repeat, squad(metric)),
        )
    verl = best_of(args.repeat, lambda: [ref.compute_score(s, t) for s, t in solutions])
    print(f"{'':38s}{'rewardlab qa':>16s}{'reference':>16s}{'ratio':>8s}")
    for mode, (ours, theirs) in timings.items():
        label = f"{mode} vs SQuAD metric_max_over_ground_truths"
        print(f"{label:38s}{n / ours:12.0f} r/s{n / theirs:12.0f} r/s{theirs / ours:7.2f}x")
    ours_em = timings["em"][0]
    print(
        f"{'em vs verl compute_score':38s}{n / ours_em:12.0f} r/s{n / verl:12.0f} r/s{verl / ours_em:7.2f}x"
    )
    print("(ratio = reference time / rewardlab time; qa reads the answer, checks hedges and builds details)")

    print("\nAgreement of verdicts (qa's reward vs the reference's), disagreements by class:")
    for name, table in ref.agreement(rows).items():
        total = sum(table.values())
        print(f"  {name:11s} agree {table['agree']}/{total}")
        for label, count in table.most_common():
            if label != "agree":
                print(f"    {count:6d}  {label}")


if __name__ == "__main__":
    main()
