"""Arena: Wilson intervals, result bookkeeping, CSV tables, and matches with known outcomes."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from curiosity_search.envs import make
from curiosity_search.eval.arena import append_csv, play_match, read_csv
from curiosity_search.eval.match_result import summarize
from curiosity_search.eval.player_specs import parse_player
from curiosity_search.eval.players import GameSpec, mcts_player, random_player
from curiosity_search.eval.wilson import wilson_interval


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and low == pytest.approx(0.7225, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    # Narrows like 1 / sqrt(n) around the observed proportion.
    low, high = wilson_interval(300, 1000)
    assert low < 0.3 < high and high - low == pytest.approx(2 * 1.96 * (0.21 / 1000) ** 0.5, 0.01)


def test_summarize_counts_scores_and_colours() -> None:
    returns = np.array([1, 1, 0, -1, -1, -1])
    a_first = np.array([True, True, True, False, False, False])
    result = summarize("a", "b", returns, a_first, illegal_b=1)
    assert (result.wins, result.draws, result.losses, result.games) == (2, 1, 3, 6)
    assert result.score == pytest.approx(2.5 / 6)
    assert result.score_first == pytest.approx(2.5 / 3) and result.score_second == 0.0
    assert (result.ci_low, result.ci_high) == pytest.approx(wilson_interval(2.5, 6))
    assert result.to_row()["illegal_b"] == 1 and "score" in result.summary()


def test_append_csv_keeps_header_and_rejects_new_columns(tmp_path) -> None:
    path = tmp_path / "t" / "results.csv"
    append_csv(path, [{"a": 1, "b": 2}])
    append_csv(path, [{"a": 3}])
    assert read_csv(path) == [{"a": "1", "b": "2"}, {"a": "3", "b": ""}]
    with pytest.raises(ValueError, match=r"\['c'\]"):
        append_csv(path, [{"a": 1, "c": 2}])


def test_random_match_bookkeeping_tic_tac_toe() -> None:
    env = make("tic_tac_toe")
    result = play_match(
        jax.random.key(0), random_player(), random_player(), env, 24, opening_moves=2
    )
    assert result.games == 24 and result.wins + result.draws + result.losses == 24
    assert result.truncated == 0 and result.illegal_a == result.illegal_b == 0
    assert 0.0 <= result.ci_low <= result.score <= result.ci_high <= 1.0


def _solver_or_skip(game: GameSpec):
    try:
        return parse_player("solver", game)
    except NotImplementedError:
        pytest.skip("envs.solve is not available yet")


def test_perfect_solver_never_loses_as_first_player_hex3() -> None:
    game = GameSpec("hex", {"size": 3, "swap": False})
    env = game.make_env()
    solver = _solver_or_skip(game)
    result = play_match(jax.random.key(1), solver, random_player(), env, 32)
    assert result.score_first == 1.0  # first player wins 3x3 Hex; the solver never slips
    assert result.illegal_a == 0 and result.draws == 0
    # Solver against itself: the first mover always wins, so exactly 0.5 over both colours.
    self_play = play_match(jax.random.key(2), solver, solver, env, 16, opening_moves=0)
    assert (self_play.score_first, self_play.score_second, self_play.score) == (1.0, 0.0, 0.5)


@pytest.mark.slow
def test_rollout_mcts_beats_random_hex3() -> None:
    env = make("hex", size=3, swap=False)
    result = play_match(jax.random.key(3), mcts_player(env, 32), random_player(), env, 32)
    assert result.score > 0.8 and result.illegal_a == 0


def test_player_spec_errors_name_the_allowed_specs() -> None:
    game = GameSpec("hex", {"size": 3, "swap": False})
    for bad in ("rnd", "mcts:x", "mcts:0", "checkpoint:", "htp:"):
        with pytest.raises(ValueError, match="mcts"):
            parse_player(bad, game)
    assert parse_player("random", game).name == "random"
    assert parse_player("mcts:8", game).name == "mcts:8"
