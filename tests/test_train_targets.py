"""Targets and losses on hand-made examples; outcome labelling on hand-played games."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest
from scipy import integrate, stats

from curiosity_search.curiosity.beliefs import entropy_bits as dirichlet_entropy_bits
from curiosity_search.curiosity.beliefs import kl_dirichlet_bits
from curiosity_search.nets import NetworkOutput
from curiosity_search.train import replay as replay_lib
from curiosity_search.train.losses import belief_loss_bits, compute_losses, proven_nll_bits
from curiosity_search.train.search_fns import SearchResult
from curiosity_search.train.selfplay import SelfPlay, choose_action
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


@pytest.mark.parametrize("temperature", [1.0, 1 / 3])
def test_choose_action_samples_the_weights_at_a_power_temperature(temperature):
    # Frequencies of 40,000 sampled moves against weights ** (1 / T), renormalised over
    # the legal moves; move 3 is illegal despite its weight, move 4 has weight 0.
    weights = [0.5, 0.3, 0.15, 0.05, 0.0]
    legal = jnp.array([[True, True, True, False, True]] * 40_000)
    result = _result([weights] * 40_000, [weights] * 40_000)
    sample = jnp.ones(40_000, bool)
    actions = jax.jit(choose_action)(jax.random.key(0), result, legal, sample, temperature)
    counts = np.bincount(np.asarray(actions), minlength=5) / 40_000
    powered = np.array([0.5, 0.3, 0.15, 0.0, 0.0]) ** (1 / temperature)
    expected = powered / powered.sum()
    np.testing.assert_allclose(counts, expected, atol=4 * math.sqrt(0.25 / 40_000))
    assert counts[3] == 0 and counts[4] == 0
    greedy = choose_action(jax.random.key(1), result, legal, ~sample, temperature)
    assert np.all(np.asarray(greedy) == 0)


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
            played_actions=kwargs.get("played_actions", False),
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


def test_selfplay_records_the_played_moves_when_asked():
    _, _, replay, _ = _lowest_legal_selfplay(7, played_actions=True)
    assert int(replay.size) == 14
    played = np.asarray(replay.data.played_action[:14]).reshape(2, 7)
    np.testing.assert_array_equal(played, [list(range(7))] * 2)
    _, _, replay, _ = _lowest_legal_selfplay(7)
    assert replay.data.played_action is None


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


def test_policy_min_root_value_trains_the_policy_only_where_the_search_is_not_losing():
    # Three valid positions with root values 0.5, -0.5 and 0.0; threshold 0 keeps the
    # first and the last. The policy loss is their mean cross-entropy; the masked
    # position's logits get no gradient, the value loss still counts every position.
    legal = [[True, True, True, False]] * 3
    targets = [[1, 0, 0, 0], [0, 1, 0, 0], [0.5, 0.5, 0, 0]]
    batch = _positions(targets, [0.5, -0.5, 0.0], legal, [True, True, True])
    logits = jnp.asarray([[1.0, 0.0, -1.0, 0.0], [0.0, 2.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]])

    def losses(logits, threshold):
        return compute_losses(_output(logits, [0.0, 0.0, 0.0]), batch, policy_weight=1.0,
                              value_weight=1.0, action_value_weight=0.0,
                              policy_min_root_value=threshold)

    log_p = np.asarray(jax.nn.log_softmax(logits[:, :3]))
    cross_entropy = -np.sum(np.asarray(targets)[:, :3] * log_p, axis=-1)
    _, metrics = losses(logits, 0.0)
    np.testing.assert_allclose(metrics["policy_loss"], (cross_entropy[0] + cross_entropy[2]) / 2,
                               rtol=1e-6)
    np.testing.assert_allclose(metrics["policy_trained_fraction"], 2 / 3, rtol=1e-6)
    np.testing.assert_allclose(metrics["value_loss"], (0.25 + 0.25 + 0.0) / 3, rtol=1e-6)
    grad = np.asarray(jax.grad(lambda x: losses(x, 0.0)[0])(logits))
    assert np.all(grad[1] == 0) and np.any(grad[0] != 0) and np.any(grad[2] != 0)
    # None (the default) trains on every position, as before.
    _, every = losses(logits, None)
    np.testing.assert_allclose(every["policy_loss"], cross_entropy.mean(), rtol=1e-6)
    assert "policy_trained_fraction" not in every


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


def _belief_batch(belief_target, proven, policy_target=((0.5, 0.5, 0.0),), outcome=None):
    n = len(belief_target)
    return replay_lib.Positions(
        observation=jnp.zeros((n, 1)),
        legal_action_mask=jnp.array([[True, True, False]] * n),
        policy_target=jnp.asarray(policy_target * n, jnp.float32)[:n],
        value_target=jnp.zeros(n),
        belief_target=jnp.asarray(belief_target, jnp.float32),
        belief_target_proven=jnp.asarray(proven),
        action_belief_target=None,
        action_belief_mask=None,
        player=jnp.zeros(n, jnp.int32),
        valid=jnp.ones(n, bool),
        outcome=None if outcome is None else jnp.asarray(outcome, jnp.float32),
    )


def _belief_output(belief, logits=((0.0, 0.0, 0.0),)):
    n = len(belief)
    belief = jnp.asarray(belief, jnp.float32)
    return NetworkOutput(policy_logits=jnp.asarray(logits * n, jnp.float32)[:n],
                         value=jnp.zeros(n), value_belief=belief)


def test_proven_targets_use_the_epsilon_interior_nll_in_bits():
    # A proven win (target = total * one-hot): -log2 Beta(1 - eps | a, b), finite.
    pred = [[6.0, 2.0]]
    _, metrics = compute_losses(_belief_output(pred), _belief_batch([[9.0, 0.0]], [True]),
                                policy_weight=0.0, value_weight=1.0, action_value_weight=0.0)
    eps = 1e-3
    x = 1 - eps + eps / 2
    expected = -stats.beta.logpdf(x, 6.0, 2.0) / math.log(2.0)
    assert math.isfinite(float(metrics["value_loss"]))
    np.testing.assert_allclose(metrics["value_loss"], expected, rtol=1e-4)
    np.testing.assert_allclose(proven_nll_bits(jnp.array([1.0, 0.0]), jnp.array(pred[0])),
                               expected, rtol=1e-4)
    # Its gradient is finite, pulls the mean to the vertex and the concentration up.
    def value_loss(b):
        return compute_losses(_belief_output(b), _belief_batch([[9.0, 0.0]], [True]),
                              policy_weight=0.0, value_weight=1.0,
                              action_value_weight=0.0)[1]["value_loss"]
    grad = np.asarray(jax.grad(value_loss)(jnp.asarray(pred)))
    assert np.all(np.isfinite(grad)) and grad[0, 0] < 0
    # An unproven target still gets the KL.
    _, metrics = compute_losses(_belief_output(pred), _belief_batch([[3.0, 4.0]], [False]),
                                policy_weight=0.0, value_weight=1.0, action_value_weight=0.0)
    np.testing.assert_allclose(metrics["value_loss"],
                               kl_dirichlet_bits(jnp.array([3.0, 4.0]), jnp.array(pred[0])),
                               rtol=1e-5)


@pytest.mark.parametrize("num_outcomes", [2, 3])
def test_belief_loss_matches_the_closed_form_kl_and_scipys_density_with_gradients(
        num_outcomes):
    # belief_loss_bits evaluates one cross-entropy for both kinds of row; here each row
    # is checked against the textbook formula it must equal: the closed-form Dirichlet
    # KL (beliefs.kl_dirichlet_bits) where unproven, scipy's -log density of the
    # epsilon-interior point where proven; and its gradient against that reference's.
    rng = np.random.default_rng(num_outcomes)
    shape = (64, num_outcomes)
    target = rng.exponential(4.0, shape) + 0.05
    proven = rng.random(64) < 0.4
    outcome = np.eye(num_outcomes)[rng.integers(0, num_outcomes, 64)]
    target = np.where(proven[:, None], 7.0 * outcome, target)  # exact beliefs: zero parts
    predicted = rng.exponential(5.0, shape) + 0.1
    eps = 1e-3
    point = (1 - eps) * outcome + eps / num_outcomes
    expected = np.where(
        proven,
        [-stats.dirichlet.logpdf(x / x.sum(), c) / math.log(2.0)
         for x, c in zip(point, predicted, strict=True)],
        np.asarray(kl_dirichlet_bits(jnp.asarray(np.where(proven[:, None], 1.0, target)),
                                     jnp.asarray(predicted))))
    got = belief_loss_bits(jnp.asarray(target, jnp.float32), jnp.asarray(proven),
                           jnp.asarray(predicted, jnp.float32))
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4)

    def reference(pred):
        kl = kl_dirichlet_bits(jnp.asarray(np.where(proven[:, None], 1.0, target),
                                           jnp.float32), pred)
        log_point = jnp.log(jnp.asarray(point, jnp.float32))
        nll = (jnp.sum(jax.scipy.special.gammaln(pred), -1)
               - jax.scipy.special.gammaln(jnp.sum(pred, -1))
               - jnp.sum((pred - 1.0) * log_point, -1)) / math.log(2.0)
        return jnp.sum(jnp.where(jnp.asarray(proven), nll, kl))

    pred = jnp.asarray(predicted, jnp.float32)
    got_grad = jax.grad(lambda q: jnp.sum(belief_loss_bits(
        jnp.asarray(target, jnp.float32), jnp.asarray(proven), q)))(pred)
    np.testing.assert_allclose(got_grad, jax.grad(reference)(pred), rtol=1e-4, atol=1e-5)
    assert np.all(np.isfinite(np.asarray(got_grad)))


def test_belief_losses_split_into_kl_and_proven_nll():
    # Position 0 unproven (a KL), position 1 a proven win (an NLL below 0: the predicted
    # Beta(30, 1) has density ~29 near 1). value_loss is their mean; the split says which
    # part is which, so a negative value_loss is not read as a negative KL.
    pred = [[3.0, 1.0], [30.0, 1.0]]
    batch = _belief_batch([[2.0, 2.0], [9.0, 0.0]], [False, True])
    children = jnp.array([[[2.0, 5.0], [9.0, 0.0], [1.0, 1.0]]] * 2)
    predicted_children = jnp.array([[[3.0, 3.0], [20.0, 1.0], [1.0, 1.0]]] * 2)
    batch = batch.replace(action_belief_target=children,
                          action_belief_mask=jnp.array([[True, True, False]] * 2),
                          action_belief_proven=jnp.array([[False, True, False]] * 2))
    output = _belief_output(pred).replace(action_beliefs=predicted_children)
    _, metrics = compute_losses(output, batch, policy_weight=0.0, value_weight=1.0,
                                action_value_weight=1.0)
    kl = float(kl_dirichlet_bits(jnp.array([2.0, 2.0]), jnp.array(pred[0])))
    nll = -stats.beta.logpdf(1 - 1e-3 + 1e-3 / 2, 30.0, 1.0) / math.log(2.0)
    assert nll < 0 < kl
    np.testing.assert_allclose(metrics["value_kl_bits"], kl, rtol=1e-5)
    np.testing.assert_allclose(metrics["value_proven_nll_bits"], nll, rtol=1e-4)
    np.testing.assert_allclose(metrics["value_loss"], (kl + nll) / 2, rtol=1e-4)
    np.testing.assert_allclose(metrics["proven_fraction"], 0.5)
    child_kl = float(kl_dirichlet_bits(jnp.array([2.0, 5.0]), jnp.array([3.0, 3.0])))
    child_nll = -stats.beta.logpdf(1 - 1e-3 + 1e-3 / 2, 20.0, 1.0) / math.log(2.0)
    np.testing.assert_allclose(metrics["action_value_kl_bits"], child_kl, rtol=1e-5)
    np.testing.assert_allclose(metrics["action_value_proven_nll_bits"], child_nll, rtol=1e-4)
    np.testing.assert_allclose(metrics["action_value_loss"], (child_kl + child_nll) / 2,
                               rtol=1e-4)


def test_concentration_logit_penalty_adds_the_mean_square_and_lifts_a_saturated_head():
    from curiosity_search.nets import BeliefBounds, bounded_belief

    bounds = BeliefBounds()  # floor 1, cap 16
    batch = _belief_batch([[2.0, 2.0], [1.0, 3.0]], [False, False])
    children = jnp.ones((2, 3, 2)) * 2.0
    batch = batch.replace(action_belief_target=children,
                          action_belief_mask=jnp.array([[True, True, False]] * 2),
                          action_belief_proven=jnp.zeros((2, 3), bool))

    def losses(value_t, child_t, weight):
        output = _belief_output(bounded_belief(jnp.zeros((2, 2)), value_t, bounds))
        output = output.replace(action_beliefs=bounded_belief(jnp.zeros((2, 3, 2)), child_t,
                                                              bounds))
        return compute_losses(output, batch, policy_weight=1.0, value_weight=1.0,
                              action_value_weight=1.0, logit_l2=weight,
                              belief_bounds=bounds)

    value_t = jnp.array([-15.0, 1.0])
    child_t = jnp.array([[-3.0, 2.0, 40.0]] * 2)  # the third action is illegal
    loss0, _ = losses(value_t, child_t, 0.0)
    loss1, metrics = losses(value_t, child_t, 0.01)
    expected_sq = (15.0 ** 2 + 1.0) / 2 + (9.0 + 4.0) / 2
    np.testing.assert_allclose(metrics["concentration_logit_sq"], expected_sq, rtol=5e-3)
    np.testing.assert_allclose(loss1 - loss0, 0.01 * expected_sq, rtol=5e-3)
    # At t = -15 the KL's own gradient has all but vanished; the penalty's lifts t.
    kl_slope = jax.grad(lambda v: losses(v, child_t, 0.0)[0])(value_t)[0]
    slope = jax.grad(lambda v: losses(v, child_t, 0.01)[0])(value_t)[0]
    assert abs(float(kl_slope)) < 1e-4 and float(slope) < -0.1
    with pytest.raises(ValueError, match="belief_bounds"):
        compute_losses(_belief_output([[2.0, 2.0]] * 2), batch, policy_weight=1.0,
                       value_weight=1.0, action_value_weight=1.0, logit_l2=0.01)


def test_belief_runs_report_every_term_in_bits_with_the_outcome_auxiliary():
    pred = [[3.0, 1.0]]
    batch = _belief_batch([[2.0, 2.0]], [False], outcome=[1.0])
    loss, metrics = compute_losses(_belief_output(pred), batch, policy_weight=1.0,
                                   value_weight=1.0, action_value_weight=0.0,
                                   outcome_weight=0.5)
    # Policy: uniform logits over 2 legal actions, target (1/2, 1/2): 1 bit.
    np.testing.assert_allclose(metrics["policy_loss"], 1.0, rtol=1e-5)
    np.testing.assert_allclose(metrics["policy_target_entropy_bits"], 1.0, rtol=1e-5)
    # Outcome auxiliary: -log2(3/4) for a win under Beta(3, 1).
    np.testing.assert_allclose(metrics["outcome_loss"], -math.log2(0.75), rtol=1e-5)
    np.testing.assert_allclose(
        loss, metrics["policy_loss"] + metrics["value_loss"] + 0.5 * metrics["outcome_loss"],
        rtol=1e-5)


def test_played_move_outcome_auxiliary_is_the_predictive_nll_of_that_move_in_bits():
    # Action beliefs Beta(1, 1), Beta(3, 1), Beta(1, 3); move 1 was played, the mover won:
    # -log2(3/4). The other moves' beliefs get no gradient from it.
    batch = _belief_batch([[2.0, 2.0]], [False], outcome=[1.0]).replace(
        played_action=jnp.array([1], jnp.int32))
    action_beliefs = jnp.array([[[1.0, 1.0], [3.0, 1.0], [1.0, 3.0]]])

    def losses(beliefs):
        output = _belief_output([[2.0, 2.0]]).replace(action_beliefs=beliefs)
        return compute_losses(output, batch, policy_weight=0.0, value_weight=0.0,
                              action_value_weight=0.0, action_outcome_weight=0.25)

    loss, metrics = losses(action_beliefs)
    np.testing.assert_allclose(metrics["action_outcome_loss"], -math.log2(0.75), rtol=1e-5)
    np.testing.assert_allclose(loss, 0.25 * metrics["action_outcome_loss"], rtol=1e-5)
    grad = np.asarray(jax.grad(lambda b: losses(b)[0])(action_beliefs))
    assert np.all(grad[0, [0, 2]] == 0) and grad[0, 1, 0] < 0 < grad[0, 1, 1]
    # A lost game under the same belief: -log2(1/4) = 2 bits.
    lost = compute_losses(_belief_output([[2.0, 2.0]]).replace(action_beliefs=action_beliefs),
                          batch.replace(outcome=jnp.array([-1.0])), policy_weight=0.0,
                          value_weight=0.0, action_value_weight=0.0,
                          action_outcome_weight=1.0)[1]
    np.testing.assert_allclose(lost["action_outcome_loss"], 2.0, rtol=1e-5)
    with pytest.raises(ValueError, match="played_action"):
        compute_losses(_belief_output([[2.0, 2.0]]).replace(action_beliefs=action_beliefs),
                       batch.replace(played_action=None), policy_weight=0.0,
                       value_weight=0.0, action_value_weight=0.0, action_outcome_weight=1.0)


def test_empty_replay_rows_give_finite_belief_losses_and_gradients():
    """While the replay is empty every sampled row is zeros with valid False: the losses
    and their gradients must stay finite (they are skipped, not poisoned)."""
    batch = _belief_batch([[0.0, 0.0]], [False])
    batch = batch.replace(valid=jnp.zeros(1, bool),
                          action_belief_target=jnp.zeros((1, 3, 2)),
                          action_belief_mask=jnp.zeros((1, 3), bool),
                          action_belief_proven=jnp.zeros((1, 3), bool))

    def loss(b):
        output = _belief_output(b).replace(action_beliefs=jnp.ones((1, 3, 2)) * b[:, None])
        return compute_losses(output, batch, policy_weight=1.0, value_weight=1.0,
                              action_value_weight=1.0, outcome_weight=1.0)[0]

    value, grad = jax.value_and_grad(loss)(jnp.array([[2.0, 3.0]]))
    assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad)))
