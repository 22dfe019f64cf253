"""Types shared by the search kernel: model outputs, policy outputs, strategy signatures.

``RootFnOutput`` and ``RecurrentFnOutput`` are mctx's own classes, so anything written
for mctx plugs in unchanged. A rule that needs more per-node state than mctx's (the
curiosity rule's beliefs) returns the subclasses below, whose ``node_extras`` pytree is
stored per node in ``Tree.node_extras``.

Shapes: ``B`` batch, ``N`` nodes (``num_simulations + 1``), ``A`` actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chex
import mctx

RootFnOutput = mctx.RootFnOutput
RecurrentFnOutput = mctx.RecurrentFnOutput

Params = Any
Action = chex.Array  # [B] int32
RecurrentState = Any  # [B, ...] pytree
RecurrentFn = Callable[
    [Params, chex.PRNGKey, Action, RecurrentState], tuple[RecurrentFnOutput, RecurrentState]
]
LoopFn = Callable[..., Any]


@chex.dataclass(frozen=True)
class RootFnOutputWithExtras(mctx.RootFnOutput):
    """``RootFnOutput`` plus ``node_extras``: a pytree of ``[B, ...]`` arrays for the root.

    The kernel allocates ``Tree.node_extras`` as zeros of shape ``[B, N, ...]`` from it
    and writes the root's entry at node 0.
    """

    node_extras: Any = None  # pytree of [B, ...]


@chex.dataclass(frozen=True)
class RecurrentFnOutputWithExtras(mctx.RecurrentFnOutput):
    """``RecurrentFnOutput`` plus ``node_extras`` for the new node (pytree of ``[B, ...]``).

    Must have the same pytree structure as the root's ``node_extras``.
    """

    node_extras: Any = None  # pytree of [B, ...]


@chex.dataclass(frozen=True)
class PolicyOutput:
    """The output of a search policy (same fields as ``mctx.PolicyOutput``).

    action: ``[B]`` int32, the proposed action.
    action_weights: ``[B, A]``, the policy training target (sums to one).
    search_tree: the finished ``Tree`` (``[B, N, ...]`` arrays).
    """

    action: chex.Array  # [B]
    action_weights: chex.Array  # [B, A]
    search_tree: Any  # Tree


# Strategy signatures. All take an *unbatched* tree (the kernel vmaps over the batch).
# rng_key is a fresh key per step (selection_rng="per_step"), one key per simulation
# (selection_rng="per_simulation": fold in `depth` for per-step draws), or None
# (selection_rng="none", for deterministic rules).
RootActionSelectionFn = Callable[[chex.PRNGKey | None, Any, chex.Array], chex.Array]
InteriorActionSelectionFn = Callable[[chex.PRNGKey | None, Any, chex.Array, chex.Array], chex.Array]
# Unbatched: (tree, node_index []) -> bool []: the descent stops at this expanded node.
RootDoneFn = Callable[[Any], chex.Array]
# (tree, node_index []) -> bool []: are the node's selection statistics there (one tree)?
ReadyFn = Callable[[Any, chex.Array], chex.Array]
# (ready_fn, fill_fn): fill_fn(tree, node_index [B], needed [B]) -> tree (batched).
PrepareFn = tuple[ReadyFn, Callable[[Any, chex.Array, chex.Array], Any]]
# Batched: (tree [B, N, ...], leaf_index [B]) -> tree.
BackupFn = Callable[[Any, chex.Array], Any]
# Unbatched: (tree, node_index []) -> transformed Q-values [A].
QTransform = Callable[[Any, chex.Array], chex.Array]

__all__ = [
    "Action",
    "BackupFn",
    "InteriorActionSelectionFn",
    "LoopFn",
    "Params",
    "PolicyOutput",
    "QTransform",
    "RecurrentFn",
    "RecurrentFnOutput",
    "RecurrentFnOutputWithExtras",
    "RecurrentState",
    "RootActionSelectionFn",
    "RootFnOutput",
    "RootFnOutputWithExtras",
    "PrepareFn",
    "ReadyFn",
    "RootDoneFn",
]
