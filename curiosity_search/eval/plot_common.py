"""Small helpers shared by the figure modules (``plots``, ``elo_figure``, ``variant_plots``).

Never imports JAX; matplotlib is passed in as ``plt`` by the caller.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


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
