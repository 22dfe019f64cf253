"""REINFORCE with a value baseline: gradient signs on a one-step game, and a bandit."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.train.reinforce import reinforce_loss

LEGAL = jnp.array([[True, True, True, False]])  # 3 legal moves, the last is illegal
WINNING_ACTION = jnp.array([1])


@functools.partial(jax.jit, static_argnames=("entropy_weight",))
def _step(logits, value, returns, baseline, entropy_weight=0.0):
    """One SGD step (lr 0.5) on the logits and value; returns the new ones and grads."""

    def loss(logits, value):
        return reinforce_loss(
            logits,
            LEGAL,
            WINNING_ACTION,
            returns,
            baseline,
            value,
            entropy_weight=entropy_weight,
        )[0]

    grad_logits, grad_value = jax.grad(loss, argnums=(0, 1))(logits, value)
    return logits - 0.5 * grad_logits, value - 0.5 * grad_value, grad_logits, grad_value


def _log_prob(logits):
    masked = jnp.where(LEGAL, logits, -jnp.inf)
    return jax.nn.log_softmax(masked)[0, WINNING_ACTION[0]]


@pytest.mark.parametrize("outcome, direction", [(1.0, 1.0), (-1.0, -1.0)])
def test_policy_gradient_sign(outcome, direction):
    logits = jnp.zeros((1, 4))
    new_logits, _, grad, _ = _step(logits, jnp.zeros(1), jnp.array([outcome]), jnp.zeros(1))
    change = float(_log_prob(new_logits) - _log_prob(logits))
    assert change * direction > 0
    assert grad[0, 3] == 0.0  # no gradient to an illegal action


def test_baseline_equal_to_return_gives_zero_policy_gradient():
    logits = jnp.array([[0.3, -0.2, 0.5, 1.0]])
    returns = jnp.array([0.7])
    _, _, grad_logits, grad_value = _step(logits, jnp.array([0.1]), returns, returns)
    np.testing.assert_allclose(grad_logits, 0.0, atol=1e-7)
    # The value head still regresses on the return: d/dv (v - z)^2 = 2 (v - z).
    np.testing.assert_allclose(grad_value, 2 * (0.1 - 0.7), rtol=1e-6)


def test_baseline_receives_no_gradient_and_entropy_bonus_flattens():
    def loss(baseline):
        return reinforce_loss(
            jnp.zeros((1, 4)), LEGAL, WINNING_ACTION, jnp.ones(1), baseline, jnp.zeros(1)
        )[0]

    assert jax.grad(loss)(jnp.array([0.3]))[0] == 0.0
    peaked = jnp.array([[3.0, 0.0, 0.0, 0.0]])
    returns = jnp.array([0.5])
    new_logits, _, _, _ = _step(peaked, jnp.zeros(1), returns, returns, entropy_weight=1.0)
    assert jnp.max(new_logits[0, :3]) - jnp.min(new_logits[0, :3]) < 3.0


def test_masked_positions_are_ignored_and_metrics_are_finite():
    logits = jnp.zeros((2, 4))
    legal = jnp.concatenate([LEGAL, LEGAL])
    loss, metrics = reinforce_loss(
        logits,
        legal,
        jnp.array([1, 2]),
        jnp.array([1.0, 50.0]),
        jnp.zeros(2),
        jnp.zeros(2),
        mask=jnp.array([True, False]),
    )
    np.testing.assert_allclose(metrics["policy_loss"], np.log(3.0), rtol=1e-6)
    np.testing.assert_allclose(metrics["value_loss"], 1.0, rtol=1e-6)
    np.testing.assert_allclose(metrics["entropy"], np.log(3.0), rtol=1e-6)
    assert all(bool(jnp.isfinite(v)) for v in metrics.values()) and jnp.isfinite(loss)


def test_learns_a_one_step_game():
    """Action 1 wins (+1), the others lose (-1): sampled play with a learned baseline."""
    rewards = jnp.array([-1.0, 1.0, -1.0, -1.0])

    def train_step(carry, key):
        logits, value = carry
        batch_logits = jnp.broadcast_to(logits, (64, 4))
        legal = jnp.broadcast_to(LEGAL, (64, 4))
        actions = jax.random.categorical(key, jnp.where(legal, batch_logits, -jnp.inf))
        returns = rewards[actions]

        def loss(logits, value):
            values = jnp.broadcast_to(value, (64,))
            return reinforce_loss(
                jnp.broadcast_to(logits, (64, 4)), legal, actions, returns, values, values
            )[0]

        grad_logits, grad_value = jax.grad(loss, argnums=(0, 1))(logits, value)
        return (logits - 0.5 * grad_logits, value - 0.1 * grad_value), None

    (logits, value), _ = jax.jit(lambda keys: jax.lax.scan(train_step, (jnp.zeros(4), 0.0), keys))(
        jax.random.split(jax.random.PRNGKey(0), 100)
    )
    probability = jax.nn.softmax(jnp.where(LEGAL[0], logits, -jnp.inf))
    assert probability[1] > 0.9
    assert float(value) > 0.0  # the baseline follows the improving return
