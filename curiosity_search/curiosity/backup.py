"""The curiosity backup, batched level by level: beliefs, P(best) caches and proofs.

For each ancestor of the new (or stopped-at) node, from the leaf's parent up to the
root: pi = P(a is best) over its children's beliefs, Qbar = the pi-mixture summarized,
``C = (1 - gamma) V + gamma Qbar`` with ``gamma = n / (kappa + n)`` and n = the sum of
its children's visit counts; a node with a proven winning child, or whose legal
children are all proven, is proven with the minimax result (see ``curiosity.py``).

The walk runs on the whole batch at once, one tree level per iteration of a
batch-level ``while_loop`` (no ``vmap`` of a per-tree loop): every tree's path
advances one edge per level, and trees whose path has reached the root are inactive.
A parent's update (its children's beliefs gathered, P(best), the mixture, the proofs)
runs only on the active trees, gathered into compacted slots
(``compaction.compacted_map``): at deep levels, where only a few trees still climb,
it costs a fraction of the batch. The numbers are those of the per-tree walk: each
ancestor sees its children's already updated beliefs.

Shapes: ``B`` batch, ``N`` nodes, ``A`` actions, ``K`` outcomes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import chex
import jax
import jax.numpy as jnp

from curiosity_search.search import beliefs
from curiosity_search.search.compaction import compacted_map, default_slots
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree


def _parent_update(
    tree: Tree,
    node_beliefs: chex.Array,
    visits: chex.Array,
    proven: chex.Array,
    scores: chex.Array,
    tree_index: chex.Array,
    child: chex.Array,
    *,
    kappa: chex.Numeric,
    grid_size: int,
    belief_summary: str,
    two_player: bool,
    proven_strength: float,
    pbest_method: str,
):
    """The new state of the parent of ``child [S]`` in trees ``tree_index [S]``.

    Args:
      node_beliefs ``[B, N, K]``, visits ``[B, N]``, proven ``[B, N]`` bool, scores
      ``[B, N]``: the carried, partly updated arrays of the whole batch (read only).

    Returns:
      ``(belief [S, K], proven [S] bool, score [S], cumulative [S, A])``: the parent's
      belief, proof state, exact score (0 if unproven) and running sum of P(best) over
      its children.
    """
    extras = tree.node_extras
    parent = tree.parents[tree_index, child]
    index = tree.children_index[tree_index, parent]  # [S, A]
    expanded = index != UNVISITED
    safe = jnp.maximum(index, 0)
    rows = tree_index[:, None]
    searched = node_beliefs[rows, safe]  # [S, A, K]
    if two_player:
        searched = beliefs.flip_perspective(searched)
    child_beliefs = jnp.where(expanded[..., None], searched,
                              extras.action_beliefs[tree_index, parent])
    invalid = extras.invalid[tree_index, parent]  # [S, A]
    weights = beliefs.best_arm_probability(child_beliefs, invalid, grid_size, pbest_method)
    mixture = beliefs.summarize_mixture(weights, child_beliefs, belief_summary)
    evidence = jnp.sum(jnp.where(expanded, visits[rows, safe], 0), axis=-1)
    blended = beliefs.combine_with_prior(extras.value_belief[tree_index, parent], mixture,
                                         evidence, kappa)

    # Minimax proofs over the exact results of proven children (this mover's view).
    child_proven = expanded & proven[rows, safe] & ~invalid
    child_score = scores[rows, safe]
    child_score = 1.0 - child_score if two_player else child_score
    proven_best = jnp.max(jnp.where(child_proven, child_score, -1.0), axis=-1)
    wins = jnp.any(child_proven & (child_score >= 1.0), axis=-1)
    all_proven = jnp.all(child_proven | invalid, axis=-1) & jnp.any(~invalid, axis=-1)
    newly_proven = wins | all_proven
    exact = beliefs.score_belief(proven_best, child_beliefs.shape[-1], proven_strength)
    already = proven[tree_index, parent]
    belief = jnp.where(already[:, None], node_beliefs[tree_index, parent],
                       jnp.where(newly_proven[:, None], exact, blended))
    score = jnp.where(already, scores[tree_index, parent],
                      jnp.where(newly_proven, proven_best, 0.0))
    return belief, already | newly_proven, score, beliefs.cumulative_probability(weights)


def _level(
    tree: Tree,
    child: chex.Array,
    node_beliefs: chex.Array,
    visits: chex.Array,
    proven: chex.Array,
    scores: chex.Array,
    best: chex.Array,
    *,
    slots: Sequence[int],
    **options,
):
    """One backup level: each active tree updates the parent of ``child [B]``.

    The parents' new state (``_parent_update``, ``options`` its keyword arguments) is
    computed on the active trees only, gathered into compacted slots
    (``compaction.compacted_map``): at deep levels only a few trees still climb.

    Args:
      node_beliefs ``[B, N, K]``, visits ``[B, N]``, proven ``[B, N]`` bool, scores
      ``[B, N]``, best ``[B, N, A]`` (cumulative P(best) caches): the carried, partly
      updated arrays.

    Returns:
      ``(parent [B] (the next level's child; the root stays), node_beliefs, visits,
      proven, scores, best)`` with the parents' entries updated where active.
    """
    batch = jnp.arange(child.shape[0])
    active = child != ROOT_INDEX
    # Inactive trees point at their root; their writes are dropped.
    parent = jnp.where(active, tree.parents[batch, child], ROOT_INDEX)
    write_at = jnp.where(active, parent, tree.node_visits.shape[1])
    visits = visits.at[batch, write_at].add(1, mode="drop")
    update = functools.partial(_parent_update, tree, node_beliefs, visits, proven, scores,
                               **options)
    belief, is_proven, score, cumulative = compacted_map(update, active, batch, child,
                                                         slots=slots)
    return (
        parent,
        node_beliefs.at[batch, write_at].set(belief, mode="drop"),
        visits,
        proven.at[batch, write_at].set(is_proven, mode="drop"),
        scores.at[batch, write_at].set(score, mode="drop"),
        best.at[batch, write_at].set(cumulative, mode="drop"),
    )


def curiosity_backup(
    tree: Tree,
    leaf_index: chex.Array,
    *,
    kappa: chex.Numeric = 4.0,
    grid_size: int = 21,
    belief_summary: str = "average",
    two_player: bool = True,
    proven_strength: float = 1e4,
    pbest_method: str = "accurate",
    compaction_slots: Sequence[int] | None = None,
) -> Tree:
    """Backup hook: updates visits, beliefs, P(best) caches and proofs from ``leaf_index
    [B]`` to the root.

    The leaf's belief was set at expansion (V, or its exact result); each ancestor is
    recomputed from its children (see the module docstring). ``node_values`` become
    ``to_value(belief)`` so the kernel's scalar summaries stay meaningful.
    ``compaction_slots``: static slot sizes for P(best) on the active trees (None:
    ``compaction.default_slots(B)``; ``()``: always the full batch).
    """
    slots = default_slots(leaf_index.shape[0]) if compaction_slots is None else compaction_slots
    level = functools.partial(
        _level, tree, kappa=kappa, grid_size=grid_size, belief_summary=belief_summary,
        two_player=two_player, proven_strength=proven_strength, pbest_method=pbest_method,
        slots=tuple(slots),
    )
    extras = tree.node_extras
    state = (jnp.asarray(leaf_index, jnp.int32), extras.belief, tree.node_visits, extras.proven,
             extras.proven_score, extras.best_cumulative)
    state = jax.lax.while_loop(lambda s: jnp.any(s[0] != ROOT_INDEX),
                               lambda s: level(*s), state)
    _, node_beliefs, visits, proven, scores, best = state
    values = jnp.where(visits > 0, beliefs.to_value(node_beliefs), 0.0).astype(
        tree.node_values.dtype
    )
    extras = extras.replace(
        belief=node_beliefs, proven=proven, proven_score=scores, best_cumulative=best
    )
    return tree.replace(node_visits=visits, node_values=values, node_extras=extras)
