"""The CPU trunk comparison on 4x4 Hex: ``trunk_cpu.csv`` and ``optimal_move_rate.png``.

    python results/trunk_cpu/make_figure.py

Reads the run folders beside this file (``pair<X>_<arm>_s<seed>/metrics.jsonl``, copied
from ``runs/``; the two arms of one pair ran at the same time on the same machine) and
writes, beside them:

- ``trunk_cpu.csv``: one row per run: iterations done, training wall time, median
  seconds per iteration (the first, which compiles, left out), the final raw and
  32-simulation-search optimal-move rates, and the wall time and iteration at which
  each rate first reached 99% and 100% (empty: never);
- ``curves.csv``: every evaluation (run, iteration, wall time, both rates);
- ``optimal_move_rate.png``: one panel per pair, optimal-move rate against training
  wall time (the first iteration's compilation included), MLP vs ResNet, search solid,
  raw policy dashed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from curiosity_search.atomic_io import write_csv_atomically  # noqa: E402
from curiosity_search.plots.learning_curves import optimal_move_rows  # noqa: E402

HERE = Path(__file__).resolve().parent
RATES = (("search_optimal_move_rate", "search", "-"), ("raw_optimal_move_rate", "raw", "--"))


def _runs() -> dict[str, list[dict]]:
    runs = {}
    for folder in sorted(HERE.glob("pair*_*")):
        lines = (folder / "metrics.jsonl").read_text().splitlines()
        runs[folder.name] = [json.loads(line) for line in lines if line.strip()]
    return runs


def _first(curve: list[dict], key: str, threshold: float) -> tuple[float | str, int | str]:
    for row in curve:
        if row.get(key) is not None and row[key] >= threshold - 1e-9:
            return round(row["wall_time_s"], 1), row["iteration"]
    return "", ""


def main() -> None:
    runs = _runs()
    table, curves = [], {}
    for name, rows in runs.items():
        curve = optimal_move_rows([{**row, "run": name} for row in rows])
        curves[name] = curve
        last = curve[-1]
        entry = {
            "run": name,
            "network": name.split("_")[1],
            "seed": name.rsplit("_s", 1)[1],
            "iterations": rows[-1]["iteration"],
            "wall_time_s": round(rows[-1]["wall_time_s"], 1),
            "first_iteration_s": round(rows[0]["iteration_time_s"], 1),
            "median_iteration_s": round(
                statistics.median(row["iteration_time_s"] for row in rows[1:]), 3),
            "final_raw": round(last["raw_optimal_move_rate"], 4),
            "final_search": round(last["search_optimal_move_rate"], 4),
        }
        for key, what, _ in RATES:
            for threshold, label in ((0.99, "99"), (1.0, "100")):
                wall, iteration = _first(curve, key, threshold)
                entry[f"{what}_{label}_wall_s"] = wall
                entry[f"{what}_{label}_iteration"] = iteration
        table.append(entry)
    write_csv_atomically(HERE / "trunk_cpu.csv", table)
    write_csv_atomically(HERE / "curves.csv", [row for curve in curves.values() for row in curve])

    pairs = sorted({name.split("_")[0] for name in runs})
    fig, axes = plt.subplots(1, len(pairs), figsize=(3.3 * len(pairs), 3.0), sharey=True,
                             squeeze=False)
    for ax, pair in zip(axes[0], pairs, strict=True):
        for name in sorted(n for n in runs if n.startswith(pair + "_")):
            colour = "tab:blue" if "_mlp" in name else "tab:orange"
            arm = name.split("_", 1)[1]
            for key, what, style in RATES:
                xs = [row["wall_time_s"] for row in curves[name]]
                ys = [row[key] for row in curves[name]]
                ax.plot(xs, ys, style, marker=".", markersize=4, color=colour,
                        label=f"{arm} {what}")
        ax.axhline(0.99, color="grey", linewidth=0.6, linestyle=":")
        ax.set_title(f"pair {pair.removeprefix('pair')} (run together)", fontsize=9)
        ax.set_xlabel("training wall time (s)", fontsize=8)
        ax.set_ylim(0.65, 1.005)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower left")
    axes[0][0].set_ylabel("optimal-move rate (4x4)", fontsize=8)
    fig.suptitle("4x4 Hex, Gumbel: MLP 2x128 vs conv ResNet on 2 shared CPU cores", fontsize=9)
    fig.tight_layout()
    fig.savefig(HERE / "optimal_move_rate.png", dpi=100)
    plt.close(fig)
    for entry in table:
        print(entry)


if __name__ == "__main__":
    main()
