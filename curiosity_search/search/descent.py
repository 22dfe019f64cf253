"""The descent: from the root to the edge a simulation expands, for a whole batch.

``descend`` walks every tree (``jax.vmap`` of a per-tree ``while_loop``) from the root
through expanded children, choosing each edge with the root or interior selection
rule, until it reaches an unexpanded edge or ``max_depth``; optionally it also stops
on an expanded child that ``ready_fn`` says is not ready yet. ``select_at_unready``
then prepares such a node (the kernel's ``prepare_fn``) and selects the edge to expand
below it, so lazily computed per-node statistics give the tree an eager rule would
have built.

Shapes: ``B`` batch; a descent state's fields are ``[B]`` (batched) or ``[]``.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

from curiosity_search.search.base import (
    InteriorActionSelectionFn,
    PrepareFn,
    ReadyFn,
    RootActionSelectionFn,
)
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree


class DescentState(NamedTuple):
    rng_key: Any
    node_index: chex.Array  # []
    action: chex.Array  # []
    next_node_index: chex.Array  # []
    depth: chex.Array  # []
    is_continuing: chex.Array  # [] bool


def _next_key(key, split_per_step: bool):
    if key is None or not split_per_step:
        return key, key
    key, selection_key = jax.random.split(key)
    return key, selection_key


def descend(
    rng_keys: chex.PRNGKey | None,
    tree: Tree,
    root_action_selection_fn: RootActionSelectionFn,
    interior_action_selection_fn: InteriorActionSelectionFn,
    *,
    max_depth: int,
    split_per_step: bool,
    ready_fn: ReadyFn | None = None,
) -> DescentState:
    """Descends every tree from the root to the edge to expand; the final state ``[B]``.

    Args:
      rng_keys: ``[B]`` keys, or None (deterministic rules).
      tree: the batched tree.
      root_action_selection_fn, interior_action_selection_fn: the rules (one tree).
      max_depth: the descent stops at this many edges from the root.
      split_per_step: a fresh key per step (mctx's chain) or the same key throughout.
      ready_fn: ``(tree, node_index) -> bool`` (one tree) or None: also stop on an
        expanded child that is not ready (``select_at_unready`` handles it).

    Returns:
      ``DescentState``: ``node_index`` and ``action`` are the edge to expand,
      ``next_node_index`` its child (``UNVISITED`` if new), ``depth`` its depth.
    """
    next_key = functools.partial(_next_key, split_per_step=split_per_step)

    def continues(tree, next_node_index, depth):
        going = (next_node_index != UNVISITED) & (depth < max_depth)
        if ready_fn is not None:
            going = going & ready_fn(tree, next_node_index)
        return going

    def one(key, tree):
        key, selection_key = next_key(key)
        root_index = jnp.asarray(ROOT_INDEX, jnp.int32)
        action = root_action_selection_fn(selection_key, tree, root_index)
        next_node_index = tree.children_index[root_index, action]
        depth = jnp.asarray(1, jnp.int32)
        state = DescentState(
            rng_key=key,
            node_index=root_index,
            action=action,
            next_node_index=next_node_index,
            depth=depth,
            is_continuing=continues(tree, next_node_index, depth),
        )

        def body(state):
            node_index = state.next_node_index
            key, selection_key = next_key(state.rng_key)
            action = interior_action_selection_fn(selection_key, tree, node_index, state.depth)
            next_node_index = tree.children_index[node_index, action]
            depth = state.depth + 1
            return DescentState(
                rng_key=key,
                node_index=node_index,
                action=action,
                next_node_index=next_node_index,
                depth=depth,
                is_continuing=continues(tree, next_node_index, depth),
            )

        return jax.lax.while_loop(lambda s: s.is_continuing, body, state)

    return jax.vmap(one, in_axes=(None if rng_keys is None else 0, 0))(rng_keys, tree)


def select_at_unready(
    tree: Tree,
    descent: DescentState,
    prepare_fn: PrepareFn,
    interior_action_selection_fn: InteriorActionSelectionFn,
    max_depth: int,
    *,
    split_per_step: bool,
) -> tuple[Tree, chex.Array, chex.Array]:
    """Where a descent stopped on an unready expanded child: fill it, select there.

    Returns ``(tree, parent_index [B], action [B])``: the tree with the statistics of
    those nodes filled, and the edge to expand (unchanged for the other trees).
    """
    ready_fn, fill_fn = prepare_fn
    child = descent.next_node_index
    safe_child = jnp.maximum(child, 0)
    needed = (child != UNVISITED) & (descent.depth < max_depth)
    needed = needed & ~jax.vmap(ready_fn)(tree, safe_child)
    tree = fill_fn(tree, safe_child, needed)
    key = jax.vmap(functools.partial(_next_key, split_per_step=split_per_step))(
        descent.rng_key)[1] if descent.rng_key is not None else None
    action = jax.vmap(interior_action_selection_fn, in_axes=(None if key is None else 0, 0, 0, 0))(
        key, tree, safe_child, descent.depth)
    parent_index = jnp.where(needed, safe_child, descent.node_index)
    return tree, parent_index, jnp.where(needed, action, descent.action)
