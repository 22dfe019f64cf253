"""Learning curves measured against an exact solver: optimal-move rate vs time and FLOPs.

Runs on boards a solver covers (Hex up to 4x4, tic-tac-toe) log
``eval/raw_optimal_move_rate`` (the raw policy, no search) and
``eval/search_optimal_move_rate`` (policy + search) in ``metrics.jsonl`` every
``eval.every`` iterations. This figure draws both against training wall time and
against estimated training FLOPs, one colour per run, search solid and raw dashed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RATE_KEYS = {
    "eval/search_optimal_move_rate": ("search", "-"),
    "eval/raw_optimal_move_rate": ("raw policy", "--"),
}
X_AXES = (("wall_time_s", "training wall time (s)"), ("train_flops", "training FLOPs"))


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def optimal_move_rows(metric_rows: Sequence[dict]) -> list[dict]:
    """One row per (run, evaluated iteration): wall time, FLOPs and both rates."""
    rows = []
    for row in metric_rows:
        rates = {key: row.get(key) for key in RATE_KEYS if _finite(row.get(key))}
        if rates:
            rows.append(
                {
                    "run": row.get("run", ""),
                    "algorithm": row.get("algorithm", ""),
                    "board_size": row.get("board_size", ""),
                    "iteration": row.get("iteration"),
                    "wall_time_s": row.get("wall_time_s"),
                    "train_flops": row.get("train_flops"),
                    **{key.split("/")[-1]: value for key, value in rates.items()},
                }
            )
    return rows


def optimal_move_figure(plt: Any, metric_rows: Sequence[dict], out: Path) -> list[dict]:
    """Writes ``optimal_move_rate.png`` (two panels); returns the plotted table."""
    table = optimal_move_rows(metric_rows)
    if not table:
        return table
    runs = sorted({row["run"] for row in table})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (x_key, x_label) in zip(axes[0], X_AXES, strict=True):
        for index, run in enumerate(runs):
            points = [row for row in table if row["run"] == run and _finite(row[x_key])]
            for key, (what, style) in RATE_KEYS.items():
                name = key.split("/")[-1]
                series = [(row[x_key], row[name]) for row in points if name in row]
                if series:
                    xs, ys = zip(*series, strict=True)
                    ax.plot(xs, ys, style, marker=".", color=colours[index % len(colours)],
                            label=f"{run} ({what})")
        if x_key == "train_flops":
            ax.set_xscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel("optimal-move rate")
        ax.set_ylim(min(0.5, min(row.get("raw_optimal_move_rate", 1.0) for row in table)), 1.005)
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Optimal-move rate (exact solver) on random-play positions")
    fig.tight_layout()
    fig.savefig(out / "optimal_move_rate.png", dpi=120)
    plt.close(fig)
    return table
