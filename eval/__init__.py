"""Benchmark evaluation: pass@k (unbiased), maj@k, best-of-n, with bootstrap intervals and reports."""
