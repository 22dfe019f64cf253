"""The jitted kernel builds the same trees as the slow plain-Python reference search."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.search import exit_policy, gumbel_policy, puct_policy
from curiosity_search.search.seq_halving import considered_visit_sequence
from curiosity_search.testing import search_reference as reference
from curiosity_search.testing.stubs import HashModel

NUM_ACTIONS = 5
BATCH = 4
NUM_SIMULATIONS = 14


def _invalid_actions():
    invalid = np.zeros((BATCH, NUM_ACTIONS), np.float32)
    invalid[1, [0, 4]] = 1
    invalid[3, 1:4] = 1
    return invalid


def _assert_same_tree(ours, b, ref_tree):
    n = len(ref_tree.nodes)
    np.testing.assert_array_equal(np.asarray(ours.node_visits[b, :n]), ref_tree.node_visits())
    np.testing.assert_array_equal(
        np.asarray(ours.children_index[b, :n]), ref_tree.children_index()
    )
    np.testing.assert_allclose(
        np.asarray(ours.node_values[b, :n]), ref_tree.node_values(), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("discount, max_depth", [(-1.0, None), (0.95, 3)])
def test_kernel_matches_reference(discount, max_depth):
    model = HashModel(NUM_ACTIONS, discount=discount, reward_scale=0.4, seed=3)
    root = model.root(BATCH, offset=11)
    invalid = _invalid_actions()
    common = dict(
        params=None,
        root=root,
        recurrent_fn=model.recurrent_fn,
        num_simulations=NUM_SIMULATIONS,
        invalid_actions=jnp.asarray(invalid),
        max_depth=max_depth,
    )

    @jax.jit
    def run(key):
        return {
            "muzero": puct_policy(rng_key=key, dirichlet_fraction=0.0, **common),
            "alphago": puct_policy(
                rng_key=key, dirichlet_fraction=0.0, formula="alphago", c_puct=2.0, **common
            ),
            "exit": exit_policy(rng_key=key, c_b=0.7, w_a=3.0, **common),
            "gumbel": gumbel_policy(rng_key=key, max_num_considered_actions=4, **common),
        }

    out = run(jax.random.PRNGKey(0))
    rules = {
        "muzero": functools.partial(reference.puct_rule, formula="muzero"),
        "alphago": functools.partial(reference.puct_rule, formula="alphago", c_puct=2.0),
        "exit": functools.partial(reference.uct_p_nn_rule, c_b=0.7, w_a=3.0),
    }
    for b in range(BATCH):
        args = (model.step, np.asarray(root.prior_logits[b]), float(root.value[b]), 11 + b,
                NUM_SIMULATIONS)
        for name, rule in rules.items():
            ref_tree, weights = reference.visit_policy(
                *args, rule=rule, invalid_actions=invalid[b], max_depth=max_depth
            )
            _assert_same_tree(out[name].search_tree, b, ref_tree)
            np.testing.assert_allclose(np.asarray(out[name].action_weights[b]), weights,
                                       atol=1e-6)
        gumbel = np.asarray(out["gumbel"].search_tree.extra_data.root_gumbel[b], np.float64)
        ref_tree, action, weights = reference.gumbel_policy(
            *args, gumbel=gumbel, max_num_considered_actions=4, invalid_actions=invalid[b],
            max_depth=max_depth,
        )
        _assert_same_tree(out["gumbel"].search_tree, b, ref_tree)
        assert int(out["gumbel"].action[b]) == action
        np.testing.assert_allclose(np.asarray(out["gumbel"].action_weights[b]), weights,
                                   atol=1e-5)


@pytest.mark.parametrize("m, n", [(1, 5), (2, 8), (4, 14), (16, 32), (5, 100), (16, 7)])
def test_halving_schedule_matches_reference(m, n):
    assert list(considered_visit_sequence(m, n)) == reference.halving_schedule(m, n)
