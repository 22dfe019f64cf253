"""Stub models with known answers: a bandit, a tree with fixed values, node extras."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.search import (
    RecurrentFnOutputWithExtras,
    RootFnOutputWithExtras,
    backup_values,
    exit_policy,
    gumbel_policy,
    puct_policy,
    search,
    walk_to_root,
)
from curiosity_search.testing.stubs import BanditModel

MEANS = (0.2, 0.8, 0.5, 0.1)
BEST = 1


def test_bandit_visits_concentrate_on_the_best_arm():
    model = BanditModel(MEANS)
    root = model.root(2)
    policies = {
        "muzero": functools.partial(puct_policy, dirichlet_fraction=0.0),
        "alphago": functools.partial(puct_policy, dirichlet_fraction=0.0, formula="alphago"),
        "exit": functools.partial(exit_policy, w_a=1.0),
        "gumbel": functools.partial(gumbel_policy, c_scale=1.0),
    }

    @jax.jit
    def run(key):
        return {
            name: policy(None, key, root, model.recurrent_fn, 64)
            for name, policy in policies.items()
        }

    for name, out in run(jax.random.PRNGKey(0)).items():
        visits = np.asarray(out.search_tree.summary().visit_counts)
        if name == "gumbel":  # sequential halving ends with two equally visited finalists
            assert np.all(visits[:, BEST] == visits.max(axis=-1)), visits
            assert np.all(np.asarray(out.action) == BEST)
        else:
            assert np.all(np.argmax(visits, axis=-1) == BEST), name
            assert np.all(visits[:, BEST] > 0.5 * 64), (name, visits)
        assert np.all(np.argmax(np.asarray(out.action_weights), axis=-1) == BEST), name
        q = np.asarray(out.search_tree.summary().qvalues)
        np.testing.assert_allclose(q[visits > 0], np.tile(MEANS, (2, 1))[visits > 0], atol=1e-6)


def _always_first(rng_key, tree, node_index, depth=None):
    return jnp.zeros((), jnp.int32)


def _chain_model(reward, discount):
    """Embedding = depth; the node at depth d has value d and reward `reward` on its edge."""

    def recurrent_fn(params, rng_key, action, depth):
        depth = depth + 1
        b = action.shape[0]
        out = RecurrentFnOutputWithExtras(
            reward=jnp.full((b,), reward),
            discount=jnp.full((b,), discount),
            prior_logits=jnp.zeros((b, 2)),
            value=depth.astype(jnp.float32),
            node_extras={"depth": depth, "deepest_below": depth},
        )
        return out, depth

    root = RootFnOutputWithExtras(
        prior_logits=jnp.zeros((1, 2)),
        value=jnp.zeros((1,)),
        embedding=jnp.zeros((1,), jnp.int32),
        node_extras={"depth": jnp.zeros((1,), jnp.int32),
                     "deepest_below": jnp.zeros((1,), jnp.int32)},
    )
    return root, recurrent_fn


def _deepest_below_backup(tree, leaf_index):
    """A custom backup: the mean-value backup plus an extra per-node statistic."""
    tree = backup_values(tree, leaf_index)

    def one(tree, leaf):
        def step(deepest, parent, child):
            return deepest.at[parent].max(deepest[child])

        return walk_to_root(step, tree.node_extras["deepest_below"], tree.parents, leaf)

    deepest = jax.vmap(one)(tree, leaf_index)
    return tree.replace(node_extras={**tree.node_extras, "deepest_below": deepest})


@pytest.mark.parametrize("reward, discount", [(0.5, -1.0), (0.25, 0.5)])
def test_fixed_value_chain_backups_are_exact(reward, discount):
    num_simulations = 5
    root, recurrent_fn = _chain_model(reward, discount)
    tree = jax.jit(
        functools.partial(
            search,
            root=root,
            recurrent_fn=recurrent_fn,
            root_action_selection_fn=_always_first,
            interior_action_selection_fn=_always_first,
            num_simulations=num_simulations,
            backup_fn=_deepest_below_backup,
            selection_rng="none",
        )
    )(None, jax.random.PRNGKey(0))

    # Simulation k creates the node at depth k (value k); node j sees the returns
    # G_j^k = sum_{i=j+1}^{k} discount^(i-j-1) reward + discount^(k-j) k for k > j.
    s = num_simulations
    for j in range(s + 1):
        returns = [j] + [
            sum(discount ** (i - j - 1) * reward for i in range(j + 1, k + 1))
            + discount ** (k - j) * k
            for k in range(j + 1, s + 1)
        ]
        assert int(tree.node_visits[0, j]) == s + 1 - j
        np.testing.assert_allclose(float(tree.node_values[0, j]), np.mean(returns), rtol=1e-6)
    np.testing.assert_array_equal(tree.node_extras["depth"][0], np.arange(s + 1))
    np.testing.assert_array_equal(tree.node_extras["deepest_below"][0], np.full(s + 1, s))
    np.testing.assert_allclose(
        float(tree.qvalues(jnp.zeros((1,), jnp.int32))[0, 0]),
        reward + discount * float(tree.node_values[0, 1]),
        rtol=1e-6,
    )
    np.testing.assert_array_equal(tree.children_index[0, :s, 0], np.arange(1, s + 1))
