"""Thompson draws (curiosity/thompson.py) against the accurate P(best): drawing one
score per child must sample P(a is best) exactly, also in the regimes where a naive
draw in probability space ties (concentrations far below 1, Dirichlets at their draw
vertex). The search's use of them: tests/test_curiosity.py (kernel vs reference)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.curiosity import CuriosityOptions, best_arm_probability
from curiosity_search.curiosity.thompson import thompson_draw

DRAWS = 50_000
# Binomial standard error at most 0.5 / sqrt(DRAWS) = 0.0022; the accurate P(best) is
# within 0.01 of exact (tests/test_best_arm.py) and ~0.005 in practice.
TOLERANCE = 0.012


def _frequencies(concentrations: np.ndarray, valid: np.ndarray) -> np.ndarray:
    keys = jax.random.split(jax.random.PRNGKey(3), DRAWS)
    draw = jax.jit(jax.vmap(thompson_draw, in_axes=(0, None, None)))
    actions = draw(keys, jnp.asarray(concentrations, jnp.float32), jnp.asarray(valid))
    return np.asarray(jax.nn.one_hot(actions, concentrations.shape[-2]).mean(axis=0))


def _rows(num_outcomes: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    random = rng.dirichlet(np.ones(num_outcomes), (2, 5)) * rng.uniform(1, 16, (2, 5, 1))
    if num_outcomes == 2:  # concentrations far below 1: p within e^-100 of 0 or 1
        special = np.array([[0.01, 0.02], [0.02, 0.01], [0.005, 0.005], [0.3, 0.01],
                            [0.01, 0.4]])
    else:  # the draw vertex: every score within ~e^-100 of 1/2
        special = np.array([[1e-3, 12.0, 1e-3], [2e-3, 9.0, 1e-3], [1e-3, 15.0, 3e-3],
                            [5e-3, 4.0, 1e-3], [1e-3, 8.0, 1e-3]])
    return np.concatenate([random, special[None]], axis=0)


@pytest.mark.parametrize("num_outcomes", [2, 3])
def test_draw_frequencies_match_accurate_pbest(num_outcomes):
    rows = _rows(num_outcomes)
    valid = np.ones(rows.shape[:2], bool)
    valid[1, 3] = False  # a masked arm is never drawn and takes no probability
    frequency = _frequencies(rows, valid)
    # One compiled program (cached across runs), not the accurate path op by op.
    accurate = jax.jit(functools.partial(best_arm_probability, grid_size=21,
                                         method="accurate"))
    exact = np.asarray(accurate(jnp.asarray(rows, jnp.float32), jnp.asarray(~valid)))
    assert frequency[1, 3] == 0.0
    np.testing.assert_allclose(frequency, exact, atol=TOLERANCE)
    # The special row is not a tie broken by index: several of its arms take mass.
    assert np.sum(frequency[-1] > 0.02) >= 3


def test_draw_in_probability_space_would_tie():
    """Why the log space: at the draw vertex a draw of (w + d / 2) / total in float32
    mostly ties at 1/2, where the argmax returns the first tied arm."""
    rows = _rows(3)[-1:]
    log_gamma = jax.random.loggamma(jax.random.PRNGKey(0), jnp.asarray(rows, jnp.float32))
    gamma = jnp.exp(log_gamma)
    naive = (gamma[..., 0] + 0.5 * gamma[..., 1]) / jnp.sum(gamma, axis=-1)
    assert np.sum(np.asarray(naive) == 0.5) >= 3
    assert len(set(np.asarray(thompson_draw(
        jax.random.PRNGKey(1), jnp.broadcast_to(jnp.asarray(rows[0], jnp.float32),
                                                (64,) + rows.shape[1:]),
        jnp.ones((64, rows.shape[1]), bool)).tolist()))) > 1


def test_one_valid_arm_is_always_drawn():
    rows = jnp.asarray(_rows(2), jnp.float32)
    valid = jnp.zeros(rows.shape[:2], bool).at[:, 2].set(True)
    actions = thompson_draw(jax.random.PRNGKey(0), rows, valid)
    assert np.all(np.asarray(actions) == 2)


def test_selection_draw_option():
    assert CuriosityOptions().draws_thompson(3) and not CuriosityOptions().draws_thompson(2)
    assert CuriosityOptions(selection_draw="thompson").draws_thompson(2)
    assert not CuriosityOptions(selection_draw="table").draws_thompson(3)
    with pytest.raises(ValueError, match="selection_draw"):
        CuriosityOptions(selection_draw="gumbel")
