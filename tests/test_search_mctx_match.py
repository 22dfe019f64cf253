"""puct_policy / gumbel_policy reproduce mctx's policies on the same inputs and key."""

import chex
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from curiosity_search.search import gumbel_policy, puct_policy, tree_nbytes
from curiosity_search.testing.stubs import HashModel

NUM_ACTIONS = 6
BATCH = 6


def _invalid_actions():
    invalid = np.zeros((BATCH, NUM_ACTIONS), np.float32)
    invalid[1, 2] = 1
    invalid[2, [0, 3, 5]] = 1
    invalid[3, 1:] = 1  # a single valid action
    return jnp.asarray(invalid)


def _assert_same(ours, theirs):
    ours_tree, theirs_tree = ours.search_tree, theirs.search_tree
    np.testing.assert_array_equal(ours_tree.node_visits, theirs_tree.node_visits)
    np.testing.assert_array_equal(ours_tree.children_visits, theirs_tree.children_visits)
    np.testing.assert_array_equal(ours_tree.children_index, theirs_tree.children_index)
    np.testing.assert_allclose(ours_tree.node_values, theirs_tree.node_values, atol=1e-6)
    np.testing.assert_allclose(ours_tree.children_values, theirs_tree.children_values, atol=1e-6)
    np.testing.assert_allclose(ours.action_weights, theirs.action_weights, atol=1e-6)
    np.testing.assert_array_equal(ours.action, theirs.action)
    for leaf in jax.tree.leaves((ours.action_weights, ours_tree.node_values)):
        assert np.all(np.isfinite(leaf))
    assert tree_nbytes(ours_tree) < tree_nbytes(theirs_tree)


# (discount, reward_scale, max_depth, num_simulations): two-player with rewards, and a
# discounted single-player case whose depth limit forces leaf re-evaluations.
CASES = [(-1.0, 0.3, None, 16), (0.9, 0.5, 2, 12)]


@pytest.mark.parametrize("discount, reward_scale, max_depth, num_simulations", CASES)
def test_policies_match_mctx(discount, reward_scale, max_depth, num_simulations):
    model = HashModel(NUM_ACTIONS, discount=discount, reward_scale=reward_scale, seed=1)
    root = model.root(BATCH, offset=7)
    invalid = _invalid_actions()
    common = dict(
        params=None,
        root=root,
        recurrent_fn=model.recurrent_fn,
        num_simulations=num_simulations,
        invalid_actions=invalid,
        max_depth=max_depth,
    )

    @jax.jit
    def run(key):
        return (
            puct_policy(rng_key=key, tie_break="random", **common),
            mctx.muzero_policy(rng_key=key, **common),
            gumbel_policy(rng_key=key, max_num_considered_actions=4, **common),
            mctx.gumbel_muzero_policy(rng_key=key, max_num_considered_actions=4, **common),
        )

    puct, muzero, gumbel, gumbel_muzero = run(jax.random.PRNGKey(5))
    _assert_same(puct, muzero)
    _assert_same(gumbel, gumbel_muzero)
    # Invalid root actions are never visited.
    visits = np.asarray(puct.search_tree.children_visits[:, 0])
    assert np.all(visits[np.asarray(invalid) > 0] == 0)
    assert np.all(np.asarray(gumbel.action_weights)[np.asarray(invalid) > 0] < 1e-6)


def test_no_recompilation_across_calls():
    model = HashModel(NUM_ACTIONS, seed=2)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(key, root):
        return (
            puct_policy(None, key, root, model.recurrent_fn, 4),
            gumbel_policy(None, key, root, model.recurrent_fn, 4),
        )

    for i in range(3):
        root = model.root(2, offset=10 * i)
        root = root.replace(value=root.value + i)
        puct, gumbel = run(jax.random.PRNGKey(i), root)
        assert np.all(np.isfinite(puct.action_weights))
        assert np.all(np.isfinite(gumbel.action_weights))
