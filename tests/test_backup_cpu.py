"""The native CPU passes of a curiosity search (the backup levels and the root's in-place
incremental update, curiosity/backup_cpu.cc, and the lazy prior fill,
curiosity/prior_fill_cpu.cc) against the XLA programs they replace
(``backup._batched_levels``, ``backup._root_in_place``, ``nodes._batched_prior_fill``), which the
kernel-vs-reference tests check against the slow reference search: same trees, visit
counts, proofs; beliefs and selection rows to float32 rounding."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.bench.pbest_rows import without_native_passes
from curiosity_search.curiosity import CuriosityOptions, curiosity_policy, native_cpu
from curiosity_search.search.tree import ROOT_INDEX
from curiosity_search.testing.curiosity_reference import BeliefHashModel

pytestmark = pytest.mark.skipif(not native_cpu.native_available(),
                                reason="the native CPU library did not build")


def _lowered(options, *, batch_size, num_actions, num_simulations, log_total_range,
             terminal_fraction, native):
    """The search program on the hash model, lowered, and its arguments."""
    model = BeliefHashModel(num_actions=num_actions, num_outcomes=2, seed=3,
                            terminal_fraction=terminal_fraction,
                            log_total_range=log_total_range)
    invalid = np.zeros((batch_size, num_actions), bool)
    invalid[0, 1] = invalid[1, -1] = True
    policy = functools.partial(curiosity_policy, recurrent_fn=model.recurrent_fn,
                               num_simulations=num_simulations, kappa=2.5, options=options,
                               invalid_actions=jnp.asarray(invalid))
    args = (None, jax.random.PRNGKey(4), model.root(batch_size, offset=5))
    targets = (native_cpu.BACKUP_TARGET, native_cpu.PRIOR_FILL_TARGET)
    if options.pbest_updates == "incremental":
        targets += (native_cpu.ROOT_UPDATE_TARGET,)
    if native:
        lowered = jax.jit(policy).lower(*args)
        assert all(target in lowered.as_text() for target in targets)
        return lowered, args
    with without_native_passes():
        lowered = jax.jit(policy).lower(*args)
        assert not any(target in lowered.as_text() for target in targets)
        return lowered, args


def _search(options, **shape):
    lowered, args = _lowered(options, **shape)
    return lowered.compile()(*args).search_tree


@pytest.mark.parametrize("pbest_updates,log_total_range,terminal_fraction,two_player", [
    ("full", (-1.0, 3.5), 0.15, True),        # inside the fast envelope: all native
    # Many rows outside: trees fall back (slow; the test after this one checks the
    # fallback directly).
    pytest.param("full", (-1.0, 6.0), 0.15, True, marks=pytest.mark.slow),
    ("incremental", (-1.0, 3.5), 0.1, True),  # the root updated apart
    ("incremental", (-1.0, 6.0), 0.15, True),  # roots outside the envelope: rebuilds
    # No terminals, so no proofs: most root updates take the usual path (backup_cpu.cc,
    # UpdateRootUsual), which reads the cache's arms instead of gathering the children.
    ("incremental", (-1.0, 3.5), 0.0, True),
    pytest.param("full", (-1.0, 3.0), 0.15, False,  # one perspective
                 marks=pytest.mark.slow),
])
def test_native_levels_match_the_batched_walk(pbest_updates, log_total_range,
                                              terminal_fraction, two_player):
    options = CuriosityOptions(pbest_updates=pbest_updates, two_player=two_player)
    shape = dict(batch_size=6, num_actions=7, num_simulations=40,
                 log_total_range=log_total_range, terminal_fraction=terminal_fraction)
    native = _search(options, native=True, **shape)
    batched = _search(options, native=False, **shape)
    np.testing.assert_array_equal(native.children_index, batched.children_index)
    np.testing.assert_array_equal(native.node_visits, batched.node_visits)
    extras, expected = native.node_extras, batched.node_extras
    np.testing.assert_array_equal(extras.proven, expected.proven)
    np.testing.assert_array_equal(extras.proven_score, expected.proven_score)
    np.testing.assert_array_equal(extras.proven_length, expected.proven_length)
    np.testing.assert_allclose(extras.belief, expected.belief, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(extras.selection.table, expected.selection.table, atol=2e-5)
    np.testing.assert_array_equal(extras.selection.weights, expected.selection.weights)
    if pbest_updates == "incremental":  # the root's cache (nodes.CuriosityExtraData)
        root, expected_root = native.extra_data.root_selection, batched.extra_data.root_selection
        np.testing.assert_array_equal(root.arms_valid, expected_root.arms_valid)
        np.testing.assert_array_equal(root.current, expected_root.current)
        np.testing.assert_allclose(root.arms, expected_root.arms, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(root.aggregates.edges, expected_root.aggregates.edges,
                                   rtol=1e-5)
        # The stored terms are the fast kernel's, whose lowest sub-nodes divide by the
        # mass below the grid, a difference of sums near 1 (its rounding differs between
        # the two programs, and between a one-arm and a whole-row call of the XLA one):
        # compare the selection distribution they encode, P(best), as issue 11 bounds it.
        def selection(cache):
            table = np.asarray(cache.table, np.float64)
            columns = table / np.maximum(table.sum(axis=1, keepdims=True), 1e-30)
            probability = np.einsum("bs,bas->ba", np.asarray(cache.weights), columns)
            return probability / probability.sum(axis=-1, keepdims=True)

        np.testing.assert_allclose(selection(root), selection(expected_root), atol=1e-4)
    # The searches are not trivial: proofs above the leaves (where there are terminals)
    # and deep paths.
    has_children = np.any(np.asarray(native.children_index) >= 0, axis=-1)
    assert np.any(np.asarray(extras.proven) & has_children) == (terminal_fraction > 0)
    parents = np.asarray(native.parents)
    grandparents = np.take_along_axis(parents, np.maximum(parents, 0), axis=1)
    assert np.any(np.take_along_axis(parents, np.maximum(grandparents, 0), axis=1) > ROOT_INDEX)


@pytest.mark.parametrize("check_envelope", [True, False])
def test_a_node_outside_the_envelope_flags_its_tree_unless_unchecked(check_envelope):
    """A path through a node with a child outside the fast envelope: checked, that tree is
    flagged and untouched (for the batched walk), the others updated; unchecked
    (``bounded_beliefs``), no tree is flagged and the fast kernel computes that row."""
    options = CuriosityOptions()
    tree = _search(options, native=True, batch_size=3, num_actions=5, num_simulations=12,
                   log_total_range=(-1.0, 2.0), terminal_fraction=0.0)
    extras = tree.node_extras
    depth_two = np.asarray(tree.parents[:, :] > ROOT_INDEX)  # nodes two plies down or more
    leaf = np.argmax(depth_two, axis=1).astype(np.int32)  # [B], one such node per tree
    assert np.all(depth_two[np.arange(3), leaf])
    beliefs = np.asarray(extras.belief).copy()
    beliefs[0, leaf[0]] = [90.0, 10.0]  # total 100 > best_arm.FAST_MAX_TOTAL
    updated = (jnp.asarray(beliefs), tree.node_visits, extras.proven, extras.proven_score,
               extras.proven_length, extras.selection.weights, extras.selection.table)
    call = jax.jit(functools.partial(native_cpu.native_backup_levels, grid_size=21,
                                     two_player=True, root_apart=False,
                                     check_envelope=check_envelope))
    out = call(jnp.asarray(leaf), tree.parents, tree.children_index, extras.invalid,
               extras.value_belief, extras.action_beliefs, jnp.float32(2.5), *updated)
    *arrays, top_child, fallback = out
    visits = np.asarray(arrays[1]) - np.asarray(tree.node_visits)
    if check_envelope:
        np.testing.assert_array_equal(fallback, [True, False, False])
        for new, old in zip(arrays, updated, strict=True):
            np.testing.assert_array_equal(new[0], old[0])  # the flagged tree: untouched
        assert np.all(visits[0] == 0) and np.all(visits[1:, ROOT_INDEX] == 1)
    else:
        np.testing.assert_array_equal(fallback, [False, False, False])
        assert np.all(visits[:, ROOT_INDEX] == 1)
    parents = np.asarray(tree.parents)
    for b in range(3):  # top_child: the path's node whose parent is the root
        node = leaf[b]
        while parents[b, node] != ROOT_INDEX:
            node = parents[b, node]
        assert top_child[b] == node


@pytest.mark.parametrize("pbest_updates", ["full", "incremental"])
def test_bounded_beliefs_compile_no_fallback_and_change_nothing_inside_the_envelope(
        pbest_updates):
    """``bounded_beliefs`` (``search.pbest_fallback: false``) drops the accurate fallback
    from the program (no sort: the accurate grid's) and, where every belief is inside
    the fast envelope, gives the very same search as the checked program."""
    shape = dict(batch_size=6, num_actions=7, num_simulations=40, log_total_range=(-1.0, 3.5),
                 terminal_fraction=0.15, native=True)
    checked, checked_args = _lowered(CuriosityOptions(pbest_updates=pbest_updates), **shape)
    bounded, bounded_args = _lowered(
        CuriosityOptions(pbest_updates=pbest_updates, bounded_beliefs=True), **shape)
    checked_text, bounded_text = checked.as_text(), bounded.as_text()
    assert "stablehlo.sort" in checked_text and "stablehlo.sort" not in bounded_text
    assert len(bounded_text) < 0.8 * len(checked_text)
    expected = checked.compile()(*checked_args).search_tree
    tree = bounded.compile()(*bounded_args).search_tree
    for new, old in zip(jax.tree.leaves(tree), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(new, old)
