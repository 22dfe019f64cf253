"""A node's selection distribution, P(best) over its unresolved children, kept current.

Selection reads, per node, a two-stage distribution (``beliefs.two_stage_index``):
stage weights ``weights [W]`` and a table ``table [A, W]`` whose columns are the
second stage's distributions over the children (arm-major: the incremental layout's
terms are computed per arm, and a backup rewrites one arm's ``[W]`` terms). Two
layouts:

- **full** (every node but an incremental root): ``W = 1``, ``weights = [1]`` and
  ``table[:, 0]`` = P(best) over the unresolved children, recomputed by every backup
  through the node (``from_probability``).
- **incremental** (the root's, with ``pbest_updates="incremental"``, K = 2, the
  ``fast`` P(best) and the ``"average"`` summary; ``CuriosityOptions.incremental``):
  ``W = S + 1`` with ``S = 3 (G - 1) + 1`` grid sub-nodes. The node keeps the fast
  kernel's aggregates over its children on its own grid (``best_arm.FastAggregates``)
  and the beliefs they hold (``arms [A, K]``, ``arms_valid [A]``) with each child's
  stored terms (``logs [A, W]``, ``best_arm.fast_arm_terms``). P(a is best) is
  ``sum_s W(s) ratio_a(s)`` plus a lower-tail term, so the stage weight of sub-node s
  is ``W(s) sum_a ratio_a(s)`` (column s of the table holds ``ratio_a(s)``) and that
  of the lower tail is ``L`` (its column holds the tail rates): exactly P(best), drawn
  without ever forming it. A backup changes one child, so it takes the child's stored
  terms out of the aggregates and its new ones in (exactly what was put in comes out,
  so rounding does not accumulate), rewrites its table and logs rows and the stage
  weights, and the mixture of the children's beliefs follows from the aggregates
  (``fast_mixture``): O(S K + A) instead of the O(A S) of a fresh P(best)
  (``update_incremental``). The fast grid is a step function of the beliefs
  (``best_arm._fast_edges``); when the grid would move, when a row leaves the fast
  kernel's envelope, or when the node holds no aggregates, it is rebuilt in full
  (``build_incremental``): the numbers are always those of a fresh P(best) on the
  current beliefs, up to float32 rounding. A row outside the envelope takes the
  ``accurate`` method's P(best) as a one-column table (``current`` False: the next backup
  rebuilds it).

Why only the root: every backup ends at the root, and in a wide search (A above the
simulation count) it takes most of the work (2,048 of the 2,283 P(best) rows a search
needs at B = 64, 32 simulations on 11x11 Hex); an incremental cache costs ``2 W A`` floats per
node, which for every node of every tree (``[B, N, A, W]``) cost more memory traffic
than it saved (results/bench/README.md). The root's cache lives in
``tree.extra_data`` (``nodes.CuriosityExtraData``), one per tree.

Shapes: ``A`` actions, ``K`` outcomes, ``G`` grid edges, ``W`` stage count.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from curiosity_search.curiosity import beliefs
from curiosity_search.curiosity.best_arm import (
    FastAggregates,
    best_arm_probability,
    fast_aggregates,
    fast_grid_edges,
    fast_mixture,
    fast_selection,
    in_fast_envelope,
    same_fast_grid,
    update_fast_aggregates,
)


@chex.dataclass(frozen=True)
class SelectionCache:
    """One node's selection distribution (``[..., ...]`` leading dims in a tree).

    weights: ``[W]`` stage weights; table: ``[A, W]`` (see the module docstring).
    Incremental layout only (None otherwise): aggregates: ``FastAggregates`` of the
    node's children; logs: ``[A, W]`` the children's stored log CDF terms (the table
    holds their ratio terms); arms: ``[A, K]`` the children's beliefs they hold; arms_valid:
    ``[A]`` bool, the children they count (legal and unresolved); current: ``[]`` bool,
    the aggregates are the fast kernel's for ``arms`` (False: rebuild at the next backup).
    """

    weights: chex.Array
    table: chex.Array
    aggregates: FastAggregates | None = None
    logs: chex.Array | None = None
    arms: chex.Array | None = None
    arms_valid: chex.Array | None = None
    current: chex.Array | None = None


def empty_cache(leading: tuple[int, ...], num_actions: int) -> SelectionCache:
    """An unset full-layout cache of shape ``leading`` (zeros)."""
    return SelectionCache(weights=jnp.zeros(leading + (1,)),
                          table=jnp.zeros(leading + (num_actions, 1)))


def from_probability(probability: chex.Array) -> SelectionCache:
    """The full layout for ``probability [..., A]``: ``weights [..., 1]`` of ones,
    ``table [..., A, 1]``."""
    probability = jnp.asarray(probability, jnp.float32)
    return SelectionCache(weights=jnp.ones(probability.shape[:-1] + (1,), jnp.float32),
                          table=probability[..., None])


def build_incremental(concentrations: chex.Array, valid: chex.Array, grid_size: int,
                      checked: bool = True) -> tuple[SelectionCache, chex.Array]:
    """The incremental layout built in full, and the P(best)-weighted average of the
    valid arms' beliefs (the ``"average"`` mixture), ``[..., K]``.

    ``concentrations [..., A, 2]`` the children's beliefs (the node's mover's view),
    ``valid [..., A]`` bool the legal unresolved children. A row outside the fast
    kernel's envelope takes the ``accurate`` P(best) in stage 0 (``current`` False).
    ``checked`` False (static): the rows are known to be inside it
    (``nodes.CuriosityOptions.bounded_beliefs``): no check, no accurate fallback.
    """
    concentrations = jnp.asarray(concentrations, jnp.float32)
    valid = jnp.asarray(valid, bool)
    aggregates, table, logs = fast_aggregates(concentrations, valid, grid_size)
    weights = fast_selection(aggregates)
    mixture = fast_mixture(aggregates)
    inside = (in_fast_envelope(concentrations, valid) if checked
              else jnp.ones(valid.shape[:-1], bool))

    def with_accurate():
        probability = best_arm_probability(concentrations, ~valid, grid_size, "accurate")
        one_column = jnp.zeros_like(table).at[..., 0].set(probability)
        first = jnp.zeros_like(weights).at[..., 0].set(1.0)
        average = beliefs.summarize_mixture(
            probability, jnp.where(valid[..., None], concentrations, 0.0), "average")
        keep = inside[..., None]
        return (jnp.where(keep, weights, first), jnp.where(keep[..., None], table, one_column),
                jnp.where(keep, mixture, average))

    if checked:
        weights, table, mixture = jax.lax.cond(jnp.any(~inside), with_accurate,
                                               lambda: (weights, table, mixture))
    cache = SelectionCache(weights=weights, table=table, aggregates=aggregates, logs=logs,
                           arms=concentrations, arms_valid=valid, current=inside)
    return cache, mixture


def update_incremental(cache: SelectionCache, arm: chex.Array, concentrations: chex.Array,
                       valid: chex.Array, grid_size: int, checked: bool = True):
    """The cache after one child per row changed, in O(S K + A) (rows ``[R]``).

    Args:
      cache: rows ``[R, ...]`` of the incremental layout as of the last backup, with
        ``table`` and ``logs`` holding only the changed child's terms ``[R, W]``.
      arm: ``[R]`` int32, the child that changed (every other child is as ``cache.arms``).
      concentrations: ``[R, A, 2]`` the children's current beliefs; valid: ``[R, A]``.

    Returns:
      ``(weights [R, W], aggregates, the arm's table terms [R, W] and logs terms [R, W], mixture
      [R, K], ok [R] bool)``: valid only where ``ok`` (the cache was current, the grid did
      not move and the row is inside the fast envelope, which ``checked`` False
      takes as known), else the caller rebuilds (``build_incremental``).
    """
    rows = jnp.arange(arm.shape[0])
    edges = fast_grid_edges(concentrations, valid, grid_size)
    ok = cache.current & same_fast_grid(edges, cache.aggregates.edges)
    if checked:
        ok = ok & in_fast_envelope(concentrations, valid)
    aggregates, table, logs = update_fast_aggregates(
        cache.aggregates, cache.table, cache.logs, cache.arms[rows, arm],
        concentrations[rows, arm], valid[rows, arm])
    return fast_selection(aggregates), aggregates, table, logs, fast_mixture(aggregates), ok
