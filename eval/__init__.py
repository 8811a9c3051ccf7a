"""Benchmark evaluation: pass@k (unbiased), maj@k, best-of-n, with bootstrap intervals and reports.

from rewardlab.eval import load_benchmark, evaluate_completions
bench, problems = load_benchmark("sample:gsm8k")
report = evaluate_completions(bench, problems, rows, run_dir="runs/eval")
"""

from rewardlab.eval.benchmarks import BENCHMARKS, Benchmark, Problem, list_benchmarks, load_benchmark
from rewardlab.eval.metrics import best_of_k_matrix, bootstrap_means, maj_at_k_matrix, pass_at_k_matrix
from rewardlab.eval.runner import (
    EvalConfig,
    EvalReport,
    GenerationConfig,
    evaluate_backend,
    evaluate_completions,
    evaluate_model,
)

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "EvalConfig",
    "EvalReport",
    "GenerationConfig",
    "Problem",
    "best_of_k_matrix",
    "bootstrap_means",
    "evaluate_backend",
    "evaluate_completions",
    "evaluate_model",
    "list_benchmarks",
    "load_benchmark",
    "maj_at_k_matrix",
    "pass_at_k_matrix",
]
