"""Monotonic transformations of a node's Q-values, used by the selection rules.

Each takes an *unbatched* tree and a scalar node index and returns ``[A]``. The
numerics follow mctx's ``qtransforms`` exactly (same operations in the same order) so
that the policies can reproduce mctx's searches bit for bit.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from curiosity_search.search.tree import Tree


def qtransform_by_min_max(
    tree: Tree, node_index: chex.Array, *, min_value: float, max_value: float
) -> chex.Array:
    """``(q - min_value) / (max_value - min_value)``; unvisited children get 0. ``[A]``."""
    qvalues = tree.node_qvalues(node_index)
    visits = tree.node_children_visits(node_index)
    value_score = jnp.where(visits > 0, qvalues, min_value)
    return (value_score - min_value) / (max_value - min_value)


def qtransform_by_parent_and_siblings(
    tree: Tree, node_index: chex.Array, *, epsilon: float = 1e-8
) -> chex.Array:
    """Q min-max normalized over the node's value and its visited children's Q. ``[A]``.

    Unvisited children get 0 (the minimum). mctx's default for MuZero PUCT.
    """
    qvalues = tree.node_qvalues(node_index)
    visits = tree.node_children_visits(node_index)
    node_value = tree.node_values[node_index]
    safe_qvalues = jnp.where(visits > 0, qvalues, node_value)
    min_value = jnp.minimum(node_value, jnp.min(safe_qvalues, axis=-1))
    max_value = jnp.maximum(node_value, jnp.max(safe_qvalues, axis=-1))
    completed_by_min = jnp.where(visits > 0, qvalues, min_value)
    return (completed_by_min - min_value) / jnp.maximum(max_value - min_value, epsilon)


def qtransform_completed_by_parent_value(tree: Tree, node_index: chex.Array) -> chex.Array:
    """Raw Q-values; unvisited children completed by the node's own search value. ``[A]``.

    Not normalized: the value scale of the model is kept (ExIt's UCT on win rates).
    Completing with the parent's value (a "first-play urgency" equal to V(s)) makes an
    unvisited child neither the worst sibling (which locks PUCT-style rules onto the
    first visited child when values are pessimistic) nor an automatic first pick.
    """
    qvalues = tree.node_qvalues(node_index)
    visits = tree.node_children_visits(node_index)
    return jnp.where(visits > 0, qvalues, tree.node_values[node_index])


def mixed_value(
    raw_value: chex.Array,
    qvalues: chex.Array,
    visit_counts: chex.Array,
    prior_probs: chex.Array,
) -> chex.Array:
    """v_mix = (v + (sum N / sum_visited pi) * sum_visited pi q) / (1 + sum N). ``[]``.

    Args:
      raw_value: ``[]`` the network value of the node.
      qvalues: ``[A]`` (undefined where unvisited).
      visit_counts: ``[A]``.
      prior_probs: ``[A]``.
    """
    sum_visits = jnp.sum(visit_counts, axis=-1)
    prior_probs = jnp.maximum(jnp.finfo(prior_probs.dtype).tiny, prior_probs)
    visited = visit_counts > 0
    sum_probs = jnp.sum(jnp.where(visited, prior_probs, 0.0), axis=-1)
    weighted_q = jnp.sum(
        jnp.where(visited, prior_probs * qvalues / jnp.where(visited, sum_probs, 1.0), 0.0),
        axis=-1,
    )
    return (raw_value + sum_visits * weighted_q) / (sum_visits + 1)


def qtransform_completed_by_mix_value(
    tree: Tree,
    node_index: chex.Array,
    *,
    value_scale: chex.Numeric = 0.1,
    maxvisit_init: chex.Numeric = 50.0,
    rescale_values: bool = True,
    use_mixed_value: bool = True,
    epsilon: float = 1e-8,
) -> chex.Array:
    """Gumbel's sigma(completedQ): ``(maxvisit_init + max N) * value_scale * q~``. ``[A]``.

    Unvisited children are completed with the mixed value (or the raw value if
    ``use_mixed_value=False``); ``q~`` is min-max rescaled over the completed Q-values
    when ``rescale_values``. ``maxvisit_init`` is the paper's c_visit and
    ``value_scale`` its c_scale (mctx's defaults 50 and 0.1 are the Atari setting; the
    paper uses c_scale = 1.0 for board games).
    """
    qvalues = tree.node_qvalues(node_index)
    visits = tree.node_children_visits(node_index)
    raw_value = tree.raw_values[node_index]
    prior_probs = jax.nn.softmax(tree.children_prior_logits[node_index])
    if use_mixed_value:
        value = mixed_value(raw_value, qvalues, visits, prior_probs)
    else:
        value = raw_value
    completed = jnp.where(visits > 0, qvalues, value)
    if rescale_values:
        low = jnp.min(completed, axis=-1, keepdims=True)
        high = jnp.max(completed, axis=-1, keepdims=True)
        completed = (completed - low) / jnp.maximum(high - low, epsilon)
    visit_scale = maxvisit_init + jnp.max(visits, axis=-1)
    return visit_scale * value_scale * completed
