"""Curiosity-driven tree search: Thompson selection over beliefs, pseudo-Bayesian backups.

Every node holds a belief (Beta, K = 2: (win, loss); Dirichlet, K = 3: (win, draw,
loss)) **from the point of view of the player to move at that node** (seeds/002). The
network gives, per evaluated node, a value belief V ``[K]`` and action beliefs Q_a
``[A, K]``; Q_a is the belief about playing ``a`` from the same node's mover's view, so
a parent reads an unexpanded child ``a`` as ``Q_a`` and an expanded child as its
search belief seen from the parent's side (``CuriosityOptions.to_parent``).

- Selection: one action drawn from P(a is best) over the node's *unresolved* legal
  children, in one of two ways (``CuriosityOptions.selection_draw``; by default the
  table at K = 2, the draw at K = 3):
  - the table (``curiosity_selection``; at the root ``curiosity_root_selection``): one
    uniform per step, no Gamma or Beta draws. The distribution only changes when a
    backup passes through the node, so the backup keeps it in the node's
    ``selection_cache.SelectionCache`` (with ``pbest_updates="incremental"`` the root's
    holds the fast kernel's aggregates, updated for the one child that changed, in
    ``tree.extra_data``) and selection reads it in O(A + G): a two-stage inverse-CDF
    draw (``beliefs.stage_index``, then one table column). A new node's distribution
    over its Q_a priors is computed lazily, when a descent first stops on it (the
    kernel's ``prepare_fn``);
  - the draw (``curiosity_thompson_selection``): one score drawn from each child's
    belief, in log space, and the argmax (``thompson``): exactly P(best), no cached
    rows and no lazy fills.
- Backup (``backup.curiosity_backup``): pi = P(best) over the children, the pi-mixture,
  ``C = (1 - gamma) V + gamma Qbar``, ``gamma = n / (kappa + n)``.
- Proofs, exact facts: a terminal node is proven at expansion; a child proven won
  proves its parent won; a node whose legal children are all proven is proven at the
  best of them; each proof keeps its length in plies. Descents never enter a proven
  child (selection excludes them). A proven root spends no further simulations (the
  kernel's ``root_done_fn``) and returns its exact answer: a one-hot policy on the
  shortest proven win, the shortest draw, or the longest loss.
- Output: ``action_weights`` = P(best) at the root (the policy target; a proven child
  counts with its exact weight), the root belief (the value target), the root
  children's beliefs and proofs (the action-value targets).

The rule plugs into the generic kernel (``search.search``) through its hooks: node
extras (``CuriosityExtras``), a selection function, a backup function, ``prepare_fn``
and ``root_done_fn``. Static options are one ``CuriosityOptions``; ``kappa`` and the
temperature may be traced.

Shapes: ``B`` batch, ``N`` nodes, ``A`` actions, ``K`` outcomes.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp

from curiosity_search.curiosity import beliefs, native_cpu
from curiosity_search.curiosity.backup import curiosity_backup
from curiosity_search.curiosity.nodes import (
    DEFAULT_OPTIONS,
    BeliefRootFnOutput,
    CuriosityExtraData,
    CuriosityOptions,
    fill_prior_best,
    has_best_probability,
    node_extras,
    prove,
    wrap_recurrent_fn,
)
from curiosity_search.curiosity.selection_cache import empty_cache
from curiosity_search.curiosity.thompson import thompson_draw
from curiosity_search.search.base import LoopFn, Params, PolicyOutput, RootFnOutputWithExtras
from curiosity_search.search.search import search as run_search
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree


@chex.dataclass(frozen=True)
class CuriosityPolicyOutput(PolicyOutput):
    """``PolicyOutput`` plus the root's beliefs and proofs.

    action_weights: ``[B, A]`` root P(best) (the policy target), one-hot on the exact
    answer at a proven root. root_belief: ``[B, K]`` root search belief (the value
    target; exact at a proven root). root_proven: ``[B]`` bool. child_beliefs:
    ``[B, A, K]`` the root children's beliefs from the root mover's view (search belief
    if expanded, Q_a prior otherwise; a proven child's ``beliefs.exact_belief``).
    child_belief_mask: ``[B, A]`` bool, expanded legal children. child_proven:
    ``[B, A]`` bool, expanded legal children whose result is exact.
    """

    root_belief: chex.Array = None  # [B, K]
    root_proven: chex.Array = None  # [B]
    child_beliefs: chex.Array = None  # [B, A, K]
    child_belief_mask: chex.Array = None  # [B, A]
    child_proven: chex.Array = None  # [B, A]


def children_beliefs(
    tree: Tree, node_index: chex.Array, node_beliefs: chex.Array,
    options: CuriosityOptions = DEFAULT_OPTIONS,
) -> tuple[chex.Array, chex.Array]:
    """Beliefs of one node's children from its mover's view (unbatched tree).

    Args:
      node_beliefs: ``[N, K]`` search beliefs of all nodes.

    Returns:
      ``(beliefs [A, K], expanded [A] bool)``: the children's search beliefs (parent's
      view) where expanded, the node's Q_a priors elsewhere.
    """
    index = tree.children_index[node_index]  # [A]
    expanded = index != UNVISITED
    searched = options.to_parent(node_beliefs[jnp.maximum(index, 0)])
    prior = tree.node_extras.action_beliefs[node_index]
    return jnp.where(expanded[:, None], searched, prior), expanded


def children_proofs(tree: Tree, node_index: chex.Array,
                    options: CuriosityOptions = DEFAULT_OPTIONS):
    """``(proven [A], score [A], length [A])`` of one node's children (unbatched tree),
    scores from the node's mover's view; unexpanded children are unproven."""
    extras = tree.node_extras
    index = tree.children_index[node_index]
    safe = jnp.maximum(index, 0)
    proven = (index != UNVISITED) & extras.proven[safe] & ~extras.invalid[node_index]
    return proven, options.score_to_parent(extras.proven_score[safe]), extras.proven_length[safe]


def curiosity_selection(
    rng_key: chex.PRNGKey, tree: Tree, node_index: chex.Array, depth: chex.Array | int = 0,
) -> chex.Array:
    """Thompson selection at one node: an action drawn from P(a is best) over its
    unresolved legal children, ``[]`` int32.

    Reads the node's ``SelectionCache`` (kept current by the backup and by
    ``fill_prior_best``): one uniform and a two-stage inverse-CDF draw, O(A + G). Use with
    ``selection_rng="per_simulation"``: the draw at ``depth`` uses ``u =
    uniform(fold_in(rng_key, depth))`` (root: depth 0).
    """
    uniform = jax.random.uniform(jax.random.fold_in(rng_key, depth))
    return _draw(jax.tree_util.tree_map(lambda x: x[node_index], tree.node_extras.selection),
                 uniform)


def curiosity_thompson_selection(
    rng_key: chex.PRNGKey, tree: Tree, node_index: chex.Array, depth: chex.Array | int = 0,
    *, options: CuriosityOptions = DEFAULT_OPTIONS,
) -> chex.Array:
    """Thompson selection at one node by drawing (``CuriosityOptions.selection_draw``):
    one score from each unresolved legal child's belief, the argmax, ``[]`` int32.

    Reads the children's beliefs from the node's mover's view (``children_beliefs``),
    no selection cache: O(A K) random draws (``thompson.thompson_draw``) with the key
    ``fold_in(rng_key, depth)`` (root: depth 0). For the root and interior nodes alike.
    """
    child_beliefs, _ = children_beliefs(tree, node_index, tree.node_extras.belief, options)
    proven = children_proofs(tree, node_index, options)[0]
    unresolved = ~tree.node_extras.invalid[node_index] & ~proven
    return thompson_draw(jax.random.fold_in(rng_key, depth), child_beliefs, unresolved)


def curiosity_root_selection(rng_key: chex.PRNGKey, tree: Tree,
                             node_index: chex.Array) -> chex.Array:
    """The root's Thompson selection, ``[]`` int32: ``curiosity_selection`` at depth 0,
    reading ``tree.extra_data.root_selection`` when the root keeps the incremental
    layout (``nodes.CuriosityExtraData``; the choice is static, the tree's structure)."""
    if isinstance(tree.extra_data, CuriosityExtraData):
        return _draw(tree.extra_data.root_selection,
                     jax.random.uniform(jax.random.fold_in(rng_key, 0)))
    return curiosity_selection(rng_key, tree, node_index, 0)


def _draw(cache, uniform: chex.Array) -> chex.Array:
    """The action ``[]`` a two-stage inverse-CDF draw of ``uniform`` picks from one
    node's ``cache`` (``beliefs.two_stage_index``: only the drawn stage's column ``[A]``
    is read).

    On the CPU, where the native library is built, by its pass (``native_cpu.native_draw``,
    ``draw_cpu.cc``: the same rules with left-to-right running sums; XLA:CPU's
    ``cumsum`` made these draws ~10% of an 11x11 search's time).
    """
    return native_cpu.native_or_array(native_cpu.native_draw, beliefs.two_stage_index,
                                      cache.weights, cache.table, uniform)


def root_is_proven(tree: Tree) -> chex.Array:
    """The kernel's ``root_done_fn``: the root's result is exact, ``[]`` bool (one tree)."""
    return tree.node_extras.proven[ROOT_INDEX]


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
    temperature: chex.Numeric = 1.0,
    options: CuriosityOptions = DEFAULT_OPTIONS,
) -> CuriosityPolicyOutput:
    """Curiosity-driven search (``mctx.muzero_policy``'s arguments plus beliefs).

    Args:
      params, rng_key, num_simulations, invalid_actions, max_depth, loop_fn: as
        ``mctx.muzero_policy``; invalid_actions ``[B, A]`` (True/1 = illegal).
      root: ``BeliefRootFnOutput`` (value_belief ``[B, K]``, action_beliefs ``[B, A, K]``).
      recurrent_fn: ``(params, key, action [B], embedding) ->
        (BeliefRecurrentFnOutput, embedding)``; an action whose prior logit is below
        ``nodes.ILLEGAL_LOGIT`` is illegal at an interior node.
      kappa: prior strength in ``gamma = n / (kappa + n)`` (may be traced).
      temperature: the action is drawn from ``action_weights ** (1 / temperature)``;
        0 = argmax (may be traced, except the exact 0).
      options: the static ``CuriosityOptions`` (grid, P(best) method, summary, players).

    Returns:
      ``CuriosityPolicyOutput``: action ``[B]``, action_weights ``[B, A]``, search_tree,
      root_belief ``[B, K]``, root_proven ``[B]``, child_beliefs ``[B, A, K]``,
      child_belief_mask ``[B, A]``, child_proven ``[B, A]``.
    """
    batch_size, num_actions = root.prior_logits.shape
    if invalid_actions is None:
        invalid_actions = jnp.zeros((batch_size, num_actions), bool)
    invalid_actions = jnp.asarray(invalid_actions).astype(bool)
    rng_key, search_key = jax.random.split(rng_key)
    value_belief = root.value_belief.astype(jnp.float32)
    root_action_beliefs = root.action_beliefs.astype(jnp.float32)
    extra_data = options.root_data(root_action_beliefs, ~invalid_actions)
    draws = options.draws_thompson(value_belief.shape[-1])
    if extra_data is None and not draws:
        root_selection = options.selection_from_beliefs(root_action_beliefs, ~invalid_actions)
    else:  # the root's node-level cache is unused
        root_selection = empty_cache((batch_size,), num_actions)
    if draws:
        draw = functools.partial(curiosity_thompson_selection, options=options)
        root_selection_fn, interior_selection_fn, prepare_fn = draw, draw, None
    else:
        root_selection_fn, interior_selection_fn = curiosity_root_selection, curiosity_selection
        prepare_fn = (has_best_probability, functools.partial(fill_prior_best, options=options))
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
            root_selection,
        ),
    )
    tree = run_search(
        params,
        search_key,
        root=kernel_root,
        recurrent_fn=wrap_recurrent_fn(recurrent_fn, options),
        root_action_selection_fn=root_selection_fn,
        interior_action_selection_fn=interior_selection_fn,
        num_simulations=num_simulations,
        max_depth=max_depth,
        invalid_actions=invalid_actions.astype(root.prior_logits.dtype),
        loop_fn=loop_fn,
        backup_fn=functools.partial(curiosity_backup, kappa=kappa, options=options),
        selection_rng="per_simulation",
        root_done_fn=root_is_proven,
        extra_data=extra_data,
        prepare_fn=prepare_fn,
    )
    # The kernel's scalar summaries read node_values; the backup leaves them alone.
    tree = tree.replace(node_values=jnp.where(
        tree.node_visits > 0, beliefs.to_value(tree.node_extras.belief), 0.0,
    ).astype(tree.node_values.dtype))
    root_index = jnp.full((batch_size,), ROOT_INDEX, jnp.int32)
    child_beliefs, expanded = jax.vmap(
        lambda t, i: children_beliefs(t, i, t.node_extras.belief, options))(tree, root_index)
    child_proven, child_score, child_length = jax.vmap(
        lambda t, i: children_proofs(t, i, options))(tree, root_index)
    root_proven, _, _, choice = prove(child_proven, child_score, child_length, invalid_actions)
    root_proven = root_proven | tree.node_extras.proven[:, ROOT_INDEX]
    exact_scores = jnp.where(child_proven, child_score, jnp.nan)
    weights = options.best_probability(child_beliefs, invalid_actions, exact_scores)
    answer = jax.nn.one_hot(jnp.maximum(choice, 0), num_actions, dtype=weights.dtype)
    action_weights = jnp.where(root_proven[:, None], answer, weights)
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
        root_proven=root_proven,
        child_beliefs=child_beliefs,
        child_belief_mask=expanded & ~invalid_actions,
        child_proven=child_proven,
    )
