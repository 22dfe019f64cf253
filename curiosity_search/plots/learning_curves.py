"""Learning curves measured against exact answers: optimal-move rates vs time and FLOPs.

Runs on boards a solver covers (Hex up to 4x4, tic-tac-toe) log
``eval/raw_optimal_move_rate`` (the raw policy, no search) and
``eval/search_optimal_move_rate`` (policy + search) in ``metrics.jsonl`` every
``eval.every`` iterations. ``optimal_move_figure`` draws both against training wall time
and against estimated training FLOPs, one colour per run, search solid and raw dashed.

From 5x5 up the sweep's evaluation rows (``eval.csv``) carry the late-game optimal-move
rate of each role (``eval.evaluation``, exact late-game judge). ``late_game_figure``
draws it against training FLOPs like the score figure: one panel per algorithm, one
colour per board size, expert solid and apprentice dashed, seeds pooled; the title
states E and where the positions come from.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from curiosity_search.plots.common import (
    log_x_axis,
    number,
    numeric_sort_key,
    panel_grid,
    x_axis,
)

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


def late_game_curves(eval_rows: Sequence[dict], group_key: str = "algorithm") -> list[dict]:
    """Seed-pooled late-game optimal-move rate per (``group_key``, board size, role,
    iteration): the mean over runs, each run counted once per point. ``group_key`` is
    a column of the rows: ``algorithm``, or ``variant`` (``plots.variants``: two arms
    of one algorithm kept apart)."""
    per_run: dict[tuple, dict] = {}
    for row in eval_rows:
        rate = number(row.get("late_game_rate"))
        if rate != rate:  # NaN: no late-game column in this row
            continue
        key = (str(row.get("run", "")), str(row.get("role", "")),
               int(number(row.get("iteration"))))
        per_run.setdefault(key, row)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for (_, role, iteration), row in per_run.items():
        group = (str(row.get(group_key, "")), str(row.get("board_size", "")), role, iteration)
        groups[group].append(row)
    out = []
    for (name, board, role, iteration), rows in sorted(groups.items()):
        out.append({
            group_key: name,
            "board_size": board,
            "role": role,
            "iteration": iteration,
            "train_flops": float(np.mean([number(r.get("train_flops")) for r in rows])),
            "wall_time_s": float(np.mean([number(r.get("wall_time_s")) for r in rows])),
            "runs": len(rows),
            "late_game_rate": float(np.mean([number(r["late_game_rate"]) for r in rows])),
            "late_game_positions": int(number(rows[0].get("late_game_positions"))),
            "late_game_empty_cells": int(number(rows[0].get("late_game_empty_cells"))),
            "late_game_source": rows[0].get("late_game_source", ""),
        })
    return out


def late_game_figure(plt: Any, eval_rows: Sequence[dict], out: Path) -> list[dict]:
    """Writes ``late_game_rate_vs_flops.png`` when any row has the late-game rate;
    returns the plotted table (empty otherwise)."""
    curves = late_game_curves(eval_rows)
    if not curves:
        return curves
    x_key, x_label = x_axis(curves)
    panels = sorted({c["algorithm"] for c in curves}, key=numeric_sort_key)
    fig, axes = panel_grid(plt, len(panels))
    boards = sorted({c["board_size"] for c in curves}, key=numeric_sort_key)
    colours = dict(zip(boards, plt.cm.viridis(np.linspace(0, 0.9, max(1, len(boards)))),
                       strict=False))
    for ax, algorithm in zip(axes, panels, strict=False):
        for board in boards:
            for role, style in (("expert", "-"), ("apprentice", "--")):
                pts = sorted((c for c in curves if c["algorithm"] == algorithm
                              and c["board_size"] == board and c["role"] == role
                              and number(c[x_key]) > 0), key=lambda c: c[x_key])
                if not pts:
                    continue
                positions = pts[0]["late_game_positions"]
                ax.plot([c[x_key] for c in pts], [c["late_game_rate"] for c in pts], style,
                        marker=".", color=colours[board],
                        label=f"board {board}, {role} ({positions} positions)")
        log_x_axis(ax)
        ax.axhline(1.0, color="grey", linestyle=":", linewidth=1, label="perfect play")
        ax.set_ylim(min(0.5, min(c["late_game_rate"] for c in curves) - 0.02), 1.02)
        ax.set_xlabel(x_label)
        ax.set_ylabel("late-game optimal-move rate")
        ax.set_title(f"algorithm {algorithm}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    empties = sorted({c["late_game_empty_cells"] for c in curves})
    sources = sorted({str(c["late_game_source"]) for c in curves})
    fig.suptitle(
        "Late-game optimal-move rate (exact judge): winning positions with "
        f"E = {', '.join(map(str, empties))} empty cells\nfrom {'; '.join(sources)}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out / "late_game_rate_vs_flops.png", dpi=120)
    plt.close(fig)
    return curves
