"""P(a is best) over per-action beliefs on a shared grid, in O(A G).

``best_arm_probability`` computes ``P(a is best) = int f_a(x) prod_{b != a} F_b(x) dx``
for beliefs ``[..., A, K]`` (Beta for K = 2, Dirichlet for K = 3, compared by their
score ``win + draw / 2``) on one grid of ``G`` points shared by all arms, with the
log-CDF trick for the product and explicit handling of CDFs that are exactly 0. Two
methods: ``accurate`` (grid placed where comparisons are decided, Gauss-Legendre within
cells; max abs error <= 0.01 at G = 21) and ``fast`` (moment-matched, cheaper). The
per-arm CDFs come from ``score_cdf``. All functions are pure and jit/vmap-able.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from curiosity_search.search.best_arm_fast import fast_best_arm_probability
from curiosity_search.search.score_cdf import (
    _score_cdf,
    _score_cdf_and_density_beta,
    _score_location,
)

Array = jax.Array

_TINY = 1e-30
# Shared-grid placement: per-arm candidate points at +-_CANDIDATE_RANGE standard
# deviations; the region below the second-largest (mean - _RELEVANCE_SIGMAS * std)
# cannot decide any comparison and gets no grid points.
_CANDIDATE_RANGE = 3.5
_RELEVANCE_SIGMAS = 3.0
# Three-point Gauss-Legendre rule on [0, 1] for the within-cell integral.
_GAUSS_T = (0.5 - 0.5 * math.sqrt(0.6), 0.5, 0.5 + 0.5 * math.sqrt(0.6))
_GAUSS_W = (5.0 / 18.0, 8.0 / 18.0, 5.0 / 18.0)
PBEST_METHODS = ("accurate", "fast")


# --------------------------------------------------------------------------------------
# P(a is best)
# --------------------------------------------------------------------------------------


def _sort_floats(values: Array) -> Array:
    """``jnp.sort(values, axis=-1)`` for non-NaN float32, ~4x faster on CPU.

    Sorts the IEEE bit patterns as int32 keys (negative floats with their magnitude
    bits flipped, so integer order is float order); XLA's CPU float comparator is the
    slow part of ``jnp.sort``. Same values out (``-0.0`` may sort before ``0.0``).
    """
    flip = jnp.int32(0x7FFFFFFF)
    keys = jax.lax.bitcast_convert_type(values.astype(jnp.float32), jnp.int32)
    keys = jnp.where(keys < 0, keys ^ flip, keys)
    keys = jax.lax.sort(keys, dimension=keys.ndim - 1, is_stable=False)
    keys = jnp.where(keys < 0, keys ^ flip, keys)
    return jax.lax.bitcast_convert_type(keys, jnp.float32)


def _grid_edges(center: Array, scale: Array, valid: Array, grid_size: int) -> Array:
    """Shared logit grid, ``[..., G]``, sorted.

    Each legal arm offers ``G`` candidate points ``center + scale * c_j`` (``c_j``
    uniform on +-_CANDIDATE_RANGE); candidates below the second-largest
    ``center - _RELEVANCE_SIGMAS * scale`` are dropped (there at least two arms are
    almost surely higher, so no arm can be best); the edges are the G quantiles of the
    pooled remaining candidates. Sharp arms thus get their own grid points wherever
    they compete, flat arms get spread ones.
    """
    offsets = jnp.linspace(-_CANDIDATE_RANGE, _CANDIDATE_RANGE, grid_size)
    candidates = center[..., None] + scale[..., None] * offsets  # [..., A, G]
    lows = jnp.where(valid, center - _RELEVANCE_SIGMAS * scale, -jnp.inf)
    top_two = jax.lax.top_k(lows, 2)[0] if lows.shape[-1] > 1 else jnp.concatenate(
        [lows, lows], axis=-1)
    num_valid = jnp.sum(valid, axis=-1)
    threshold = jnp.where(num_valid >= 2, top_two[..., 1], top_two[..., 0])
    keep = valid[..., None] & (candidates >= threshold[..., None, None])
    flat_shape = candidates.shape[:-2] + (-1,)
    pooled = jnp.where(keep, candidates, jnp.inf).reshape(flat_shape)
    pooled = _sort_floats(pooled)
    num_kept = jnp.maximum(jnp.sum(keep.reshape(flat_shape), axis=-1), 1)
    quantiles = (jnp.arange(grid_size) + 0.5) / grid_size
    index = jnp.floor(quantiles * num_kept[..., None]).astype(jnp.int32)
    edges = jnp.take_along_axis(pooled, index, axis=-1)
    return jnp.where(jnp.isfinite(edges), edges, 0.0)


def best_arm_probability(
    concentrations: Array,
    invalid_actions: Array | None = None,
    grid_size: int = 21,
    method: str = "accurate",
) -> Array:
    """P(a is the best arm): ``int f_a(x) prod_{b != a} F_b(x) dx`` on a shared grid.

    The score of an arm is its expected outcome (``p(win)`` for K = 2, ``p_w + p_d / 2``
    for K = 3 under the Dirichlet). Numerics, O(A G):

    1. Grid: ``G`` edges in logit(score) space placed per batch element at the pooled
       quantiles of the competing arms (see ``_grid_edges``), so sharp (concentration
       1e4) and flat (concentration 1) arms are both resolved where they compete.
    2. CDFs ``F_a`` at the edges, an ``A x G`` table: exact per cell (K = 2 from a
       tabulated logit-Beta CDF, K = 3 by a 1-D quadrature of the exact Dirichlet
       representation), so cell masses ``m_a = F_a(hi) - F_a(lo)`` are exact; the
       densities at the edges (their derivatives) give each arm's linear density
       profile inside the ``G + 1`` cells (the two end cells are half-lines).
    3. Inside each cell ``P_a += int rho_a(t) prod_{b != a} F_b(t) dt`` by 3-point
       Gauss-Legendre, with ``prod_{b != a} F_b = exp(S - log F_a)``,
       ``S = sum_b log F_b``; zero CDFs are counted instead of logged.
    4. Normalize over legal arms; illegal arms get exactly 0.

    Max abs error against quadrature / Monte Carlo is ~2e-3 at G = 21 over flat,
    sharp, mixed, identical and single-legal cases (tests/test_beliefs.py). Identical
    arms get identical probabilities; a single legal arm gets 1. With no legal arm the
    result is all zeros.

    ``method="fast"`` (``best_arm_fast.fast_best_arm_probability``) trades accuracy for
    speed: one shared sinh-logit grid per batch element from min/max reductions, cell
    masses from
    the log-density at cell midpoints, a moment-matched Beta for K = 3; no sort, no
    CDF table, no jvp. Its errors are larger (see that function's docstring); the
    0.01 accuracy criterion above applies to ``"accurate"`` only.

    Args:
      concentrations: ``[..., A, K]``, K = 2 (win, loss) or 3 (win, draw, loss), > 0.
      invalid_actions: ``[..., A]`` bool, True = illegal; None = all legal.
      grid_size: G, number of shared grid edges (static).
      method: ``"accurate"`` (default) or ``"fast"`` (static).

    Returns:
      ``[..., A]`` probabilities.
    """
    if method not in PBEST_METHODS:
        raise ValueError(f"method must be one of {PBEST_METHODS}, got {method!r}")
    concentrations = jnp.asarray(concentrations, jnp.float32)
    concentrations = jnp.maximum(concentrations, 1e-6)
    batch_shape = concentrations.shape[:-1]
    if invalid_actions is None:
        valid = jnp.ones(batch_shape, bool)
    else:
        valid = ~jnp.broadcast_to(jnp.asarray(invalid_actions, bool), batch_shape)
    # Illegal arms get a harmless stand-in belief; they are masked below.
    concentrations = jnp.where(valid[..., None], concentrations, 1.0)
    if method == "fast":
        return fast_best_arm_probability(concentrations, valid, grid_size)

    center, scale = _score_location(concentrations)
    edges = _grid_edges(center, scale, valid, grid_size)  # [..., G]
    # [..., A, G] each; density with respect to logit(score).
    if concentrations.shape[-1] == 2:
        cdf, density = _score_cdf_and_density_beta(concentrations, edges)
    else:
        cdf, density = jax.jvp(
            lambda e: _score_cdf(concentrations, e), (edges,), (jnp.ones_like(edges),)
        )
    cdf = jnp.where(valid[..., None], cdf, 1.0)
    density = jnp.maximum(jnp.where(valid[..., None], density, 0.0), 0.0)
    # Edges of the G + 1 cells, with the CDF forced monotone.
    cdf = jax.lax.cummax(cdf, axis=cdf.ndim - 1)
    zeros = jnp.zeros_like(cdf[..., :1])
    ones = jnp.ones_like(cdf[..., :1])
    lower = jnp.concatenate([zeros, cdf], axis=-1)  # [..., A, G + 1]
    mass = jnp.concatenate([cdf, ones], axis=-1) - lower
    mass = jnp.where(valid[..., None], jnp.maximum(mass, 0.0), 0.0)
    # Linear density profile in each finite cell from the edge densities; uniform in
    # the half-line end cells and where both edge densities vanish.
    density_low = jnp.concatenate([ones, density], axis=-1)
    density_high = jnp.concatenate([density, ones], axis=-1)
    density_low = density_low.at[..., -1].set(1.0)
    density_high = density_high.at[..., 0].set(1.0)
    # Weights of the two edges in the profile; uniform where both densities vanish.
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
        is_zero = cdf_t <= 0.0
        log_cdf = jnp.log(jnp.where(is_zero, 1.0, cdf_t))
        total_log = jnp.sum(log_cdf, axis=-2, keepdims=True)
        total_zeros = jnp.sum(is_zero, axis=-2, keepdims=True)
        others = jnp.where(total_zeros - is_zero > 0, 0.0, jnp.exp(total_log - log_cdf))
        probability = probability + w * rho_t * others
    probability = jnp.sum(probability, axis=-1)
    probability = jnp.where(valid, probability, 0.0)
    normalizer = jnp.sum(probability, axis=-1, keepdims=True)
    return jnp.where(normalizer > 0, probability / jnp.where(normalizer > 0, normalizer, 1.0), 0.0)


