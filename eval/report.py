"""Human-readable outputs of an evaluation: a markdown table and a plot of pass@k (and maj@k) against k."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _cell(metric: dict[str, float] | None) -> str:
    if not metric:
        return "-"
    mean = metric.get("mean")
    if mean is None or mean != mean:  # NaN
        return "-"
    if "ci_low" in metric and metric["ci_low"] == metric["ci_low"]:
        return f"{100 * mean:.1f} [{100 * metric['ci_low']:.1f}, {100 * metric['ci_high']:.1f}]"
    return f"{100 * mean:.1f}"


def _families(metrics: dict[str, Any]) -> list[str]:
    order = ["pass@", "maj@", "best_of_"]
    return [f for f in order if any(name.startswith(f) for name in metrics)]


def _covered(metrics: dict[str, Any], k: int) -> int | None:
    """The number of problems the k-metrics average over (those with at least k samples)."""
    entry = metrics.get(f"pass@{k}") or {}
    return entry.get("problems")


def metric_table(metrics: dict[str, Any], ks: list[int], num_problems: int | None = None) -> list[str]:
    """The table over k; with a ``problems`` column when some k covers fewer than ``num_problems``."""
    families = _families(metrics)
    partial = num_problems is not None and any(
        (_covered(metrics, k) or num_problems) < num_problems for k in ks
    )
    names = [f.rstrip("@_").replace("_", "-") + "@k" for f in families]
    header = "| k | " + ("problems | " if partial else "") + " | ".join(names) + " |"
    lines = [header, "|---|" + "---|" * (len(families) + partial)]
    for k in ks:
        cells = [_cell(metrics.get(f"{family}{k}")) for family in families]
        if partial:
            cells.insert(0, str(_covered(metrics, k)))
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines


def _sample_line(summary: dict[str, Any]) -> str:
    """``(8 per problem)``, or with different n ``(4-8 per problem: 1 with 4, 1 with 8)``."""
    per = summary.get("samples_per_problem")
    counts = summary.get("sample_counts") or {}
    if len(counts) > 1:
        spread = ", ".join(f"{count} with {n}" for n, count in counts.items())
        return f"({per} per problem: {spread})"
    return f"({per} per problem)"


def coverage_notes(summary: dict[str, Any]) -> list[str]:
    """Lines saying which k cover only some problems, and which requested k were dropped."""
    metrics, total = summary.get("metrics", {}), summary.get("num_problems")
    lines = []
    for k in summary.get("ks", []):
        covered = _covered(metrics, k)
        if covered is not None and total is not None and covered < total:
            names = ", ".join(f"{family.replace('_', '-')}{k}" for family in _families(metrics))
            lines.append(f"- {names} over {covered} of {total} problems (those with at least {k} samples)")
    dropped = summary.get("dropped_ks") or []
    if dropped:
        listed = ", ".join(map(str, dropped))
        lines.append(f"- k = {listed} dropped: no problem has that many samples")
    return lines


def render_markdown(summary: dict[str, Any]) -> str:
    """The report as markdown: headline numbers, a table over k, subsets, errors. Values in percent with
    bootstrap 95% intervals in brackets."""
    ks = summary.get("ks", [])
    metrics = summary.get("metrics", {})
    lines = [
        f"# {summary.get('benchmark', 'evaluation')}",
        "",
        f"- problems: {summary.get('num_problems')}, samples: {summary.get('num_samples')} "
        f"{_sample_line(summary)}, verifier: `{summary.get('verifier')}`",
        f"- mean reward: {_cell(metrics.get('mean_reward'))}",
    ]
    if "mean_f1" in metrics:
        lines.append(f"- mean token F1: {_cell(metrics['mean_f1'])}")
    if summary.get("model"):
        lines.append(f"- model: `{summary['model']}` (backend {summary.get('backend')})")
    if summary.get("truncated_fraction") is not None:
        lines.append(f"- truncated completions: {100 * summary['truncated_fraction']:.1f}%")
    if summary.get("missing_problems"):
        lines.append(f"- problems without completions (left out): {len(summary['missing_problems'])}")
    lines += ["", "Percent, with bootstrap 95% intervals.", ""]
    lines += metric_table(metrics, ks, summary.get("num_problems"))
    notes = coverage_notes(summary)
    if notes:
        lines += ["", *notes]
    subsets = summary.get("subsets") or {}
    if subsets:
        top = [f"pass@{ks[0]}", f"pass@{ks[-1]}"] if ks else []
        if any(name.startswith("maj@") for name in metrics) and ks:
            top.append(f"maj@{ks[-1]}")
        top = list(dict.fromkeys(top))
        lines += ["", "## Subsets", "", "| subset | problems | " + " | ".join(top) + " |"]
        lines.append("|---|---|" + "---|" * len(top))
        for name, entry in subsets.items():
            cells = [_cell(entry["metrics"].get(metric)) for metric in top]
            lines.append(f"| {name} | {entry['num_problems']} | " + " | ".join(cells) + " |")
    lines += environment_lines(summary.get("environment"))
    lines += tally_section(summary.get("tally_lines"))
    errors = summary.get("errors") or {}
    if errors:
        lines += ["", "## Errors", "", "| kind | samples |", "|---|---|"]
        lines += [f"| {kind} | {count} |" for kind, count in sorted(errors.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines) + "\n"


def tally_section(texts: dict[str, str] | None) -> list[str]:
    """The report's section of the scoring source's own summaries (``summary.json``'s ``tally_lines``: its
    ``summary_tallies()`` hook, the rubric's criteria met per category), each as its lines."""
    if not texts:
        return []
    lines = ["", "## Source summaries"]
    for text in texts.values():
        lines += ["", "```", text, "```"]
    return lines


_SHARES = ("tool_call_rate", "tool_error_rate", "answered", "answer_in_observations")
"""Environment metrics that are shares (shown in percent); ``end/*`` are too."""


def environment_lines(env: dict[str, Any] | None) -> list[str]:
    """The report's environment section: the settings, then each episode metric (``rewardlab.envs.
    episode_metrics``: shares in percent, means per episode, tool errors as counts)."""
    if not env:
        return []
    cfg = env.get("config") or {}
    setting = f"`{env.get('name')}`"
    if cfg.get("name") == "tools":
        setting += f", tools {', '.join(cfg.get('tools', []))} ({', '.join(cfg.get('formats', []))})"
    setting += f", at most {cfg.get('max_turns')} turns and {cfg.get('max_tokens')} tokens per episode"
    lines = ["", "## Environment", "", f"- {setting}; {env.get('num_episodes')} episodes", ""]
    lines += ["| metric | value |", "|---|---|"]
    for name, value in (env.get("metrics") or {}).items():
        if name in _SHARES or name.startswith("end/"):
            cell = f"{100 * value:.1f}%"
        elif name.startswith("tool_error/"):
            cell = str(int(value))
        else:
            cell = f"{value:.2f}"
        lines.append(f"| {name} | {cell} |")
    return lines


def plot_pass_at_k(summary: dict[str, Any], path: str | Path) -> None:
    """pass@k (and maj@k, best-of-k when present) against k on a log2 axis, with the intervals shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = summary.get("ks", [])
    metrics = summary.get("metrics", {})
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for family, label in (("pass@", "pass@k"), ("maj@", "maj@k"), ("best_of_", "best-of-k")):
        points = [(k, metrics.get(f"{family}{k}")) for k in ks]
        points = [(k, m) for k, m in points if m and m.get("mean") == m.get("mean")]
        if not points:
            continue
        xs = [k for k, _ in points]
        ax.plot(xs, [100 * m["mean"] for _, m in points], marker="o", label=label)
        if all("ci_low" in m for _, m in points):
            ax.fill_between(
                xs,
                [100 * m["ci_low"] for _, m in points],
                [100 * m["ci_high"] for _, m in points],
                alpha=0.2,
            )
    if len(ks) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("percent")
    ax.set_ylim(0, 100)
    ax.set_title(f"{summary.get('benchmark', '')}: {summary.get('num_problems')} problems")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
