"""The generic search loop: simulate (descend), expand, backup, once per simulation.

``search`` runs ``num_simulations`` iterations of a ``fori_loop``; each adds exactly one
node per tree (node ``sim + 1``; at ``max_depth`` an existing leaf is re-evaluated
instead, as in mctx) with one ``recurrent_fn`` call for the whole batch. The strategy
is entirely in the arguments: the root and interior selection rules, the backup, and
the per-node extras carried by the model outputs. Nothing here branches on a rule at
run time.

The steps, in the order this file defines them:

- ``descend`` (mctx's ``simulate``) walks every tree (``jax.vmap`` of a per-tree
  ``while_loop``) from the root through expanded children, choosing each edge with the
  root or interior selection rule, until it reaches an unexpanded edge or
  ``max_depth``; optionally it also stops on an expanded child that ``ready_fn`` says
  is not ready yet. ``select_at_unready`` then prepares such a node (the kernel's
  ``prepare_fn``) and selects the edge to expand below it, so lazily computed per-node
  statistics give the tree an eager rule would have built.
- ``expand`` evaluates the chosen edge with ``recurrent_fn`` and writes the new node.
- ``backup_values`` (the default ``backup_fn``, built on ``walk_to_root``) updates
  every ancestor.

Two-player games follow mctx: the model returns ``discount = -1`` on every move, and
``q = reward + discount * value(child)`` flips the sign once per ply, in the backup
and in the Q-values the rules read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

from curiosity_search.search.base import (
    BackupFn,
    InteriorActionSelectionFn,
    LoopFn,
    Params,
    PrepareFn,
    ReadyFn,
    RecurrentFn,
    RootActionSelectionFn,
    RootDoneFn,
    RootFnOutput,
)
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree, instantiate_tree

SELECTION_RNG = ("per_step", "per_simulation", "none")


def search(
    params: Params,
    rng_key: chex.PRNGKey,
    *,
    root: RootFnOutput,
    recurrent_fn: RecurrentFn,
    root_action_selection_fn: RootActionSelectionFn,
    interior_action_selection_fn: InteriorActionSelectionFn,
    num_simulations: int,
    max_depth: int | None = None,
    invalid_actions: chex.Array | None = None,
    extra_data: Any = None,
    loop_fn: LoopFn = jax.lax.fori_loop,
    backup_fn: BackupFn | None = None,
    selection_rng: str = "per_step",
    root_done_fn: RootDoneFn | None = None,
    prepare_fn: PrepareFn | None = None,
) -> Tree:
    """Runs a batched search and returns the tree.

    Args:
      params: forwarded to ``recurrent_fn``.
      rng_key: consumed. Split per simulation as mctx does, so with the same rules the
        keys reaching ``recurrent_fn`` and the rules equal mctx's.
      root: ``RootFnOutput`` with prior_logits ``[B, A]``, value ``[B]``, embedding
        ``[B, ...]``; a ``RootFnOutputWithExtras`` also seeds ``tree.node_extras``.
      recurrent_fn: ``(params, key, action [B], embedding [B, ...]) ->
        (RecurrentFnOutput, embedding)``; outputs reward, discount, value ``[B]`` and
        prior_logits ``[B, A]`` (plus ``node_extras`` if the root had them).
      root_action_selection_fn: ``(key, tree, node_index) -> action`` on one tree.
      interior_action_selection_fn: ``(key, tree, node_index, depth) -> action``.
      num_simulations: static; the tree has ``N = num_simulations + 1`` nodes.
      max_depth: maximum number of edges from the root (default: no limit).
      invalid_actions: ``[B, A]``, 1 = invalid at the root (default: none).
      extra_data: pytree of ``[B, ...]`` stored as ``tree.extra_data``.
      loop_fn: the loop over simulations (``jax.lax.fori_loop`` signature).
      backup_fn: ``(tree, leaf_index [B]) -> tree`` (default: ``backup_values``).
      selection_rng: what the rules receive as ``rng_key``: ``"per_step"`` a fresh key
        per descent step (mctx's key chain), ``"per_simulation"`` one key per tree and
        simulation (fold in ``depth`` for per-step draws), ``"none"`` None (for
        deterministic rules: no key splitting at all).
      root_done_fn: ``(tree) -> bool []`` on one tree, or None. Where True (the root's
        result is final, e.g. proven), the simulation leaves that tree unchanged: no
        node written, no visit counted, no backup (``recurrent_fn`` still runs for the
        whole batch; its output for that tree is discarded). Rules that mark nodes
        final must also keep their descents out of final children themselves (as
        curiosity's selection does with proven children). None (default): the compiled
        program is the same as without the argument.
      prepare_fn: ``(ready_fn, fill_fn)`` or None, for rules whose per-node selection
        statistics are costly and only needed once the descent passes through a node
        (e.g. curiosity's P(best) over a fresh node's priors). ``ready_fn(tree,
        node_index []) -> bool []`` (one tree) says whether a node's statistics exist;
        the descent does not enter an expanded child that is not ready but stops on
        it; then ``fill_fn(tree, node_index [B], needed [B] bool) -> tree`` (batched)
        fills the statistics of the stopped nodes, and the interior rule selects the
        edge to expand there, with the key and depth the descent would have used.
        The resulting tree is the one an eager rule (statistics computed at
        expansion) builds. None (default): the compiled program is unchanged.

    Returns:
      The ``Tree`` (``[B, N, ...]`` arrays).
    """
    if selection_rng not in SELECTION_RNG:
        raise ValueError(f"selection_rng must be one of {SELECTION_RNG}, got {selection_rng!r}")
    if backup_fn is None:
        backup_fn = backup_values
    batch_size, num_actions = root.prior_logits.shape
    batch_range = jnp.arange(batch_size)
    if max_depth is None:
        max_depth = num_simulations
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)

    tree = instantiate_tree(
        root.prior_logits,
        root.value,
        root.embedding,
        num_simulations,
        invalid_actions,
        extra_data=extra_data,
        root_node_extras=getattr(root, "node_extras", None),
    )

    def body(sim, loop_state):
        rng_key, tree = loop_state
        rng_key, simulate_key, expand_key = jax.random.split(rng_key, 3)
        if selection_rng == "none":
            simulate_keys = None
        else:
            simulate_keys = jax.random.split(simulate_key, batch_size)
        descent = descend(
            simulate_keys,
            tree,
            root_action_selection_fn,
            interior_action_selection_fn,
            max_depth=max_depth,
            split_per_step=selection_rng == "per_step",
            ready_fn=None if prepare_fn is None else prepare_fn[0],
        )
        parent_index, action = descent.node_index, descent.action
        if prepare_fn is not None:
            tree, parent_index, action = select_at_unready(
                tree, descent, prepare_fn, interior_action_selection_fn, max_depth,
                split_per_step=selection_rng == "per_step",
            )
        next_node_index = tree.children_index[batch_range, parent_index, action]
        next_node_index = jnp.where(next_node_index == UNVISITED, sim + 1, next_node_index)
        skipped = None if root_done_fn is None else jax.vmap(root_done_fn)(tree)
        tree = expand(
            params, expand_key, tree, recurrent_fn, parent_index, action, next_node_index,
            skip_write=skipped,
        )
        if skipped is not None:
            next_node_index = jnp.where(skipped, ROOT_INDEX, next_node_index)
        tree = backup_fn(tree, next_node_index)
        return rng_key, tree

    _, tree = loop_fn(0, num_simulations, body, (rng_key, tree))
    return tree


class DescentState(NamedTuple):
    """Where one tree's descent stands (fields ``[]``; ``[B]`` once batched by ``descend``)."""

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


def expand(
    params: Params,
    rng_key: chex.PRNGKey,
    tree: Tree,
    recurrent_fn: RecurrentFn,
    parent_index: chex.Array,
    action: chex.Array,
    next_node_index: chex.Array,
    skip_write: chex.Array | None = None,
) -> Tree:
    """Evaluates ``action`` from ``parent_index`` and writes node ``next_node_index``.

    Args:
      parent_index, action, next_node_index: ``[B]`` int32.
      skip_write: ``[B]`` bool or None: where True, nothing is written for that tree
        (the model's output is discarded and no visit is counted).

    Returns:
      The tree with the new node's prior, values, edge reward/discount, embedding and
      node extras written, its visit count incremented, and the edge linked.
    """
    batch_size = parent_index.shape[0]
    b = jnp.arange(batch_size)
    embedding = jax.tree.map(lambda x: x[b, parent_index], tree.embeddings)
    step, embedding = recurrent_fn(params, rng_key, action, embedding)
    chex.assert_shape(step.prior_logits, (batch_size, tree.num_actions))
    chex.assert_shape([step.reward, step.discount, step.value], (batch_size,))

    mode = None
    if skip_write is not None:
        # Out-of-range indices: the scatters below drop those trees' writes.
        mode = "drop"
        next_node_index = jnp.where(skip_write, tree.num_simulations + 1, next_node_index)
        parent_index = jnp.where(skip_write, tree.num_simulations + 1, parent_index)
    visits = tree.node_visits.at[b, next_node_index].add(1, mode=mode)

    def write(array, value):
        return array.at[b, next_node_index].set(value, mode=mode)

    def write_if_stored(array, value):  # the last node's embedding is never read
        return array.at[b, next_node_index].set(value, mode="drop")

    node_extras = tree.node_extras
    if jax.tree.leaves(node_extras):
        step_extras = getattr(step, "node_extras", None)
        if step_extras is None:
            raise ValueError("the root has node_extras but recurrent_fn's output has none")
        node_extras = jax.tree.map(write, node_extras, step_extras)

    return tree.replace(
        node_visits=visits,
        raw_values=write(tree.raw_values, step.value),
        node_values=write(tree.node_values, step.value),
        node_rewards=write(tree.node_rewards, step.reward),
        node_discounts=write(tree.node_discounts, step.discount),
        parents=write(tree.parents, parent_index),
        action_from_parent=write(tree.action_from_parent, action),
        children_prior_logits=write(tree.children_prior_logits, step.prior_logits),
        children_index=tree.children_index.at[b, parent_index, action].set(
            next_node_index, mode=mode
        ),
        embeddings=jax.tree.map(write_if_stored, tree.embeddings, embedding),
        node_extras=node_extras,
    )


def walk_to_root(
    step_fn: Callable[[Any, chex.Array, chex.Array], Any],
    carry: Any,
    parents: chex.Array,
    leaf_index: chex.Array,
) -> Any:
    """Calls ``carry = step_fn(carry, parent, child)`` for each edge from leaf to root.

    Unbatched (use inside ``jax.vmap``). Keep ``carry`` to what changes (e.g. the
    ``[N]`` value and visit arrays and the running return): under vmap every step
    selects over the whole carry.

    Args:
      parents: ``[N]`` parent index of each node.
      leaf_index: ``[]``.
    """

    def body(state):
        carry, child = state
        parent = parents[child]
        return step_fn(carry, parent, child), parent

    carry, _ = jax.lax.while_loop(
        lambda state: state[1] != ROOT_INDEX, body, (carry, jnp.asarray(leaf_index, jnp.int32))
    )
    return carry


def backup_values(tree: Tree, leaf_index: chex.Array) -> Tree:
    """The mean-value backup: every ancestor's value becomes the running mean of returns.

    The return through edge (parent -> child) is ``reward + discount * return(child)``,
    starting from the leaf's value; each ancestor's visit count is incremented.

    Args:
      tree: batched tree.
      leaf_index: ``[B]``.
    """

    def one(tree: Tree, leaf: chex.Array) -> tuple[chex.Array, chex.Array]:
        def step(carry, parent, child):
            values, visits, leaf_value = carry
            leaf_value = tree.node_rewards[child] + tree.node_discounts[child] * leaf_value
            count = visits[parent]
            values = values.at[parent].set((values[parent] * count + leaf_value) / (count + 1.0))
            visits = visits.at[parent].set(count + 1)
            return values, visits, leaf_value

        values, visits, _ = walk_to_root(
            step, (tree.node_values, tree.node_visits, tree.node_values[leaf]), tree.parents, leaf
        )
        return values, visits

    values, visits = jax.vmap(one)(tree, leaf_index)
    return tree.replace(node_values=values, node_visits=visits)
