"""P(a is best) over per-action beliefs on a shared grid, in O(A G).

``best_arm_probability`` computes ``P(a is best) = int f_a(x) prod_{b != a} F_b(x) dx``
(seeds/002) for beliefs ``[..., A, K]``: Beta for K = 2, Dirichlet for K = 3 compared by
their score ``win + draw / 2``. Arms may also be **exact** (a proven result, score
``s_a``, a Dirac): ``exact_scores [..., A]`` (NaN where the arm is uncertain).

Exact arms, with ``s*`` the best exact score:
- ``s* = 1`` (a proven win): the proven wins share all the probability (the caller
  breaks the tie, e.g. by the shortest win);
- ``s* = 0``: the exact arms get 0 while an uncertain arm exists (a continuous belief
  beats 0 with probability 1), else they share equally;
- ``0 < s* < 1`` (a proven draw, K = 3): the uncertain arms integrate above ``s*`` only,
  ``P_a = int_{s*}^1 f_a prod F_b``, and the exact arms at ``s*`` share
  ``prod_b F_b(s*)``: the exact probabilities, with a grid edge placed at ``s*``.

Two methods, both within 0.01 (max abs) of a Monte Carlo in logit space
(``tests/pbest_reference.py``) on random beliefs, concentrations far below 1,
1e4-sharp arms against flat ones, identical arms, one legal arm and masked arms
(tests/test_best_arm.py, 2 to 6 arms), for K = 2 and K = 3, and at K = 2 with as many
arms as wide boards have (26 and 122; those rows include heavy-tailed arms).

- ``accurate``: the grid is placed where comparisons are decided, in two passes: G
  edges at the quantiles of the pooled per-arm candidates (a sort) and the highest
  candidate; then G more at the quantiles of the max's CDF ``prod_b F_b`` read off
  the first pass (``_max_quantile_edges``), because with many arms the pooled
  candidates follow the crowd while the max climbs from ~0 to ~1 within a cell or two
  (or, with a heavy-tailed arm, beyond the last edge): with the first pass alone
  ``accurate`` erred by 0.043 at 26 arms and 0.048 at 122 (2026-12-04). Per-arm CDFs
  come from tabulated logit-Beta CDFs (``score_cdf``), cell masses are exact, and
  each arm's density is linear inside a cell, integrated against the product of the
  others' CDFs by 3-point Gauss-Legendre. Any belief. K = 2, ``python
  scripts/pbest_validate.py --outcomes 2 --regimes random far_below_one sharp_vs_flat
  identical --seeds 7 8 --cases 20 --arms N --methods accurate`` for N = 9, 16, 26,
  64, 122: max error 0.0048 (16 arms, random), no regime above 0.0031 at 26 or more
  arms. ``python scripts/pbest_cost.py --batch 64 --arms 122 --outcomes 2 --methods
  accurate``: ~0.31 ms per row of 122 arms (one pass: ~0.23-0.31).
  For K = 3 everything lives on the score axis ``y = sign(z) |z|^(1/128)``
  (``score_cdf.logit_to_score_axis``, ``z = logit(score)``), on which a Dirichlet at its
  draw vertex, whose score lies within e^-1000 of 1/2, keeps its order against the
  others; the score CDF is a 1-D integral of the exact representation
  (``score_cdf.score_cdf_and_density``, 8-point Gauss-Legendre in quantile space, the
  density analytic); each arm adds ``G`` candidates at quantiles of a stratified sample
  of its score (``score_cdf.score_sample``), which follow mass at a vertex that moments
  miss; and the grid gets three more edges, at score 1/2 and at ``|z| =
  _DRAW_VERTEX_LOGIT`` either side (``_with_draw_vertex_edges``), where a Dirichlet's
  score density can be singular or jump; the cells beside 1/2 take the profile that
  holds their mass. On the 30 cases per regime of tests/test_best_arm.py (G = 21) K = 3
  errs by at most 0.0029 (concentrations far below 1), 0.0021 (random), 0.0024 (sharp vs
  flat), 0.0030 (identical), 0.0027 (masked); on 300 more cases per regime under other
  seeds (``python scripts/pbest_validate.py --outcomes 3 --regimes far_below_one random
  sharp_vs_flat identical --seeds 7 8 9 11 12 --methods accurate``) at most 0.0047,
  0.0034, 0.0034, 0.0031 (one pass: 0.0085 on the test's cases far below 1, 0.0056 on
  the 300). ``python scripts/pbest_cost.py --outcomes 3 --methods accurate`` on [256,
  9]: ~0.43-0.44 ms per K = 3 row on a 2-core machine (one pass, same run: ~0.31-0.36).
- ``fast`` (the search's default): for K = 2 rows inside the **envelope** (every
  uncertain arm with ``alpha, beta >= FAST_MIN_CONCENTRATION`` and ``alpha + beta <=
  FAST_MAX_TOTAL``; no fractional exact score), a kernel exact up to quadrature: the
  exact logit-Beta log-density (normalized by ``log B``), integrated by 3-point
  Gauss-Legendre on ``G - 1`` cells of a sinh-stretched grid centred at logit 0 (fine
  where the density bends most, ``n/4`` at logit 0, widening where it is
  exponential; its ends rounded outward to steps of 0.25 in the sinh parameter, so the
  grid is a step function of the beliefs: ``FastAggregates`` and the incremental
  backup rely on it), an exact exponential upper tail beyond logit 20, the lower tail by
  normalization and split by the arms' tail rates ``alpha_a / sum alpha`` (exact for
  exponential tails); each Gauss node is a sub-cell whose product of the others' CDFs
  is taken at its middle. On the CPU the kernel runs as a native custom call
  (``native_cpu``, ``fast_pbest_cpu.cc``: the same computation transcribed to one
  vectorized loop per row, within 2e-5 of this array program, which other platforms
  run). When any row is outside the envelope (and for every K = 3 row) the batch is
  also computed by ``accurate`` and those rows take its values (a batch-level
  ``lax.cond``). Bounded belief heads
  (``nets.belief_head``, total <= 16, components >= 1e-3) keep network beliefs, and
  hence every K = 2 search belief (their convex combinations), inside the envelope.

All functions are pure and jit/vmap-able. Shapes: ``A`` arms, ``G`` grid edges.
"""

from __future__ import annotations

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from curiosity_search.curiosity import native_cpu
from curiosity_search.curiosity.score_cdf import (
    SCORE_AXIS_POWER,
    logit_to_score_axis,
    score_cdf_and_density,
    score_location,
    score_sample,
)

Array = jax.Array

PBEST_METHODS = ("fast", "accurate")
FAST_MIN_CONCENTRATION = 1e-3
FAST_MAX_TOTAL = 64.0

_CONCENTRATION_FLOOR = 1e-6
# accurate: per-arm candidate grid points at +-_CANDIDATE_RANGE standard deviations;
# below the second-largest (mean - _RELEVANCE_SIGMAS std) no arm can be best.
_CANDIDATE_RANGE = 3.5
_RELEVANCE_SIGMAS = 3.0
# Three-point Gauss-Legendre rule on [0, 1].
_GAUSS_T = (0.5 - 0.5 * math.sqrt(0.6), 0.5, 0.5 + 0.5 * math.sqrt(0.6))
_GAUSS_W = (5.0 / 18.0, 8.0 / 18.0, 5.0 / 18.0)
# fast: sinh grid c + w sinh(t) centred at logit 0 with inner scale w; beyond
# _FAST_TAIL the log-density is exponential to float32 precision (n e^-20 < 1e-7).
_FAST_INNER = 0.5
_FAST_TAIL = 20.0
_FAST_LIMIT = 1e4
_FAST_RANGE_SIGMAS = 4.0
_FAST_GRID_STEP = 0.25
# K = 3: fixed grid edges at this |logit(score)| either side of 1/2 (and at 1/2).
_DRAW_VERTEX_LOGIT = 1e-3


# --------------------------------------------------------------------------------------
# accurate
# --------------------------------------------------------------------------------------


def _sort_floats(values: Array) -> Array:
    """``jnp.sort(values, axis=-1)`` for non-NaN float32, ~4x faster on CPU.

    Sorts the IEEE bit patterns as int32 keys (negative floats with their magnitude
    bits flipped, so integer order is float order); XLA's CPU float comparator is the
    slow part of ``jnp.sort``.
    """
    flip = jnp.int32(0x7FFFFFFF)
    keys = jax.lax.bitcast_convert_type(values.astype(jnp.float32), jnp.int32)
    keys = jnp.where(keys < 0, keys ^ flip, keys)
    keys = jax.lax.sort(keys, dimension=keys.ndim - 1, is_stable=False)
    keys = jnp.where(keys < 0, keys ^ flip, keys)
    return jax.lax.bitcast_convert_type(keys, jnp.float32)


def _grid_edges(candidates: Array, lows: Array, valid: Array, threshold: Array,
                grid_size: int) -> Array:
    """Shared grid ``[..., G + 1]``, sorted, with an edge at ``threshold`` if finite.

    Each valid arm offers ``candidates [..., A, C]`` (``+inf`` = none); those below the
    second-largest of the arms' ``lows [..., A]`` (each arm's ``center - 3 scale``; and
    below ``threshold``) cannot decide a comparison and are dropped; the edges are the G
    quantiles of the pooled candidates and the highest candidate (the top of every arm's
    range: without it, with many arms the quantiles follow the crowd and a heavy-tailed
    arm's mass, often most of the max's, lies beyond the last edge, in a half-line
    cell whose profile is a guess). The edge nearest a finite ``threshold`` is moved
    onto it (the order is kept), so a truncation at ``threshold`` is exact.
    """
    lows = jnp.where(valid, lows, -jnp.inf)
    top_two = jax.lax.top_k(lows, 2)[0] if lows.shape[-1] > 1 else jnp.concatenate(
        [lows, lows], axis=-1)
    num_valid = jnp.sum(valid, axis=-1)
    floor = jnp.where(num_valid >= 2, top_two[..., 1], top_two[..., 0])
    floor = jnp.maximum(floor, jnp.where(jnp.isfinite(threshold), threshold, -jnp.inf))
    keep = valid[..., None] & (candidates >= floor[..., None, None]) & (candidates < jnp.inf)
    flat_shape = candidates.shape[:-2] + (-1,)
    pooled = _sort_floats(jnp.where(keep, candidates, jnp.inf).reshape(flat_shape))
    num_kept = jnp.maximum(jnp.sum(keep.reshape(flat_shape), axis=-1), 1)
    quantiles = (jnp.arange(grid_size) + 0.5) / grid_size
    index = jnp.floor(quantiles * num_kept[..., None]).astype(jnp.int32)
    index = jnp.concatenate([index, num_kept[..., None] - 1], axis=-1)  # [..., G + 1]
    edges = jnp.take_along_axis(pooled, index, axis=-1)
    edges = jnp.where(jnp.isfinite(edges), edges, 0.0)
    finite = jnp.isfinite(threshold)
    nearest = jnp.argmin(jnp.abs(edges - jnp.where(finite, threshold, 0.0)[..., None]), axis=-1)
    at = jnp.arange(grid_size + 1) == nearest[..., None]
    snapped = jnp.where(at & finite[..., None], threshold[..., None], edges)
    # Keep the edges sorted after the move (only the moved edge can be out of order).
    return jnp.sort(snapped, axis=-1)


def _max_quantile_edges(edges: Array, cdf: Array, valid: Array, threshold: Array,
                        count: int) -> Array:
    """``[..., count]`` edges near the quantiles ``(j + 1/2) / count`` of the max's CDF
    ``M = prod_b F_b`` (at or above a finite ``threshold``), from the arms' CDFs ``cdf
    [..., A, G]`` at ``edges [..., G]``: each found by interpolating ``log M`` linearly
    between the two edges that bracket it (clamped to the grid's ends).

    The pooled candidates place the grid where single arms' masses are; with many arms
    ``M`` climbs from ~0 to ~1 within one or two of those cells, where the cells'
    linear profiles and 3-point rule cannot follow a product of that degree. These
    edges split the climb into ``count`` steps of ~1 / count each.
    """
    cdf = jnp.where(valid[..., None], jnp.clip(cdf, 1e-30, 1.0), 1.0)
    log_max_cdf = jnp.sum(jnp.log(jax.lax.cummax(cdf, axis=cdf.ndim - 1)), axis=-2)  # [..., G]
    targets = np.log((np.arange(count) + 0.5) / count).astype(np.float32)  # [count]
    above = jnp.sum(log_max_cdf[..., None, :] <= targets[:, None], axis=-1)  # [..., count]
    last = edges.shape[-1] - 1
    low, high = jnp.clip(above - 1, 0, last), jnp.clip(above, 0, last)
    take = functools.partial(jnp.take_along_axis, axis=-1)
    x_low, x_high = take(edges, low), take(edges, high)
    m_low, m_high = take(log_max_cdf, low), take(log_max_cdf, high)
    fraction = jnp.clip((targets - m_low) / jnp.maximum(m_high - m_low, 1e-30), 0.0, 1.0)
    placed = x_low + (x_high - x_low) * fraction
    return jnp.maximum(placed, jnp.where(jnp.isfinite(threshold), threshold, -jnp.inf)[..., None])


def _merged(edges: Array, extra: Array, per_arm: tuple[Array, ...],
            extra_per_arm: tuple[Array, ...]) -> tuple[Array, tuple[Array, ...]]:
    """``edges [..., G]`` and ``extra [..., R]`` (each sorted) merged in order,
    ``[..., G + R]``, with the per-arm values at them (``[..., A, G]`` and ``[..., A, R]``
    each) in the same order.

    Each point's merged position is its index plus the count of the other list's points
    before it (``[G, R]`` comparisons); the values move by a one-hot matrix product
    (exact at HIGHEST precision), not a float sort, which XLA:CPU runs slowly.
    """
    before = extra[..., None, :] < edges[..., :, None]  # [..., G, R]
    rank_edges = jnp.arange(edges.shape[-1]) + jnp.sum(before, axis=-1)
    rank_extra = jnp.arange(extra.shape[-1]) + jnp.sum(~before, axis=-2)
    rank = jnp.concatenate([rank_edges, rank_extra], axis=-1)  # [..., G + R], a permutation
    slots = jnp.arange(rank.shape[-1])
    move = (rank[..., :, None] == slots).astype(edges.dtype)  # [..., source, target]
    high = jax.lax.Precision.HIGHEST
    joined = jnp.concatenate([edges, extra], axis=-1)
    merged = [jnp.einsum("...s,...st->...t", joined, move, precision=high)]
    for values, extra_values in zip(per_arm, extra_per_arm, strict=True):
        both = jnp.concatenate([values, extra_values], axis=-1)
        merged.append(jnp.einsum("...as,...st->...at", both, move, precision=high))
    return merged[0], tuple(merged[1:])


def _arm_candidates(concentrations: Array, grid_size: int) -> tuple[Array, Array]:
    """Each arm's grid candidates ``[..., A, C]`` and lower relevance bound ``[..., A]``.

    K = 2, in logit space: ``G`` candidates ``center + scale * c_j`` (``c_j`` uniform on
    +-_CANDIDATE_RANGE) and ``center - _RELEVANCE_SIGMAS scale``, from the logit's
    moments. K = 3, on the score axis (``score_cdf.logit_to_score_axis``): the same,
    mapped, and ``G`` more at the arm's score quantiles
    (``score_cdf.score_sample``), which moments cannot place.
    """
    center, scale = score_location(concentrations)
    offsets = jnp.linspace(-_CANDIDATE_RANGE, _CANDIDATE_RANGE, grid_size)
    candidates = center[..., None] + scale[..., None] * offsets  # [..., A, G]
    lows = center - _RELEVANCE_SIGMAS * scale
    if concentrations.shape[-1] == 2:
        return candidates, lows
    sample = _sort_floats(score_sample(concentrations))  # [..., A, M]
    pick = np.floor((np.arange(grid_size) + 0.5) / grid_size * sample.shape[-1]).astype(np.int32)
    return (jnp.concatenate([logit_to_score_axis(candidates), sample[..., pick]], axis=-1),
            logit_to_score_axis(lows))


def _with_draw_vertex_edges(edges: Array) -> Array:
    """K = 3: ``edges [..., G]`` (on the score axis) and three more, at score 1/2 (y = 0)
    and at ``|logit(score)| = _DRAW_VERTEX_LOGIT`` on either side, each where it lies
    inside the grid (else a copy of the last edge: an empty cell); ``[..., G + 3]``, sorted.

    A Dirichlet's score density can be singular or jump at 1/2 (s - 1/2 = (1 - t)(B -
    1/2): with a component below 1, s piles up at, or stays on one side of, 1/2), which
    the cells' linear density profiles cannot follow inside a cell; the two edges beside
    it separate such a pile (|logit| far below 1e-3) from the smooth mass around it.
    """
    side = math.exp(math.log(_DRAW_VERTEX_LOGIT) / SCORE_AXIS_POWER)
    extra = []
    for fixed in (-side, 0.0, side):
        inside = (edges[..., 0] < fixed) & (edges[..., -1] > fixed)
        extra.append(jnp.where(inside, fixed, edges[..., -1])[..., None])
    return jnp.sort(jnp.concatenate([edges] + extra, axis=-1), axis=-1)


def _mass_consistent_at_half(edges: Array, mass: Array, density_low: Array,
                             density_high: Array) -> tuple[Array, Array]:
    """K = 3: the cells' edge densities ``[..., A, G + 1]`` with the value at an edge at
    logit 0 replaced, in the two finite cells beside it, by the one that makes the
    cell's linear profile hold its ``mass [..., A, G + 1]`` given the far end's density.

    At score 1/2 a Dirichlet's score density can be singular (``|z|^(c - 1)`` for a
    component ``c < 1``) or jump, so its value there says nothing about the cell; the
    mass (exact, from CDF differences) does. ``edges [..., G]``.
    """
    width = edges[..., 1:] - edges[..., :-1]  # [..., G - 1]
    inf = jnp.full_like(edges[..., :1], jnp.inf)
    width = jnp.concatenate([inf, width, inf], axis=-1)[..., None, :]  # [..., 1, G + 1]
    finite = jnp.isfinite(width) & (width > 0.0)
    zero = jnp.concatenate([edges == 0.0, jnp.zeros_like(edges[..., :1], bool)], axis=-1)
    ends_at_zero = (zero & finite[..., 0, :])[..., None, :]  # the cell's upper edge is 0
    starts_at_zero = (jnp.concatenate([jnp.zeros_like(zero[..., :1]), zero[..., :-1]], axis=-1)
                      & finite[..., 0, :])[..., None, :]
    average = 2.0 * mass / jnp.where(finite, width, 1.0)
    density_high = jnp.where(ends_at_zero, jnp.maximum(average - density_low, 0.0), density_high)
    density_low = jnp.where(starts_at_zero, jnp.maximum(average - density_high, 0.0),
                            density_low)
    return density_low, density_high


def _accurate_core(concentrations: Array, valid: Array, threshold: Array,
                   grid_size: int) -> tuple[Array, Array]:
    """Unnormalized ``(P [..., A], P_exact [...])`` on the accurate grid.

    ``P_a = int_{threshold}^inf f_a prod_{b != a} F_b`` over the valid arms (``threshold``
    ``[...]`` in logit space, ``-inf`` for none) and ``P_exact = prod_b F_b(threshold)``
    (0 without a threshold): absolute probabilities, up to the grid's error. Below, G
    counts the edges in use: ``2 grid_size + 1``, ``2 grid_size + 4`` for K = 3.
    """
    candidates, lows = _arm_candidates(concentrations, grid_size)
    if concentrations.shape[-1] == 3:
        threshold = logit_to_score_axis(threshold)
    edges = _grid_edges(candidates, lows, valid, threshold, grid_size)
    if concentrations.shape[-1] == 3:
        edges = _with_draw_vertex_edges(edges)
    cdf, density = score_cdf_and_density(concentrations, edges)
    extra = _max_quantile_edges(edges, cdf, valid, threshold, grid_size)
    edges, (cdf, density) = _merged(edges, extra, (cdf, density),
                                    score_cdf_and_density(concentrations, extra))
    cdf = jnp.where(valid[..., None], cdf, 1.0)
    density = jnp.maximum(jnp.where(valid[..., None], density, 0.0), 0.0)
    cdf = jax.lax.cummax(cdf, axis=cdf.ndim - 1)
    zeros = jnp.zeros_like(cdf[..., :1])
    ones = jnp.ones_like(cdf[..., :1])
    lower = jnp.concatenate([zeros, cdf], axis=-1)  # [..., A, G + 1] CDF at each cell's start
    mass = jnp.concatenate([cdf, ones], axis=-1) - lower
    mass = jnp.where(valid[..., None], jnp.maximum(mass, 0.0), 0.0)
    # Linear density profile in each finite cell from the edge densities; uniform in the
    # half-line end cells and where both edge densities vanish.
    density_low = jnp.concatenate([ones, density], axis=-1).at[..., -1].set(1.0)
    density_high = jnp.concatenate([density, ones], axis=-1).at[..., 0].set(1.0)
    if concentrations.shape[-1] == 3:
        density_low, density_high = _mass_consistent_at_half(edges, mass, density_low,
                                                             density_high)
    edge_sum = density_low + density_high
    degenerate = edge_sum <= 1e-30
    weight_low = jnp.where(degenerate, 0.5, density_low / jnp.where(degenerate, 1.0, edge_sum))
    weight_high = 1.0 - weight_low

    probability = jnp.zeros_like(mass)
    for t, w in zip(_GAUSS_T, _GAUSS_W, strict=True):
        # Profile density 2 (w_lo (1 - t) + w_hi t) integrates to 1 over the cell.
        shape_t = 2.0 * (weight_low * (t - 0.5 * t * t) + weight_high * 0.5 * t * t)
        cdf_t = jnp.where(valid[..., None], lower + mass * shape_t, 1.0)
        rho_t = 2.0 * mass * (weight_low * (1.0 - t) + weight_high * t)
        probability = probability + w * rho_t * _others_product(cdf_t)
    # Cells ending at or below the threshold edge are excluded (a Dirac there is higher).
    cell_top = jnp.concatenate([edges, jnp.full_like(edges[..., :1], jnp.inf)], axis=-1)
    above = cell_top > threshold[..., None]  # [..., G + 1]
    probability = jnp.sum(jnp.where(above[..., None, :], probability, 0.0), axis=-1)
    probability = jnp.where(valid, probability, 0.0)
    on_edge = (edges == threshold[..., None]) & jnp.isfinite(threshold)[..., None]  # [..., G]
    first = on_edge & (jnp.cumsum(on_edge, axis=-1) == 1)
    cdf_at = jnp.sum(jnp.where(first[..., None, :], cdf, 0.0), axis=-1)  # [..., A]
    exact_share = jnp.where(jnp.any(on_edge, axis=-1),
                            jnp.prod(jnp.where(valid, cdf_at, 1.0), axis=-1), 0.0)
    return probability, exact_share


def _log_cdf_product(cdf: Array) -> tuple[Array, Array, Array, Array]:
    """The product of all arms' CDFs at each node, in logs, zero CDFs counted, not logged
    (seeds/002's step 3), for ``cdf [..., A, C]`` (arms on axis -2).

    Returns ``(log_cdf [..., A, C], total_log [..., 1, C], is_zero [..., A, C],
    total_zeros [..., 1, C])``: ``log F_a`` (0 where ``F_a = 0``), ``sum_b log F_b`` over
    the nonzero CDFs, and the zero counts. Both methods take ``prod_{b != a} F_b`` from
    these: ``exp(total_log - log_cdf)`` where ``total_zeros - is_zero == 0``, else 0.
    """
    is_zero = cdf <= 0.0
    log_cdf = jnp.log(jnp.where(is_zero, 1.0, cdf))
    total_log = jnp.sum(log_cdf, axis=-2, keepdims=True)
    total_zeros = jnp.sum(is_zero, axis=-2, keepdims=True)
    return log_cdf, total_log, is_zero, total_zeros


def _others_product(cdf: Array) -> Array:
    """``prod_{b != a} F_b`` over the arm axis -2 of ``cdf [..., A, C]``."""
    log_cdf, total_log, is_zero, total_zeros = _log_cdf_product(cdf)
    return jnp.where(total_zeros - is_zero > 0, 0.0, jnp.exp(total_log - log_cdf))


# --------------------------------------------------------------------------------------
# fast (K = 2, inside the envelope)
# --------------------------------------------------------------------------------------


def in_fast_envelope(concentrations: Array, uncertain: Array) -> Array:
    """``[...]`` bool: every uncertain arm of the row is in the fast kernel's envelope
    (K = 2, ``alpha, beta >= FAST_MIN_CONCENTRATION``, ``alpha + beta <= FAST_MAX_TOTAL``)."""
    if concentrations.shape[-1] != 2:
        return jnp.zeros(concentrations.shape[:-2], bool)
    # On the two component slices: XLA:CPU reduces a minor axis of 2 with scalar code.
    alpha, beta = concentrations[..., 0], concentrations[..., 1]
    inside = ((jnp.minimum(alpha, beta) >= FAST_MIN_CONCENTRATION)
              & (alpha + beta <= FAST_MAX_TOTAL))
    return jnp.all(inside | ~uncertain, axis=-1)


def _fast_edges(alpha: Array, beta: Array, valid: Array, grid_size: int) -> Array:
    """``[..., G]`` sinh-stretched logit edges ``w sinh(t)``, ``t`` uniform, from the
    decisive region's lower end (the highest arm's ``mode - 4 sd``) to at least logit
    20, both ends rounded outward to a multiple of ``_FAST_GRID_STEP`` in ``t``."""
    mode = jnp.log(alpha) - jnp.log(beta)
    sd = jnp.sqrt(1.0 / alpha + 0.5 / alpha**2 + 1.0 / beta + 0.5 / beta**2)
    low = jnp.max(jnp.where(valid, jnp.maximum(mode - _FAST_RANGE_SIGMAS * sd, -_FAST_LIMIT),
                            -_FAST_LIMIT), axis=-1)
    high = jnp.max(jnp.where(valid, jnp.minimum(mode + _FAST_RANGE_SIGMAS * sd, _FAST_LIMIT),
                             -_FAST_LIMIT), axis=-1)
    high = jnp.maximum(high, _FAST_TAIL)
    low = jnp.minimum(low, high - 1.0)
    # Ends snapped outward to multiples of _FAST_GRID_STEP in t: the grid is a step
    # function of the beliefs, so a node's grid stays put while its children's beliefs
    # move a little and its aggregates can be updated one arm at a time.
    t_low = jnp.floor(jnp.arcsinh(low / _FAST_INNER) / _FAST_GRID_STEP) * _FAST_GRID_STEP
    t_high = jnp.ceil(jnp.arcsinh(high / _FAST_INNER) / _FAST_GRID_STEP) * _FAST_GRID_STEP
    fraction = jnp.linspace(0.0, 1.0, grid_size)
    return _FAST_INNER * jnp.sinh(t_low[..., None] + (t_high - t_low)[..., None] * fraction)


def _log_density(alpha: Array, beta: Array, log_norm: Array, z: Array) -> Array:
    """Log-density of ``logit(p)``, ``p ~ Beta(alpha, beta)``, at ``z`` without cancellation:
    ``alpha z - n softplus(z) = -beta z - n softplus(-z)``, the form whose linear term
    has the sign of the smaller side. ``alpha, beta, log_norm [..., A, 1]``, ``z [..., 1, S]``."""
    n = alpha + beta
    return (jnp.where(z > 0, -beta * z, alpha * z) - n * jnp.log1p(jnp.exp(-jnp.abs(z)))
            - log_norm)


def _fast_terms(concentrations: Array, valid: Array, edges: Array) -> tuple[Array, ...]:
    """Each arm's terms of the fast kernel on the row's ``edges [..., G]``.

    ``concentrations [..., A, 2]``, ``valid [..., A]``. The ``S = 3 (G - 1) + 1``
    sub-nodes are the 3 Gauss nodes of each cell (each a sub-cell whose CDF is taken at
    its middle), Gauss-point-major (every cell's first node, then every second, then
    every third), and the upper tail beyond the last edge. Returns ``(log_cdf [..., A, S]``
    (``log F_a`` at each sub-node's middle, 0 where ``F_a = 0`` or the arm is invalid),
    ``is_zero [..., A, S]`` (``F_a = 0``), ``ratio [..., A, S]`` (sub-node mass / ``F_a``,
    0 where ``F_a = 0``), ``log_lower [..., A]`` (log mass below the grid, floored at
    1e-37) and ``rate [..., A]`` (the lower tail's exponential rate ``alpha``)``; an
    invalid arm's terms are 0 (F = 1, no mass).
    """
    alpha = concentrations[..., 0]
    beta = concentrations[..., 1]
    log_norm = gammaln(alpha) + gammaln(beta) - gammaln(alpha + beta)  # log B
    width = edges[..., 1:] - edges[..., :-1]  # [..., C], C = G - 1
    num_cells = width.shape[-1]
    # Sub-nodes in Gauss-point-major order, [..., 3, C] flattened to [..., 3C]: every
    # array keeps the cells on its minor axis (XLA:CPU vectorizes the minor axis only;
    # a minor axis of 3 made this function ~2x slower).
    nodes = jnp.stack([edges[..., :-1] + width * t for t in _GAUSS_T], axis=-2)  # [..., 3, C]
    weights = jnp.stack([width * w for w in _GAUSS_W], axis=-2)
    a, b, norm = alpha[..., None], beta[..., None], log_norm[..., None]
    flat_nodes = nodes.reshape(nodes.shape[:-2] + (3 * num_cells,))
    log_f = _log_density(a, b, norm, flat_nodes[..., None, :])  # [..., A, 3C]
    sub_mass = jnp.exp(log_f).reshape(log_f.shape[:-1] + (3, num_cells)) * weights[..., None, :, :]
    sub_mass = jnp.where(valid[..., None, None], sub_mass, 0.0)  # [..., A, 3, C]
    # Upper tail beyond the last edge (>= logit 20): exponential with rate beta, exact.
    top = edges[..., -1:][..., None, :]  # [..., 1, 1]
    upper = jnp.exp(_log_density(a, b, norm, top))[..., 0] / beta
    upper = jnp.where(valid, jnp.minimum(upper, 1.0), 0.0)  # [..., A]
    first, second, third = sub_mass[..., 0, :], sub_mass[..., 1, :], sub_mass[..., 2, :]
    cell_mass = first + second + third  # [..., A, C]
    lower = jnp.clip(1.0 - jnp.sum(cell_mass, axis=-1) - upper, 0.0, 1.0)  # below the grid
    strictly_upper = jnp.triu(jnp.ones((num_cells, num_cells), cell_mass.dtype), k=1)
    cell_start = lower[..., None] + jnp.matmul(cell_mass, strictly_upper,
                                               precision=jax.lax.Precision.HIGHEST)
    middle = jnp.concatenate([cell_start + 0.5 * first, cell_start + first + 0.5 * second,
                              cell_start + first + second + 0.5 * third,
                              (1.0 - 0.5 * upper)[..., None]], axis=-1)  # [..., A, S]
    mass = jnp.concatenate([first, second, third, upper[..., None]], axis=-1)
    middle = jnp.where(valid[..., None], jnp.clip(middle, 0.0, 1.0), 1.0)
    ratio = jnp.where(middle > 0.0, mass / jnp.where(middle > 0.0, middle, 1.0), 0.0)
    is_zero = middle <= 0.0
    log_cdf = jnp.log(jnp.where(is_zero, 1.0, middle))
    log_lower = jnp.where(valid, jnp.log(jnp.maximum(lower, 1e-37)), 0.0)
    rate = jnp.where(valid, alpha, 0.0)
    return log_cdf, is_zero, ratio, log_lower, rate


def _fast_core(concentrations: Array, valid: Array, grid_size: int) -> Array:
    """Unnormalized ``P [..., A]`` (a common factor per row) of the fast kernel: on the
    CPU by the native custom call where it is built (``native_cpu``,
    ``fast_pbest_cpu.cc``: the same computation as one loop per row), elsewhere by the
    array program
    (``_fast_core_array``)."""
    return native_cpu.native_or_array(
        lambda conc, mask: native_cpu.native_fast_core(conc, mask, grid_size),
        lambda conc, mask: _fast_core_array(conc, mask, grid_size), concentrations, valid)


def _fast_core_array(concentrations: Array, valid: Array, grid_size: int) -> Array:
    """``_fast_core`` as an array program, any platform. ``fast_pbest_cpu.h`` transcribes
    it step for step: a change here needs the same change there
    (tests/test_fast_pbest_cpu.py compares the two)."""
    edges = _fast_edges(concentrations[..., 0], concentrations[..., 1], valid, grid_size)
    log_cdf, is_zero, ratio, log_lower, rate = _fast_terms(concentrations, valid, edges)
    # prod_{b != a} F_b = ratio * prod_b F_b: the product of all CDFs per node once (as
    # the accurate method), scaled by its peak, then a matrix-vector product.
    total_log = jnp.sum(log_cdf, axis=-2)
    total_log = jnp.where(jnp.sum(is_zero, axis=-2) > 0, -jnp.inf, total_log)  # [..., S]
    peak = jnp.max(total_log, axis=-1, keepdims=True)
    peak = jnp.where(jnp.isfinite(peak), peak, 0.0)
    probability = jnp.einsum("...as,...s->...a", ratio, jnp.exp(total_log - peak),
                             precision=jax.lax.Precision.HIGHEST)
    # Below the grid every CDF is its exponential lower tail: the max falls there with
    # probability prod lower, and then arm a is the max with probability alpha_a / sum.
    share = rate / jnp.maximum(jnp.sum(rate, axis=-1, keepdims=True), 1e-30)
    lower_weight = jnp.exp(jnp.sum(log_lower, axis=-1) - peak[..., 0])
    probability = probability + lower_weight[..., None] * share
    # Materialized once: otherwise XLA:CPU fuses the kernel into each consumer of the
    # result and computes it again there (2.5x the kernel's time at [64, 122]).
    return jax.lax.optimization_barrier(jnp.where(valid, probability, 0.0))


# --------------------------------------------------------------------------------------
# fast, as per-row aggregates updated one arm at a time
# --------------------------------------------------------------------------------------


@chex.dataclass(frozen=True)
class FastAggregates:
    """The fast kernel's sums over a row's arms on its stored grid (K = 2).

    ``P_a`` is proportional to ``sum_s ratio_a(s) W(s) + L rate_a / sum_b rate_b``, with
    ``W(s) = prod_b F_b(s)`` and ``L = prod_b lower_b`` (``_fast_core``), so the P(best)
    mixture of the arms' belief vectors and the two-stage selection draw
    (``fast_selection``) need only these sums, and one arm's change updates them in
    O(S K) (``update_fast_aggregates``) while the grid stays put.

    edges: ``[..., G]`` the grid. log_total: ``[..., S]`` sum of the nonzero ``log F_a``.
    zeros: ``[..., S]`` the number of arms with ``F_a = 0`` (float32, exact integers).
    ratio_sum: ``[..., S]`` sum of ``ratio_a``. vector_sum: ``[..., S, K]`` sum of
    ``ratio_a c_a``. lower_log: ``[...]`` sum of ``log lower_a``. rate_sum: ``[...]``
    sum of ``rate_a``. rate_vector: ``[..., K]`` sum of ``rate_a c_a``. ``c_a`` is arm
    a's belief vector (the mixture's), ``S = 3 (G - 1) + 1``.
    """

    edges: Array
    log_total: Array
    zeros: Array
    ratio_sum: Array
    vector_sum: Array
    lower_log: Array
    rate_sum: Array
    rate_vector: Array


def _kernel_concentrations(concentrations: Array, valid: Array) -> Array:
    """Floored concentrations, with a harmless stand-in (1, 1) for invalid arms."""
    floored = jnp.maximum(jnp.asarray(concentrations, jnp.float32), _CONCENTRATION_FLOOR)
    return jnp.where(valid[..., None], floored, 1.0)


def fast_arm_terms(concentrations: Array, valid: Array,
                   edges: Array) -> tuple[Array, Array]:
    """Each arm's terms on the grid ``edges [..., G]``, as the aggregates store them:
    ``(table [..., A, S + 1], logs [..., A, S + 1])``, arm-major. ``table``:
    ``ratio_a(s)`` in columns ``s < S``, ``rate_a`` in column ``S``; ``logs``: ``log
    F_a(s)`` (``-inf`` where ``F_a = 0``) in columns ``s < S``, ``log lower_a`` in
    column ``S``. An invalid arm's terms are 0 (no mass, ``F = 1``).
    ``concentrations [..., A, 2]``, ``valid [..., A]``. ``fast_pbest_cpu.h`` transcribes
    it (``ArmTerms``, one arm; ``AggregatesRow``, a row): a change here needs the same
    change there."""
    valid = jnp.asarray(valid, bool)
    log_cdf, is_zero, ratio, log_lower, rate = _fast_terms(
        _kernel_concentrations(concentrations, valid), valid, edges)
    table = jnp.concatenate([ratio, rate[..., None]], axis=-1)
    logs = jnp.concatenate([jnp.where(is_zero, -jnp.inf, log_cdf), log_lower[..., None]],
                           axis=-1)
    return table, logs


def fast_aggregates(concentrations: Array, valid: Array,
                    grid_size: int = 21) -> tuple[FastAggregates, Array, Array]:
    """The aggregates of rows ``concentrations [..., A, 2]`` over the ``valid [..., A]``
    arms on the grid ``_fast_core`` would use, and the arms' stored terms
    (``fast_arm_terms``: ``table, logs [..., A, S + 1]``). On the CPU by the native
    kernel where it is built (``native_cpu.native_fast_aggregates``, the same numbers to
    float32 rounding: tests/test_fast_pbest_cpu.py), elsewhere by the array program
    (``_fast_aggregates_array``)."""
    concentrations = jnp.asarray(concentrations, jnp.float32)
    valid = jnp.asarray(valid, bool)
    def native(concentrations, valid):
        (edges, log_total, zeros, ratio_sum, vector_sum, lower_log, rate_sum, rate_vector,
         table, logs) = native_cpu.native_fast_aggregates(concentrations, valid, grid_size)
        aggregates = FastAggregates(edges=edges, log_total=log_total, zeros=zeros,
                                    ratio_sum=ratio_sum, vector_sum=vector_sum,
                                    lower_log=lower_log, rate_sum=rate_sum,
                                    rate_vector=rate_vector)
        return aggregates, table, logs

    return native_cpu.native_or_array(
        native, lambda conc, mask: _fast_aggregates_array(conc, mask, grid_size),
        concentrations, valid)


def _fast_aggregates_array(concentrations: Array, valid: Array,
                           grid_size: int) -> tuple[FastAggregates, Array, Array]:
    """``fast_aggregates`` as an array program, any platform. ``fast_pbest_cpu.h``
    transcribes it (``AggregatesRow``): a change here needs the same change there."""
    edges = fast_grid_edges(concentrations, valid, grid_size)
    table, logs = fast_arm_terms(concentrations, valid, edges)
    vectors = jnp.where(valid[..., None], concentrations, 0.0)
    zero = jnp.isinf(logs[..., :-1])
    high = jax.lax.Precision.HIGHEST
    aggregates = FastAggregates(
        edges=edges,
        log_total=jnp.sum(jnp.where(zero, 0.0, logs[..., :-1]), axis=-2),
        zeros=jnp.sum(zero.astype(jnp.float32), axis=-2),
        ratio_sum=jnp.sum(table[..., :-1], axis=-2),
        vector_sum=jnp.einsum("...as,...ak->...sk", table[..., :-1], vectors, precision=high),
        lower_log=jnp.sum(logs[..., -1], axis=-1),
        rate_sum=jnp.sum(table[..., -1], axis=-1),
        rate_vector=jnp.einsum("...a,...ak->...k", table[..., -1], vectors, precision=high),
    )
    return aggregates, table, logs


def fast_grid_edges(concentrations: Array, valid: Array, grid_size: int = 21) -> Array:
    """``[..., G]`` the grid ``fast_aggregates`` would place for these rows, in O(A)."""
    valid = jnp.asarray(valid, bool)
    kernel = _kernel_concentrations(concentrations, valid)
    return _fast_edges(kernel[..., 0], kernel[..., 1], valid, grid_size)


def same_fast_grid(edges: Array, other: Array) -> Array:
    """``[...]`` bool: the grids ``edges, other [..., G]`` (``fast_grid_edges``) are the
    same grid. A grid is fixed by its ends' whole numbers of ``_FAST_GRID_STEP`` in
    ``t`` (``_fast_edges``), compared here, so that a grid placed by the native kernel
    (``fast_pbest_cpu.h``, its own ``sinh``) and one placed by the array program match
    where the two ``sinh`` differ in the last bit (``EdgeStep`` there)."""

    def steps(edge):
        return jnp.round(jnp.arcsinh(edge / _FAST_INNER) / _FAST_GRID_STEP)

    return ((steps(edges[..., 0]) == steps(other[..., 0]))
            & (steps(edges[..., -1]) == steps(other[..., -1])))


def update_fast_aggregates(aggregates: FastAggregates, old_table: Array, old_logs: Array,
                           old_vector: Array, new: Array,
                           new_valid: Array) -> tuple[FastAggregates, Array, Array]:
    """One arm per row changed: its stored terms ``old_table, old_logs [..., S + 1]``
    (its ``fast_arm_terms`` when it was last counted) and belief vector ``old_vector
    [..., 2]`` taken out, its terms for ``new [..., 2]`` (``new_valid [...]``) on the
    same grid put in. Returns the aggregates and the arm's new ``(table, logs)`` columns
    ``[..., S + 1]``.

    Taking out exactly what was put in keeps the sums those of a fresh build up to
    float32 summation rounding, however the terms were rounded when computed; valid when
    the changed row's grid (``fast_grid_edges``) is ``aggregates.edges``.
    ``fast_pbest_cpu.h`` transcribes it (``UpdateAggregates``, with ``fast_selection``
    and ``fast_mixture`` as ``SelectionAndMixture``) for the native root update.
    """
    new_table, new_logs = fast_arm_terms(new[..., None, :], new_valid[..., None],
                                         aggregates.edges)
    new_table, new_logs = new_table[..., 0, :], new_logs[..., 0, :]
    new_vector = jnp.where(new_valid[..., None], jnp.asarray(new, jnp.float32), 0.0)

    def finite(logs):
        return jnp.where(jnp.isinf(logs), 0.0, logs)

    def zeros(logs):
        return jnp.isinf(logs).astype(jnp.float32)

    def moved(table, vector):  # [..., S, K]
        return table[..., :-1, None] * vector[..., None, :]

    updated = FastAggregates(
        edges=aggregates.edges,
        log_total=aggregates.log_total - finite(old_logs[..., :-1]) + finite(new_logs[..., :-1]),
        zeros=aggregates.zeros - zeros(old_logs[..., :-1]) + zeros(new_logs[..., :-1]),
        ratio_sum=aggregates.ratio_sum - old_table[..., :-1] + new_table[..., :-1],
        vector_sum=(aggregates.vector_sum - moved(old_table, old_vector)
                    + moved(new_table, new_vector)),
        lower_log=aggregates.lower_log - old_logs[..., -1] + new_logs[..., -1],
        rate_sum=aggregates.rate_sum - old_table[..., -1] + new_table[..., -1],
        rate_vector=(aggregates.rate_vector - old_table[..., -1:] * old_vector
                     + new_table[..., -1:] * new_vector),
    )
    return updated, new_table, new_logs


def _node_weights(aggregates: FastAggregates) -> tuple[Array, Array]:
    """``(W [..., S], L [...])``: ``prod_b F_b`` at each sub-node and ``prod_b lower_b``,
    both divided by their common peak."""
    log_total = jnp.where(aggregates.zeros > 0.5, -jnp.inf, aggregates.log_total)
    peak = jnp.maximum(jnp.max(log_total, axis=-1), aggregates.lower_log)
    peak = jnp.where(jnp.isfinite(peak), peak, 0.0)
    return jnp.exp(log_total - peak[..., None]), jnp.exp(aggregates.lower_log - peak)


def fast_selection(aggregates: FastAggregates) -> Array:
    """The first stage of the selection draw, ``[..., S + 1]`` unnormalized: sub-node s
    with weight ``W(s) ratio_sum(s)``, the lower tail with weight ``L``; the second
    stage draws the arm from the table's column (``beliefs.two_stage_index``)."""
    node, lower = _node_weights(aggregates)
    return jnp.concatenate([node * jnp.maximum(aggregates.ratio_sum, 0.0), lower[..., None]],
                           axis=-1)


def fast_mixture(aggregates: FastAggregates) -> Array:
    """``sum_a P_a c_a`` over the row's arms, ``[..., K]`` (P(best) normalized; the
    "average" belief summary), from the aggregates in O(S K)."""
    node, lower = _node_weights(aggregates)
    share = lower / jnp.maximum(aggregates.rate_sum, 1e-30)
    numerator = (jnp.einsum("...s,...sk->...k", node, aggregates.vector_sum,
                            precision=jax.lax.Precision.HIGHEST)
                 + share[..., None] * aggregates.rate_vector)
    denominator = jnp.sum(node * aggregates.ratio_sum, axis=-1) + lower
    safe = jnp.where(denominator > 0, denominator, 1.0)
    return jnp.where((denominator > 0)[..., None], numerator / safe[..., None], 0.0)


# --------------------------------------------------------------------------------------
# P(a is best)
# --------------------------------------------------------------------------------------


def _prepared_rows(concentrations: Array, invalid_actions: Array | None,
                   exact_scores: Array | None) -> tuple:
    """The arms as the kernels read them: ``(concentrations [..., A, K]`` (floored, a
    stand-in for illegal and exact arms), ``uncertain [..., A]``, ``threshold [...]``
    (logit of a fractional best exact score, else -inf), ``tops [..., A]`` (the best
    exact arms), ``best_exact [...])``."""
    concentrations = jnp.asarray(concentrations, jnp.float32)
    arm_shape = concentrations.shape[:-1]
    legal = (jnp.ones(arm_shape, bool) if invalid_actions is None
             else ~jnp.broadcast_to(jnp.asarray(invalid_actions, bool), arm_shape))
    if exact_scores is None:
        scores = jnp.zeros(arm_shape, jnp.float32)
        exact = jnp.zeros(arm_shape, bool)
    else:
        scores = jnp.broadcast_to(jnp.asarray(exact_scores, jnp.float32), arm_shape)
        exact = legal & ~jnp.isnan(scores)
    uncertain = legal & ~exact
    best_exact = jnp.max(jnp.where(exact, scores, -jnp.inf), axis=-1)  # [...]
    tops = exact & (scores >= best_exact[..., None])
    fractional = (best_exact > 0.0) & (best_exact < 1.0)
    threshold = jnp.where(fractional, jnp.log(best_exact) - jnp.log1p(-best_exact), -jnp.inf)
    # Illegal and exact arms get a harmless stand-in belief (masked everywhere).
    concentrations = _kernel_concentrations(concentrations, uncertain)
    return concentrations, uncertain, threshold, tops, best_exact


def _outside_fast(concentrations: Array, uncertain: Array, threshold: Array) -> Array:
    """``[...]`` bool: the rows the fast kernel cannot serve (an uncertain arm outside
    its envelope, or a proven draw: K = 3 only), from ``_prepared_rows``."""
    return ~(in_fast_envelope(concentrations, uncertain) & ~jnp.isfinite(threshold))


def needs_accurate(concentrations: Array, invalid_actions: Array | None = None,
                   exact_scores: Array | None = None) -> Array:
    """``[...]`` bool: the rows whose P(best) ``method="fast"`` takes from the accurate
    method (every K = 3 row; at K = 2 the rows with an uncertain arm outside the fast
    kernel's envelope). Arguments as ``best_arm_probability``'s.

    With ``fallback=False`` ``best_arm_probability`` leaves these rows as the fast
    kernel computed them, for a caller that recomputes them in one batched pass
    (``compaction.compacted_map``'s ``fallback``).
    """
    concentrations, uncertain, threshold, _, _ = _prepared_rows(concentrations,
                                                                invalid_actions, exact_scores)
    return _outside_fast(concentrations, uncertain, threshold)


def best_arm_probability(
    concentrations: Array,
    invalid_actions: Array | None = None,
    grid_size: int = 21,
    method: str = "fast",
    exact_scores: Array | None = None,
    *,
    fallback: bool = True,
) -> Array:
    """P(a is the best arm) ``[..., A]`` on a shared grid (see the module docstring).

    Args:
      concentrations: ``[..., A, K]``, K = 2 (win, loss) or 3 (win, draw, loss), > 0
        (floored at 1e-6); ignored for exact and illegal arms.
      invalid_actions: ``[..., A]`` bool, True = illegal (probability 0); None = all legal.
      grid_size: G, the number of shared grid edges (static, >= 2).
      method: ``"fast"`` (default) or ``"accurate"`` (static).
      exact_scores: ``[..., A]`` exact (proven) scores in ``[0, 1]``, NaN for uncertain
        arms, or None (all uncertain).
      fallback: with ``"fast"`` at K = 2, the rows ``needs_accurate`` flags get the
        accurate method's P(best) (True), or keep the fast kernel's numbers, which are
        then not P(best) (False: only for a caller that recomputes those rows itself).

    Returns:
      ``[..., A]`` probabilities summing to 1 over the legal arms (all 0 without one).
      Identical arms get identical values; a single legal arm gets 1.
    """
    if method not in PBEST_METHODS:
        raise ValueError(f"method must be one of {PBEST_METHODS}, got {method!r}")
    if grid_size < 2:
        raise ValueError(f"grid_size must be >= 2, got {grid_size}")
    arm_shape = jnp.shape(concentrations)[:-1]
    concentrations, uncertain, threshold, tops, best_exact = _prepared_rows(
        concentrations, invalid_actions, exact_scores)

    flat = (-1,) + concentrations.shape[-2:]
    rows = (concentrations.reshape(flat), uncertain.reshape(flat[:2]), threshold.reshape(-1))

    def accurate(conc: Array, valid: Array, edge: Array) -> tuple[Array, Array]:
        return _accurate_core(conc, valid, edge, grid_size)

    if method == "accurate" or concentrations.shape[-1] != 2:
        probability, exact_share = accurate(*rows)
    elif not fallback:
        probability = _fast_core(rows[0], rows[1], grid_size)
        exact_share = jnp.zeros_like(probability[:, 0])
    else:
        outside = _outside_fast(*rows)
        fast = _fast_core(rows[0], rows[1], grid_size)

        def with_accurate() -> tuple[Array, Array]:
            slow, slow_share = accurate(*rows)
            return (jnp.where(outside[:, None], slow, fast),
                    jnp.where(outside, slow_share, 0.0))

        # One batch-level branch (not per-row compaction): the accurate method runs only
        # when some row needs it, and the program holds one copy of it per call (a
        # compacted map holds one call per slot size: it defers these rows to its own
        # single pass instead, ``fallback=False`` and ``compaction.compacted_map``).
        probability, exact_share = jax.lax.cond(
            jnp.any(outside), with_accurate, lambda: (fast, jnp.zeros_like(fast[:, 0])))
    probability = probability.reshape(arm_shape)
    exact_share = exact_share.reshape(arm_shape[:-1])
    return _combine(probability, exact_share, uncertain, tops, best_exact)


def _combine(probability: Array, exact_share: Array, uncertain: Array, tops: Array,
             best_exact: Array) -> Array:
    """The exact-arm rules of the module docstring on the uncertain arms' ``probability``."""
    num_tops = jnp.maximum(jnp.sum(tops, axis=-1, keepdims=True), 1)
    tie = tops / num_tops  # [..., A]
    probability = jnp.where(uncertain, probability, 0.0)
    has_uncertain = jnp.any(uncertain, axis=-1, keepdims=True)
    total = jnp.sum(probability, axis=-1, keepdims=True)
    share = jnp.where(has_uncertain, exact_share[..., None], 1.0)  # all-exact rows: ties
    denominator = total + share
    normal = jnp.where(denominator > 0,
                       (probability + share * tie) / jnp.where(denominator > 0, denominator, 1.0),
                       0.0)
    won = (best_exact >= 1.0)[..., None]
    lost = (best_exact <= 0.0)[..., None] & has_uncertain
    uncertain_only = jnp.where(total > 0, probability / jnp.where(total > 0, total, 1.0), 0.0)
    return jnp.where(won, tie, jnp.where(lost | ~jnp.isfinite(best_exact)[..., None],
                                         jnp.where(has_uncertain, uncertain_only, tie), normal))
