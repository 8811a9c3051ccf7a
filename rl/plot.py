"""``rewardlab rl plot RUN_DIR``: a run's curves (reward, accuracy, held-out pass@1, length, KL...) to PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardlab.training.metrics import read_metrics

DEFAULT_PANELS = (
    ("reward", "reward (mean over samples)"),
    ("eval/pass@1", "held-out greedy pass@1"),
    ("accuracy", "training accuracy"),
    ("frac_reward_zero_std", "groups with zero reward std"),
    ("completions/mean_length", "completion length (tokens)"),
    ("env/tool_call_rate", "episodes calling a tool"),
    ("entropy", "entropy (nats/token)"),
    ("kl", "KL to reference"),
    ("grad_norm", "gradient norm"),
)


def _smooth(values: list[float], window: int) -> list[float]:
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def plot_run(
    run_dir: str | Path,
    output: str | Path | None = None,
    *,
    metrics: list[str] | None = None,
    smooth: int = 5,
) -> Path:
    """Draws the run's metrics to a PNG grid (raw values faint, a moving average on top); returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    panels: list[tuple[str, str]] = (
        [(m, m) for m in metrics] if metrics else [p for p in DEFAULT_PANELS if any(p[0] in r for r in rows)]
    )
    if not panels:
        panels = [("reward", "reward")]
    cols = 2 if len(panels) > 1 else 1
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 3.2 * nrows), squeeze=False)
    for ax, (key, title) in zip(axes.flat, panels, strict=False):
        points: list[tuple[int, Any]] = [
            (r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))
        ]
        if points:
            xs, ys = zip(*points, strict=True)
            if key.startswith("eval/") or len(xs) < 3:
                ax.plot(xs, ys, marker="o")
            else:
                ax.plot(xs, ys, alpha=0.3, color="C0")
                ax.plot(xs, _smooth(list(ys), smooth), color="C0")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(str(Path(run_dir).name))
    fig.tight_layout()
    out = Path(output) if output else Path(run_dir) / "curves.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
