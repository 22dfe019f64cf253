"""Figure: experiment variants side by side (``variants.png`` / ``variants.csv``).

A sweep's runs differ in their grid entries; the run name joins the entry names, e.g.
``tpt-online-seed1`` or ``hex4-curiosity-seed0``. The *variant* is the run name without
its ``-seed<N>`` suffix, so seeds of one variant are pooled. Where the algorithm alone
does not tell runs apart (ExIt with TPT vs CAT targets, AlphaZero with or without
search control) this is the figure that compares them.

Top row, one panel per board size: the seed-pooled score against the reference vs
training compute (expert solid with its Wilson band, apprentice dashed). Below it, where
the runs logged them: the seed-mean optimal-move rate against the exact solver (search
solid, raw policy dashed), and the seed-mean late-game optimal-move rate of the
evaluation's roles (exact judge; expert solid, apprentice dashed). The figures grouped
by algorithm (``win_rate_vs_flops``, ``late_game_rate_vs_flops``, ...) pool every run of
an algorithm; two arms of one algorithm are told apart here only. Never imports JAX.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from curiosity_search.atomic_io import write_csv_atomically
from curiosity_search.plots.common import (
    log_x_axis,
    number,
    numeric_sort_key,
    x_axis,
)
from curiosity_search.plots.learning_curves import RATE_KEYS, optimal_move_rows

_SEED_SUFFIX = re.compile(r"-seed\d+$")
# (column of ``optimal_move_rows``, line style, label) per rate in ``RATE_KEYS``
RATES = tuple((key.split("/")[-1], style, label) for key, (label, style) in RATE_KEYS.items())


def variant_name(run: str) -> str:
    """``tpt-online-seed1`` -> ``tpt-online``: the run name without its seed suffix."""
    return _SEED_SUFFIX.sub("", str(run))


def with_variants(rows: Sequence[dict]) -> list[dict]:
    """Copies of ``rows`` with a ``variant`` column derived from ``run``."""
    return [{**row, "variant": variant_name(row.get("run", ""))} for row in rows]


def optimal_move_curves(metric_rows: Sequence[dict]) -> list[dict]:
    """Seed-mean optimal-move rates per (variant, board size, iteration)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in with_variants(optimal_move_rows(metric_rows)):
        groups[(row["variant"], str(row["board_size"]), int(row["iteration"]))].append(row)
    out = []
    for (variant, board, iteration), rows in sorted(groups.items()):
        entry = {"variant": variant, "board_size": board, "iteration": iteration, "runs": len(rows)}
        for key in ("train_flops", "wall_time_s", *(name for name, _, _ in RATES)):
            entry[key] = float(np.mean([number(r.get(key)) for r in rows]))
        out.append(entry)
    return out


def variant_figure(
    plt: Any, score_curves: Sequence[dict], rate_curves: Sequence[dict], out: Path,
    late_curves: Sequence[dict] = (),
) -> bool:
    """Draws ``variants.png`` and writes ``variants.csv``; False (nothing) for < 2 variants.

    Args:
      plt: ``matplotlib.pyplot``.
      score_curves: ``plots.reference_curves(rows, ("variant", "board_size"))``.
      rate_curves: ``optimal_move_curves(metric_rows)`` (may be empty).
      out: the output folder.
      late_curves: ``learning_curves.late_game_curves(with_variants(rows), "variant")``
        (may be empty).
    """
    every = [*score_curves, *rate_curves, *late_curves]
    variants = sorted({c["variant"] for c in every})
    if len(variants) < 2:
        return False
    boards = sorted({str(c["board_size"]) for c in every}, key=numeric_sort_key)
    rows = 1 + bool(rate_curves) + bool(late_curves)
    fig, axes = plt.subplots(rows, len(boards), figsize=(6.0 * len(boards), 4.2 * rows),
                             squeeze=False)
    colours = dict(zip(variants, plt.cm.tab10(np.arange(len(variants)) % 10), strict=True))
    x_key, x_label = x_axis(every)
    for column, board in enumerate(boards):
        ax = axes[0][column]
        for variant in variants:
            for role, style in (("expert", "-"), ("apprentice", "--")):
                pts = _points(score_curves, variant, board, x_key, role)
                if not pts:
                    continue
                x = [c[x_key] for c in pts]
                ax.plot(x, [c["score"] for c in pts], style, marker=".", color=colours[variant],
                        label=f"{variant} ({role})")
                if role == "expert":
                    ax.fill_between(x, [c["ci_low"] for c in pts], [c["ci_high"] for c in pts],
                                    color=colours[variant], alpha=0.12, linewidth=0)
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(-0.02, 1.02)
        _finish_panel(ax, x_label, "score vs reference (0.5 = perfect play)",
                      f"board size {board}: score vs the reference", "upper left")
        if rate_curves:
            _rate_panel(axes[1][column], rate_curves, variants, colours, board, x_key, x_label)
        if late_curves:
            _late_game_panel(axes[-1][column], late_curves, variants, colours, board, x_key,
                             x_label)
    fig.suptitle("Variants (seeds pooled): expert / search solid, apprentice / raw dashed")
    fig.tight_layout()
    fig.savefig(out / "variants.png", dpi=120)
    plt.close(fig)
    write_csv_atomically(out / "variants.csv", every)
    return True


def _late_game_panel(ax: Any, curves: Sequence[dict], variants: Sequence[str],
                     colours: dict, board: str, x_key: str, x_label: str) -> None:
    for variant in variants:
        for role, style in (("expert", "-"), ("apprentice", "--")):
            pts = _points(curves, variant, board, x_key, role)
            if pts:
                ax.plot([c[x_key] for c in pts], [c["late_game_rate"] for c in pts], style,
                        marker=".", color=colours[variant], label=f"{variant} ({role})")
    _finish_panel(ax, x_label, "late-game optimal-move rate",
                  f"board size {board}: late-game optimal-move rate (exact judge)",
                  "lower right")


def _rate_panel(ax: Any, curves: Sequence[dict], variants: Sequence[str], colours: dict,
                board: str, x_key: str, x_label: str) -> None:
    for variant in variants:
        pts = _points(curves, variant, board, x_key)
        for key, style, what in RATES:
            series = [(c[x_key], c[key]) for c in pts if np.isfinite(number(c[key]))]
            if series:
                xs, ys = zip(*series, strict=True)
                ax.plot(xs, ys, style, marker=".", color=colours[variant],
                        label=f"{variant} ({what})")
    _finish_panel(ax, x_label, "optimal-move rate",
                  f"board size {board}: optimal-move rate (exact solver)", "lower right")


def _points(curves: Sequence[dict], variant: str, board: str, x_key: str,
            role: str | None = None) -> list[dict]:
    """The points of ``curves`` for one variant (and role, where given) on one board,
    sorted by ``x_key`` (points without a positive ``x_key`` left out)."""
    return sorted((c for c in curves if c["variant"] == variant
                   and str(c["board_size"]) == board and (role is None or c["role"] == role)
                   and number(c[x_key]) > 0), key=lambda c: c[x_key])


def _finish_panel(ax: Any, x_label: str, y_label: str, title: str, legend_loc: str) -> None:
    log_x_axis(ax)
    ax.set(xlabel=x_label, ylabel=y_label, title=title)
    ax.grid(True, alpha=0.3)
    if ax.has_data():
        ax.legend(fontsize=7, loc=legend_loc)
