"""Prints a Markdown table of each variant's last evaluation point from ``variants.csv``.

    python scripts/variant_table.py results/exit_vs_reinforce

Columns: seed-mean optimal-move rate (raw policy / search) where logged, else the
seed-mean late-game optimal-move rate (apprentice / expert, exact judge) where logged,
the seed-pooled score against the reference (apprentice / expert), training FLOPs, and
the mean wall time of the runs (``seconds`` in each run's ``DONE``: training plus
evaluation).
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from curiosity_search.plots.variants import variant_name


def main(folder: str) -> None:
    root = Path(folder)
    with open(root / "variants.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    seconds = defaultdict(list)
    for done in root.glob("*/DONE"):
        seconds[variant_name(done.parent.name)].append(json.loads(done.read_text())["seconds"])
    last: dict[tuple, dict] = {}
    for row in rows:
        # score rows carry a role, late-game rows a role and a rate, optimal-move rows neither
        kind = ("late_" if row.get("late_game_rate") else "") + (row.get("role") or "rates")
        key = (row["variant"], row["board_size"], kind)
        if key not in last or int(row["iteration"]) > int(last[key]["iteration"]):
            last[key] = row
    print("| variant | board | iteration | optimal moves raw / search | score vs reference "
          "apprentice / expert (games) | training FLOPs | run time (s) |")
    print("| --- | ---: | ---: | --- | --- | ---: | ---: |")
    for variant, board in sorted({(k[0], k[1]) for k in last}):
        rates = last.get((variant, board, "rates"))
        apprentice = last.get((variant, board, "apprentice"))
        expert = last.get((variant, board, "expert"))
        late = [last.get((variant, board, f"late_{role}")) for role in ("apprentice", "expert")]
        if rates:
            rate_text = (f"{float(rates['raw_optimal_move_rate']):.1%} / "
                         f"{float(rates['search_optimal_move_rate']):.1%}")
        elif all(late):
            rate_text = " / ".join(f"{float(r['late_game_rate']):.1%}" for r in late)
            rate_text = f"late game {rate_text}"
        else:
            rate_text = "-"
        score_text = (f"{float(apprentice['score']):.2f} / {float(expert['score']):.2f} "
                      f"({expert['games']})") if apprentice and expert else "-"
        point = expert or rates
        flops = float(point["train_flops"])
        wall = seconds.get(variant)
        wall_text = f"{sum(wall) / len(wall):.0f}" if wall else "-"
        print(f"| {variant} | {board} | {point['iteration']} | {rate_text} | {score_text} | "
              f"{flops:.2e} | {wall_text} |")


if __name__ == "__main__":
    main(sys.argv[1])
