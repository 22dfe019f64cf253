"""Small helpers shared by the figure modules (``make``, ``elo_figure``, ``variants``,
``learning_curves``).

Never imports JAX; matplotlib is passed in as ``plt`` by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def number(value: Any) -> float:
    """``value`` as a float; NaN when it is missing or not a number (CSV cells)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan




def x_axis(rows: Sequence[dict]) -> tuple[str, str]:
    """``(column, axis label)`` of the x axis: training FLOPs when recorded, else wall time."""
    if any(number(r.get("train_flops")) > 0 for r in rows):
        return "train_flops", "training compute (FLOPs)"
    return "wall_time_s", "training wall time (s)"


def numeric_sort_key(value: str) -> tuple:
    """Sort key: numeric strings first, by value, then the rest alphabetically."""
    return (0, float(value), "") if number(value) == number(value) else (1, 0.0, value)


def log_x_axis(ax: Any) -> None:
    """Log-scales x when the panel has data (an empty panel says so instead)."""
    if ax.has_data():
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def panel_grid(plt: Any, count: int) -> tuple[Any, np.ndarray]:
    """A figure with ``count`` axes, at most 3 per row (spare axes hidden); ``(fig, axes)``."""
    cols = min(count, 3)
    rows = max(1, math.ceil(count / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, axes.flat


__all__ = [
    "log_x_axis",
    "number",
    "numeric_sort_key",
    "panel_grid",
    "x_axis",
]
