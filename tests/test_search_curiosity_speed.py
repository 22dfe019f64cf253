"""The curiosity search's speed-ups are exact: fast P(best) algebra, compaction, backups."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.search import best_arm_fast, score_cdf
from curiosity_search.search.compaction import compacted_map, default_slots
from curiosity_search.search.curiosity import curiosity_policy
from curiosity_search.search.curiosity_reference import BeliefHashModel


def test_prefix_sum_is_cumsum():
    x = jax.random.uniform(jax.random.PRNGKey(0), (3, 5, 22))
    np.testing.assert_allclose(score_cdf._prefix_sum(x), jnp.cumsum(x, axis=-1), rtol=1e-6)


def cell_best_probability(mass, middle):
    """The midpoint rule's P(best) from per-arm cell masses and midpoint CDFs [B, A, C]."""
    valid = jnp.ones(mass.shape[:-1], bool)
    terms = best_arm_fast.cell_terms(jnp.asarray(mass), jnp.asarray(middle), valid)
    return best_arm_fast.best_from_terms(*terms, valid)


def test_cell_best_probability_equals_others_product_form():
    # mass_a prod_{b != a} middle_b, summed over cells, with zero CDFs in some cells.
    rng = np.random.default_rng(0)
    mass = rng.dirichlet(np.ones(9), (4, 6)).astype(np.float32)  # [B, A, C]
    mass[:, :3, :4] = 0.0  # arms with no mass in the low cells: zero CDFs there
    mass /= mass.sum(-1, keepdims=True)
    upper = np.cumsum(mass, -1)
    middle = (upper - 0.5 * mass).astype(np.float32)
    expected = np.sum(mass * np.asarray(best_arm_fast.others_product(jnp.asarray(middle))), -1)
    got = np.asarray(cell_best_probability(mass, middle))
    # Same up to one positive factor per batch element.
    np.testing.assert_allclose(got / got.sum(-1, keepdims=True),
                               expected / expected.sum(-1, keepdims=True), atol=1e-6)


def test_cell_best_probability_ignores_per_arm_scale():
    # The fast path passes unnormalized per-arm masses and CDFs: scaling an arm's row of
    # both by a positive factor must not change the normalized result.
    rng = np.random.default_rng(1)
    mass = rng.dirichlet(np.ones(9), (4, 6)).astype(np.float32)
    mass[:, :2, :3] = 0.0
    middle = (np.cumsum(mass, -1) - 0.5 * mass).astype(np.float32)
    scale = rng.uniform(1.0, 22.0, (4, 6, 1)).astype(np.float32)
    base, scaled = (np.asarray(cell_best_probability(m, c))
                    for m, c in [(mass, middle), (mass * scale, middle * scale)])
    np.testing.assert_allclose(scaled / scaled.sum(-1, keepdims=True),
                               base / base.sum(-1, keepdims=True), atol=1e-6)


def test_compacted_map_matches_full_batch():
    def fn(x, y):
        return {"sum": jnp.sum(x, -1) + y, "x2": 2.0 * x}

    x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
    y = jnp.arange(8.0)
    full = fn(x, y)
    mapped = jax.jit(lambda a: compacted_map(fn, a, x, y, slots=(1, 2, 4), fill=-1.0))
    for pattern in [[], [0], [7], [2, 5], [0, 1, 7], [1, 2, 3, 4], [0, 2, 3, 4, 6], range(8)]:
        active = np.zeros(8, bool)
        active[list(pattern)] = True
        out = mapped(jnp.asarray(active))
        for key in full:
            expected = np.where(active.reshape((-1,) + (1,) * (full[key].ndim - 1)),
                                full[key], -1.0)
            np.testing.assert_allclose(out[key], expected, rtol=1e-6)
    assert default_slots(64) == (4, 8, 16, 24, 32, 40, 48, 56) and default_slots(3) == ()


def test_compacted_map_runs_fn_on_the_chosen_slots_only():
    # fn reports how many rows it was given: none without active rows, else the
    # smallest slot size holding them, or the whole batch.
    calls = []

    def fn(x):
        jax.debug.callback(lambda n: calls.append(int(n)), x.shape[0])
        return 2.0 * x

    x = jnp.arange(8.0)
    mapped = jax.jit(lambda a: compacted_map(fn, a, x, slots=(2, 4)))
    for count, rows in [(0, None), (1, 2), (2, 2), (3, 4), (5, 8), (8, 8)]:
        calls.clear()
        active = np.arange(8) < count
        jax.block_until_ready(mapped(jnp.asarray(active)))
        assert calls == ([] if rows is None else [rows])


@pytest.mark.parametrize("pbest_method", ["accurate", "fast"])
def test_compacted_search_equals_full_batch_search(pbest_method):
    # Compaction changes which rows P(best) runs on, never its values: the trees match.
    batch_size, num_actions = 4, 5
    model = BeliefHashModel(num_actions=num_actions, seed=5, terminal_fraction=0.15)
    root = model.root(batch_size, offset=1)
    invalid = jnp.zeros((batch_size, num_actions), bool).at[1, 3].set(True)
    run = {
        slots: jax.jit(functools.partial(
            curiosity_policy, recurrent_fn=model.recurrent_fn, num_simulations=12,
            kappa=2.0, pbest_method=pbest_method, compaction_slots=slots))
        for slots in [(), (1, 2)]
    }
    full, compact = (run[s](None, jax.random.PRNGKey(4), root, invalid_actions=invalid)
                     for s in [(), (1, 2)])
    np.testing.assert_array_equal(full.search_tree.parents, compact.search_tree.parents)
    np.testing.assert_array_equal(full.search_tree.node_visits, compact.search_tree.node_visits)
    # Float32 rounding may differ by an ulp between batch shapes (beliefs reach ~1e2).
    for name in ["belief", "best_cumulative", "proven_score"]:
        np.testing.assert_allclose(getattr(full.search_tree.node_extras, name),
                                   getattr(compact.search_tree.node_extras, name),
                                   rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(full.action_weights, compact.action_weights, atol=1e-6)
