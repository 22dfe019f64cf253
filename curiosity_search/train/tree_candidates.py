"""Tree candidates (RGSC): each search tree's top-ranked non-root node, a restart state.

Regret-guided search control (``seeds/003``) restarts self-play from high-regret
states. Besides the trajectory's roots, ``make_search(..., tree_candidates=True)``
(``search_fns``) offers, per search tree, the expanded node the network's regret heads
rank highest: a position reachable from the root, off the played trajectory, whose
regret-value estimate stands in for its regret (``restarts``, ``search_control``).

Where the per-node ranking logits and regret estimates come from depends on the rule:

- PUCT, Gumbel and ExIt: from the network call that expanded each node. The root and
  recurrent functions return the node's ``regret_extras`` and the kernel stores them in
  ``tree.node_extras``: no extra network pass.
- curiosity: its beliefs fill the kernel's node extras, so the stored nodes are
  evaluated after the search in one batched call (``evaluate_tree_nodes``:
  ``B * num_simulations`` extra network evaluations per move, about doubling the
  network's share of a move).

``tree_candidate`` then picks, per tree, the highest-ranked valid node.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import mctx
from flax import struct


@struct.dataclass
class TreeCandidate:
    """Per search tree, its top-ranked non-root node: a restart candidate (RGSC).

    Attributes:
      states: env ``State`` ``[B]``, the node's state (its stored tree embedding: a
        position reachable from the root by the node's path of legal moves).
      rank_logit: ``[B]`` float32 ranking logit ``gamma`` of the node.
      regret_value: ``[B]`` float32 regret-value head estimate of the node.
      valid: ``[B]`` bool, the tree has such a node (expanded, not the root, not
        terminal, its state stored).
    """

    states: Any
    rank_logit: jax.Array
    regret_value: jax.Array
    valid: jax.Array


def regret_extras(output: Any) -> dict[str, jax.Array]:
    """The per-node extras of a tree-candidate search: ``regret_rank``, ``regret_value``
    (``[B]`` float32 each) from the network's ``output``."""
    if output.regret_rank is None or output.regret_value is None:
        raise ValueError("tree candidates need a network with regret heads (network.regret_heads)")
    return {
        "regret_rank": output.regret_rank.astype(jnp.float32),
        "regret_value": output.regret_value.astype(jnp.float32),
    }


def tree_candidate(tree: Any, rank_logits: jax.Array, regret_values: jax.Array) -> TreeCandidate:
    """The top-ranked candidate node of each tree (max ``rank_logits`` over valid nodes).

    Valid nodes: expanded (they have a parent, so never the root nor an unused slot),
    their state stored in ``tree.embeddings`` (the kernel does not store the last
    node's) and not terminal (nor truncated). Ties go to the lowest node index.

    Args:
      tree: the search ``Tree`` (``[B, N, ...]``; embeddings ``[B, S, ...]``,
        ``S = max(N - 1, 1)``).
      rank_logits: ``[B, M]`` ranking logits of nodes ``0..M-1``, ``M >= S``.
      regret_values: ``[B, M]`` regret estimates of the same nodes.

    Returns:
      ``TreeCandidate`` ``[B]`` (where ``valid`` is False its fields are node 0's).
    """
    embeddings = tree.embeddings
    slots = jax.tree.leaves(embeddings)[0].shape[1]  # S, static
    live = ~embeddings.terminated
    truncated = getattr(embeddings, "truncated", None)
    if truncated is not None:
        live = live & ~truncated
    valid_nodes = (tree.parents[:, :slots] != mctx.Tree.NO_PARENT) & live  # [B, S]
    ranks = jnp.where(valid_nodes, rank_logits[:, :slots].astype(jnp.float32), -jnp.inf)
    best = jnp.argmax(ranks, axis=-1)  # [B]
    rows = jnp.arange(best.shape[0])
    return TreeCandidate(
        states=jax.tree.map(lambda x: x[rows, best], embeddings),
        rank_logit=ranks[rows, best],
        regret_value=regret_values[rows, best].astype(jnp.float32),
        valid=jnp.any(valid_nodes, axis=-1),
    )


def evaluate_tree_nodes(network: Any, params: Any, tree: Any) -> tuple[jax.Array, jax.Array]:
    """``(rank_logits [B, S], regret_values [B, S])`` of the stored tree nodes, by one
    batched network call on their observations (``B * S`` evaluations)."""
    observation = tree.embeddings.observation  # [B, S, ...]
    batch, slots = observation.shape[:2]
    output = network.apply(params, observation.reshape((batch * slots,) + observation.shape[2:]))
    extras = regret_extras(output)
    return (
        extras["regret_rank"].reshape(batch, slots),
        extras["regret_value"].reshape(batch, slots),
    )


__all__ = ["TreeCandidate", "evaluate_tree_nodes", "regret_extras", "tree_candidate"]
