"""The explain figure from hand-made root statistics: no training, no search, no JAX
beyond pgx's Hex neighbourhood (the independent reference for the board geometry)."""

from __future__ import annotations

import math

import matplotlib.image
import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer

from curiosity_search.eval.explain_figure import (
    BLACK_STONE,
    WHITE_STONE,
    RootView,
    belief_score_moments,
    draw_explain_figure,
    explain_figure,
    hex_centre,
    top_actions,
)
from curiosity_search.htp.coords import action_to_cell

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _normalised(x: np.ndarray) -> np.ndarray:
    return x / x.sum()


def curiosity_view(size: int = 4) -> RootView:
    """A 4x4 Hex root after a1 (black), b2 (white): 14 legal cells, Dirichlet beliefs."""
    cells = size * size
    rng = np.random.default_rng(0)
    board = np.zeros(cells, int)
    board[0], board[size + 1] = BLACK_STONE, WHITE_STONE
    legal = board == 0
    visits = np.where(legal, rng.integers(0, 6, cells), 0).astype(float)
    pbest = _normalised(np.where(legal, rng.random(cells), 0.0))
    mean, std = belief_score_moments(rng.uniform(0.5, 6.0, (cells, 3)))
    return RootView(
        action_names=[action_to_cell(a, size) for a in range(cells)],
        legal=legal,
        prior=_normalised(np.where(legal, rng.random(cells), 0.0)),
        visits=visits,
        policy_target=pbest,
        policy_target_kind="pbest",
        q_values=np.zeros(cells),
        pbest=pbest,
        belief_mean=mean,
        belief_std=std,
        belief_expanded=visits > 0,
        chosen=int(np.argmax(pbest)),
        board=board,
        board_size=size,
        run_name="tiny_curiosity",
        iteration=3,
        num_simulations=int(visits.sum()),
        rule="curiosity",
        to_move="black",
        root_value=0.25,
        network_value=-0.1,
    )


def puct_view() -> RootView:
    """A tic-tac-toe-like root (9 actions, 2 illegal), Q values, no beliefs, no board."""
    legal = np.array([1, 1, 0, 1, 1, 1, 0, 1, 1], bool)
    visits = np.array([3, 0, 0, 9, 1, 0, 0, 2, 1], float)
    return RootView(
        action_names=[str(a) for a in range(9)],
        legal=legal,
        prior=_normalised(legal * np.arange(1.0, 10.0)),
        visits=visits,
        policy_target=visits / visits.sum(),
        policy_target_kind="visits",
        q_values=np.linspace(-0.8, 0.8, 9),
        chosen=3,
        run_name="ttt_puct",
        iteration=7,
        num_simulations=16,
        rule="puct",
        to_move="player 0",
        root_value=0.1,
        network_value=0.0,
    )


def legend_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts]


def test_curiosity_figure_shows_pbest_and_belief_spread(tmp_path):
    view = curiosity_view()
    fig = explain_figure(view)
    labels = legend_texts(fig)
    assert any("P(best)" in label for label in labels), labels
    assert any("mean ± std" in label for label in labels), labels
    errorbars = [c for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert errorbars, "the belief spread is drawn as error bars"
    assert "curiosity" in fig._suptitle.get_text() and "black to move" in fig._suptitle.get_text()
    assert len(fig.axes) == 4  # board, its colour bar, probabilities, values
    path = draw_explain_figure(view, tmp_path / "sub" / "curiosity.png")
    assert path.read_bytes()[:8] == PNG_MAGIC
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[2] in (3, 4) and image.shape[1] > image.shape[0] > 300


def test_puct_figure_has_bars_and_q_without_pbest(tmp_path):
    view = puct_view()
    fig = explain_figure(view, top=5)
    labels = legend_texts(fig)
    assert not any("P(best)" in label or "std" in label for label in labels), labels
    assert any(label.startswith("Q(s, a)") for label in labels), labels
    assert "policy target (visits)" in labels and "network prior" in labels
    assert len(fig.axes) == 2  # no board for non-Hex games
    bars, values = fig.axes
    assert len(bars.patches) == 3 * 5  # prior, visit share, target over the top 5 moves
    ticks = [t.get_text().split("\n")[0] for t in values.get_xticklabels()]
    assert ticks == ["3", "0", "7", "8", "4"]
    (q_line,) = [line for line in values.lines if line.get_label().startswith("Q")]
    assert len(q_line.get_xdata()) == 5  # all five top moves were visited
    path = draw_explain_figure(view, tmp_path / "puct.png")
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert matplotlib.image.imread(path).ndim == 3


def test_game_over_view_draws_the_board_alone(tmp_path):
    view = curiosity_view()
    zeros = np.zeros_like(view.prior)
    over = RootView(
        action_names=view.action_names,
        legal=np.zeros_like(view.legal),
        prior=zeros,
        visits=zeros,
        policy_target=zeros,
        board=view.board,
        board_size=view.board_size,
        status="the game is over",
    )
    assert top_actions(over) == []
    assert draw_explain_figure(over, tmp_path / "over.png").read_bytes()[:8] == PNG_MAGIC


def test_top_actions_by_visits_then_target_then_prior():
    view = puct_view()
    assert top_actions(view, top=9) == [3, 0, 7, 8, 4, 5, 1]  # 2 and 6 are illegal
    tied = RootView(
        action_names=list("abcd"),
        legal=np.ones(4, bool),
        prior=np.array([0.4, 0.3, 0.2, 0.1]),
        visits=np.zeros(4),
        policy_target=np.array([0.1, 0.1, 0.5, 0.3]),
    )
    assert top_actions(tied) == [2, 3, 0, 1]


@pytest.mark.parametrize("alpha", [(2.0, 5.0), (1.0, 1.0), (30.0, 3.0)])
def test_beta_score_moments_closed_form(alpha):
    a, b = alpha
    mean, std = belief_score_moments(np.array([a, b]))
    assert mean == pytest.approx(a / (a + b))
    assert std == pytest.approx(math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))))


def test_dirichlet_score_moments_match_sampling():
    alpha = np.array([[2.0, 1.0, 3.0], [0.5, 4.0, 0.5]])
    mean, std = belief_score_moments(alpha)
    samples = np.random.default_rng(1).dirichlet(alpha[0], 200_000) @ np.array([1.0, 0.5, 0.0])
    assert mean[0] == pytest.approx(samples.mean(), abs=3e-3)
    assert std[0] == pytest.approx(samples.std(), abs=3e-3)
    assert mean[1] == pytest.approx(0.5) and std[1] < std[0]


def test_board_geometry_matches_pgx_neighbours():
    from pgx._src.games.hex import _neighbour

    size = 4
    for action in range(size * size):
        x, y = hex_centre(action, size)
        near = {
            other
            for other in range(size * size)
            if other != action
            and math.isclose(math.dist((x, y), hex_centre(other, size)), 1.0, abs_tol=1e-9)
        }
        pgx = {int(n) for n in np.asarray(_neighbour(action, size)) if n >= 0}
        assert near == pgx, action_to_cell(action, size)
