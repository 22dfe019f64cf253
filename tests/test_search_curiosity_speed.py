"""The curiosity search's speed-ups are exact: prefix sums, compaction, compacted backups."""

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.curiosity import CuriosityOptions, curiosity_policy, score_cdf
from curiosity_search.curiosity.compaction import compacted_map, default_slots
from curiosity_search.testing.curiosity_reference import BeliefHashModel


def test_prefix_sum_is_cumsum():
    x = jax.random.uniform(jax.random.PRNGKey(0), (3, 5, 22))
    np.testing.assert_allclose(score_cdf.prefix_sum(x), jnp.cumsum(x, axis=-1), rtol=1e-6)


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
    assert default_slots(64) == (8, 16, 32) and default_slots(3) == (1,)


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


def test_compacted_map_never_shows_fn_an_inactive_row():
    # Inactive rows hold garbage (NaN here; an unexpanded node's zeros in a search, which
    # sent the fast P(best) to its accurate fallback for the whole batch): fn must only
    # ever see active rows, in the full-batch branch and in padded slots alike.
    seen_nan = []

    def fn(x):
        jax.debug.callback(lambda bad: seen_nan.append(bool(bad)), jnp.any(jnp.isnan(x)))
        return 2.0 * x

    x = jnp.where(jnp.arange(8) < 5, jnp.arange(8.0), jnp.nan)  # rows 5-7 garbage
    mapped = jax.jit(lambda a: compacted_map(fn, a, x, slots=(2, 4)))
    for count in (1, 3, 5):  # padded 2-slot and 4-slot branches, then the full batch
        active = np.arange(8) < count
        out = np.asarray(mapped(jnp.asarray(active)))
        np.testing.assert_allclose(out[active], 2.0 * np.asarray(x)[active])
        assert np.all(out[~active] == 0.0)
    assert seen_nan and not any(seen_nan)


def test_chunked_compacted_map_runs_whole_chunks_of_active_rows_only():
    # chunk: fn sees only active rows (padding copies one), ceil(active / chunk) calls of
    # chunk rows each, the same outputs as the slot sizes; also under a fallback.
    calls, seen_nan = [], []

    def fn(x):
        jax.debug.callback(lambda bad: seen_nan.append(bool(bad)), jnp.any(jnp.isnan(x)))
        jax.debug.callback(lambda: calls.append(x.shape[0]))
        return {"y": 2.0 * x, "z": x[:, None] * jnp.ones(3)}

    x = jnp.where(jnp.arange(10) % 4 == 3, jnp.nan, jnp.arange(10.0))  # rows 3, 7 garbage
    chunked = jax.jit(lambda a: compacted_map(fn, a, x, chunk=3))
    slotted = jax.jit(lambda a: compacted_map(fn, a, x, slots=(2, 4)))
    for active in (np.zeros(10, bool), np.arange(10) == 5, np.arange(10) % 4 != 3,
                   np.isin(np.arange(10), [0, 9])):
        calls.clear()
        out = chunked(jnp.asarray(active))
        assert calls == [3] * -(-int(active.sum()) // 3)
        for key, value in slotted(jnp.asarray(active)).items():
            np.testing.assert_array_equal(out[key], value)
    assert seen_nan and not any(seen_nan)

    def flagged(x):
        return {"y": 2.0 * x}, x > 5.0

    with_fallback = jax.jit(lambda a: compacted_map(
        flagged, a, jnp.arange(10.0), chunk=4, fallback=lambda x: {"y": 100.0 * x}))
    active = np.arange(10) % 2 == 0
    out = np.asarray(with_fallback(jnp.asarray(active))["y"])
    expected = np.where(np.arange(10) > 5, 100.0, 2.0) * np.arange(10) * active
    np.testing.assert_array_equal(out, expected)


def test_compacted_map_fallback_recomputes_the_flagged_rows_only():
    # fn flags rows it cannot serve; they (and only they, among the active rows) get the
    # fallback's value, in every slot branch; with no flagged row the fallback never runs.
    fallback_runs = []

    def fn(x):
        return {"y": 2.0 * x}, x > 5.0

    def fallback(x):
        jax.debug.callback(lambda: fallback_runs.append(1))
        return {"y": 100.0 * x}

    x = jnp.arange(8.0)
    mapped = jax.jit(lambda a: compacted_map(fn, a, x, slots=(2, 4), fallback=fallback))
    for active in (np.arange(8) < 2, np.arange(8) < 4, np.arange(8) < 7, np.arange(8) % 3 == 0):
        fallback_runs.clear()
        out = np.asarray(mapped(jnp.asarray(active))["y"])
        expected = np.where(np.arange(8) > 5, 100.0, 2.0) * np.arange(8)
        np.testing.assert_allclose(out[active], expected[active])
        assert np.all(out[~active] == 0.0)
        assert bool(fallback_runs) == bool(np.any(active & (np.arange(8) > 5)))


@pytest.mark.parametrize("num_outcomes,traces", [(2, 1), (3, 2)])
def test_lazy_fill_holds_one_copy_of_the_accurate_pbest(num_outcomes, traces, monkeypatch):
    # K = 2, fast: the slot branches run the fast kernel only and one fallback pass holds
    # the accurate method (~40% of a curiosity search's compilation with a copy per
    # branch, as before). K = 3 has no fast kernel: a loop over chunks holds its one
    # copy (with slot sizes, one per branch: 4 here), and the loop traces fn once more
    # for its output shapes (no copy in the program). The same with the native CPU pass
    # (K = 2), whose flagged rows and other platforms share the one batched fill.
    from curiosity_search.bench.pbest_rows import without_native_passes
    from curiosity_search.curiosity import best_arm, nodes

    traced = []
    accurate_core = best_arm._accurate_core
    monkeypatch.setattr(best_arm, "_accurate_core",
                        lambda *args: traced.append(1) or accurate_core(*args))
    batch_size, num_actions = 64, 5  # slots 8, 16, 32 and the full batch: 4 branches
    model = BeliefHashModel(num_actions=num_actions, num_outcomes=num_outcomes, seed=3)
    root = model.root(batch_size, offset=0)
    tree = jax.eval_shape(lambda r: curiosity_policy(
        None, jax.random.PRNGKey(0), r, model.recurrent_fn, num_simulations=1,
        options=CuriosityOptions()).search_tree, root)
    tree = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), tree)
    for passes in (without_native_passes, contextlib.nullcontext):
        traced.clear()
        with passes():
            jax.eval_shape(lambda t: nodes.fill_prior_best(
                t, jnp.zeros(batch_size, jnp.int32), jnp.ones(batch_size, bool),
                options=CuriosityOptions()), tree)
        assert len(traced) == traces


# The default method in the default run; accurate (~40 s of compilation) with -m slow.
@pytest.mark.parametrize("pbest_method", [pytest.param("accurate", marks=pytest.mark.slow),
                                          "fast"])
def test_compacted_search_equals_full_batch_search(pbest_method):
    # Compaction changes which rows P(best) runs on, never its values: the trees match.
    batch_size, num_actions = 4, 5
    model = BeliefHashModel(num_actions=num_actions, seed=5, terminal_fraction=0.15)
    root = model.root(batch_size, offset=1)
    invalid = jnp.zeros((batch_size, num_actions), bool).at[1, 3].set(True)
    run = {
        slots: jax.jit(functools.partial(
            curiosity_policy, recurrent_fn=model.recurrent_fn, num_simulations=12,
            kappa=2.0, options=CuriosityOptions(pbest_method=pbest_method,
                                                compaction_slots=slots)))
        for slots in [(), (1, 2)]
    }
    full, compact = (run[s](None, jax.random.PRNGKey(4), root, invalid_actions=invalid)
                     for s in [(), (1, 2)])
    np.testing.assert_array_equal(full.search_tree.parents, compact.search_tree.parents)
    np.testing.assert_array_equal(full.search_tree.node_visits, compact.search_tree.node_visits)
    # Float32 rounding may differ by an ulp between batch shapes (beliefs reach ~1e2).
    for name in ["belief", "proven_score", "proven_length"]:
        np.testing.assert_allclose(getattr(full.search_tree.node_extras, name),
                                   getattr(compact.search_tree.node_extras, name),
                                   rtol=1e-6, atol=1e-6)

    def selection(out):  # each node's selection distribution, [B, N, A]
        cache = out.search_tree.node_extras.selection
        table = np.asarray(cache.table)
        columns = table / np.maximum(table.sum(-2, keepdims=True), 1e-30)
        p = np.einsum("bns,bnas->bna", np.asarray(cache.weights), columns)
        return p / np.maximum(p.sum(-1, keepdims=True), 1e-30)

    np.testing.assert_allclose(selection(full), selection(compact), atol=1e-6)
    np.testing.assert_allclose(full.action_weights, compact.action_weights, atol=1e-6)
