"""Curiosity's nodes: model outputs with beliefs, per-node extras, lazy prior P(best).

A curiosity search stores per node (``CuriosityExtras``, ``[B, N, ...]`` in the tree)
the search belief C, the network's value belief V and action beliefs Q_a, the illegal
actions, the proof state and the running sum of P(a is best) that selection reads.
This module turns the model's ``BeliefRootFnOutput`` / ``BeliefRecurrentFnOutput`` into
those extras (terminal nodes get the exact belief of their result), and fills a node's
P(best) over its Q_a priors lazily, the first time a descent stops on it
(``has_best_probability`` / ``fill_prior_best``, the kernel's ``prepare_fn`` pair).
The policy, selection and proofs are in ``curiosity.py``; the backup in
``curiosity_backup.py``.

Shapes: ``B`` batch, ``N`` nodes, ``A`` actions, ``K`` outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import chex
import jax.numpy as jnp

from curiosity_search.search import beliefs
from curiosity_search.search.base import RecurrentFnOutputWithExtras
from curiosity_search.search.compaction import compacted_map, default_slots
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree

ILLEGAL_LOGIT = -1e30  # prior logits below this mark illegal actions at interior nodes


@chex.dataclass(frozen=True)
class BeliefRootFnOutput:
    """Root model output with beliefs.

    prior_logits: ``[B, A]``; value: ``[B]`` (scalar value, kept as the raw value);
    embedding: ``[B, ...]``; value_belief: ``[B, K]`` V for the root's mover;
    action_beliefs: ``[B, A, K]`` Q_a for the root's mover.
    """

    prior_logits: chex.Array  # [B, A]
    value: chex.Array  # [B]
    embedding: Any  # [B, ...]
    value_belief: chex.Array  # [B, K]
    action_beliefs: chex.Array  # [B, A, K]


@chex.dataclass(frozen=True)
class BeliefRecurrentFnOutput:
    """``recurrent_fn`` output with beliefs for the new node.

    reward: ``[B]`` for the player who moved; discount: ``[B]`` (-1 two-player, 0 at a
    terminal); prior_logits ``[B, A]``; value ``[B]``; value_belief ``[B, K]`` and
    action_beliefs ``[B, A, K]`` for the new node's mover (ignored at terminals).
    """

    reward: chex.Array  # [B]
    discount: chex.Array  # [B]
    prior_logits: chex.Array  # [B, A]
    value: chex.Array  # [B]
    value_belief: chex.Array  # [B, K]
    action_beliefs: chex.Array  # [B, A, K]


@chex.dataclass(frozen=True)
class CuriosityExtras:
    """Per-node arrays in ``Tree.node_extras`` (``[B, N, ...]`` in the tree).

    belief: ``[K]`` search belief C (node mover's view); value_belief: ``[K]`` network V
    (or the exact result); action_beliefs: ``[A, K]`` Q_a priors; invalid: ``[A]`` bool;
    proven: ``[]`` bool (terminal or solved: belief is exact and stays fixed);
    proven_score: ``[]`` exact expected outcome of a proven node (mover's view), else 0;
    best_cumulative: ``[A]`` running sum over actions (``beliefs.cumulative_probability``)
    of P(a is best) over the node's children beliefs as of its last backup (before its
    first: over its Q_a priors, computed when a descent first stops on the node,
    ``fill_prior_best``; zeros until then), read by selection's inverse-CDF draw.
    """

    belief: chex.Array
    value_belief: chex.Array
    action_beliefs: chex.Array
    invalid: chex.Array
    proven: chex.Array
    proven_score: chex.Array
    best_cumulative: chex.Array



def node_extras(
    value_belief: chex.Array,
    action_beliefs: chex.Array,
    invalid: chex.Array,
    proven: chex.Array,
    proven_score: chex.Array,
    best_weights: chex.Array | None = None,
) -> CuriosityExtras:
    """Extras of new nodes, ``[B, ...]``; their cumulative P(best) cache is over
    ``best_weights [B, A]`` (the root's P(best) over its Q_a priors) or, if None,
    zeros, filled later by ``fill_prior_best``."""
    if best_weights is None:
        best = jnp.zeros(invalid.shape, jnp.float32)
    else:
        best = beliefs.cumulative_probability(best_weights)
    return CuriosityExtras(
        belief=value_belief,
        value_belief=value_belief,
        action_beliefs=action_beliefs,
        invalid=invalid,
        proven=proven,
        proven_score=proven_score.astype(jnp.float32),
        best_cumulative=best,
    )


def has_best_probability(tree: Tree, node_index: chex.Array) -> chex.Array:
    """The kernel's ``ready_fn``: is the node's P(best) cache set? ``[]`` bool (one tree).

    The root's is set at the start and every backup through a node sets its cache, so
    exactly the nodes without expanded children lack one; the descent stops on them
    and ``fill_prior_best`` computes P(best) over their Q_a priors.
    """
    return (node_index == ROOT_INDEX) | jnp.any(tree.children_index[node_index] != UNVISITED)


def fill_prior_best(
    tree: Tree,
    node_index: chex.Array,
    needed: chex.Array,
    *,
    grid_size: int,
    pbest_method: str,
    compaction_slots: Sequence[int] | None = None,
) -> Tree:
    """The kernel's ``fill_fn``: cumulative P(best) over the Q_a priors of ``node_index
    [B]`` where ``needed [B]``, written to the nodes' caches (batched tree).

    Computed only for the trees that need it (``compaction.compacted_map``): a node's
    prior P(best) is read once, by the first selection at the node, and most nodes of
    a wide search are never selected from.
    """
    batch = jnp.arange(node_index.shape[0])
    extras = tree.node_extras
    slots = default_slots(batch.shape[0]) if compaction_slots is None else compaction_slots
    def pbest(concentrations, invalid):
        return beliefs.cumulative_probability(beliefs.best_arm_probability(
            concentrations, invalid, grid_size, pbest_method))

    best = compacted_map(pbest, needed, extras.action_beliefs[batch, node_index],
                         extras.invalid[batch, node_index], slots=tuple(slots))
    write_at = jnp.where(needed, node_index, tree.node_visits.shape[1])
    cache = extras.best_cumulative.at[batch, write_at].set(best, mode="drop")
    return tree.replace(node_extras=extras.replace(best_cumulative=cache))


def wrap_recurrent_fn(recurrent_fn, two_player: bool, proven_strength: float):
    """Turns a ``BeliefRecurrentFnOutput`` model into the kernel's extras-carrying one.

    At a terminal (discount 0) the node's belief is the exact result: the reward is for
    the player who moved, in [-1, 1], i.e. score ``(1 + r) / 2`` for the parent's mover.
    """

    def wrapped(params, rng_key, action, embedding):
        out, embedding = recurrent_fn(params, rng_key, action, embedding)
        num_outcomes = out.value_belief.shape[-1]
        terminal = out.discount == 0
        mover_score = 0.5 * (1.0 + out.reward)
        own_score = 1.0 - mover_score if two_player else mover_score
        exact = beliefs.score_belief(own_score, num_outcomes, proven_strength)
        value_belief = jnp.where(terminal[:, None], exact, out.value_belief)
        value_belief = value_belief.astype(jnp.float32)
        invalid = out.prior_logits < ILLEGAL_LOGIT
        extras = node_extras(
            value_belief,
            out.action_beliefs.astype(jnp.float32),
            invalid,
            terminal,
            jnp.where(terminal, own_score, 0.0),
        )
        kernel_out = RecurrentFnOutputWithExtras(
            reward=out.reward,
            discount=out.discount,
            prior_logits=out.prior_logits,
            value=out.value,
            node_extras=extras,
        )
        return kernel_out, embedding

    return wrapped
