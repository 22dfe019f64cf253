"""The compiled iteration: traces once, finite metrics, legal self-play, resets, act fn."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_fixtures import tiny_trainer

from curiosity_search.train.state import TrainState

SLOW = pytest.mark.slow


@pytest.fixture(
    scope="module",
    params=[
        "gumbel",
        pytest.param("alphazero", marks=SLOW),
        pytest.param("exit", marks=SLOW),
        pytest.param("reinforce", marks=SLOW),
        pytest.param("curiosity", marks=SLOW),
    ],
)
def run(request):
    """A tiny trainer, and its state and metrics after 3 iterations."""
    chex.clear_trace_counter()
    extra = {
        "reinforce": ("search.num_simulations=0",),
        # Tic-tac-toe has draws; both outcome auxiliaries on, so that they are compiled.
        "curiosity": ("network.value_head=dirichlet", "train.outcome_loss_weight=0.5",
                      "train.action_outcome_loss_weight=0.25"),
    }.get(request.param, ())
    trainer = tiny_trainer(request.param, *extra)
    iteration = jax.jit(chex.assert_max_traces(trainer.iteration, n=1), donate_argnums=0)
    state = trainer.init(jax.random.key(0))
    history = []
    for i in range(3):
        state, metrics = iteration(state, jax.random.fold_in(jax.random.key(1), i))
        history.append(jax.device_get(metrics))
    return trainer, state, history


def test_iteration_traces_once_and_metrics_are_finite(run):
    trainer, state, history = run
    assert isinstance(state, TrainState)
    for metrics in history:
        for name, value in metrics.items():
            assert np.isfinite(value), name
    last = history[-1]
    assert last["iterations"] == 3
    assert last["positions"] == 3 * trainer.batch_size * trainer.selfplay.num_moves
    assert last["updates"] > 0 and last["replay_size"] > 0
    assert last["loss"] > 0 and last["grad_norm"] > 0
    if trainer.cfg.train.action_outcome_loss_weight > 0:
        assert last["action_outcome_loss"] > 0 and last["outcome_loss"] > 0


def test_selfplay_is_legal_and_resets_finished_games(run):
    trainer, state, history = run
    assert all(metrics["illegal_moves"] == 0 for metrics in history)
    # 18 moves per game slot with tic-tac-toe games of at most 9 plies: games restart.
    assert history[-1]["games"] >= trainer.batch_size
    records, games = state.records, state.games
    ended = np.asarray(games.terminated) | (np.asarray(records.ply) >= 9)
    np.testing.assert_array_equal(np.asarray(records.needs_reset), ended)
    assert (np.asarray(records.length) <= np.asarray(records.ply)).all()
    recorded = np.asarray(records.trajectory.valid).sum(axis=1)
    np.testing.assert_array_equal(recorded, np.asarray(records.length))
    # Every stored position is valid, with a proper policy target and a decided z.
    size = int(state.replay.size)
    data = jax.tree.map(lambda x: np.asarray(x[:size]), state.replay.data)
    assert data.valid.all()
    np.testing.assert_allclose(data.policy_target.sum(-1), 1.0, rtol=1e-5)
    assert not (data.policy_target * ~data.legal_action_mask).any()
    if data.played_action is not None:
        rows = np.arange(size)
        assert data.legal_action_mask[rows, data.played_action].all()
        assert set(np.unique(data.outcome)) <= {-1.0, 0.0, 1.0}
    if trainer.selfplay.value_target == "outcome":
        assert set(np.unique(data.value_target)) <= {-1.0, 0.0, 1.0}
    else:
        assert (np.abs(data.value_target) <= 1.0 + 1e-5).all()
    if trainer.selfplay.value_target == "search_belief":
        # Unresolved roots: a proper Dirichlet; proven roots: their exact outcome (zeros
        # allowed), flagged so that the loss treats them as exact.
        proven = data.belief_target_proven
        assert (data.belief_target[~proven] > 0).all()
        assert (data.belief_target >= 0).all() and (data.belief_target.sum(-1) > 0).all()
    if trainer.selfplay.action_beliefs:
        exact = data.action_belief_proven[..., None]
        assert (data.action_belief_target >= 0).all() and data.action_belief_mask.any()
        assert np.where(exact, 1.0, data.action_belief_target).min() > 0


@pytest.mark.parametrize("num_simulations", [0, 4])
def test_act_fn_plays_legal_moves(run, num_simulations):
    trainer, state, _ = run
    act = jax.jit(trainer.make_act_fn(num_simulations))
    states = jax.vmap(trainer.env.init)(jax.random.split(jax.random.key(5), 8))
    states = jax.vmap(trainer.env.step)(states, jnp.arange(8) % 9)
    actions = np.asarray(act(state.params, jax.random.key(6), states))
    legal = np.asarray(states.legal_action_mask)
    assert actions.shape == (8,) and legal[np.arange(8), actions].all()
