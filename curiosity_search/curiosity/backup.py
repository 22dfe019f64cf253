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
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree


def _parent_update(tree: Tree, node_beliefs: chex.Array, visits: chex.Array,
                   proven: chex.Array, scores: chex.Array, lengths: chex.Array,
                   tree_index: chex.Array, child: chex.Array, *, kappa: chex.Numeric,
                   options: CuriosityOptions):
    """The new state of the parent of ``child [S]`` in trees ``tree_index [S]``.

    Args:
      node_beliefs ``[B, N, K]``, visits ``[B, N]``, proven ``[B, N]`` bool, scores
      ``[B, N]``, lengths ``[B, N]``: the carried, partly updated arrays (read only).

    Returns:
      ``(belief [S, K], proven [S], score [S], length [S], cumulative [S, A])``.
    """
    extras = tree.node_extras
    parent = tree.parents[tree_index, child]
    index = tree.children_index[tree_index, parent]  # [S, A]
    expanded = index != UNVISITED
    safe = jnp.maximum(index, 0)
    rows = tree_index[:, None]
    invalid = extras.invalid[tree_index, parent]  # [S, A]
    searched = options.to_parent(node_beliefs[rows, safe])  # [S, A, K]
    child_beliefs = jnp.where(expanded[..., None], searched,
                              extras.action_beliefs[tree_index, parent])
    child_proven = expanded & proven[rows, safe] & ~invalid
    child_score = options.score_to_parent(scores[rows, safe])
    node_proven, node_score, node_length, _ = prove(
        child_proven, child_score, lengths[rows, safe], invalid)

    exact_scores = jnp.where(child_proven, child_score, jnp.nan)
    weights = options.best_probability(child_beliefs, invalid, exact_scores)
    num_outcomes = child_beliefs.shape[-1]
    vectors = jnp.where(
        child_proven[..., None],
        beliefs.exact_belief(child_score, jnp.sum(child_beliefs, axis=-1), num_outcomes),
        child_beliefs)
    mixture = beliefs.summarize_mixture(weights, vectors, options.belief_summary)
    evidence = jnp.sum(jnp.where(expanded, visits[rows, safe], 0), axis=-1)
    blended = beliefs.combine_with_prior(extras.value_belief[tree_index, parent], mixture,
                                         evidence, kappa)
    exact = beliefs.exact_belief(node_score, jnp.sum(blended, axis=-1), num_outcomes)

    # Selection: P(best) over the unresolved children. A proven loss already has weight
    # 0 and a proven win proves the node, so only a proven draw (K = 3) makes them differ.
    selection = weights
    if num_outcomes == 3:
        own = jnp.any(child_proven & (child_score > 0.0) & (child_score < 1.0), axis=-1)
        selection = jax.lax.cond(
            jnp.any(own),
            lambda: jnp.where(own[:, None],
                              options.best_probability(child_beliefs, invalid | child_proven),
                              weights),
            lambda: weights)

    already = proven[tree_index, parent]
    belief = jnp.where(already[:, None], node_beliefs[tree_index, parent],
                       jnp.where(node_proven[:, None], exact, blended))
    score = jnp.where(already, scores[tree_index, parent], node_score)
    length = jnp.where(already, lengths[tree_index, parent], node_length)
    return (belief, already | node_proven, score, length,
            beliefs.cumulative_probability(selection))


def _level(tree: Tree, state: tuple, *, slots: tuple[int, ...], **options):
    """One backup level: each active tree updates the parent of its current child.

    The parents' new state (``_parent_update``) is computed on the active trees only,
    gathered into compacted slots: at deep levels only a few trees still climb.
    Returns the next state, the parents becoming the children (the root stays).
    """
    child, node_beliefs, visits, proven, scores, lengths, best = state
    batch = jnp.arange(child.shape[0])
    active = child != ROOT_INDEX
    parent = jnp.where(active, tree.parents[batch, child], ROOT_INDEX)
    write_at = jnp.where(active, parent, tree.node_visits.shape[1])  # inactive: dropped
    visits = visits.at[batch, write_at].add(1, mode="drop")
    update = functools.partial(_parent_update, tree, node_beliefs, visits, proven, scores,
                               lengths, **options)
    belief, is_proven, score, length, cumulative = compacted_map(update, active, batch, child,
                                                                 slots=slots)
    return (
        parent,
        node_beliefs.at[batch, write_at].set(belief, mode="drop"),
        visits,
        proven.at[batch, write_at].set(is_proven, mode="drop"),
        scores.at[batch, write_at].set(score, mode="drop"),
        lengths.at[batch, write_at].set(length, mode="drop"),
        best.at[batch, write_at].set(cumulative, mode="drop"),
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
             extras.proven_score, extras.proven_length, extras.best_cumulative)
    state = jax.lax.while_loop(lambda s: jnp.any(s[0] != ROOT_INDEX), level, state)
    _, node_beliefs, visits, proven, scores, lengths, best = state
    values = jnp.where(visits > 0, beliefs.to_value(node_beliefs), 0.0).astype(
        tree.node_values.dtype)
    extras = extras.replace(belief=node_beliefs, proven=proven, proven_score=scores,
                            proven_length=lengths, best_cumulative=best)
    return tree.replace(node_visits=visits, node_values=values, node_extras=extras)
