"""End-to-end evaluation: completions made elsewhere, and sampling the tiny model, on shipped samples."""

import json
import logging
import subprocess
import sys

import pytest

from rewardlab.eval import EvalConfig, benchmarks, evaluate_completions, load_benchmark
from rewardlab.verifiers.math import group_answers


def test_shipped_math_samples_load():
    for name in ("gsm8k", "math500", "aime"):
        bench, problems = load_benchmark(f"sample:{name}")
        assert len(problems) >= 10 and bench.verifier == "math"
        assert all(p.reference for p in problems)
    _, gsm = load_benchmark("sample:gsm8k")
    assert gsm[0].reference == "27"


def test_equivalent_answers_share_a_class():
    classes = group_answers(["1/2", "0.5", "\\frac{1}{2}", "\\dfrac{1}{2}", None, "2", "\\sqrt{4}"])
    assert classes[:4] == [0, 0, 0, 0] and classes[4] is None and classes[5] == classes[6] == 1


def _rows(problems, answers_per_problem):
    rows = []
    for problem, answers in zip(problems, answers_per_problem, strict=False):
        for answer in answers:
            rows.append({"problem_id": problem.id, "completion": f"Reasoning... so \\boxed{{{answer}}}."})
    return rows


def test_completions_path_metrics_and_files(tmp_path):
    bench, problems = load_benchmark("sample:math500", limit=4)
    # problem 0 (answer 5): 2 of 4 right; problem 2 (3/4): equivalent forms win the vote;
    # problem 1 (7): wrong majority; problem 3 has no completions at all.
    answers = [["5", "4", "5", "6"], ["8", "8", "7", "9"], ["0.75", "\\frac{3}{4}", "3/4", "1"]]
    report = evaluate_completions(
        bench,
        problems,
        _rows(problems, answers),
        config=EvalConfig(ks=[1, 4], workers=1, bootstrap=200),
        run_dir=tmp_path,
    )
    metrics = report.summary["metrics"]
    assert report.summary["num_problems"] == 3
    assert report.summary["missing_problems"] == [problems[3].id]
    # pass@1 = mean(c/n) = (2/4 + 1/4 + 3/4) / 3
    assert metrics["pass@1"]["mean"] == pytest.approx((0.5 + 0.25 + 0.75) / 3)
    assert metrics["pass@4"]["mean"] == pytest.approx(1.0)
    # maj@4: problem 0: 5 has two votes -> right; problem 1 majority 8 -> wrong; problem 2 -> right
    assert metrics["maj@4"]["mean"] == pytest.approx(2 / 3)
    for name in ("samples.jsonl", "summary.json", "report.md", "pass_at_k.png"):
        assert (tmp_path / name).exists()
    rows = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and rows[2]["answer"] == "5"
    assert "subject=" in "".join(report.summary["subsets"])


def test_runs_write_one_problem_row_per_problem(tmp_path):
    bench, problems = load_benchmark("sample:math500", limit=4)
    evaluate_completions(
        bench,
        problems,
        _rows(problems, [["5"], ["7"]]),  # problems 2 and 3 without completions are listed too
        config=EvalConfig(ks=[1], workers=1, bootstrap=0),
        run_dir=tmp_path,
    )
    rows = [json.loads(line) for line in (tmp_path / "problems.jsonl").read_text().splitlines()]
    assert [r["problem_id"] for r in rows] == [p.id for p in problems]
    for row, problem in zip(rows, problems, strict=True):
        assert row["prompt"] == problem.prompt and row["reference"] == problem.reference
        assert row["metadata"] == problem.metadata and "subject" in row["metadata"]


def test_problems_with_different_sample_counts(tmp_path, caplog):
    # 4 samples for one problem and 8 for the other, k up to 16: pass@8 covers one problem, k = 16 none.
    bench, problems = load_benchmark("sample:gsm8k", limit=2)
    answers = [["27", "27", "3", "4"], ["17", "2", "17", "17", "17", "9", "9", "17"]]
    config = EvalConfig(ks=[1, 4, 8, 16], workers=1, bootstrap=100)
    with caplog.at_level(logging.WARNING, logger="rewardlab.eval.runner"):
        report = evaluate_completions(
            bench, problems, _rows(problems, answers), config=config, run_dir=tmp_path
        )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["ks"] == [1, 4, 8] and summary["dropped_ks"] == [16]
    assert summary["samples_per_problem"] == "4-8" and summary["sample_counts"] == {"4": 1, "8": 1}
    metrics = summary["metrics"]
    for name in ("pass@1", "maj@1", "pass@4", "maj@4", "mean_reward"):
        assert metrics[name]["problems"] == 2, name
    assert metrics["pass@8"]["problems"] == metrics["maj@8"]["problems"] == 1
    assert metrics["pass@8"]["mean"] == 1.0  # the 8-sample problem alone
    assert metrics["pass@1"]["mean"] == pytest.approx((2 / 4 + 5 / 8) / 2)
    assert metrics["maj@1"]["mean"] == pytest.approx(metrics["pass@1"]["mean"], abs=1e-15)
    # maj@8 (the 8-sample problem alone): 17 has five votes of eight
    assert metrics["maj@8"]["mean"] == 1.0
    assert report.summary["metrics"] == summary["metrics"]
    # one warning line naming the uneven counts, the partial k and the dropped k
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert "different numbers of samples (4-8 per problem)" in warnings[0]
    assert "k=8 covers 1 of 2" in warnings[0] and "k=16 exceeds every problem's samples" in warnings[0]
    text = (tmp_path / "report.md").read_text()
    assert "(4-8 per problem: 1 with 4, 1 with 8)" in text
    assert "| k | problems | pass@k | maj@k |" in text and "| 8 | 1 |" in text
    assert "pass@8, maj@8 over 1 of 2 problems" in text and "k = 16 dropped" in text


def test_even_sample_counts_warn_only_about_dropped_k(caplog):
    bench, problems = load_benchmark("sample:gsm8k", limit=2)
    rows = _rows(problems, [["27", "1"], ["17", "17"]])
    with caplog.at_level(logging.WARNING, logger="rewardlab.eval.runner"):
        report = evaluate_completions(
            bench, problems, rows, config=EvalConfig(ks=[1, 2], workers=1, bootstrap=0)
        )
    assert not caplog.records
    assert report.summary["samples_per_problem"] == 2 and report.summary["dropped_ks"] == []
    assert report.summary["metrics"]["pass@2"]["problems"] == 2
    with caplog.at_level(logging.WARNING, logger="rewardlab.eval.runner"):
        report = evaluate_completions(
            bench, problems, rows, config=EvalConfig(ks=[1, 4], workers=1, bootstrap=0)
        )
    assert report.summary["ks"] == [1] and report.summary["dropped_ks"] == [4]
    assert [r.getMessage() for r in caplog.records] == [
        "eval: k=4 exceeds every problem's samples (at most 2) and is dropped"
    ]


def test_best_of_n_from_given_scores(tmp_path):
    bench, problems = load_benchmark("sample:gsm8k", limit=2)
    rows = [
        {"problem_id": problems[0].id, "completions": ["\\boxed{27}", "\\boxed{1}"], "rm_scores": [0.9, 0.1]},
        {"problem_id": problems[1].id, "completions": ["\\boxed{17}", "\\boxed{2}"], "rm_scores": [0.2, 0.8]},
    ]
    report = evaluate_completions(bench, problems, rows, config=EvalConfig(ks=[1, 2], workers=1, bootstrap=0))
    metrics = report.summary["metrics"]
    assert metrics["best_of_2"]["mean"] == pytest.approx(0.5)
    assert metrics["best_of_1"]["mean"] == pytest.approx(metrics["pass@1"]["mean"])


def test_unknown_problem_in_completions_is_an_error():
    bench, problems = load_benchmark("sample:gsm8k", limit=2)
    with pytest.raises(KeyError, match="not in the benchmark"):
        evaluate_completions(bench, problems, [{"problem_id": "nope", "completion": "1"}])


def test_cli_completions_path(tmp_path):
    _, problems = load_benchmark("sample:gsm8k")
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(problems, [["27", "26"]] * len(problems))))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewardlab.cli",
            "eval",
            "--completions",
            str(path),
            "--benchmark",
            "sample:gsm8k",
            "-o",
            str(tmp_path / "run"),
            "--workers",
            "1",
            "--bootstrap",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "pass@k" in out.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["num_samples"] == 2 * len(problems)


def test_cli_bad_benchmark_is_one_line_error(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewardlab.cli",
            "eval",
            "--completions",
            "x.jsonl",
            "--benchmark",
            "nonesuch",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr and "unknown benchmark" in out.stderr


def test_model_eval_on_tiny_model_is_resumable(tmp_path, tiny_model_dir):
    from rewardlab.eval import GenerationConfig, evaluate_model

    bench, problems = load_benchmark("sample:gsm8k", limit=3)
    gen = GenerationConfig(n=2, temperature=1.0, max_new_tokens=8, batch_size=2)
    run_dir = tmp_path / "run"
    first = evaluate_model(
        bench, problems, tiny_model_dir, gen=gen, config=EvalConfig(workers=1, bootstrap=0), run_dir=run_dir
    )
    assert first.summary["num_problems"] == 3 and first.summary["num_samples"] == 6
    lines = (run_dir / "generations.jsonl").read_text().splitlines()
    assert len(lines) == 3
    # drop the last problem, as if interrupted; the rerun generates only that one
    (run_dir / "generations.jsonl").write_text("\n".join(lines[:2]) + "\n")
    again = evaluate_model(
        bench, problems, tiny_model_dir, gen=gen, config=EvalConfig(workers=1, bootstrap=0), run_dir=run_dir
    )
    new_lines = (run_dir / "generations.jsonl").read_text().splitlines()
    assert new_lines[:2] == lines[:2] and len(new_lines) == 3
    assert again.summary["truncated_fraction"] is not None
    # problems.jsonl keeps the prompt as sent (gsm8k's template around the question)
    sent = [json.loads(line)["prompt"] for line in (run_dir / "problems.jsonl").read_text().splitlines()]
    assert len(sent) == 3 and all(
        p.prompt in t and t != p.prompt for p, t in zip(problems, sent, strict=True)
    )


def test_best_of_n_with_a_reward_model(tmp_path, tiny_model_dir):
    from rewardlab.rewardmodels.orm import RewardModelSource

    bench, problems = load_benchmark("sample:gsm8k", limit=3)
    rows = _rows(problems, [["27", "3", "27"], ["17", "1", "2"], ["150", "150", "9"]])
    report = evaluate_completions(
        bench,
        problems,
        rows,
        config=EvalConfig(ks=[1, 3], workers=1, bootstrap=0),
        reward_model=RewardModelSource(tiny_model_dir),
    )
    metrics = report.summary["metrics"]
    assert 0.0 <= metrics["best_of_3"]["mean"] <= 1.0
    assert all(s.rm_score is not None for s in report.samples)
    assert metrics["best_of_1"]["mean"] == pytest.approx(metrics["pass@1"]["mean"])


def test_shaping_changes_mean_reward_not_correctness():
    bench, problems = load_benchmark("sample:gsm8k", limit=2)
    rows = _rows(problems, [["27", "1"], ["17", "17"]])
    plain = evaluate_completions(bench, problems, rows, config=EvalConfig(ks=[1], workers=1, bootstrap=0))
    shaped = evaluate_completions(
        bench, problems, rows, config=EvalConfig(ks=[1], workers=1, bootstrap=0, shape=["scale:0.5"])
    )
    assert shaped.summary["metrics"]["pass@1"] == plain.summary["metrics"]["pass@1"]
    assert shaped.summary["metrics"]["mean_reward"]["mean"] == pytest.approx(
        0.5 * plain.summary["metrics"]["mean_reward"]["mean"]
    )


def test_truncated_completions_count_as_wrong_unless_asked():
    # A completion that ran to the token limit after its box still parses; by default it is not a solve.
    bench, problems = load_benchmark("sample:gsm8k", limit=1)
    rows = [
        {
            "problem_id": problems[0].id,
            "completions": ["\\boxed{27}", "So the total is \\boxed{27}"],
            "finish_reasons": ["stop", "length"],
        }
    ]
    config = EvalConfig(ks=[1], workers=1, bootstrap=0)
    report = evaluate_completions(bench, problems, rows, config=config)
    kept, cut = report.samples
    assert kept.correct and not cut.correct
    assert cut.reward == 0.0 and cut.error.startswith("truncated") and cut.answer is None
    assert report.summary["metrics"]["pass@1"]["mean"] == pytest.approx(0.5)
    assert report.summary["truncated_fraction"] == pytest.approx(0.5)
    scored = evaluate_completions(
        bench, problems, rows, config=EvalConfig(ks=[1], workers=1, bootstrap=0, score_truncated=True)
    )
    assert scored.summary["metrics"]["pass@1"]["mean"] == pytest.approx(1.0)


def test_a_named_benchmark_refuses_another_verifier(tmp_path, capsys):
    """--verifier applies to data files; a named benchmark asked for another verifier says so in one line
    instead of scoring with its own (the same verifier is accepted)."""
    from rewardlab.cli import main

    completions = tmp_path / "c.jsonl"
    completions.write_text(json.dumps({"problem_id": "x", "completion": "1"}) + "\n")
    argv = [
        "eval",
        "--completions",
        str(completions),
        "--benchmark",
        "sample:gsm8k",
        "-o",
        str(tmp_path / "o"),
    ]
    assert main([*argv, "--verifier", "rubric"]) == 2
    err = capsys.readouterr().err.strip()
    assert "benchmark gsm8k is scored by its own verifier (math)" in err and len(err.splitlines()) == 1
    assert benchmarks.resolve("sample:gsm8k", verifier="math")[0].verifier == "math"
    with pytest.raises(ValueError, match="its own verifier"):
        benchmarks.resolve("math500", verifier="code")


def test_benchmark_verifier_settings_reach_the_verifier(tmp_path, monkeypatch):
    # The shipped Spider sample's databases are a verifier setting (db_root): scoring must use it, from any
    # working directory.
    monkeypatch.chdir(tmp_path)
    bench, problems = load_benchmark("sample:spider", limit=2)
    rows = [{"problem_id": p.id, "completion": f"```sql\n{p.reference['gold']}\n```"} for p in problems]
    report = evaluate_completions(bench, problems, rows, config=EvalConfig(ks=[1], workers=1, bootstrap=0))
    assert report.summary["errors"] == {} and report.summary["metrics"]["pass@1"]["mean"] == 1.0


def test_multiple_choice_and_qa_benchmarks_get_maj_at_k(tmp_path):
    """A file scored by ``choice`` or ``qa`` votes on the letters / answers the verifier read
    (``answer_votes="exact"``); a file scored by a verifier without answers has no maj@k."""
    rows = [
        {"id": "q1", "prompt": "Which?", "reference": "B"},
        {"id": "q2", "prompt": "Which?", "reference": "D"},
    ]
    path = tmp_path / "mc.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bench, problems = load_benchmark(str(path), verifier="choice")
    assert bench.answer_votes == "exact"
    answers = {"q1": ["B", "(B)", "A", "(C)"], "q2": ["A", "A", "D", "C"]}
    completions = [
        {"problem_id": pid, "completion": f"The answer is {letter}."}
        for pid, letters in answers.items()
        for letter in letters
    ]
    report = evaluate_completions(
        bench, problems, completions, config=EvalConfig(ks=[4], workers=1, bootstrap=0)
    )
    # q1: B read twice ("B", "(B)") wins the vote -> right; q2: A twice -> wrong
    assert report.summary["metrics"]["maj@4"]["mean"] == pytest.approx(0.5)

    qa_bench, _ = load_benchmark(str(path), verifier="qa")
    code_bench, _ = load_benchmark(str(path), verifier="code")
    assert qa_bench.answer_votes == "exact" and code_bench.answer_votes is None
