#!/usr/bin/env python
"""Exploration against entropy collapse on the demo task (issue 35): Clip-Cov, KL-Cov, training on the
high-entropy tokens only, and tree rollouts, against GRPO; same budget, several seeds.

The runs are ``bench/algorithms.py``'s (the demo's warm start per seed, then ``--steps`` GRPO steps of
``--prompts`` prompts x ``--group`` samples on a pool of problems; one subprocess each, ``--jobs`` at once),
with these arms (each changes one thing, at the paper's defaults):

===========  ====================================================================================
arm          rewardlab config
===========  ====================================================================================
grpo         the demo's GRPO (the reference)
clip_cov     ``algorithm.policy_loss=clip_cov`` (Cui et al., 2025: r = 2e-4, covariance in (1, 5))
kl_cov       ``algorithm.policy_loss=kl_cov`` (k = 2e-4, beta = 1)
top_entropy  ``algorithm.top_entropy_quantile=0.2`` (Wang et al., 2025: the top 20% tokens by entropy)
tree         ``rollout.tree``: 2 roots, 3 branches at each root's highest-entropy token (TreeRL's rule)
tree_grpo    the same trees, plus Tree-GRPO's intra-tree advantage (coefficient 1)
===========  ====================================================================================

Reported per arm (medians over seeds, min-max in brackets): held-out greedy pass@1 before and after; after
RL, sampled pass@1 and pass@k (k = ``--sample-k``, 8 samples at temperature 1 per held-out problem, the
unbiased estimator); the paired gain over GRPO on each seed; the entropy trajectory (mean token entropy
and the share of near-deterministic tokens over the first and last 10 steps, and a plot of every step);
generated tokens per sample (a tree's shared prefixes are sampled once); wall time.

Writes ``OUT/results.json``, ``OUT/table.md`` and ``OUT/entropy.png``.

``python bench/exploration.py [--seeds 0,1,2] [--steps 100] [--jobs 2] [--out runs/bench-exploration]``
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import algorithms as bench  # bench/algorithms.py: this folder is on sys.path when run as a script

ARMS = ["grpo", "clip_cov", "kl_cov", "top_entropy", "tree", "tree_grpo"]
K = 8


def main() -> None:
    parser = bench.build_parser()
    parser.description = __doc__.split("\n")[0]
    parser.set_defaults(out="runs/bench-exploration", arms=",".join(ARMS), sample_k=K)
    args = parser.parse_args()
    if args.group != 8:
        raise SystemExit("--group must be 8: the tree arms' 2 roots x (1 + 3 branches)")
    results, arms, out = bench.run_bench(args)
    table = markdown_table(results, arms, args.sample_k)
    (out / "table.md").write_text(table)
    print(table)
    print(f"[bench] plot: {plot_entropy(results, arms, out / 'entropy.png')}")


def _median(values: list[float]) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def _phase(run: dict[str, Any], key: str, first: bool) -> float:
    values = [v for v in run[key] if v is not None]
    return _median(values[:10] if first else values[-10:])


def _paired(results: list[dict[str, Any]], arm: str, key: str, *, gain: bool) -> list[tuple[int, float]]:
    """Per seed, the arm's figure minus GRPO's on the same seed (``gain``: after minus before)."""
    by = {(r["seed"], r["arm"]): r for r in results}

    def value(r: dict[str, Any]) -> float:
        return r[key] - r["heldout_before"] if gain else r[key]

    return [
        (s, value(by[s, a]) - value(by[s, "grpo"])) for s, a in sorted(by) if a == arm and (s, "grpo") in by
    ]


def markdown_table(results: list[dict[str, Any]], arms: list[str], k: int) -> str:
    lines = [
        f"| arm | greedy pass@1 before -> after (min-max) | paired gain vs grpo per seed (points) | sampled "
        f"pass@1 | pass@{k} | pass@{k} vs grpo per seed | entropy first -> last 10 steps | near-deterministic "
        "tokens first -> last | generated tokens / sample | wall s | where the paper finds its gain |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in arms:
        runs = [r for r in results if r["arm"] == arm]
        after = [r["heldout_after"] for r in runs]
        before = _median([r["heldout_before"] for r in runs])
        gains = ", ".join(f"{100 * d:+.0f}" for _, d in _paired(results, arm, "heldout_after", gain=True))
        passk = ", ".join(
            f"{100 * d:+.0f}" for _, d in _paired(results, arm, f"sampled_pass@{k}", gain=False)
        )
        ent = [(_phase(r, "entropy", True), _phase(r, "entropy", False)) for r in runs]
        near = [(_phase(r, "near_deterministic", True), _phase(r, "near_deterministic", False)) for r in runs]
        lines.append(
            f"| {arm} | {before:.1%} -> {_median(after):.1%} ({min(after):.0%}-{max(after):.0%}) | {gains} | "
            f"{_median([r['sampled_pass@1'] for r in runs]):.1%} | "
            f"{_median([r[f'sampled_pass@{k}'] for r in runs]):.1%} | {passk} | "
            f"{_median([a for a, _ in ent]):.3f} -> {_median([b for _, b in ent]):.3f} | "
            f"{_median([a for a, _ in near]):.1%} -> {_median([b for _, b in near]):.1%} | "
            f"{_median([r['generated_tokens_per_sample'] for r in runs]):.2f} | "
            f"{_median([r['wall_s'] for r in runs]):.0f} | {bench.SETTINGS[arm]} |"
        )
    return "\n".join(lines) + "\n"


def plot_entropy(results: list[dict[str, Any]], arms: list[str], path: Path) -> Path:
    """Mean token entropy and the near-deterministic share per step, the median over seeds of each arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    for ax, (key, title) in zip(
        axes,
        [("entropy", "mean token entropy (nats)"), ("near_deterministic", "near-deterministic tokens")],
        strict=True,
    ):
        for i, arm in enumerate(arms):
            series = [r[key] for r in results if r["arm"] == arm]
            steps = min(len(s) for s in series)
            ys = [_median([s[t] for s in series]) for t in range(steps)]
            ax.plot(range(1, steps + 1), ys, label=arm, color=f"C{i}", lw=2 if arm == "grpo" else 1.2)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("Entropy over RL on the demo task (median over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
