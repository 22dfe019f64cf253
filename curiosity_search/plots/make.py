"""Figures and tables from run or sweep directories (``curiosity-search plot DIR``).

Reads every run directory under the given folders (``eval.csv`` written by
``eval.evaluation``, ``metrics.jsonl`` by training, ``config.yaml`` for labels) and
writes a PNG and a CSV per figure:

- ``win_rate_vs_flops``: score against the reference vs training FLOPs, one panel per
  algorithm, one curve per board size (expert solid, apprentice dashed); without the
  swap rule perfect play scores 0.5, the dotted ceiling.
- ``curiosity_vs_gumbel``: the same data, one panel per board size, one curve per
  algorithm (matched boards).
- ``entropy_vs_flops``: the categorical entropy (bits) of the policy target vs training
  FLOPs (the curiosity blog's Figure 13); ``prediction_entropy_vs_flops``: the network
  policy's entropy and the value belief's differential entropy (bits).
- ``elo_vs_compute``: Elo (Bradley-Terry over all evaluation games of a board size,
  anchored at the reference, 0 = perfect play where it is the solver) vs training FLOPs,
  with the frontier fit ``elo = min(0, max(incline, plateau))`` in log-compute per
  board size (``frontier_fit.csv``).
- ``late_game_rate_vs_flops``: the late-game optimal-move rate (exact judge, positions
  with E empty cells; Hex from 5x5 up) vs training FLOPs, one panel per algorithm, one
  curve per board size (expert solid, apprentice dashed); see ``learning_curves``.
- ``variants``: runs grouped by name without ``-seed<N>`` (e.g. ExIt ``tpt-online`` vs
  ``cat-online``), score vs the reference, optimal-move rate and late-game rate; see
  ``variants``. The figures above group runs by algorithm and pool two arms of one
  algorithm; this one keeps them apart.

Seeds are pooled: curves show the mean over runs that differ only in seed, with the
Wilson interval of the pooled games as a band. Never imports JAX.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from curiosity_search.atomic_io import write_csv_atomically
from curiosity_search.eval.wilson import wilson_interval
from curiosity_search.plots.common import (
    log_x_axis,
    number,
    numeric_sort_key,
    panel_grid,
    x_axis,
)
from curiosity_search.plots.elo_figure import elo_figure
from curiosity_search.plots.learning_curves import (
    late_game_curves,
    late_game_figure,
    optimal_move_figure,
)
from curiosity_search.plots.variants import (
    optimal_move_curves,
    variant_figure,
    with_variants,
)

LABEL_KEYS = ("run", "algorithm", "board_size", "network", "seed")


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


def reference_curves(
    eval_rows: Sequence[dict], group_keys: Sequence[str] = ("algorithm", "board_size", "network")
) -> list[dict]:
    """Seed-pooled score vs the reference per (``group_keys``..., role, iteration)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in eval_rows:
        if str(row.get("reference")) in ("1", "True", "true"):
            key = tuple(str(row.get(k, "")) for k in group_keys)
            groups[(*key, row["role"], int(number(row["iteration"])))].append(row)
    out = []
    for (*key, role, iteration), rows in sorted(groups.items()):
        games = sum(int(number(r["games"])) for r in rows)
        points = sum(number(r["wins"]) + 0.5 * number(r["draws"]) for r in rows)
        low, high = wilson_interval(points, games) if games else (math.nan, math.nan)
        out.append(
            {
                **dict(zip(group_keys, key, strict=True)),
                "role": role,
                "iteration": iteration,
                "opponent": rows[0].get("player_b", ""),
                "train_flops": float(np.mean([number(r["train_flops"]) for r in rows])),
                "wall_time_s": float(np.mean([number(r["wall_time_s"]) for r in rows])),
                "runs": len(rows),
                "games": games,
                "score": points / games if games else math.nan,
                "ci_low": low,
                "ci_high": high,
            }
        )
    return out


def _score_figure(
    plt: Any, curves: list[dict], panel_key: str, curve_key: str, title: str, path: Path
) -> None:
    x_key, x_label = x_axis(curves)
    panels = sorted({c[panel_key] for c in curves}, key=numeric_sort_key)
    fig, axes = panel_grid(plt, len(panels))
    for ax, panel in zip(axes, panels, strict=False):
        mine = [c for c in curves if c[panel_key] == panel]
        curve_values = sorted({c[curve_key] for c in mine}, key=numeric_sort_key)
        colours = plt.cm.viridis(np.linspace(0, 0.9, max(1, len(curve_values))))
        for colour, value in zip(colours, curve_values, strict=False):
            for role, style in (("expert", "-"), ("apprentice", "--")):
                pts = sorted(
                    (c for c in mine if c[curve_key] == value and c["role"] == role),
                    key=lambda c: c[x_key],
                )
                pts = [c for c in pts if number(c[x_key]) > 0]
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
        log_x_axis(ax)
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, label="perfect play (no swap)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(x_label)
        ax.set_ylabel("score vs reference")
        ax.set_title(f"{panel_key.replace('_', ' ')} {panel}")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")  # scores live below the 0.5 ceiling
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


POLICY_TARGET_ENTROPY = "policy_target_entropy_bits"  # the blog's Figure 13


def entropy_figure(plt: Any, metric_rows: list[dict], out: Path) -> list[dict]:
    """Entropy figures vs compute; returns the rows of both tables.

    ``entropy_vs_flops``: the categorical entropy (bits) of the policy target, as the
    curiosity blog's Figure 13 plots it. ``prediction_entropy_vs_flops``: every other
    ``*entropy_bits`` metric, each in its own panel (the network policy's categorical
    entropy; the value belief's *differential* entropy, which can be negative).
    """
    keys = sorted({k for r in metric_rows for k in r if k.endswith("entropy_bits")})
    target_keys = [k for k in keys if k.split("/")[-1] == POLICY_TARGET_ENTROPY]
    other_keys = [k for k in keys if k not in target_keys]
    target = _entropy_panels(plt, metric_rows, target_keys,
                             "Entropy of the policy target vs training compute",
                             out, "entropy_vs_flops")
    other = _entropy_panels(plt, metric_rows, other_keys,
                            "Prediction entropy vs training compute (value: differential)",
                            out, "prediction_entropy_vs_flops")
    return target + other


def _entropy_panels(plt: Any, metric_rows: list[dict], keys: list[str], title: str,
                    out: Path, stem: str) -> list[dict]:
    """One panel per metric key, one curve per (algorithm, board); writes PNG + CSV."""
    x_key, x_label = x_axis(metric_rows)
    table = []
    for key in keys:
        groups: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
        for r in metric_rows:
            if number(r.get(key)) == number(r.get(key)) and number(r.get(x_key)) > 0:
                group = (str(r.get("algorithm", "")), str(r.get("board_size", "")))
                groups[group + (int(number(r["iteration"])),)].append(
                    (number(r[x_key]), number(r[key]))
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
    fig, axes = panel_grid(plt, max(1, len(keys)))
    for ax, key in zip(axes, keys or ["(no entropy metrics)"], strict=False):
        series = sorted(
            {(t["algorithm"], t["board_size"]) for t in table if t["metric"] == key},
            key=lambda s: (s[0], numeric_sort_key(s[1])),
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
        log_x_axis(ax)
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"{key.split('/')[-1].replace('_', ' ')}")
        ax.set_title(key)
        ax.grid(True, alpha=0.3)
        if series:
            ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=120)
    plt.close(fig)
    write_csv_atomically(out / f"{stem}.csv", table or [{"metric": ""}])
    return table


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
        write_csv_atomically(out / "win_rate_vs_flops.csv", curves)
        _score_figure(
            plt,
            curves,
            "algorithm",
            "board_size",
            "Score vs the reference by board size",
            out / "win_rate_vs_flops.png",
        )
        write_csv_atomically(out / "curiosity_vs_gumbel.csv", curves)
        _score_figure(
            plt,
            curves,
            "board_size",
            "algorithm",
            "Curiosity vs Gumbel on matched boards",
            out / "curiosity_vs_gumbel.png",
        )
        elo_figure(plt, eval_rows, out)
        late = late_game_figure(plt, eval_rows, out)
        if late:
            write_csv_atomically(out / "late_game_rate_vs_flops.csv", late)
    variant_figure(
        plt,
        reference_curves(with_variants(eval_rows), ("variant", "board_size")),
        optimal_move_curves(metric_rows),
        out,
        late_game_curves(with_variants(eval_rows), "variant"),
    )
    if metric_rows:
        entropy_figure(plt, metric_rows, out)
        rates = optimal_move_figure(plt, metric_rows, out)
        if rates:
            write_csv_atomically(out / "optimal_move_rate.csv", rates)
    command = "curiosity-search plot " + " ".join(map(str, dirs)) + f" --out {out}"
    (out / "PLOTS_COMMAND.txt").write_text(command + "\n")
    return sorted(out.glob("*.png")) + sorted(out.glob("*.csv"))
