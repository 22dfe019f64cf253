"""Targets and losses on hand-made examples; outcome labelling on hand-played games."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest
from scipy import integrate, stats

from curiosity_search.nets import NetworkOutput
from curiosity_search.train import replay as replay_lib
from curiosity_search.train.losses import (
    compute_losses,
    dirichlet_entropy_bits,
    kl_dirichlet_bits,
)
from curiosity_search.train.search_fns import SearchResult
from curiosity_search.train.selfplay import SelfPlay
from curiosity_search.train.targets import label_outcomes, policy_target, record_positions


def _result(weights: list[list[float]], visits: list[list[float]]) -> SearchResult:
    weights_array = jnp.asarray(weights, jnp.float32)
    batch = weights_array.shape[0]
    return SearchResult(
        action=jnp.argmax(weights_array, axis=-1),
        action_weights=weights_array,
        root_value=jnp.full((batch,), 0.25),
        network_value=jnp.zeros((batch,)),
        visit_distribution=jnp.asarray(visits, jnp.float32),
    )


def test_policy_targets_tpt_cat_improved():
    result = _result([[0.1, 0.6, 0.3]], [[0.25, 0.25, 0.5]])
    action = jnp.array([2])
    np.testing.assert_allclose(policy_target("visits", result, action), [[0.25, 0.25, 0.5]])
    np.testing.assert_allclose(policy_target("chosen_action", result, action), [[0, 0, 1]])
    np.testing.assert_allclose(policy_target("improved", result, action), [[0.1, 0.6, 0.3]])
    np.testing.assert_allclose(policy_target("pbest", result, action), [[0.1, 0.6, 0.3]])
    with pytest.raises(ValueError):
        policy_target("nonsense", result, action)


# X (player to move first) plays 0, 1, 2 and wins along the top row.
_GAME = (0, 3, 1, 4, 2)


def test_outcome_labels_each_position_from_its_movers_view():
    env = pgx.make("tic_tac_toe")
    state = env.init(jax.random.key(3))
    players = []
    for action in _GAME:
        players.append(int(state.current_player))
        state = env.step(state, action)
    assert bool(state.terminated)
    length, horizon = len(_GAME), 9
    trajectory = replay_lib.Positions(
        observation=jnp.zeros((1, horizon, 1)),
        legal_action_mask=jnp.ones((1, horizon, 9), bool),
        policy_target=jnp.zeros((1, horizon, 9)),
        value_target=jnp.zeros((1, horizon)),
        belief_target=None,
        action_belief_target=None,
        action_belief_mask=None,
        player=jnp.asarray([players + [0] * (horizon - length)], jnp.int32),
        valid=jnp.arange(horizon)[None] < length,
    )
    labelled = label_outcomes(trajectory, state.rewards[None], value_kind="outcome")
    z = np.asarray(labelled.value_target[0, :length])
    np.testing.assert_array_equal(z, [1, -1, 1, -1, 1])  # the first mover won
    unchanged = label_outcomes(trajectory, state.rewards[None], value_kind="search_value")
    np.testing.assert_array_equal(np.asarray(unchanged.value_target), 0)


def _first_legal_search(params, key, states) -> SearchResult:
    """A stub search: all weight on the lowest legal action."""
    del params, key
    legal = states.legal_action_mask
    first = jnp.argmax(legal, axis=-1)
    weights = jax.nn.one_hot(first, legal.shape[-1])
    batch = legal.shape[0]
    return SearchResult(
        action=first.astype(jnp.int32),
        action_weights=weights,
        root_value=jnp.full((batch,), 0.5),
        network_value=jnp.zeros((batch,)),
        visit_distribution=weights,
    )


def _lowest_legal_selfplay(num_moves: int, **kwargs):
    """SelfPlay of 2 tic-tac-toe games with the lowest-legal stub, after ``num_moves``."""
    env = pgx.make("tic_tac_toe")
    settings = dict(
        env=env,
        search=_first_legal_search,
        num_moves=num_moves,
        sampling_moves=0,
        random_opening_moves=0,
        max_game_length=9,
        policy_target="visits",
        value_target="outcome",
    )
    selfplay = SelfPlay(**{**settings, **kwargs})
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 2))
    example = jax.tree.map(
        lambda x: x[0],
        record_positions(
            states,
            _first_legal_search(None, None, states),
            jnp.zeros(2, jnp.int32),
            policy_kind="visits",
            value_kind="outcome",
            action_beliefs=False,
        ),
    )
    replay = replay_lib.init_replay(example, 32)
    states, records = selfplay.init_games(jax.random.key(1), 2, example)
    states, records, replay, _, metrics = jax.jit(selfplay.play)(
        None, jax.random.key(2), states, records, replay
    )
    return states, records, replay, metrics


def test_selfplay_flushes_a_finished_game_with_outcomes():
    # Lowest-legal play: X 0, O 1, X 2, O 3, X 4, O 5, X 6 -> X wins on the 2-4-6 diagonal.
    states, records, replay, metrics = _lowest_legal_selfplay(7)
    assert float(metrics["games_finished"]) == 2 and float(metrics["illegal_moves"]) == 0
    assert float(metrics["mean_game_length"]) == 7
    assert float(metrics["first_mover_score"]) == 1.0
    assert int(replay.size) == 14
    z = np.asarray(replay.data.value_target[:14]).reshape(2, 7)  # slot = game * 7 + ply
    np.testing.assert_array_equal(z, [[1, -1, 1, -1, 1, -1, 1]] * 2)
    actions = np.argmax(np.asarray(replay.data.policy_target[:14]), -1).reshape(2, 7)
    np.testing.assert_array_equal(actions, [list(range(7))] * 2)
    assert np.asarray(records.needs_reset).all() and np.asarray(states.terminated).all()


def test_selfplay_truncated_games_are_draws():
    _, records, replay, metrics = _lowest_legal_selfplay(4, max_game_length=4)
    assert float(metrics["games_finished"]) == 2 and int(replay.size) == 8
    np.testing.assert_array_equal(np.asarray(replay.data.value_target[:8]), 0.0)
    assert np.asarray(records.needs_reset).all()


def test_selfplay_one_position_per_game():
    _, _, replay, metrics = _lowest_legal_selfplay(14, one_position_per_game=True)
    # Two rounds of 7-ply games in 2 slots: 4 games, one stored position each.
    assert float(metrics["games_finished"]) == 4 and int(replay.size) == 4
    z = np.asarray(replay.data.value_target[:4])
    moves = np.argmax(np.asarray(replay.data.policy_target[:4]), -1)
    np.testing.assert_array_equal(z, np.where(moves % 2 == 0, 1.0, -1.0))  # X moves: even


def _output(logits, value, belief=None) -> NetworkOutput:
    return NetworkOutput(
        policy_logits=jnp.asarray(logits, jnp.float32),
        value=jnp.asarray(value, jnp.float32),
        value_belief=None if belief is None else jnp.asarray(belief, jnp.float32),
    )


def _positions(policy, value, legal, valid, belief=None) -> replay_lib.Positions:
    policy = jnp.asarray(policy, jnp.float32)
    return replay_lib.Positions(
        observation=jnp.zeros(policy.shape[:1] + (1,)),
        legal_action_mask=jnp.asarray(legal, bool),
        policy_target=policy,
        value_target=jnp.asarray(value, jnp.float32),
        belief_target=None if belief is None else jnp.asarray(belief, jnp.float32),
        action_belief_target=None,
        action_belief_mask=None,
        player=jnp.zeros(policy.shape[:1], jnp.int32),
        valid=jnp.asarray(valid, bool),
    )


def test_policy_and_scalar_value_losses_by_hand():
    legal = [[True, True, True, False], [True, True, True, True]]
    batch = _positions([[1 / 3, 1 / 3, 1 / 3, 0], [1, 0, 0, 0]], [1.0, -1.0], legal, [True, False])
    output = _output([[0.0, 0.0, 0.0, 50.0], [9.0, 0, 0, 0]], [0.5, 0.0])
    loss, metrics = compute_losses(
        output, batch, policy_weight=1.0, value_weight=2.0, action_value_weight=1.0
    )
    # Only the valid first row counts; its illegal 4th logit is masked out.
    np.testing.assert_allclose(metrics["policy_loss"], math.log(3), rtol=1e-6)
    np.testing.assert_allclose(metrics["policy_entropy_bits"], math.log2(3), rtol=1e-6)
    np.testing.assert_allclose(metrics["value_loss"], 0.25, rtol=1e-6)
    np.testing.assert_allclose(loss, math.log(3) + 0.5, rtol=1e-6)


def test_belief_value_loss_for_outcomes_is_predictive_nll_in_bits():
    legal = [[True, True]] * 2
    batch = _positions([[1, 0], [1, 0]], [1.0, -1.0], legal, [True, True])
    output = _output([[0, 0], [0, 0]], [0.0, 0.5], belief=[[1.0, 1.0], [3.0, 1.0]])
    _, metrics = compute_losses(
        output, batch, policy_weight=1.0, value_weight=1.0, action_value_weight=1.0
    )
    # Beta(1,1): P(win) = 1/2 -> 1 bit. Beta(3,1), loss: P(loss) = 1/4 -> 2 bits.
    np.testing.assert_allclose(metrics["value_loss"], 1.5, rtol=1e-6)
    # Differential entropies: Beta(1,1) = 0 bits; Beta(3,1) from scipy.
    expected = (0.0 + stats.beta(3, 1).entropy() / math.log(2)) / 2
    np.testing.assert_allclose(metrics["value_entropy_bits"], expected, rtol=1e-5)


def test_belief_value_loss_for_search_beliefs_is_kl_in_bits():
    legal = [[True, True]]
    batch = _positions([[1, 0]], [0.0], legal, [True], belief=[[2.0, 5.0]])
    same = _output([[0, 0]], [0.0], belief=[[2.0, 5.0]])
    _, metrics = compute_losses(same, batch, policy_weight=1, value_weight=1, action_value_weight=1)
    np.testing.assert_allclose(metrics["value_loss"], 0.0, atol=1e-5)


def test_kl_and_entropy_match_quadrature():
    target, predicted = stats.beta(2.0, 5.0), stats.beta(3.0, 1.5)

    def integrand(x):
        return target.pdf(x) * (target.logpdf(x) - predicted.logpdf(x))

    expected_kl = integrate.quad(integrand, 0, 1)[0] / math.log(2)
    got = kl_dirichlet_bits(jnp.array([2.0, 5.0]), jnp.array([3.0, 1.5]))
    np.testing.assert_allclose(got, expected_kl, rtol=1e-4)
    np.testing.assert_allclose(kl_dirichlet_bits(jnp.ones(3) * 2, jnp.ones(3) * 2), 0, atol=1e-6)
    alpha = np.array([1.5, 2.0, 4.0])
    np.testing.assert_allclose(
        dirichlet_entropy_bits(jnp.asarray(alpha)),
        stats.dirichlet(alpha).entropy() / math.log(2),
        rtol=1e-5,
    )
    np.testing.assert_allclose(dirichlet_entropy_bits(jnp.ones(3)), -1.0, rtol=1e-5)  # log2(1/2)
