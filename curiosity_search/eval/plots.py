"""Figures and tables from run or sweep directories (``curiosity-search plot DIR``).

Reads every run directory under the given folders (``eval.csv`` written by
``eval.evaluation``, ``metrics.jsonl`` by training, ``config.yaml`` for labels) and
writes a PNG and a CSV per figure:

- ``win_rate_vs_flops``: score against the reference vs training FLOPs, one panel per
  algorithm, one curve per board size (expert solid, apprentice dashed); without the
  swap rule perfect play scores 0.5, the dotted ceiling.
- ``curiosity_vs_gumbel``: the same data, one panel per board size, one curve per
  algorithm (matched boards).
- ``entropy_vs_flops``: prediction entropy (bits) of the policy (and value belief)
  vs training FLOPs.
- ``elo_vs_compute``: Elo (Bradley-Terry over all evaluation games of a board size,
  anchored at the reference, 0 = perfect play where it is the solver) vs training FLOPs,
  with the frontier fit ``elo = min(0, max(incline, plateau))`` in log-compute per
  board size (``frontier_fit.csv``).

Seeds are pooled: curves show the mean over runs that differ only in seed, with the
Wilson interval of the pooled games as a band. Never imports JAX.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from curiosity_search.eval.elo import PairResult, fit_elo
from curiosity_search.eval.frontier import fit_frontier
from curiosity_search.eval.learning_curves import optimal_move_figure

LABEL_KEYS = ("run", "algorithm", "board_size", "network", "seed")


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _run_labels(run_dir: Path) -> dict[str, Any]:
    """Labels from the run's config.yaml (raw YAML: no config validation, no JAX)."""
    import yaml

    labels: dict[str, Any] = {"run": run_dir.name}
    path = run_dir / "config.yaml"
    if path.exists():
        cfg = yaml.safe_load(path.read_text()) or {}
        env, net = cfg.get("env") or {}, cfg.get("network") or {}
        labels.update(
            algorithm=cfg.get("algorithm", ""),
            board_size=env.get("size", ""),
            network=f"{net.get('trunk', '')}{net.get('blocks', '')}x{net.get('width', '')}",
            seed=cfg.get("seed", ""),
        )
    return labels


def load_runs(dirs: Iterable[str | os.PathLike]) -> tuple[list[dict], list[dict]]:
    """(evaluation rows, metrics rows) of every run directory under ``dirs``."""
    run_dirs = set()
    for folder in map(Path, dirs):
        for name in ("eval.csv", "metrics.jsonl"):
            run_dirs |= {p.parent for p in folder.rglob(name)}
    eval_rows, metric_rows = [], []
    for run_dir in sorted(run_dirs):
        labels = _run_labels(run_dir)
        if (run_dir / "eval.csv").exists():
            with open(run_dir / "eval.csv", newline="") as handle:
                rows = list(csv.DictReader(handle))
            eval_rows += [{**labels, **row} for row in rows]
            if rows:
                labels.update({k: rows[0][k] for k in LABEL_KEYS if k in rows[0]})
        if (run_dir / "metrics.jsonl").exists():
            for line in (run_dir / "metrics.jsonl").read_text().splitlines():
                if line.strip():
                    metric_rows.append({**labels, **json.loads(line)})
    return eval_rows, metric_rows


def _write_csv(path: Path, rows: Sequence[dict]) -> None:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def _x_key(rows: Sequence[dict]) -> tuple[str, str]:
    """Training FLOPs when recorded, else wall time."""
    if any(_number(r.get("train_flops")) > 0 for r in rows):
        return "train_flops", "training compute (FLOPs)"
    return "wall_time_s", "training wall time (s)"


def reference_curves(eval_rows: Sequence[dict]) -> list[dict]:
    """Seed-pooled score vs the reference per (algorithm, board, network, role, iteration)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in eval_rows:
        if str(row.get("reference")) in ("1", "True", "true"):
            key = tuple(str(row.get(k, "")) for k in ("algorithm", "board_size", "network"))
            groups[(*key, row["role"], int(_number(row["iteration"])))].append(row)
    out = []
    for (algorithm, board, network, role, iteration), rows in sorted(groups.items()):
        games = sum(int(_number(r["games"])) for r in rows)
        points = sum(_number(r["wins"]) + 0.5 * _number(r["draws"]) for r in rows)
        low, high = _wilson(points, games)
        out.append(
            {
                "algorithm": algorithm,
                "board_size": board,
                "network": network,
                "role": role,
                "iteration": iteration,
                "opponent": rows[0].get("player_b", ""),
                "train_flops": float(np.mean([_number(r["train_flops"]) for r in rows])),
                "wall_time_s": float(np.mean([_number(r["wall_time_s"]) for r in rows])),
                "runs": len(rows),
                "games": games,
                "score": points / games if games else math.nan,
                "ci_low": low,
                "ci_high": high,
            }
        )
    return out


def _wilson(points: float, games: int, z: float = 1.96) -> tuple[float, float]:
    if games <= 0:
        return math.nan, math.nan
    p, z2 = points / games, z * z
    centre = (p + z2 / (2 * games)) / (1 + z2 / games)
    half = z * math.sqrt(p * (1 - p) / games + z2 / (4 * games * games)) / (1 + z2 / games)
    return max(0.0, centre - half), min(1.0, centre + half)


def _sort_key(value: str) -> tuple:
    return (0, float(value), "") if _number(value) == _number(value) else (1, 0.0, value)


def _log_x(ax: Any) -> None:
    """Log-scales x when the panel has data (an empty panel says so instead)."""
    if ax.has_data():
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def _panels(plt: Any, count: int) -> tuple[Any, np.ndarray]:
    cols = min(count, 3)
    rows = max(1, math.ceil(count / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, axes.flat


def _score_figure(
    plt: Any, curves: list[dict], panel_key: str, curve_key: str, title: str, path: Path
) -> None:
    x_key, x_label = _x_key(curves)
    panels = sorted({c[panel_key] for c in curves}, key=_sort_key)
    fig, axes = _panels(plt, len(panels))
    for ax, panel in zip(axes, panels, strict=False):
        mine = [c for c in curves if c[panel_key] == panel]
        curve_values = sorted({c[curve_key] for c in mine}, key=_sort_key)
        colours = plt.cm.viridis(np.linspace(0, 0.9, max(1, len(curve_values))))
        for colour, value in zip(colours, curve_values, strict=False):
            for role, style in (("expert", "-"), ("apprentice", "--")):
                pts = sorted(
                    (c for c in mine if c[curve_key] == value and c["role"] == role),
                    key=lambda c: c[x_key],
                )
                pts = [c for c in pts if _number(c[x_key]) > 0]
                if not pts:
                    continue
                x = [c[x_key] for c in pts]
                label = f"{curve_key.replace('_', ' ')} {value}, {role}"
                ax.plot(x, [c["score"] for c in pts], style, color=colour, marker=".", label=label)
                if role == "expert":
                    ax.fill_between(
                        x,
                        [c["ci_low"] for c in pts],
                        [c["ci_high"] for c in pts],
                        color=colour,
                        alpha=0.15,
                        linewidth=0,
                    )
        _log_x(ax)
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, label="perfect play (no swap)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(x_label)
        ax.set_ylabel("score vs reference")
        ax.set_title(f"{panel_key.replace('_', ' ')} {panel}")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def entropy_figure(plt: Any, metric_rows: list[dict], out: Path) -> list[dict]:
    """Prediction entropy (bits) vs compute; returns the table it plots."""
    keys = sorted({k for r in metric_rows for k in r if k.endswith("entropy_bits")})
    x_key, x_label = _x_key(metric_rows)
    table = []
    for key in keys:
        groups: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
        for r in metric_rows:
            if _number(r.get(key)) == _number(r.get(key)) and _number(r.get(x_key)) > 0:
                group = (str(r.get("algorithm", "")), str(r.get("board_size", "")))
                groups[group + (int(_number(r["iteration"])),)].append(
                    (_number(r[x_key]), _number(r[key]))
                )
        for (algorithm, board, iteration), values in sorted(groups.items()):
            x, y = np.mean(values, axis=0)
            table.append(
                {
                    "metric": key,
                    "algorithm": algorithm,
                    "board_size": board,
                    "iteration": iteration,
                    x_key: x,
                    "entropy_bits": y,
                    "runs": len(values),
                }
            )
    fig, axes = _panels(plt, max(1, len(keys)))
    for ax, key in zip(axes, keys or ["(no entropy metrics)"], strict=False):
        series = sorted(
            {(t["algorithm"], t["board_size"]) for t in table if t["metric"] == key},
            key=lambda s: (s[0], _sort_key(s[1])),
        )
        for algorithm, board in series:
            pts = [
                t
                for t in table
                if t["metric"] == key and (t["algorithm"], t["board_size"]) == (algorithm, board)
            ]
            style = "-" if algorithm != "curiosity" else "--"
            ax.plot(
                [t[x_key] for t in pts],
                [t["entropy_bits"] for t in pts],
                style,
                label=f"{algorithm}, board {board}",
            )
        _log_x(ax)
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"{key.split('/')[-1].replace('_', ' ')}")
        ax.set_title(key)
        ax.grid(True, alpha=0.3)
        if series:
            ax.legend(fontsize=7)
    fig.suptitle("Prediction entropy vs training compute")
    fig.tight_layout()
    fig.savefig(out / "entropy_vs_flops.png", dpi=120)
    plt.close(fig)
    _write_csv(out / "entropy_vs_flops.csv", table or [{"metric": ""}])
    return table


def _fit_role(table: Sequence[dict]) -> str:
    """The role whose Elo curves are drawn and fitted: expert, else apprentice."""
    return "expert" if any(t["role"] == "expert" for t in table) else "apprentice"


def elo_table(eval_rows: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """Per board size: Elo of every evaluated player (anchor = the reference), and fits."""
    by_board: dict[str, list[dict]] = defaultdict(list)
    for row in eval_rows:
        by_board[str(row.get("board_size", ""))].append(row)
    table, fits = [], []
    for board, rows in sorted(by_board.items(), key=lambda kv: _sort_key(kv[0])):
        references = [r["player_b"] for r in rows if str(r.get("reference")) in ("1", "True")]
        opponents = {r["player_b"] for r in rows}
        anchor = "solver" if "solver" in opponents else max(set(references), key=references.count)
        results = [
            PairResult(
                r["player_a"],
                r["player_b"],
                _number(r["wins"]) + 0.5 * _number(r["draws"]),
                int(_number(r["games"])),
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
                    "train_flops": _number(r.get("train_flops")),
                    "wall_time_s": _number(r.get("wall_time_s")),
                    "elo": fit.ratings[r["player_a"]],
                    "elo_stderr": fit.stderr[r["player_a"]],
                }
            )
        mine = [t for t in table if t["board_size"] == board and t["role"] == _fit_role(table)]
        x_key, _ = _x_key(mine)
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
    x_key, x_label = _x_key(table)
    boards = sorted({t["board_size"] for t in table}, key=_sort_key)
    colours = dict(
        zip(boards, plt.cm.plasma(np.linspace(0, 0.85, max(1, len(boards)))), strict=False)
    )
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    markers = {"gumbel": "o", "curiosity": "s", "alphazero": "^", "exit": "D"}
    for t in table:
        if t["role"] == _fit_role(table) and _number(t[x_key]) > 0:
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
    _log_x(ax)
    ax.axhline(0, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel(x_label)
    ax.set_ylabel("Elo (0 = reference / perfect play)")
    ax.set_title("Elo vs training compute, frontier min(0, max(incline, plateau))")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "elo_vs_compute.png", dpi=120)
    plt.close(fig)
    _write_csv(out / "elo_vs_compute.csv", table)
    _write_csv(out / "frontier_fit.csv", fits or [{"board_size": ""}])


def make_plots(dirs: Sequence[str | os.PathLike], out: str | os.PathLike) -> list[Path]:
    """Writes every figure (PNG + CSV) for the runs under ``dirs`` into ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    eval_rows, metric_rows = load_runs(dirs)
    if not eval_rows and not metric_rows:
        raise FileNotFoundError(f"no eval.csv or metrics.jsonl under {[str(d) for d in dirs]}")
    if eval_rows:
        curves = reference_curves(eval_rows)
        _write_csv(out / "win_rate_vs_flops.csv", curves)
        _score_figure(
            plt,
            curves,
            "algorithm",
            "board_size",
            "Score vs the reference by board size",
            out / "win_rate_vs_flops.png",
        )
        _write_csv(out / "curiosity_vs_gumbel.csv", curves)
        _score_figure(
            plt,
            curves,
            "board_size",
            "algorithm",
            "Curiosity vs Gumbel on matched boards",
            out / "curiosity_vs_gumbel.png",
        )
        elo_figure(plt, eval_rows, out)
    if metric_rows:
        entropy_figure(plt, metric_rows, out)
        rates = optimal_move_figure(plt, metric_rows, out)
        if rates:
            _write_csv(out / "optimal_move_rate.csv", rates)
    command = "curiosity-search plot " + " ".join(map(str, dirs)) + f" --out {out}"
    (out / "PLOTS_COMMAND.txt").write_text(command + "\n")
    return sorted(out.glob("*.png")) + sorted(out.glob("*.csv"))


def plot_main(args: argparse.Namespace) -> int:
    """``curiosity-search plot DIR... [--out OUT]`` (default OUT: the first DIR)."""
    dirs = getattr(args, "dirs", None) or [args.dir]
    out = getattr(args, "out", None) or dirs[0]
    for path in make_plots(dirs, out):
        print(path)
    return 0
