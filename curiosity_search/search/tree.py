"""The preallocated search tree: one frozen dataclass of ``[B, N, ...]`` arrays.

Node ``i`` is created by simulation ``i - 1`` (node 0 is the root), so a search of
``num_simulations`` simulations needs ``N = num_simulations + 1`` nodes.

Compared with ``mctx.Tree`` the tree stores edge statistics on the *child* node (every
node has exactly one parent edge): ``children_visits``, ``children_values``,
``children_rewards`` and ``children_discounts`` are gathered through
``children_index`` instead of being stored as four more ``[B, N, A]`` arrays, and the
backup only writes ``[B, N]`` arrays. Embeddings are stored for the first
``num_simulations`` nodes only: the node made by the last simulation is never
expanded from, so its embedding is never read.
"""

from __future__ import annotations

from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

ROOT_INDEX = 0
NO_PARENT = -1
UNVISITED = -1


@chex.dataclass(frozen=True)
class Tree:
    """State of a batch of search trees.

    ``B`` batch, ``N`` nodes (``num_simulations + 1``), ``A`` actions. All methods and
    properties also work on an *unbatched* tree (leading ``B`` dropped), which is what
    selection rules and backups see inside ``jax.vmap``.
    """

    node_visits: chex.Array  # [B, N] int32; root starts at 1, a new node at 1
    raw_values: chex.Array  # [B, N] the model's value of the node
    node_values: chex.Array  # [B, N] the search value (mean of backed-up returns)
    node_rewards: chex.Array  # [B, N] reward on the edge parent -> node
    node_discounts: chex.Array  # [B, N] discount on the edge parent -> node (-1: two-player)
    parents: chex.Array  # [B, N] int32, NO_PARENT for the root and unused nodes
    action_from_parent: chex.Array  # [B, N] int32, NO_PARENT for the root and unused nodes
    children_index: chex.Array  # [B, N, A] int32, UNVISITED where not expanded
    children_prior_logits: chex.Array  # [B, N, A] the node's prior logits
    embeddings: Any  # pytree of [B, max(N - 1, 1), ...]
    root_invalid_actions: chex.Array  # [B, A] 1 = invalid at the root
    extra_data: Any  # pytree of [B, ...], e.g. the root Gumbel noise
    node_extras: Any  # pytree of [B, N, ...] (empty dict when unused: no cost)

    ROOT_INDEX: ClassVar[int] = ROOT_INDEX
    NO_PARENT: ClassVar[int] = NO_PARENT
    UNVISITED: ClassVar[int] = UNVISITED

    @property
    def num_actions(self) -> int:
        return self.children_index.shape[-1]

    @property
    def num_simulations(self) -> int:
        return self.node_visits.shape[-1] - 1

    @property
    def is_batched(self) -> bool:
        return self.node_visits.ndim == 2

    # --- edge statistics, gathered from the child nodes -------------------------------

    def _gather_children(self, node_array: chex.Array, fill: Any = 0) -> chex.Array:
        """``node_array[..., children_index]`` with ``fill`` where unvisited: [B, N, A]."""
        index = self.children_index
        if self.is_batched:
            gathered = jax.vmap(lambda x, i: x[i])(node_array, index)
        else:
            gathered = node_array[index]
        return jnp.where(index != UNVISITED, gathered, jnp.asarray(fill, node_array.dtype))

    @property
    def children_visits(self) -> chex.Array:
        """``[B, N, A]`` int32 visit counts of each edge (0 if unvisited)."""
        return self._gather_children(self.node_visits)

    @property
    def children_values(self) -> chex.Array:
        """``[B, N, A]`` search value of each child (0 if unvisited)."""
        return self._gather_children(self.node_values)

    @property
    def children_rewards(self) -> chex.Array:
        """``[B, N, A]`` reward of each edge (0 if unvisited)."""
        return self._gather_children(self.node_rewards)

    @property
    def children_discounts(self) -> chex.Array:
        """``[B, N, A]`` discount of each edge (0 if unvisited)."""
        return self._gather_children(self.node_discounts)

    # --- per-node accessors for rules (unbatched tree, scalar node_index) -------------

    def node_children_visits(self, node_index: chex.Array) -> chex.Array:
        """``[A]`` int32 visit counts of the children of one node (unbatched tree)."""
        index = self.children_index[node_index]
        return jnp.where(index != UNVISITED, self.node_visits[index], 0)

    def node_qvalues(self, node_index: chex.Array) -> chex.Array:
        """``[A]`` Q-values ``r + discount * value(child)`` of one node; 0 if unvisited."""
        index = self.children_index[node_index]
        q = self.node_rewards[index] + self.node_discounts[index] * self.node_values[index]
        return jnp.where(index != UNVISITED, q, jnp.zeros((), q.dtype))

    def qvalues(self, indices: chex.Array) -> chex.Array:
        """Q-values of nodes: ``[A]`` for a scalar index on an unbatched tree, or
        ``[B, A]`` for ``[B]`` indices on a batched tree (as ``mctx.Tree.qvalues``)."""
        if jnp.ndim(indices):
            return jax.vmap(Tree.node_qvalues)(self, indices)
        return self.node_qvalues(indices)

    def summary(self) -> SearchSummary:
        """Root statistics of a batched tree."""
        value = self.node_values[:, ROOT_INDEX]  # [B]
        root = jnp.zeros(value.shape, jnp.int32)
        visit_counts = jax.vmap(Tree.node_children_visits)(self, root).astype(value.dtype)
        total = jnp.sum(visit_counts, axis=-1, keepdims=True)
        visit_probs = visit_counts / jnp.maximum(total, 1)
        visit_probs = jnp.where(total > 0, visit_probs, 1 / self.num_actions)
        return SearchSummary(
            visit_counts=visit_counts,
            visit_probs=visit_probs,
            value=value,
            qvalues=self.qvalues(root),
        )


@chex.dataclass(frozen=True)
class SearchSummary:
    """Root statistics: visit_counts ``[B, A]`` (float), visit_probs ``[B, A]``,
    value ``[B]``, qvalues ``[B, A]``."""

    visit_counts: chex.Array  # [B, A]
    visit_probs: chex.Array  # [B, A]
    value: chex.Array  # [B]
    qvalues: chex.Array  # [B, A]


def tree_nbytes(tree: Any) -> int:
    """Bytes held by all arrays of a tree (any pytree, ours or mctx's)."""
    return int(sum(x.nbytes for x in jax.tree.leaves(tree)))


def instantiate_tree(
    root_prior_logits: chex.Array,
    root_value: chex.Array,
    root_embedding: Any,
    num_simulations: int,
    root_invalid_actions: chex.Array,
    extra_data: Any = None,
    root_node_extras: Any = None,
) -> Tree:
    """Allocates a tree for ``num_simulations`` and fills in its root.

    Args:
      root_prior_logits: ``[B, A]``.
      root_value: ``[B]``.
      root_embedding: pytree of ``[B, ...]``.
      num_simulations: static int.
      root_invalid_actions: ``[B, A]``, 1 = invalid.
      extra_data: pytree of ``[B, ...]`` kept as is.
      root_node_extras: pytree of ``[B, ...]`` or None; allocated as ``[B, N, ...]``.
    """
    chex.assert_rank(root_prior_logits, 2)
    batch_size, num_actions = root_prior_logits.shape
    chex.assert_shape(root_value, (batch_size,))
    num_nodes = num_simulations + 1
    num_embedding_slots = max(num_simulations, 1)
    dtype = root_value.dtype
    bn, bna = (batch_size, num_nodes), (batch_size, num_nodes, num_actions)

    def alloc(x, slots):
        return jnp.zeros((batch_size, slots) + x.shape[1:], x.dtype).at[:, ROOT_INDEX].set(x)

    node_extras = {} if root_node_extras is None else root_node_extras
    return Tree(
        node_visits=jnp.zeros(bn, jnp.int32).at[:, ROOT_INDEX].set(1),
        raw_values=jnp.zeros(bn, dtype).at[:, ROOT_INDEX].set(root_value),
        node_values=jnp.zeros(bn, dtype).at[:, ROOT_INDEX].set(root_value),
        node_rewards=jnp.zeros(bn, dtype),
        node_discounts=jnp.zeros(bn, dtype),
        parents=jnp.full(bn, NO_PARENT, jnp.int32),
        action_from_parent=jnp.full(bn, NO_PARENT, jnp.int32),
        children_index=jnp.full(bna, UNVISITED, jnp.int32),
        children_prior_logits=jnp.zeros(bna, root_prior_logits.dtype)
        .at[:, ROOT_INDEX]
        .set(root_prior_logits),
        embeddings=jax.tree.map(lambda x: alloc(x, num_embedding_slots), root_embedding),
        root_invalid_actions=root_invalid_actions,
        extra_data=extra_data,
        node_extras=jax.tree.map(lambda x: alloc(x, num_nodes), node_extras),
    )
