"""Bradley-Terry Elo: recovers known ratings, honest standard errors, clear failures."""

from __future__ import annotations

import numpy as np
import pytest

from curiosity_search.eval.elo import (
    PairResult,
    elo_difference,
    expected_score,
    fit_elo,
    results_from_rows,
)

TRUE = {"perfect": 0.0, "a": -100.0, "b": -300.0, "c": -600.0, "d": -50.0}


def _simulate(rng: np.random.Generator, games: int) -> list[PairResult]:
    names = sorted(TRUE)
    out = []
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            wins = rng.binomial(games, expected_score(TRUE[x] - TRUE[y]))
            out.append(PairResult(x, y, float(wins), games))
    return out


def test_recovers_synthetic_ratings_within_their_errors() -> None:
    fit = fit_elo(_simulate(np.random.default_rng(0), 4000), "perfect")
    assert fit.ratings["perfect"] == 0.0 and fit.stderr["perfect"] == 0.0
    for name, rating in TRUE.items():
        assert abs(fit.ratings[name] - rating) <= 4 * fit.stderr[name] + 1e-9
        if name != "perfect":
            assert 3 < fit.stderr[name] < 15
    assert fit.iterations < 50 and set(fit.players) == set(TRUE) - {"perfect"}


def test_standard_errors_match_the_spread_over_replications() -> None:
    rng = np.random.default_rng(1)
    fits = [fit_elo(_simulate(rng, 300), "perfect") for _ in range(150)]
    for name in ("a", "c"):
        spread = np.std([f.ratings[name] for f in fits])
        reported = np.mean([f.stderr[name] for f in fits])
        assert reported == pytest.approx(spread, rel=0.25)
        assert np.mean([f.ratings[name] for f in fits]) == pytest.approx(TRUE[name], abs=15)


def test_draws_count_half_and_pairs_add_up() -> None:
    even = fit_elo([PairResult("x", "y", 5.0, 10)], "y")  # 5 draws in 10 games
    assert even.ratings["x"] == pytest.approx(0.0, abs=1e-6)
    split = fit_elo([PairResult("x", "y", 30.0, 40), PairResult("y", "x", 10.0, 40)], "y")
    assert split.ratings["x"] == pytest.approx(elo_difference(0.75), abs=1.0)


def test_perfect_records_stay_finite_with_the_prior_and_fail_without() -> None:
    results = [
        PairResult("solver", "random", 100, 100),
        PairResult("mcts", "random", 100, 100),
        PairResult("solver", "mcts", 95, 100),
    ]
    fit = fit_elo(results, "solver")
    assert fit.ratings["mcts"] < 0 and fit.ratings["random"] < fit.ratings["mcts"]
    assert np.isfinite(fit.ratings["random"])
    with pytest.raises(ValueError, match="diverged"):
        fit_elo(results, "solver", prior_sigma=None)


def test_disconnected_players_and_missing_anchor_are_errors() -> None:
    results = [PairResult("a", "b", 5, 10), PairResult("c", "d", 5, 10)]
    with pytest.raises(ValueError, match=r"\['c', 'd'\]"):
        fit_elo(results, "a")
    with pytest.raises(ValueError, match="anchor 'z'"):
        fit_elo(results, "z")


def test_results_from_table_rows() -> None:
    rows = [{"player_a": "x", "player_b": "y", "wins": "3", "draws": "2", "games": "10"}]
    assert results_from_rows(rows) == [PairResult("x", "y", 4.0, 10)]
