"""Curiosity search: jitted kernel vs the slow reference, a bandit, proofs, finiteness."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.curiosity import (
    BeliefRecurrentFnOutput,
    BeliefRootFnOutput,
    CuriosityOptions,
    beliefs,
    curiosity_policy,
)
from curiosity_search.curiosity.nodes import AUTO_INCREMENTAL_ACTIONS
from curiosity_search.search.tree import UNVISITED
from curiosity_search.testing.curiosity_reference import (
    BeliefHashModel,
    kernel_selection_noise,
    reference_curiosity_search,
    tree_mismatches,
)


@pytest.mark.parametrize(
    "num_outcomes,belief_summary,max_depth,terminal_fraction,pbest_method,log_total_range,"
    "pbest_updates,selection_draw",
    [
        (2, "average", None, 0.3, "fast", (-1.0, 6.0), "full", "auto"),  # the defaults
        # In place: beliefs inside the fast envelope (updated in place, the root's cache
        # checked against a fresh build), and most rows outside it (rebuilt every time).
        (2, "average", 2, 0.3, "fast", (-1.0, 3.5), "incremental", "auto"),
        pytest.param(2, "average", None, 0.3, "fast", (-1.0, 6.0), "incremental", "auto",
                     marks=pytest.mark.slow),
        (2, "average", 3, 0.15, "accurate", (-1.0, 6.0), "full", "auto"),
        (2, "average", None, 0.3, "fast", (-1.0, 6.0), "full", "thompson"),
        (3, "average", None, 0.3, "fast", (-1.0, 6.0), "full", "auto"),  # K = 3 defaults
        pytest.param(3, "average", None, 0.3, "fast", (-1.0, 6.0), "full", "table",
                     marks=pytest.mark.slow),
        pytest.param(3, "moment_match", 2, 0.15, "accurate", (-1.0, 6.0), "full", "auto",
                     marks=pytest.mark.slow),
    ],
)
def test_kernel_matches_reference(num_outcomes, belief_summary, max_depth, terminal_fraction,
                                  pbest_method, log_total_range, pbest_updates,
                                  selection_draw):
    """Same trees, visit counts, beliefs and proofs as the plain-Python reference, which
    computes every P(best) afresh (the kernel updates K = 2 fast ones in place) and
    selects from the same uniforms or keys."""
    batch_size, num_actions, num_simulations = 3, 5, 14
    model = BeliefHashModel(num_actions=num_actions, num_outcomes=num_outcomes, seed=7,
                            terminal_fraction=terminal_fraction,
                            log_total_range=log_total_range)
    root = model.root(batch_size, offset=3)
    invalid = np.zeros((batch_size, num_actions), bool)
    invalid[0, 2] = True
    key = jax.random.PRNGKey(11)
    options = CuriosityOptions(pbest_method=pbest_method, belief_summary=belief_summary,
                               pbest_updates=pbest_updates, selection_draw=selection_draw)
    policy = jax.jit(functools.partial(
        curiosity_policy, recurrent_fn=model.recurrent_fn, num_simulations=num_simulations,
        max_depth=max_depth, kappa=2.5, options=options))
    out = policy(None, key, root, invalid_actions=jnp.asarray(invalid))
    tree = out.search_tree
    noise = kernel_selection_noise(key, batch_size, num_simulations,
                                   max_depth or num_simulations,
                                   keys=options.draws_thompson(num_outcomes))
    unused = proven_interior = 0
    for b in range(batch_size):
        nodes = reference_curiosity_search(
            model.step, np.asarray(root.value_belief[b]), np.asarray(root.action_beliefs[b]),
            int(root.embedding[b]), num_simulations, invalid[b],
            lambda sim, depth, b=b: noise[sim, b, depth],
            max_depth=max_depth, kappa=2.5, belief_summary=belief_summary,
            pbest_method=pbest_method, pbest_updates=pbest_updates,
            selection_draw=selection_draw)
        mismatches = tree_mismatches(tree, b, nodes)
        assert not mismatches, "\n".join(mismatches)
        # The comparison can fail: another root's tree differs from this reference.
        assert tree_mismatches(tree, (b + 1) % batch_size, nodes)
        unused += sum(n is None for n in nodes)
        nodes = [n for n in nodes if n is not None]
        proven_interior += sum(n.proven and bool(n.children) for n in nodes)
        # Descents never enter a proven node: none has a visit after its proof, so a
        # proven leaf (terminal) has exactly one visit.
        assert all(n.visits == 1 for n in nodes if n.proven and not n.children)
    # The max_depth re-evaluations leave slots unused; without max_depth only a proven
    # root's skipped simulations do, which depends on the draw (the K = 2 case has one).
    # Proofs above the leaves are exercised in every case.
    assert unused > 0 or max_depth is None
    assert proven_interior > 0
    assert np.all(np.isfinite(out.action_weights)) and np.all(out.action_weights[invalid] == 0)
    np.testing.assert_allclose(out.action_weights.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(out.root_belief, tree.node_extras.belief[:, 0])
    if options.incremental(num_outcomes, num_actions) and log_total_range[1] < 4.0:
        _check_root_cache_is_fresh(tree, options)
    assert np.all(out.child_belief_mask == ((tree.children_index[:, 0] != UNVISITED) & ~invalid))
    # Drawing from the beliefs keeps no selection rows (no lazy prior fill, no backup
    # row); the table writes every expanded node's.
    tables = np.asarray(tree.node_extras.selection.table)
    assert np.all(tables == 0.0) if options.draws_thompson(num_outcomes) else np.any(tables != 0.0)


def _check_root_cache_is_fresh(tree, options):
    """The root's selection cache, updated in place by every backup, is inside the
    fast envelope and equals one built afresh from the root's children."""
    from curiosity_search.curiosity.policy import children_beliefs, children_proofs
    child_beliefs, _ = jax.vmap(
        lambda t: children_beliefs(t, 0, t.node_extras.belief, options))(tree)
    proven = jax.vmap(lambda t: children_proofs(t, 0, options)[0])(tree)
    unresolved = ~tree.node_extras.invalid[:, 0] & ~proven
    fresh = options.selection_from_beliefs(child_beliefs, unresolved, at_root=True)
    stored = tree.extra_data.root_selection
    live = ~np.asarray(tree.node_extras.proven[:, 0])
    assert live.any() and np.all(np.asarray(stored.current)[live])
    def distribution(cache):  # sum_s w_s table[a, s] / sum_b table[b, s], normalized
        weights, table = np.asarray(cache.weights)[live], np.asarray(cache.table)[live]
        columns = table / np.maximum(table.sum(-2, keepdims=True), 1e-30)
        p = np.einsum("bs,bas->ba", weights, columns)
        return p / p.sum(-1, keepdims=True)

    np.testing.assert_allclose(distribution(stored), distribution(fresh), atol=2e-5)


def _bandit(scores, num_outcomes=2, terminal=True, concentration=30.0):
    """One-move bandit: arm a has expected score scores[a] for the root's mover.

    ``terminal``: the arm ends the game with that expected reward (the child is proven
    at expansion); otherwise the child is an ordinary node whose value belief (its own
    mover's view, the opponent's) has mean ``1 - scores[a]`` and total ``concentration``.
    """
    scores = jnp.asarray(scores, jnp.float32)
    num_actions = scores.shape[0]

    def recurrent_fn(params, rng_key, action, embedding):
        del params, rng_key
        batch = action.shape[0]
        score = scores[action]
        # the child's mover (the opponent) wins with probability 1 - score
        child_view = jnp.stack([1.0 - score, score], -1)
        if num_outcomes == 3:
            child_view = jnp.stack([1.0 - score, jnp.zeros_like(score), score], -1)
        out = BeliefRecurrentFnOutput(
            reward=2.0 * score - 1.0 if terminal else jnp.zeros(batch),
            discount=jnp.zeros(batch) if terminal else -jnp.ones(batch),
            prior_logits=jnp.zeros((batch, num_actions)),
            value=jnp.zeros(batch),
            value_belief=jnp.maximum(concentration * child_view, 1e-3),
            action_beliefs=jnp.ones((batch, num_actions, num_outcomes)),
        )
        return out, embedding

    def root(batch):
        return BeliefRootFnOutput(
            prior_logits=jnp.zeros((batch, num_actions)), value=jnp.zeros(batch),
            embedding=jnp.zeros(batch, jnp.int32),
            value_belief=jnp.ones((batch, num_outcomes)),
            action_beliefs=jnp.ones((batch, num_actions, num_outcomes)))

    return root, recurrent_fn


def test_two_armed_bandit_concentrates_on_better_arm():
    root, recurrent_fn = _bandit([0.3, 0.7], terminal=False)
    out = jax.jit(functools.partial(curiosity_policy, recurrent_fn=recurrent_fn,
                                    num_simulations=24, max_depth=1))(
        None, jax.random.PRNGKey(0), root(4))
    visits = np.asarray(out.search_tree.children_visits[:, 0])
    assert np.all(visits[:, 1] >= 0.8 * visits.sum(-1)), visits
    assert np.all(out.action_weights[:, 1] > 0.99)
    assert np.all(out.action == 1)
    assert not np.any(out.search_tree.node_extras.proven[:, 0])
    assert np.all(beliefs.belief_mean_score(out.root_belief) > 0.6)


def test_proven_children_prove_the_root_and_stop_the_search():
    """All arms terminal: once each is expanded the root is proven at the best of them
    and the remaining simulations change nothing; the answer is exact."""
    root, recurrent_fn = _bandit([0.0, 0.0, 1.0, 0.0])
    out = jax.jit(functools.partial(curiosity_policy, recurrent_fn=recurrent_fn,
                                    num_simulations=24, max_depth=1))(
        None, jax.random.PRNGKey(0), root(4))
    tree = out.search_tree
    visits = np.asarray(tree.children_visits[:, 0])
    # Thompson draws over uniform priors expand arms until the win is found; then the
    # root is proven won and no simulation runs again (each arm expanded at most once).
    assert np.all(visits <= 1) and np.all(visits[:, 2] == 1), visits
    assert np.all(tree.node_visits[:, 0] == 1 + visits.sum(-1))
    assert np.all(out.root_proven) and np.all(tree.node_extras.proven[:, 0])
    np.testing.assert_array_equal(tree.node_extras.proven_score[:, 0], 1.0)
    np.testing.assert_array_equal(tree.node_extras.proven_length[:, 0], 1)
    np.testing.assert_array_equal(out.action_weights, np.eye(4)[[2] * 4])
    assert np.all(out.action == 2)


def test_all_lost_root_plays_the_longest_loss():
    """A root whose every move loses is proven lost; its answer is the longest loss."""
    from curiosity_search.curiosity import prove

    child_proven = jnp.array([[True, True, True, False]])
    child_score = jnp.array([[0.0, 0.0, 0.0, 1.0]])
    lengths = jnp.array([[2, 6, 4, 0]])
    invalid = jnp.array([[False, False, False, True]])
    proven, score, length, choice = prove(child_proven, child_score, lengths, invalid)
    assert bool(proven[0]) and float(score[0]) == 0.0
    assert int(length[0]) == 7 and int(choice[0]) == 1
    # a win among them is preferred, the shortest win first
    proven, score, length, choice = prove(
        jnp.array([[True, True, True, False]]), jnp.array([[1.0, 0.0, 1.0, 0.5]]),
        jnp.array([[5, 1, 3, 0]]), jnp.zeros((1, 4), bool))
    assert bool(proven[0]) and float(score[0]) == 1.0 and int(length[0]) == 4
    assert int(choice[0]) == 2
    # an unresolved legal child and no win: unproven
    proven, _, length, choice = prove(jnp.array([[True, False]]), jnp.array([[0.5, 0.0]]),
                                      jnp.array([[1, 0]]), jnp.zeros((1, 2), bool))
    assert not bool(proven[0]) and int(length[0]) == -1 and int(choice[0]) == -1


@pytest.mark.parametrize("num_outcomes", [2, 3])
def test_fast_pbest_search_runs_and_finds_better_arm(num_outcomes):
    root, recurrent_fn = _bandit([0.3, 0.45, 0.7], num_outcomes=num_outcomes, terminal=False)
    out = jax.jit(functools.partial(curiosity_policy, recurrent_fn=recurrent_fn,
                                    num_simulations=24, max_depth=1))(
        None, jax.random.PRNGKey(3), root(4))
    visits = np.asarray(out.search_tree.children_visits[:, 0])
    assert np.all(visits[:, 2] >= 0.7 * visits.sum(-1)), visits
    for array in (out.action_weights, out.root_belief, out.search_tree.node_values):
        assert np.all(np.isfinite(array))
    np.testing.assert_allclose(out.action_weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(out.action_weights[:, 2] > 0.9) and np.all(out.action == 2)
    # The returned tree's node values are its final beliefs' values (0 where unvisited).
    tree = out.search_tree
    expected = np.where(tree.node_visits > 0, beliefs.to_value(tree.node_extras.belief), 0.0)
    np.testing.assert_allclose(tree.node_values, expected, atol=1e-6)
    assert np.all(np.sum(tree.node_visits > 0, axis=-1) >= 3)  # not only the root


def test_proven_win_makes_parent_proven_with_draws():
    # K = 3: arm 1 is a proven win for the mover, arm 0 a draw: the root is a proven win.
    root, recurrent_fn = _bandit([0.5, 1.0, 0.0], num_outcomes=3)
    out = jax.jit(functools.partial(curiosity_policy, recurrent_fn=recurrent_fn,
                                    num_simulations=8, max_depth=1, temperature=0.0))(
        None, jax.random.PRNGKey(1), root(2))
    assert np.all(out.action == 1)
    np.testing.assert_allclose(beliefs.belief_mean_score(out.root_belief), 1.0, atol=1e-6)


def test_proven_draw_gets_its_exact_weight():
    """K = 3: a proven draw next to an uncertain arm: the draw's P(best) is exactly
    P(the uncertain arm's score < 1/2) and the uncertain arm keeps the rest."""
    from curiosity_search.curiosity import best_arm_probability

    conc = jnp.array([[[1.0, 1.0, 1.0], [2.0, 1.0, 3.0]]])
    # One compiled program (cached across runs), not the accurate K = 3 path op by op.
    pbest = jax.jit(lambda c, scores: best_arm_probability(c, None, exact_scores=scores))
    p = np.asarray(pbest(conc, jnp.array([[np.nan, 0.5]])))
    # P(s < 1/2) for s = p_w + p_d / 2 under Dir(1, 1, 1): P(p_w < p_l) = 1/2.
    np.testing.assert_allclose(p, [[0.5, 0.5]], atol=5e-3)


def test_outputs_finite_for_extreme_beliefs():
    model = BeliefHashModel(num_actions=4, seed=3)
    scale = jnp.array([1e-3, 1e5])  # per tree: very flat and very sharp beliefs
    root = model.root(2)
    root = root.replace(value_belief=root.value_belief * scale[:, None],
                        action_beliefs=root.action_beliefs * scale[:, None, None])

    def recurrent_fn(params, key, action, embedding):
        out, embedding = model.recurrent_fn(params, key, action, embedding)
        return out.replace(value_belief=out.value_belief * scale[:, None],
                           action_beliefs=out.action_beliefs * scale[:, None, None]), embedding

    out = jax.jit(functools.partial(curiosity_policy, recurrent_fn=recurrent_fn,
                                    num_simulations=10,
                                    options=CuriosityOptions(belief_summary="moment_match")))(
        None, jax.random.PRNGKey(2), root)
    for array in (out.action_weights, out.root_belief, out.child_beliefs,
                  out.search_tree.node_values):
        assert np.all(np.isfinite(array))
    np.testing.assert_allclose(out.action_weights.sum(-1), 1.0, atol=1e-4)


def test_pbest_row_counter_matches_compaction_and_leaves_results_unchanged():
    from curiosity_search.bench.pbest_rows import computed_rows, count_pbest_rows
    from curiosity_search.curiosity import backup, compaction, nodes

    # computed_rows mirrors compaction.compacted_map's branches.
    assert computed_rows(0, 16, ()) == 16 and computed_rows(5, 16, ()) == 16  # no slots
    assert computed_rows(3, 16, (16, 32)) == 16  # no usable slot: the whole batch
    assert computed_rows(0, 16, (2, 4, 8)) == 0
    assert [computed_rows(n, 16, (8, 2, 4)) for n in (1, 2, 3, 5, 8, 9, 16)] == [
        2, 2, 4, 8, 8, 16, 16]
    assert [computed_rows(n, 16, (), chunk=4) for n in (0, 1, 4, 5, 16)] == [0, 4, 4, 8, 16]

    def _scaled(scale, x):
        return scale * x

    update = functools.partial(_scaled, 2.0)  # not a curiosity.backup function: lazy_fill
    rows = jnp.arange(16.0)
    patterns = [np.arange(16) < n for n in (3, 0, 16)]
    with count_pbest_rows() as counts:
        for active in patterns:
            out = jax.jit(lambda a: (backup.compacted_map(update, a, rows, slots=(2, 4, 8)),
                                     nodes.compacted_map(update, a, rows)))(active)
            expected = compaction.compacted_map(update, jnp.asarray(active), rows,
                                                slots=(2, 4, 8))
            np.testing.assert_array_equal(out[0], expected)
            np.testing.assert_array_equal(out[1], expected)
    # Active 3 + 0 + 16, twice; computed with slots (2, 4, 8): 4 + 0 + 16; without: 3 x 16.
    assert counts == {"rows_active_lazy_fill": 38, "rows_computed_lazy_fill": 68}
    assert backup.compacted_map is compaction.compacted_map  # restored on exit


def test_pbest_row_counter_names_each_site_by_its_work():
    """In a real search the counter's sites match counts read off the finished tree:
    with ``full`` updates every backup recomputes each ancestor of the new node, root
    included (``backup_full_update``: the sum of the non-root nodes' depths), and a
    node's prior P(best) is filled once, when a descent first selects at it
    (``lazy_fill``: the non-root nodes with a child). Backup levels reach
    ``compacted_map`` through ``nodes``; they are still counted as backups."""
    from curiosity_search.bench.pbest_rows import count_pbest_rows

    model = BeliefHashModel(num_actions=4, seed=3, terminal_fraction=0.0)
    batch, sims = 3, 12
    with count_pbest_rows() as counts:  # traced inside the counter
        counted = jax.jit(functools.partial(
            curiosity_policy, recurrent_fn=model.recurrent_fn, num_simulations=sims,
            options=CuriosityOptions(pbest_updates="full")))(
                None, jax.random.PRNGKey(2), model.root(batch))

    parents = np.asarray(counted.search_tree.parents)
    children = np.asarray(counted.search_tree.children_index)
    visits = np.asarray(counted.search_tree.node_visits)
    depth_sum = with_children = 0
    for tree in range(batch):
        for node in range(1, sims + 1):
            assert visits[tree, node] > 0  # no terminals: every simulation adds a node
            depth, ancestor = 0, node
            while ancestor != 0:
                ancestor, depth = parents[tree, ancestor], depth + 1
            depth_sum += depth
            with_children += int(np.any(children[tree, node] != UNVISITED))
    assert set(counts) == {"rows_active_backup_full_update", "rows_computed_backup_full_update",
                           "rows_active_lazy_fill", "rows_computed_lazy_fill"}
    assert counts["rows_active_backup_full_update"] == depth_sum
    assert counts["rows_active_lazy_fill"] == with_children
    for site in ("backup_full_update", "lazy_fill"):
        assert counts[f"rows_computed_{site}"] >= counts[f"rows_active_{site}"]


def test_auto_pbest_updates_keeps_the_incremental_root_from_36_actions():
    """``pbest_updates="auto"`` (the default) takes the incremental root layout on boards
    of ``AUTO_INCREMENTAL_ACTIONS`` actions or more (K = 2, fast, average), the full one
    below and wherever the layout does not apply; the explicit settings keep theirs."""
    auto = CuriosityOptions()
    assert auto.pbest_updates == "auto" and AUTO_INCREMENTAL_ACTIONS == 36
    assert auto.incremental(2, 36) and auto.incremental(2, 122)
    assert not auto.incremental(2, 25) and not auto.incremental(3, 36)
    assert not CuriosityOptions(pbest_method="accurate").incremental(2, 36)
    assert not CuriosityOptions(pbest_updates="full").incremental(2, 122)
    assert CuriosityOptions(pbest_updates="incremental").incremental(2, 16)
    children = jnp.ones((2, 36, 2))
    valid = jnp.ones((2, 36), bool)
    assert auto.root_data(children, valid) is not None
    assert auto.root_data(children[:, :25], valid[:, :25]) is None
