"""The curiosity backup, batched level by level: beliefs, selection caches and proofs.

For each ancestor of the new node, from the leaf's parent up to the root (seeds/002):

- its children's beliefs from its mover's view: the flipped search belief of an
  expanded child, the Q_a prior of the others;
- proofs (``nodes.prove``): a child proven won for this mover proves it won; if all
  its legal children are proven it is proven at the best of them;
- pi = P(a is best) over the children, a proven child counting as its exact result
  with its exact weight (``best_arm``: a proven loss gets 0 while an uncertain child
  exists; a proven draw gets ``prod F_b(1/2)``);
- Qbar = the pi-mixture summarized (``"average"`` of parameter vectors as the blog, or
  ``"moment_match"``), a proven child entering as ``beliefs.exact_belief``;
  ``C = (1 - gamma) V + gamma Qbar``, ``gamma = n / (kappa + n)``, n = the sum of its
  children's visit counts (the search evidence below it). A proven node's belief is its
  exact belief instead, and never changes again;
- its selection cache: P(best) over its *unresolved* legal children (equal to pi unless
  a child is a proven draw), so descents never enter a proven child.

With ``pbest_updates="incremental"`` (K = 2, fast, average) pi, the mixture and the
selection cache come from the node's stored aggregates, updated for the one child that
changed (``_incremental_update``); a node whose grid moved, that left the fast envelope
or that is proven by this update is rebuilt in full (``_rebuilt_update``), in a second
compacted pass run only when some tree needs it (``selection_cache``).

The walk runs on the whole batch at once, one tree level per iteration of a
batch-level ``while_loop``: every tree's path advances one edge per level, and trees
whose path has reached the root are inactive. A parent's update runs only on the
active trees, gathered into compacted slots (``compaction.compacted_map``). The numbers
are those of the per-tree walk: each ancestor sees its children's already updated
beliefs.

Shapes: ``B`` batch, ``N`` nodes, ``A`` actions, ``K`` outcomes, ``S`` slots.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp

from curiosity_search.curiosity import beliefs
from curiosity_search.curiosity.compaction import compacted_map
from curiosity_search.curiosity.nodes import DEFAULT_OPTIONS, CuriosityOptions, prove
from curiosity_search.curiosity.selection_cache import (
    build_incremental,
    from_probability,
    update_incremental,
)
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree


def _children(tree: Tree, node_beliefs: chex.Array, proven: chex.Array, scores: chex.Array,
              lengths: chex.Array, tree_index: chex.Array, child: chex.Array,
              options: CuriosityOptions) -> dict:
    """The parent of ``child [S]`` in trees ``tree_index [S]`` and its children, from its
    mover's view: ``parent [S]``, ``expanded``, ``invalid``, ``proven``, ``score``,
    ``length`` ``[S, A]``, ``beliefs [S, A, K]`` (search belief if expanded, else Q_a),
    ``visits_index`` (``[S, A]`` safe node indices)."""
    extras = tree.node_extras
    parent = tree.parents[tree_index, child]
    index = tree.children_index[tree_index, parent]  # [S, A]
    expanded = index != UNVISITED
    safe = jnp.maximum(index, 0)
    rows = tree_index[:, None]
    invalid = extras.invalid[tree_index, parent]  # [S, A]
    searched = options.to_parent(node_beliefs[rows, safe])  # [S, A, K]
    return dict(
        parent=parent, expanded=expanded, invalid=invalid, safe=safe,
        beliefs=jnp.where(expanded[..., None], searched,
                          extras.action_beliefs[tree_index, parent]),
        proven=expanded & proven[rows, safe] & ~invalid,
        score=options.score_to_parent(scores[rows, safe]),
        length=lengths[rows, safe],
    )


def _settle(tree: Tree, node_beliefs: chex.Array, visits: chex.Array, proven: chex.Array,
            scores: chex.Array, lengths: chex.Array, tree_index: chex.Array, kids: dict,
            mixture: chex.Array, kappa: chex.Numeric):
    """The parent's new ``(belief [S, K], proven [S], score [S], length [S])`` from its
    children's proofs and their summarized mixture ``[S, K]``; also whether it is
    (now or already) proven, ``[S]``."""
    extras = tree.node_extras
    parent = kids["parent"]
    node_proven, node_score, node_length, _ = prove(kids["proven"], kids["score"],
                                                    kids["length"], kids["invalid"])
    evidence = jnp.sum(jnp.where(kids["expanded"], visits[tree_index[:, None], kids["safe"]], 0),
                       axis=-1)
    blended = beliefs.combine_with_prior(extras.value_belief[tree_index, parent], mixture,
                                         evidence, kappa)
    exact = beliefs.exact_belief(node_score, jnp.sum(blended, axis=-1), mixture.shape[-1])
    already = proven[tree_index, parent]
    belief = jnp.where(already[:, None], node_beliefs[tree_index, parent],
                       jnp.where(node_proven[:, None], exact, blended))
    score = jnp.where(already, scores[tree_index, parent], node_score)
    length = jnp.where(already, lengths[tree_index, parent], node_length)
    return belief, already | node_proven, score, length


def _fresh_mixture(kids: dict, options: CuriosityOptions) -> tuple[chex.Array, chex.Array]:
    """``(P(best) [S, A], mixture [S, K])`` from a fresh P(best) over the children, a
    proven child counting as its exact result with its exact weight."""
    child_beliefs, child_proven = kids["beliefs"], kids["proven"]
    exact_scores = jnp.where(child_proven, kids["score"], jnp.nan)
    weights = options.best_probability(child_beliefs, kids["invalid"], exact_scores)
    vectors = jnp.where(
        child_proven[..., None],
        beliefs.exact_belief(kids["score"], jnp.sum(child_beliefs, axis=-1),
                             child_beliefs.shape[-1]),
        child_beliefs)
    return weights, beliefs.summarize_mixture(weights, vectors, options.belief_summary)


def _full_update(tree: Tree, node_beliefs, visits, proven, scores, lengths, tree_index,
                 child, *, kappa: chex.Numeric, options: CuriosityOptions):
    """The parent's new state with a fresh P(best) (the full layout): ``(belief [S, K],
    proven [S], score [S], length [S], SelectionCache [S, ...])``."""
    kids = _children(tree, node_beliefs, proven, scores, lengths, tree_index, child, options)
    child_beliefs, child_proven, invalid = kids["beliefs"], kids["proven"], kids["invalid"]
    weights, mixture = _fresh_mixture(kids, options)
    # Selection: P(best) over the unresolved children. A proven loss already has weight
    # 0 and a proven win proves the node, so only a proven draw (K = 3) makes them differ.
    selection = weights
    if child_beliefs.shape[-1] == 3:
        own = jnp.any(child_proven & (kids["score"] > 0.0) & (kids["score"] < 1.0), axis=-1)
        selection = jax.lax.cond(
            jnp.any(own),
            lambda: jnp.where(own[:, None],
                              options.best_probability(child_beliefs, invalid | child_proven),
                              weights),
            lambda: weights)
    settled = _settle(tree, node_beliefs, visits, proven, scores, lengths, tree_index, kids,
                      mixture, kappa)
    return settled + (from_probability(selection),)


def _incremental_update(tree: Tree, columns: tuple, node_beliefs, visits, proven, scores,
                        lengths, tree_index, child, *, kappa: chex.Numeric,
                        options: CuriosityOptions):
    """The parent's new state from its cached aggregates and the one child that changed
    (``selection_cache.update_incremental``): ``(belief, proven, score, length, weights
    [S, W], aggregates, table column [S, W], logs column [S, W], arm [S], arm_belief
    [S, K], arm_valid [S], ok [S])``; where not ``ok`` the caller uses
    ``_rebuilt_update`` instead. ``tree``'s selection caches come without their table
    and logs (``[B, N, W, A]``, never passed into the compacted map); ``columns``:
    the changed child's stored table and logs columns, ``([B, W], [B, W])``."""
    kids = _children(tree, node_beliefs, proven, scores, lengths, tree_index, child, options)
    valid = ~kids["invalid"] & ~kids["proven"]
    arm = tree.action_from_parent[tree_index, child]
    cache = jax.tree_util.tree_map(lambda x: x[tree_index, kids["parent"]],
                                   tree.node_extras.selection)
    cache = cache.replace(table=columns[0][tree_index], logs=columns[1][tree_index])
    weights, aggregates, column, log_column, mixture, ok = update_incremental(
        cache, arm, kids["beliefs"], valid, options.grid_size)
    belief, is_proven, score, length = _settle(tree, node_beliefs, visits, proven, scores,
                                               lengths, tree_index, kids, mixture, kappa)
    rows = jnp.arange(arm.shape[0])
    # A proven node is never selected from again: its cache need not be rebuilt. A node
    # proven now takes its exact belief's total from the fresh mixture (_rebuilt_update).
    already = proven[tree_index, kids["parent"]]
    return (belief, is_proven, score, length, weights, aggregates, column, log_column, arm,
            kids["beliefs"][rows, arm], valid[rows, arm], (ok & ~is_proven) | already)


def _rebuilt_update(tree: Tree, node_beliefs, visits, proven, scores, lengths, tree_index,
                    child, *, kappa: chex.Numeric, options: CuriosityOptions):
    """The parent's new state with its incremental cache built in full
    (``selection_cache.build_incremental``): ``(belief, proven, score, length,
    SelectionCache)``."""
    kids = _children(tree, node_beliefs, proven, scores, lengths, tree_index, child, options)
    valid = ~kids["invalid"] & ~kids["proven"]
    cache, mixture = build_incremental(kids["beliefs"], valid, options.grid_size)
    # A node proven by this update keeps the total of the mixture a fresh P(best) with
    # its proven children as exact arms gives (as the full layout), not of the
    # unresolved children's.
    proven_now = prove(kids["proven"], kids["score"], kids["length"], kids["invalid"])[0]
    mixture = jax.lax.cond(
        jnp.any(proven_now),
        lambda: jnp.where(proven_now[:, None], _fresh_mixture(kids, options)[1], mixture),
        lambda: mixture)
    settled = _settle(tree, node_beliefs, visits, proven, scores, lengths, tree_index, kids,
                      mixture, kappa)
    return settled + (cache,)


def _level(tree: Tree, state: tuple, *, slots: tuple[int, ...], kappa: chex.Numeric,
           options: CuriosityOptions):
    """One backup level: each active tree updates the parent of its current child.

    The parents' new state is computed on the active trees only, gathered into
    compacted slots: at deep levels only a few trees still climb. In the incremental
    layout the trees whose parent cannot be updated in place (its grid moved, or it
    left the fast envelope) are rebuilt in a second compacted pass, run only for them.
    Returns the next state, the parents becoming the children (the root stays).
    """
    child, node_beliefs, visits, proven, scores, lengths, selection = state
    batch = jnp.arange(child.shape[0])
    active = child != ROOT_INDEX
    parent = jnp.where(active, tree.parents[batch, child], ROOT_INDEX)
    num_nodes = tree.node_visits.shape[1]
    write_at = jnp.where(active, parent, num_nodes)  # inactive: dropped
    visits = visits.at[batch, write_at].add(1, mode="drop")
    arrays = (node_beliefs, visits, proven, scores, lengths)

    def write(stored, new, at):
        return jax.tree_util.tree_map(
            lambda old, value: old.at[batch, at].set(value, mode="drop"), stored, new)

    # The [B, N, W, A] selection tables never enter the compacted maps (each would
    # pass them to every branch of its switch): only what the update reads does.
    small = tree.replace(node_extras=tree.node_extras.replace(
        selection=selection.replace(table=None, logs=None)))
    if options.incremental(node_beliefs.shape[-1]):
        safe_parent = jnp.maximum(parent, 0)
        arm = tree.action_from_parent[batch, child]
        columns = (selection.table[batch, safe_parent, :, arm],
                   selection.logs[batch, safe_parent, :, arm])
        update = functools.partial(_incremental_update, small, columns, *arrays,
                                   kappa=kappa, options=options)
        (belief, is_proven, score, length, weights, aggregates, column, log_column, arm,
         arm_belief, arm_valid, ok) = compacted_map(update, active, batch, child, slots=slots)
        rebuild = active & ~ok
        in_place = jnp.where(active & ok, parent, num_nodes)
        selection = selection.replace(
            weights=selection.weights.at[batch, in_place].set(weights, mode="drop"),
            table=selection.table.at[batch, in_place, :, arm].set(column, mode="drop"),
            logs=selection.logs.at[batch, in_place, :, arm].set(log_column, mode="drop"),
            aggregates=write(selection.aggregates, aggregates, in_place),
            arms=selection.arms.at[batch, in_place, arm].set(arm_belief, mode="drop"),
            arms_valid=selection.arms_valid.at[batch, in_place, arm].set(arm_valid,
                                                                          mode="drop"),
        )
        rebuilt = functools.partial(_rebuilt_update, small, *arrays, kappa=kappa,
                                    options=options)

        def with_rebuilds(selection, belief, is_proven, score, length):
            (full_belief, full_proven, full_score, full_length, cache) = compacted_map(
                rebuilt, rebuild, batch, child, slots=slots)
            return (write(selection, cache, jnp.where(rebuild, parent, num_nodes)),
                    jnp.where(rebuild[:, None], full_belief, belief),
                    jnp.where(rebuild, full_proven, is_proven),
                    jnp.where(rebuild, full_score, score),
                    jnp.where(rebuild, full_length, length))

        # Most levels rebuild nothing: skip even the rebuild's bookkeeping then.
        selection, belief, is_proven, score, length = jax.lax.cond(
            jnp.any(rebuild), with_rebuilds, lambda *carried: carried,
            selection, belief, is_proven, score, length)
    else:
        update = functools.partial(_full_update, small, *arrays, kappa=kappa, options=options)
        belief, is_proven, score, length, cache = compacted_map(update, active, batch, child,
                                                                slots=slots)
        selection = write(selection, cache, write_at)
    return (
        parent,
        node_beliefs.at[batch, write_at].set(belief, mode="drop"),
        visits,
        proven.at[batch, write_at].set(is_proven, mode="drop"),
        scores.at[batch, write_at].set(score, mode="drop"),
        lengths.at[batch, write_at].set(length, mode="drop"),
        selection,
    )


def curiosity_backup(
    tree: Tree,
    leaf_index: chex.Array,
    *,
    kappa: chex.Numeric = 4.0,
    options: CuriosityOptions = DEFAULT_OPTIONS,
) -> Tree:
    """Backup hook: visits, beliefs, selection caches and proofs from ``leaf_index [B]``
    to the root (see the module docstring).

    The leaf's belief was set at expansion (V, or its exact result at a terminal); a
    tree whose ``leaf_index`` is the root (a skipped simulation) is left unchanged.
    ``node_values`` become ``to_value(belief)`` so the kernel's scalar summaries stay
    meaningful. ``kappa`` may be traced.
    """
    level = functools.partial(_level, tree, slots=options.slots(leaf_index.shape[0]),
                              kappa=kappa, options=options)
    extras = tree.node_extras
    state = (jnp.asarray(leaf_index, jnp.int32), extras.belief, tree.node_visits, extras.proven,
             extras.proven_score, extras.proven_length, extras.selection)
    state = jax.lax.while_loop(lambda s: jnp.any(s[0] != ROOT_INDEX), level, state)
    _, node_beliefs, visits, proven, scores, lengths, selection = state
    values = jnp.where(visits > 0, beliefs.to_value(node_beliefs), 0.0).astype(
        tree.node_values.dtype)
    extras = extras.replace(belief=node_beliefs, proven=proven, proven_score=scores,
                            proven_length=lengths, selection=selection)
    return tree.replace(node_visits=visits, node_values=values, node_extras=extras)
