"""Curiosity-driven tree search: Thompson selection over beliefs, pseudo-Bayesian backups.

Every node holds a belief (Beta, K = 2: (win, loss); Dirichlet, K = 3: (win, draw,
loss)) **from the point of view of the player to move at that node**. The network
gives, per evaluated node, a value belief V ``[K]`` and action beliefs Q_a ``[A, K]``;
Q_a is the belief about playing ``a`` **from the same node's mover's view** (the
player choosing ``a``), so a parent reads an unexpanded child ``a`` as ``Q_a`` and an
expanded child as ``flip_perspective(child belief)`` (two-player zero-sum; with
``two_player=False`` no flip).

- Selection: one action drawn from P(a is best) over the children beliefs by inverse
  CDF (one uniform per step, no Gamma/Beta draws, no per-action noise), illegal
  actions excluded. P(best) over a node's children only changes when a backup passes
  through the node, so the backup stores its running sum
  (``CuriosityExtras.best_cumulative``, computed once per node and simulation) and
  selection reads it: one comparison per action and step instead of a second O(A G)
  evaluation. A
  new node's P(best) over its Q_a priors is computed lazily, only when a descent
  first stops on it (the kernel's ``prepare_fn``; most nodes of a wide search are
  never selected from). Which P(best) (``pbest_method``: ``"fast"`` by default, or
  ``"accurate"``) is a static option of ``curiosity_policy``.
- Backup: for each ancestor, pi = P(best) over its children, Qbar = the pi-mixture
  summarized (``"average"`` of parameters as the blog, or ``"moment_match"``), and
  ``C = (1 - gamma) V + gamma Qbar``, ``gamma = n / (kappa + n)``, n = the sum of its
  children's visit counts (search evidence below it).
- Proofs: a terminal node (``discount == 0`` on its edge) gets the exact belief of its
  result; a node with a proven winning child, or whose legal children are all proven,
  is proven with the minimax result. Proven beliefs are ``beliefs.score_belief``
  (near-Dirac) and are never blended again. The descent stops at a proven child
  (the kernel's ``stop_descent_fn``): that simulation backs its exact belief up again
  (visits incremented along the path) instead of expanding a node below it.

The rule plugs into the generic kernel (``search.search``) through its hooks: node
extras (``CuriosityExtras``), a selection function and a backup function. Model outputs
are ``BeliefRootFnOutput`` / ``BeliefRecurrentFnOutput``; an action whose prior logit is
below ``-1e30`` (``masked_logits`` writes the dtype's minimum) is illegal at interior
nodes (the root uses ``invalid_actions``).
The node data and model adapters live in ``curiosity_nodes.py`` (re-exported here),
the backup in ``curiosity_backup.py``.

Shapes: ``B`` batch, ``N`` nodes, ``A`` actions, ``K`` outcomes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import chex
import jax
import jax.numpy as jnp

from curiosity_search.search import beliefs
from curiosity_search.search.base import (
    LoopFn,
    Params,
    PolicyOutput,
    RootFnOutputWithExtras,
)
from curiosity_search.search.curiosity_backup import curiosity_backup
from curiosity_search.search.curiosity_nodes import (
    ILLEGAL_LOGIT,
    BeliefRecurrentFnOutput,
    BeliefRootFnOutput,
    CuriosityExtras,
    fill_prior_best,
    has_best_probability,
    node_extras,
    wrap_recurrent_fn,
)
from curiosity_search.search.search import search as run_search
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree

BELIEF_SUMMARIES = ("average", "moment_match")

__all__ = [
    "BELIEF_SUMMARIES",
    "ILLEGAL_LOGIT",
    "BeliefRecurrentFnOutput",
    "BeliefRootFnOutput",
    "CuriosityExtras",
    "CuriosityPolicyOutput",
    "children_beliefs",
    "curiosity_policy",
    "curiosity_selection",
    "fill_prior_best",
    "has_best_probability",
    "is_proven",
]


@chex.dataclass(frozen=True)
class CuriosityPolicyOutput(PolicyOutput):
    """``PolicyOutput`` plus the root's beliefs.

    action_weights: ``[B, A]`` root P(a is best) (the policy target); root_belief:
    ``[B, K]`` root search belief (the value target); child_beliefs: ``[B, A, K]`` the
    root children's beliefs from the root mover's view (search belief if expanded,
    Q_a prior otherwise); child_belief_mask: ``[B, A]`` bool, expanded legal children.
    """

    root_belief: chex.Array = None  # [B, K]
    child_beliefs: chex.Array = None  # [B, A, K]
    child_belief_mask: chex.Array = None  # [B, A]


# --------------------------------------------------------------------------------------
# Node-level helpers (unbatched tree)
# --------------------------------------------------------------------------------------


def _to_parent(child_belief: chex.Array, two_player: bool) -> chex.Array:
    return beliefs.flip_perspective(child_belief) if two_player else child_belief


def children_beliefs(
    tree: Tree, node_index: chex.Array, node_beliefs: chex.Array, two_player: bool = True
) -> tuple[chex.Array, chex.Array]:
    """Beliefs of one node's children from its mover's view (unbatched tree).

    Args:
      node_beliefs: ``[N, K]`` search beliefs of all nodes (possibly being updated).

    Returns:
      ``(beliefs [A, K], expanded [A] bool)``: flipped search beliefs for expanded
      children, the node's Q_a priors for the others.
    """
    index = tree.children_index[node_index]  # [A]
    expanded = index != UNVISITED
    searched = _to_parent(node_beliefs[jnp.maximum(index, 0)], two_player)
    prior = tree.node_extras.action_beliefs[node_index]
    return jnp.where(expanded[:, None], searched, prior), expanded


def curiosity_selection(
    rng_key: chex.PRNGKey,
    tree: Tree,
    node_index: chex.Array,
    depth: chex.Array | int = 0,
    *,
    grid_size: int = 21,
    two_player: bool = True,
) -> chex.Array:
    """Thompson selection: an action drawn from P(a is best) at one node, ``[]`` int32.

    Reads the node's cached ``best_cumulative`` (kept current by ``curiosity_backup``
    and ``fill_prior_best``), so it equals ``beliefs.sample_best_arm`` over
    ``children_beliefs`` at O(A): one uniform ``u``, the inverse-CDF index
    (``beliefs.inverse_cdf_index``). ``grid_size`` and ``two_player`` are accepted for
    signature compatibility (they were fixed when the cache was computed).

    Use with ``selection_rng="per_simulation"``: the draw at ``depth`` uses
    ``u = jax.random.uniform(jax.random.fold_in(rng_key, depth))`` (root: depth 0).
    """
    del grid_size, two_player
    key = jax.random.fold_in(rng_key, depth)
    return beliefs.sample_from_cumulative(key, tree.node_extras.best_cumulative[node_index])


def is_proven(tree: Tree, node_index: chex.Array) -> chex.Array:
    """``stop_descent_fn`` for the kernel: True at terminal / solved nodes, ``[]`` bool."""
    return tree.node_extras.proven[node_index]




def curiosity_policy(
    params: Params,
    rng_key: chex.PRNGKey,
    root: BeliefRootFnOutput,
    recurrent_fn,
    num_simulations: int,
    invalid_actions: chex.Array | None = None,
    max_depth: int | None = None,
    loop_fn: LoopFn = jax.lax.fori_loop,
    *,
    kappa: chex.Numeric = 4.0,
    grid_size: int = 21,
    belief_summary: str = "average",
    temperature: chex.Numeric = 1.0,
    two_player: bool = True,
    proven_strength: float = 1e4,
    pbest_method: str = "fast",
    compaction_slots: Sequence[int] | None = None,
) -> CuriosityPolicyOutput:
    """Curiosity-driven search (``mctx.muzero_policy``'s arguments plus beliefs).

    Args:
      params, rng_key, num_simulations, invalid_actions, max_depth, loop_fn: as
        ``mctx.muzero_policy``; invalid_actions ``[B, A]`` (True/1 = illegal).
      root: ``BeliefRootFnOutput`` (value_belief ``[B, K]``, action_beliefs
        ``[B, A, K]``).
      recurrent_fn: ``(params, key, action [B], embedding) ->
        (BeliefRecurrentFnOutput, embedding)``.
      kappa: prior strength in ``gamma = n / (kappa + n)`` (may be traced).
      grid_size: G of the P(best) grid (static).
      belief_summary: ``"average"`` or ``"moment_match"`` (static).
      temperature: the action is drawn from P(best) ** (1 / temperature); 0 = argmax.
      two_player: alternate perspectives between plies (static).
      proven_strength: concentration of exact (terminal / solved) beliefs.
      pbest_method: ``"fast"`` (default) or ``"accurate"`` P(a is best) for every node,
        selection, backups and the root output (static; ``beliefs.best_arm_probability``).
        ``"fast"`` is the default because P(best) dominates the search's cost (~58% of
        it even so, results/bench/README.md): it was 16-18x faster for K = 2 when it was
        introduced (``[64, 122, 2]``: 1.8 vs 32 ms on the 2-core CPU), with max abs
        error vs ``"accurate"`` <= 0.008 on flat, moderate and sharp Beta families
        (0.044 where 1e4-sharp and flat arms compete; identical arms exact). For K = 3 it
        uses a moment-matched Beta on the score, off by up to 0.05 on moderate and 0.45
        on flat (total concentration ~1) draw-heavy Dirichlets, whose score is
        trimodal: prefer ``"accurate"`` for games with draws when accuracy matters.
      compaction_slots: static slot sizes for computing P(best) on only the trees
        that need it (``compaction.compacted_map``; None: ``default_slots(B)``, ``()``:
        always the whole batch). Exact either way; only the cost changes.

    Returns:
      ``CuriosityPolicyOutput``: action ``[B]``, action_weights ``[B, A]`` = root
      P(best), search_tree, root_belief ``[B, K]``, child_beliefs ``[B, A, K]``,
      child_belief_mask ``[B, A]``.
    """
    if belief_summary not in BELIEF_SUMMARIES:
        raise ValueError(f"belief_summary must be one of {BELIEF_SUMMARIES}")
    if pbest_method not in beliefs.PBEST_METHODS:
        raise ValueError(f"pbest_method must be one of {beliefs.PBEST_METHODS}")
    batch_size, num_actions = root.prior_logits.shape
    if invalid_actions is None:
        invalid_actions = jnp.zeros((batch_size, num_actions), bool)
    invalid_actions = jnp.asarray(invalid_actions).astype(bool)
    rng_key, search_key = jax.random.split(rng_key)
    value_belief = root.value_belief.astype(jnp.float32)
    root_action_beliefs = root.action_beliefs.astype(jnp.float32)
    root_weights = beliefs.best_arm_probability(root_action_beliefs, invalid_actions, grid_size,
                                                pbest_method)
    kernel_root = RootFnOutputWithExtras(
        prior_logits=root.prior_logits,
        value=root.value,
        embedding=root.embedding,
        node_extras=node_extras(
            value_belief,
            root_action_beliefs,
            invalid_actions,
            jnp.zeros((batch_size,), bool),
            jnp.zeros((batch_size,)),
            root_weights,
        ),
    )
    rule = functools.partial(curiosity_selection, grid_size=grid_size, two_player=two_player)
    tree = run_search(
        params,
        search_key,
        root=kernel_root,
        recurrent_fn=wrap_recurrent_fn(recurrent_fn, two_player, proven_strength),
        root_action_selection_fn=rule,
        interior_action_selection_fn=rule,
        num_simulations=num_simulations,
        max_depth=max_depth,
        invalid_actions=invalid_actions.astype(root.prior_logits.dtype),
        loop_fn=loop_fn,
        backup_fn=functools.partial(
            curiosity_backup,
            kappa=kappa,
            grid_size=grid_size,
            belief_summary=belief_summary,
            two_player=two_player,
            proven_strength=proven_strength,
            pbest_method=pbest_method,
            compaction_slots=compaction_slots,
        ),
        selection_rng="per_simulation",
        stop_descent_fn=is_proven,
        prepare_fn=(has_best_probability, functools.partial(
            fill_prior_best, grid_size=grid_size, pbest_method=pbest_method,
            compaction_slots=compaction_slots)),
    )
    root_index = jnp.full((batch_size,), ROOT_INDEX, jnp.int32)
    child_beliefs, expanded = jax.vmap(
        lambda t, i: children_beliefs(t, i, t.node_extras.belief, two_player)
    )(tree, root_index)
    action_weights = beliefs.best_arm_probability(
        child_beliefs, invalid_actions, grid_size, pbest_method
    )
    logits = jnp.where(action_weights > 0, jnp.log(jnp.maximum(action_weights, 1e-30)), -jnp.inf)
    if isinstance(temperature, int | float) and temperature == 0:
        action = jnp.argmax(logits, axis=-1)
    else:
        logits = logits / jnp.maximum(temperature, 1e-30)
        action = jnp.argmax(logits + jax.random.gumbel(rng_key, logits.shape), axis=-1)
    return CuriosityPolicyOutput(
        action=action.astype(jnp.int32),
        action_weights=action_weights,
        search_tree=tree,
        root_belief=tree.node_extras.belief[:, ROOT_INDEX],
        child_beliefs=child_beliefs,
        child_belief_mask=expanded & ~invalid_actions,
    )
