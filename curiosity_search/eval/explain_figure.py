"""The picture ``curiosity-search explain`` writes: one position and the search at its root.

    view = RootView(action_names=[...], legal=..., prior=..., visits=..., ...)
    draw_explain_figure(view, "explain.png")

Left (Hex only): the board as a rhombus of hexagons, black joining top and bottom, white
left and right (pgx geometry: cell ``r * size + c`` is HTP ``chr(ord('a') + c)``
``r + 1``); each empty cell is shaded by the final policy target and labelled with its
visit count; the searched move is outlined in red. Right, over the top moves by visits
(up to ``top``): the network prior, the visit share, the policy target and, where the
rule has it, P(a is best) as grouped bars; below, each move's value from the mover's
view: the child belief's expected score with one standard deviation (curiosity) or
Q(s, a) (other rules; only visited moves have one). Non-Hex games get the bars alone.

``A`` below is the number of actions. Everything here is NumPy and matplotlib (Agg,
no pyplot, no display); nothing imports JAX.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Circle, RegularPolygon

EMPTY, BLACK_STONE, WHITE_STONE = 0, 1, 2
HEX_RADIUS = 1.0 / math.sqrt(3.0)  # centre to corner of a pointy-top hexagon of width 1
ROW_HEIGHT = 1.5 * HEX_RADIUS
SERIES_COLOURS = {
    "prior": "#9e9e9e",
    "visits": "#1f77b4",
    "target": "#2ca02c",
    "pbest": "#d62728",
}


@dataclasses.dataclass(frozen=True)
class RootView:
    """What the explain figure shows about one position (all arrays over ``A`` actions).

    Attributes:
      action_names: ``[A]`` a name per action (HTP cells for Hex, ``str(a)`` otherwise).
      legal: ``[A]`` bool, legal moves (only these are drawn).
      prior: ``[A]`` the network's policy over legal moves.
      visits: ``[A]`` root visit counts (all zero at 0 simulations).
      policy_target: ``[A]`` the final policy target the run trains on.
      policy_target_kind: its name (``visits``, ``improved``, ``pbest``, ``chosen_action``).
      q_values: ``[A]`` Q(s, a) from the mover's view, or ``None``.
      pbest: ``[A]`` P(a is the best move) (curiosity), or ``None``.
      belief_mean: ``[A]`` the child belief's expected score, win 1 / draw 1/2 / loss 0
        (curiosity), or ``None``.
      belief_std: ``[A]`` that score's standard deviation under the belief, or ``None``.
      belief_expanded: ``[A]`` bool, children whose belief comes from search (the others
        hold the network's prior belief), or ``None``.
      chosen: the action the search plays, or ``None``.
      board: ``[size * size]`` int, 0 empty / 1 black / 2 white (Hex), or ``None``.
      board_size: the Hex board's side, or ``None``.
      run_name, iteration, num_simulations, rule, to_move: for the title.
      root_value: the search's root value from the mover's view.
      network_value: the network's value of the position from the mover's view.
      status: a note for the title (e.g. ``"the game is over"``), or ``""``.
    """

    action_names: Sequence[str]
    legal: np.ndarray
    prior: np.ndarray
    visits: np.ndarray
    policy_target: np.ndarray
    policy_target_kind: str = "visits"
    q_values: np.ndarray | None = None
    pbest: np.ndarray | None = None
    belief_mean: np.ndarray | None = None
    belief_std: np.ndarray | None = None
    belief_expanded: np.ndarray | None = None
    chosen: int | None = None
    board: np.ndarray | None = None
    board_size: int | None = None
    run_name: str = "run"
    iteration: int = 0
    num_simulations: int = 0
    rule: str = ""
    to_move: str = ""
    root_value: float = 0.0
    network_value: float = 0.0
    status: str = ""


def top_actions(view: RootView, top: int = 12) -> list[int]:
    """Up to ``top`` legal actions by visits, ties broken by policy target, then prior."""
    legal = np.flatnonzero(np.asarray(view.legal, bool))
    keys = (
        -np.asarray(view.prior)[legal],
        -np.asarray(view.policy_target)[legal],
        -np.asarray(view.visits)[legal],
    )
    return [int(a) for a in legal[np.lexsort(keys)][:top]]


def belief_score_moments(concentrations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the score under Beta/Dirichlet beliefs.

    Args:
      concentrations: ``[..., K]`` with K=2 (win, loss) or K=3 (win, draw, loss).

    Returns:
      ``(mean [...], std [...])`` of the score ``s . p`` (s = (1, 0) or (1, 1/2, 0)),
      ``p ~ Dirichlet(concentrations)``: Var = (E_a[s^2] - E_a[s]^2) / (a0 + 1), with
      E_a the average weighted by the concentrations and a0 their sum.
    """
    alpha = np.asarray(concentrations, np.float64)
    score = np.array([1.0, 0.0]) if alpha.shape[-1] == 2 else np.array([1.0, 0.5, 0.0])
    total = np.maximum(alpha.sum(-1), 1e-12)
    mean = alpha @ score / total
    second = alpha @ (score**2) / total
    std = np.sqrt(np.maximum(second - mean**2, 0.0) / (total + 1.0))
    return mean, std


def hex_centre(action: int, size: int) -> tuple[float, float]:
    """The centre of cell ``action = r * size + c``: rows shift right by half a cell."""
    row, col = divmod(int(action), size)
    return col + 0.5 * row, -ROW_HEIGHT * row


def _corner(centre: tuple[float, float], degrees: float) -> tuple[float, float]:
    angle = math.radians(degrees)
    return centre[0] + HEX_RADIUS * math.cos(angle), centre[1] + HEX_RADIUS * math.sin(angle)


def _edge(size: int, cells: Sequence[int], corners: Sequence[float]) -> np.ndarray:
    """``[P, 2]`` the zigzag of ``corners`` (degrees) along ``cells``, one board side."""
    return np.array([_corner(hex_centre(a, size), d) for a in cells for d in corners])


def draw_board(ax: Axes, view: RootView) -> None:
    """The Hex board of ``view`` on ``ax``, empty cells shaded by the policy target."""
    size = int(view.board_size)
    board = np.asarray(view.board).reshape(size * size)
    legal = np.asarray(view.legal, bool)
    target = np.asarray(view.policy_target, np.float64)[: size * size]
    norm = Normalize(0.0, max(float(target[legal[: size * size]].max(initial=0.0)), 1e-6))
    cmap = colormaps["Greens"]
    small = max(4.0, 11.0 - 0.45 * size)
    for action in range(size * size):
        centre = hex_centre(action, size)
        face = "#f4f0e6" if not legal[action] else cmap(0.08 + 0.8 * norm(target[action]))
        edge, width = ("red", 2.5) if action == view.chosen else ("0.35", 0.8)
        ax.add_patch(
            RegularPolygon(
                centre,
                6,
                radius=HEX_RADIUS,
                orientation=0.0,
                facecolor=face,
                edgecolor=edge,
                linewidth=width,
                zorder=2 if action == view.chosen else 1,
            )
        )
        stone = board[action]
        if stone != EMPTY:
            colour = "black" if stone == BLACK_STONE else "white"
            ax.add_patch(
                Circle(
                    centre,
                    radius=0.36,
                    facecolor=colour,
                    edgecolor="black",
                    linewidth=1.0,
                    zorder=3,
                )
            )
        elif legal[action] and view.visits[action] > 0:
            ax.text(
                *centre,
                f"{int(round(view.visits[action]))}",
                ha="center",
                va="center",
                fontsize=small,
                zorder=4,
            )
    rows, cols = range(size), range(size)
    sides = [  # black joins top and bottom, white left and right
        ("black", [c for c in cols], (150, 90, 30)),
        ("black", [(size - 1) * size + c for c in cols], (210, 270, 330)),
        ("0.6", [r * size for r in rows], (150, 210, 270)),
        ("0.6", [r * size + size - 1 for r in rows], (90, 30, 330)),
    ]
    for colour, cells, corners in sides:
        line = _edge(size, cells, corners)
        ax.plot(line[:, 0], line[:, 1], color=colour, linewidth=4, solid_capstyle="round")
    for col in cols:
        x, y = hex_centre(col, size)
        ax.text(x, y + 0.85, chr(ord("a") + col), ha="center", va="center", fontsize=small + 1)
    for row in rows:
        x, y = hex_centre(row * size, size)
        ax.text(x - 0.9, y, str(row + 1), ha="center", va="center", fontsize=small + 1)
    mappable = ScalarMappable(norm=norm, cmap=cmap)
    ax.figure.colorbar(
        mappable, ax=ax, shrink=0.6, pad=0.02, label=f"policy target ({view.policy_target_kind})"
    )
    ax.set_aspect("equal")
    ax.autoscale_view()
    ax.set_axis_off()
    ax.set_title(
        "black joins top-bottom, white left-right\nnumbers: visits; red outline: the searched move",
        fontsize=9,
        pad=18,
    )


def draw_probabilities(ax: Axes, view: RootView, actions: Sequence[int]) -> None:
    """Grouped bars over ``actions``: prior, visit share, policy target, P(best)."""
    visits = np.asarray(view.visits, np.float64)
    share = visits / max(float(visits.sum()), 1.0)
    target = np.asarray(view.policy_target, np.float64)
    target_label = f"policy target ({view.policy_target_kind})"
    series = [("network prior", view.prior, "prior"), ("visit share", share, "visits")]
    if view.pbest is not None and np.allclose(view.pbest, target):
        series.append((f"P(best) = {target_label}", view.pbest, "pbest"))
    else:
        series.append((target_label, target, "target"))
        if view.pbest is not None:
            series.append(("P(best)", view.pbest, "pbest"))
    x = np.arange(len(actions))
    width = 0.8 / len(series)
    highest = 0.0
    for i, (label, values, key) in enumerate(series):
        heights = np.asarray(values, np.float64)[list(actions)]
        ax.bar(
            x + (i - (len(series) - 1) / 2) * width,
            heights,
            width,
            label=label,
            color=SERIES_COLOURS[key],
        )
        highest = max(highest, float(heights.max(initial=0.0)))
    ax.set_ylabel("probability")
    ax.set_ylim(0.0, min(1.05, max(0.05, 1.3 * highest)))
    ax.legend(loc="upper right", fontsize=8, ncol=2, framealpha=0.9)
    ax.grid(axis="y", alpha=0.3)
    if not actions:
        ax.text(0.5, 0.5, "no legal moves", transform=ax.transAxes, ha="center")


def draw_values(ax: Axes, view: RootView, actions: Sequence[int]) -> None:
    """Each move's value: belief mean +- std on the score scale (curiosity), else Q."""
    x = np.arange(len(actions))
    idx = list(actions)
    if view.belief_mean is not None:
        mean = np.asarray(view.belief_mean, np.float64)[idx]
        std = (
            np.zeros_like(mean)
            if view.belief_std is None
            else np.asarray(view.belief_std, np.float64)[idx]
        )
        expanded = (
            np.ones(len(idx), bool)
            if view.belief_expanded is None
            else np.asarray(view.belief_expanded, bool)[idx]
        )
        for mask, label, face in [
            (expanded, "searched belief", "C4"),
            (~expanded, "network prior belief", "white"),
        ]:
            if mask.any():
                ax.errorbar(
                    x[mask],
                    mean[mask],
                    yerr=std[mask],
                    fmt="o",
                    color="C4",
                    markerfacecolor=face,
                    capsize=4,
                    label=f"{label} (mean ± std)",
                )
        ax.axhline(
            0.5 * (view.root_value + 1.0),
            color="0.4",
            linestyle="--",
            linewidth=1,
            label="root value (as score)",
        )
        ax.set_ylabel("expected score\n(win 1, draw ½, loss 0)")
        ax.set_ylim(-0.05, 1.05)
    else:
        visited = np.asarray(view.visits, np.float64)[idx] > 0 if idx else np.zeros(0, bool)
        if view.q_values is not None and visited.any():
            q = np.asarray(view.q_values, np.float64)[idx]
            ax.plot(x[visited], q[visited], "o", color="C1", label="Q(s, a), visited moves")
        ax.axhline(view.root_value, color="0.4", linestyle="--", linewidth=1, label="root value")
        ax.set_ylabel("value for the mover")
        ax.set_ylim(-1.05, 1.05)
    visits = np.asarray(view.visits, np.float64)
    ax.set_xticks(x, [f"{view.action_names[a]}\n{int(round(visits[a]))}" for a in idx])
    ax.set_xlabel(f"move / visits (top {len(idx)} by visits)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)


def explain_figure(view: RootView, top: int = 12) -> Figure:
    """The explain figure for ``view`` (Hex board panel when ``view.board`` is set)."""
    actions = top_actions(view, top)
    has_board = view.board is not None and view.board_size is not None
    fig = Figure(figsize=(14.0 if has_board else 9.0, 7.0), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 2 if has_board else 1, width_ratios=[1, 1.25] if has_board else None)
    if has_board:
        draw_board(fig.add_subplot(grid[:, 0]), view)
    column = 1 if has_board else 0
    bars = fig.add_subplot(grid[0, column])
    draw_probabilities(bars, view, actions)
    bars.tick_params(labelbottom=False)
    draw_values(fig.add_subplot(grid[1, column], sharex=bars), view, actions)
    chosen = "" if view.chosen is None else f", plays {view.action_names[view.chosen]}"
    status = f" ({view.status})" if view.status else ""
    fig.suptitle(
        f"{view.run_name}, iteration {view.iteration}: {view.num_simulations} simulations, "
        f"rule {view.rule}, {view.to_move} to move{status}\n"
        f"root value {view.root_value + 0.0:+.3f}, "  # + 0.0: no "-0.000"
        f"network value {view.network_value + 0.0:+.3f}{chosen}",
        fontsize=11,
    )
    return fig


def draw_explain_figure(view: RootView, path: str | os.PathLike[str], top: int = 12) -> Path:
    """Writes the explain figure for ``view`` to ``path`` (PNG); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = explain_figure(view, top)
    fig.savefig(path, dpi=110, format="png")
    return path


__all__ = [
    "RootView",
    "belief_score_moments",
    "draw_explain_figure",
    "explain_figure",
    "hex_centre",
    "top_actions",
]
