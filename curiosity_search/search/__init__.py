"""The search kernel: one generic batched MCTS loop, strategies plugged in as functions.

Files (one concept each):

- the kernel: ``tree`` (the preallocated ``[B, N, ...]`` Tree), ``search`` (the loop:
  simulate (``descend``: root to the edge to expand), expand, backup), ``base`` (model
  outputs and hook signatures);
- the rules: ``action_selection`` (PUCT MuZero/AlphaGo, UCT-P-NN, Gumbel
  root/interior), ``qtransforms``, ``seq_halving``, ``policies`` (``puct_policy``,
  ``gumbel_policy``, ``exit_policy``).

The kernel imports no pgx. Test aids (stub models with known answers, the slow
plain-Python reference search) live in ``curiosity_search.testing``; random rollouts in
``curiosity_search.envs``; the search benchmark in ``curiosity_search.search_bench``.

Curiosity-driven search is a rule built on these hooks; it lives in its own package,
``curiosity_search.curiosity``.

How a strategy plugs into ``search.search`` (nothing in the kernel changes):

1. Selection. Write plain functions of ONE (unbatched) tree:
   ``root_rule(rng_key, tree, node_index) -> action`` and
   ``interior_rule(rng_key, tree, node_index, depth) -> action`` (``[]`` int32), bind
   options with ``functools.partial`` and pass them as ``root_action_selection_fn`` /
   ``interior_action_selection_fn``. Read the node with ``tree.node_children_visits(i)``
   ``[A]``, ``tree.node_qvalues(i)`` ``[A]`` (``r + discount * value(child)``, so the
   two-player sign flip is already applied), ``tree.children_prior_logits[i]``,
   ``tree.node_visits[i]``, ``tree.children_index[i]`` and any ``tree.node_extras``.
   Choose ``selection_rng``: ``"none"`` (deterministic rule, fastest), ``"per_simulation"``
   (one key per tree and simulation; ``jax.random.fold_in(rng_key, depth)`` for a fresh
   draw per step, e.g. Thompson sampling), ``"per_step"`` (mctx's key chain).
2. Node extras. Return ``RootFnOutputWithExtras`` / ``RecurrentFnOutputWithExtras`` from
   the root and ``recurrent_fn`` with ``node_extras``: a pytree of ``[B, ...]`` arrays
   (e.g. ``{"belief": [B, K], "child_prior_beliefs": [B, A, K]}``). The tree then holds
   ``tree.node_extras`` as ``[B, N, ...]`` arrays, written at expansion for the new node
   (and the root at allocation). No extras: an empty dict, no cost.
3. Backup. Pass ``backup_fn(tree, leaf_index [B]) -> tree`` (batched). Build it like
   ``search.backup_values``: ``jax.vmap`` over trees of a function that calls
   ``search.walk_to_root(step_fn, carry, tree.parents, leaf)``, with
   ``step_fn(carry, parent, child) -> carry`` and the carry holding only what changes
   (``[N]`` arrays such as ``node_visits`` and ``node_extras["belief"]``). Keep
   ``node_visits`` incremented along the path (selection, the summary and the Gumbel
   schedule read visit counts from it). E.g. a curiosity backup sets at each ancestor
   ``C = (1 - gamma) V + gamma * Qbar`` over its children, gathered with
   ``tree.children_index[parent]`` from the carried belief array.

4. A final root (optional). Pass ``root_done_fn(tree) -> bool`` (one tree) to mark a
   root whose result can no longer change (curiosity: proven): further simulations then
   leave that tree unchanged. A rule that marks nodes final keeps its own descents out
   of final children (curiosity's selection excludes proven ones). The default None
   keeps mctx's behaviour and program.

Bind everything into a policy with ``functools.partial`` (see ``policies.py`` and
``docs/fork_search_kernel.md``). The library never calls ``jax.jit``; callers do.
"""

from curiosity_search.search.action_selection import (
    alphago_puct_selection,
    gumbel_interior_selection,
    gumbel_root_selection,
    masked_argmax,
    muzero_puct_selection,
    uct_p_nn_selection,
)
from curiosity_search.search.base import (
    PolicyOutput,
    RecurrentFnOutput,
    RecurrentFnOutputWithExtras,
    RootFnOutput,
    RootFnOutputWithExtras,
)
from curiosity_search.search.policies import (
    GumbelExtraData,
    exit_policy,
    gumbel_policy,
    puct_policy,
)
from curiosity_search.search.qtransforms import (
    qtransform_by_min_max,
    qtransform_by_parent_and_siblings,
    qtransform_completed_by_mix_value,
    qtransform_completed_by_parent_value,
)
from curiosity_search.search.search import backup_values, search, walk_to_root
from curiosity_search.search.tree import Tree, tree_nbytes

__all__ = [
    "GumbelExtraData",
    "PolicyOutput",
    "RecurrentFnOutput",
    "RecurrentFnOutputWithExtras",
    "RootFnOutput",
    "RootFnOutputWithExtras",
    "Tree",
    "alphago_puct_selection",
    "backup_values",
    "exit_policy",
    "gumbel_interior_selection",
    "gumbel_policy",
    "gumbel_root_selection",
    "masked_argmax",
    "muzero_puct_selection",
    "puct_policy",
    "qtransform_by_min_max",
    "qtransform_by_parent_and_siblings",
    "qtransform_completed_by_mix_value",
    "qtransform_completed_by_parent_value",
    "search",
    "tree_nbytes",
    "uct_p_nn_selection",
    "walk_to_root",
]
