"""The late-game optimal-move rate end to end: the position set, a player backed by the
judge (which must score 100%), the sweep's evaluation columns, the in-training
evaluation on 5x5, and the figure."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_fixtures import BASE, TINY_HEX

from curiosity_search.config import load_config
from curiosity_search.envs import make
from curiosity_search.envs.late_game import LateGameJudge, bitboards_from_states
from curiosity_search.eval.evaluation import (
    EvalPlan,
    evaluate_point,
    late_game_set,
    plan_from_dict,
)
from curiosity_search.eval.late_game import build_late_game_set, play_out
from curiosity_search.eval.late_game_player import late_game_player
from curiosity_search.eval.players import GameSpec, random_player

HEX5 = GameSpec("hex", {"size": 5, "swap": False})


@pytest.fixture(scope="module")
def env5():
    return make("hex", size=5, swap=False)


@pytest.fixture(scope="module")
def late5(env5):
    """Positions with 10 empty cells from 48 random games and 48 random self-play games."""
    return build_late_game_set(jax.random.key(0), env5, reference=random_player(), games=48,
                               judge=LateGameJudge(5, max_empty=10, cache=False))


def test_late_game_set_holds_won_positions_with_e_empty_cells(late5):
    assert late5.size > 20 and late5.empty == 10
    counts = late5.counts()
    assert counts["random"] > 0 and counts["reference"] > 0
    assert late5.describe_source() == "random play + self-play of random"
    empties = (np.asarray(late5.positions._x.board) == 0).sum(axis=1)
    assert (empties == 10).all()
    assert late5.winning.any(axis=1).all() and not late5.winning[:, 25].any()
    # every recorded winning move is legal, and the judge agrees position by position
    legal = np.asarray(late5.positions.legal_action_mask)
    assert not (late5.winning & ~legal).any()
    black, white, to_move, _ = bitboards_from_states(late5.positions)
    judge = LateGameJudge(5, max_empty=10, cache=False)
    for i in range(0, late5.size, 7):
        win, moves = judge.solve(black[i], white[i], int(to_move[i]))
        assert win and [c for c in range(25) if (moves >> c) & 1] == list(
            np.nonzero(late5.winning[i])[0])


def test_a_judge_backed_player_keeps_every_win_and_converts_it(late5, env5):
    perfect = late_game_player(random_player(), 5, 10)
    assert late5.rate(perfect.apply, perfect.params, jax.random.key(1)) == 1.0
    rand = random_player()
    assert late5.rate(rand.apply, rand.params, jax.random.key(1)) < 1.0
    outcome = play_out(jax.random.key(2), perfect, rand, env5, late5.positions)
    assert (outcome == 1).all()
    assert perfect.apply.override.calls > 0


def test_plan_and_evaluation_rows_carry_the_late_game_columns(env5):
    plan = plan_from_dict({"late_game_games": 16, "reference": ["random"]})
    assert plan.late_game_games == 16
    assert late_game_set(plan, GameSpec("hex", {"size": 4, "swap": False}), make(
        "hex", size=4, swap=False), []) is None
    assert late_game_set(EvalPlan(late_game_games=0), HEX5, env5, []) is None
    reference = random_player()
    late = late_game_set(plan, HEX5, env5, [(reference, True)])
    assert late is not None and late.empty == 14

    def first_legal(params, key, states):
        del params, key
        return jnp.argmax(states.legal_action_mask, axis=-1).astype(jnp.int32)

    rows = evaluate_point(
        jax.random.key(0), params=(), act_fn=lambda sims: first_legal, env=env5,
        opponents=[(reference, True)], plan=EvalPlan(games=2, late_game_games=16),
        simulations=(0,), iteration=1, train_flops=1.0, wall_time_s=1.0,
        labels={"run": "r"}, late_game=late,
    )
    (row,) = rows
    assert row["late_game_positions"] == late.size and row["late_game_empty_cells"] == 14
    assert 0.0 <= row["late_game_rate"] <= 1.0
    assert row["late_game_source"] == "random play + self-play of random"
    expected = late.keeps_win(np.asarray(first_legal((), None, late.positions))).mean()
    assert math.isclose(row["late_game_rate"], float(expected))


def test_in_training_late_game_evaluation_on_5x5():
    from curiosity_search.train.solver_eval import (
        LATE_EMPTY_KEY,
        LATE_POSITIONS_KEY,
        LATE_RAW_KEY,
        LATE_SEARCH_KEY,
        LateGameEvaluation,
        make_solver_evaluation,
    )
    from curiosity_search.train.trainer import build_trainer

    cfg = load_config(BASE, [*TINY_HEX, "env.size=5", "eval.num_positions=24"])
    trainer = build_trainer(cfg)
    evaluation = make_solver_evaluation(cfg, trainer)
    assert isinstance(evaluation, LateGameEvaluation)
    params = trainer.init(jax.random.key(0)).params
    results = evaluation(params, 3)
    assert results[LATE_EMPTY_KEY] == 14 and results[LATE_POSITIONS_KEY] > 0
    for key in (LATE_RAW_KEY, LATE_SEARCH_KEY):
        assert 0.0 <= results[key] <= 1.0
    assert results == evaluation(params, 3)  # a function of the seed and the iteration
    assert "late-game optimal-move rate (14 empty cells)" in evaluation.describe(results)
    off = load_config(BASE, [*TINY_HEX, "env.size=5", "eval.num_positions=0"])
    assert make_solver_evaluation(off, trainer) is None


def test_late_game_figure_from_evaluation_rows(tmp_path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from curiosity_search.plots.learning_curves import late_game_curves, late_game_figure

    rows = []
    for seed in (0, 1):
        for iteration in (1, 2, 3):
            for role in ("apprentice", "expert"):
                for opponent in ("reference", "random"):  # the rate repeats per opponent
                    rows.append({
                        "run": f"hex5-gumbel-seed{seed}", "algorithm": "gumbel",
                        "board_size": "5", "role": role, "iteration": str(iteration),
                        "train_flops": str(1e12 * iteration), "wall_time_s": "1",
                        "player_b": opponent, "late_game_rate": str(0.8 + 0.05 * iteration),
                        "late_game_positions": "300", "late_game_empty_cells": "14",
                        "late_game_source": "random play + self-play of reference:hex5@64",
                    })
    rows.append({"run": "hex3-gumbel-seed0", "role": "expert", "iteration": "1"})  # no column
    curves = late_game_curves(rows)
    assert len(curves) == 6 and {c["runs"] for c in curves} == {2}
    assert math.isclose(curves[-1]["late_game_rate"], 0.95)
    late_game_figure(plt, rows, tmp_path)
    assert (tmp_path / "late_game_rate_vs_flops.png").stat().st_size > 5000
    with open(tmp_path / "late_game_rate_vs_flops.png", "rb") as handle:
        assert handle.read(4) == b"\x89PNG"
