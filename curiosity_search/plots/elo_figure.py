"""Figure (d): Elo vs training compute with the frontier fit per board size.

Elo is fitted by Bradley-Terry (``eval.elo.fit_elo``) over all evaluation games of a
board size, anchored at the reference (0 = perfect play where that is the solver); the
frontier ``elo = min(0, max(incline, plateau))`` in log-compute is fitted per board
size (``eval.frontier.fit_frontier``). Never imports JAX.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from curiosity_search.atomic_io import write_csv_atomically
from curiosity_search.eval.elo import PairResult, fit_elo
from curiosity_search.eval.frontier import fit_frontier
from curiosity_search.plots.common import (
    log_x_axis,
    number,
    numeric_sort_key,
    x_axis,
)


def _fit_role(table: Sequence[dict]) -> str:
    """The role whose Elo curves are drawn and fitted: expert, else apprentice."""
    return "expert" if any(t["role"] == "expert" for t in table) else "apprentice"


def elo_table(eval_rows: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """Per board size: Elo of every evaluated player (anchor = the reference), and fits."""
    by_board: dict[str, list[dict]] = defaultdict(list)
    for row in eval_rows:
        by_board[str(row.get("board_size", ""))].append(row)
    table, fits = [], []
    for board, rows in sorted(by_board.items(), key=lambda kv: numeric_sort_key(kv[0])):
        references = [r["player_b"] for r in rows if str(r.get("reference")) in ("1", "True")]
        opponents = {r["player_b"] for r in rows}
        anchor = "solver" if "solver" in opponents else max(set(references), key=references.count)
        results = [
            PairResult(
                r["player_a"],
                r["player_b"],
                number(r["wins"]) + 0.5 * number(r["draws"]),
                int(number(r["games"])),
            )
            for r in rows
        ]
        fit = fit_elo(results, anchor)
        seen = set()
        for r in rows:
            if r["player_a"] in seen:
                continue
            seen.add(r["player_a"])
            table.append(
                {
                    "board_size": board,
                    "anchor": anchor,
                    "player": r["player_a"],
                    "algorithm": r.get("algorithm", ""),
                    "role": r.get("role", ""),
                    "run": r.get("run", ""),
                    "iteration": r.get("iteration", ""),
                    "train_flops": number(r.get("train_flops")),
                    "wall_time_s": number(r.get("wall_time_s")),
                    "elo": fit.ratings[r["player_a"]],
                    "elo_stderr": fit.stderr[r["player_a"]],
                }
            )
        mine = [t for t in table if t["board_size"] == board and t["role"] == _fit_role(table)]
        x_key, _ = x_axis(mine)
        try:
            f = fit_frontier([t[x_key] for t in mine], [t["elo"] for t in mine])
            fits.append(
                {
                    "board_size": board,
                    "anchor": anchor,
                    "compute": x_key,
                    "slope": f.slope,
                    "intercept": f.intercept,
                    "plateau": f.plateau,
                    "rmse": f.rmse,
                    "frontier_points": f.points,
                }
            )
        except ValueError as error:
            print(f"note: no frontier fit for board {board}: {error}", file=sys.stderr)
    return table, fits


def elo_figure(plt: Any, eval_rows: Sequence[dict], out: Path) -> None:
    """Elo vs compute with the frontier fit per board size."""
    table, fits = elo_table(eval_rows)
    x_key, x_label = x_axis(table)
    boards = sorted({t["board_size"] for t in table}, key=numeric_sort_key)
    colours = dict(
        zip(boards, plt.cm.plasma(np.linspace(0, 0.85, max(1, len(boards)))), strict=False)
    )
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    markers = {"gumbel": "o", "curiosity": "s", "alphazero": "^", "exit": "D"}
    for t in table:
        if t["role"] == _fit_role(table) and number(t[x_key]) > 0:
            ax.errorbar(
                t[x_key],
                t["elo"],
                yerr=t["elo_stderr"],
                color=colours[t["board_size"]],
                marker=markers.get(t["algorithm"], "x"),
                markersize=4,
                alpha=0.6,
                linestyle="none",
            )
    for fit in fits:
        pts = [t[x_key] for t in table if t["board_size"] == fit["board_size"] and t[x_key] > 0]
        grid = np.logspace(np.log10(min(pts)), np.log10(max(pts)), 100)
        line = np.minimum(
            0, np.maximum(fit["slope"] * np.log10(grid) + fit["intercept"], fit["plateau"])
        )
        ax.plot(grid, line, color=colours[fit["board_size"]], label=f"board {fit['board_size']}")
    for algorithm, marker in markers.items():
        if any(t["algorithm"] == algorithm for t in table):
            ax.plot([], [], marker, color="grey", linestyle="none", label=algorithm)
    log_x_axis(ax)
    ax.axhline(0, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel(x_label)
    ax.set_ylabel("Elo (0 = reference / perfect play)")
    ax.set_title("Elo vs training compute, frontier min(0, max(incline, plateau))")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "elo_vs_compute.png", dpi=120)
    plt.close(fig)
    write_csv_atomically(out / "elo_vs_compute.csv", table)
    write_csv_atomically(out / "frontier_fit.csv", fits or [{"board_size": ""}])
