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
``curiosity_search.envs``; the search benchmark in ``curiosity_search.bench.search``.

Curiosity-driven search is a rule built on these hooks; it lives in its own package,
``curiosity_search.curiosity``.

The hook contract: how a strategy plugs into ``search.search``, nothing in the kernel
changing. This docstring is its one statement; README and ``docs/fork_search_kernel.md``
(a worked UCB1 example, and how to train with a new rule) link here. The hooks are
arguments of ``search.search``; each default keeps mctx's behaviour and program.

1. Selection (``root_action_selection_fn``, ``interior_action_selection_fn``; required).
   Write plain functions of ONE (unbatched) tree and a scalar node index:
   ``root_rule(rng_key, tree, node_index) -> action`` and
   ``interior_rule(rng_key, tree, node_index, depth) -> action`` (``[]`` int32), bind
   options with ``functools.partial``. The kernel ``vmap``s them over the batch. The
   root rule runs only at the root and the interior rule only below it (``depth`` >= 1,
   the number of edges from the root to ``node_index``), so a rule never branches on
   depth at run time. Read the node with (``[A]`` unless noted):

   - ``tree.node_children_visits(i)``: the children's visit counts;
   - ``tree.node_qvalues(i)``: ``r + discount * value(child)``, 0 where unvisited; with
     two-player models (``discount = -1``) the sign flip is already applied;
   - ``tree.children_prior_logits[i]``, ``tree.node_visits[i]`` ``[]``,
     ``tree.node_values[i]`` ``[]``, ``tree.children_index[i]`` (``-1`` where
     unexpanded), ``tree.root_invalid_actions`` (1 = invalid at the root; the root rule
     masks with it, e.g. ``masked_argmax(score, tree.root_invalid_actions)``);
   - ``tree.node_extras[...][i]``: any per-node arrays the model outputs (3);
   - ``tree.extra_data``: per-tree data passed to ``search.search`` as ``extra_data``
     (Gumbel's root noise ``[A]``; curiosity's incremental root selection cache).

2. Keys (``selection_rng``, default ``"per_step"``): what the rules receive as
   ``rng_key``. ``"none"``: None, for deterministic rules (no key splitting at all,
   fastest). ``"per_simulation"``: one key per tree and simulation, the same at every
   step; derive a fresh draw per step with ``jax.random.fold_in(rng_key, depth)`` (the
   root rule takes depth 0), as curiosity's Thompson selection does. ``"per_step"``:
   a fresh key per descent step from mctx's key chain (``puct_policy(tie_break=
   "random")`` uses it to reproduce mctx bit for bit).

3. Node extras (default: none). Return ``RootFnOutputWithExtras`` /
   ``RecurrentFnOutputWithExtras`` from the root and ``recurrent_fn`` with
   ``node_extras``: a pytree of ``[B, ...]`` arrays (e.g. ``{"belief": [B, K],
   "child_prior_beliefs": [B, A, K]}``). The tree then holds ``tree.node_extras`` as
   ``[B, N, ...]`` arrays, written at expansion for the new node (and the root at
   allocation); the rules read them and a ``backup_fn`` may update them. No extras: an
   empty dict, no cost.

4. Backup (``backup_fn``, default ``search.backup_values``, the running mean of
   returns). Pass ``backup_fn(tree, leaf_index [B]) -> tree`` (batched). Build it like
   ``search.backup_values``: ``jax.vmap`` over trees of a function that calls
   ``search.walk_to_root(step_fn, carry, tree.parents, leaf)``, with
   ``step_fn(carry, parent, child) -> carry`` and the carry holding only what changes
   (``[N]`` arrays such as ``node_visits`` and ``node_extras["belief"]``). Keep
   ``node_visits`` incremented along the path (selection, the summary and the Gumbel
   schedule read visit counts from it). E.g. a curiosity backup sets at each ancestor
   ``C = (1 - gamma) V + gamma * Qbar`` over its children, gathered with
   ``tree.children_index[parent]`` from the carried belief array. A backup may also
   return an updated ``tree.extra_data`` (same structure and shapes).

5. A final root (``root_done_fn``, default None: every simulation runs). Pass
   ``root_done_fn(tree) -> bool`` (one tree) to mark a root whose result can no longer
   change (curiosity: proven): the remaining simulations of that tree then leave it
   unchanged and write nothing, visits included. A rule that marks nodes final keeps
   its own descents out of final children (curiosity's selection excludes proven ones).

6. Lazy per-node statistics (``prepare_fn``, default None). ``(ready_fn, fill_fn)`` for
   a rule whose selection statistics are costly and only needed once a descent passes
   through a node: ``ready_fn(tree, node_index) -> bool`` (one tree) says whether a
   node's statistics exist; the descent stops on an expanded node that is not ready,
   ``fill_fn(tree, node_index [B], needed [B]) -> tree`` (batched) computes them, and
   the interior rule selects there. The tree is the one an eager rule would build
   (curiosity's lazy prior P(best)).

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
