"""The ``fast`` P(a is best): one cheap shared grid per batch element, in stages.

``fast_best_arm_probability`` is ``best_arm_probability(..., method="fast")``, built
from three stages:

1. ``fast_grid(alpha, beta, valid) -> [..., 4]``: the grid's parameters (range, centre,
   inner scale) from min / max reductions over the legal arms;
2. ``fast_cells(alpha, beta, grid, G) -> (mass, middle)``, ``[..., A, C]`` with
   ``C = G + 1`` cells: each arm's cell masses and CDFs at the cell midpoints, a
   function of that arm's belief and the grid only (no mixing across arms);
   ``cell_terms`` turns them into ``(ratio, log_middle)``;
3. ``best_from_terms(ratio, log_middle, valid) -> [..., A]``: the products over arms,
   the cell sums and the normalization.

Keeping each node's per-arm table and redoing only the changed arm's row between
simulations was tried at the root (where every backup ends): on XLA:CPU it was no
faster, since the table's memory traffic (``[B, A, C]`` twice per update) and the
trees whose grid moved (24% of root updates in the benchmark, most early in the
search) cost about what the saved exps and logs did (results/bench/README.md).

Shapes: ``A`` arms, ``G`` grid edges, ``C = G + 1`` cells.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from curiosity_search.search.score_cdf import _prefix_sum

Array = jax.Array

_TINY = 1e-30
# The grid spans every legal arm's mode +-_FAST_RANGE_SIGMAS logit standard deviations,
# clipped to +-_FAST_LOGIT_LIMIT (score 2e-9 .. 1 - 2e-9).
_FAST_RANGE_SIGMAS = 4.0
_FAST_LOGIT_LIMIT = 20.0
_FAST_MIN_TAIL_SLOPE = 1e-3  # a tail cell is at most 1000 logit units "wide"
WITHIN_CELL_RULES = ("midpoint", "simpson")


def score_beta(concentrations: Array) -> tuple[Array, Array]:
    """``(alpha, beta)`` ``[..., A]`` of the score's Beta; K = 3 moment-matched.

    K = 2: the belief itself. K = 3: the Beta with the mean and variance of
    ``s = p_w + p_d / 2`` under the Dirichlet (closed form); without draws it is
    exactly ``Beta(w, l)``. Both floored at 1e-6.
    """
    if concentrations.shape[-1] == 2:
        alpha, beta = concentrations[..., 0], concentrations[..., 1]
    else:
        win, draw, loss = (concentrations[..., 0], concentrations[..., 1],
                           concentrations[..., 2])
        total = win + draw + loss
        up = win + 0.5 * draw  # total * mean
        down = loss + 0.5 * draw  # total * (1 - mean), no cancellation
        # Var(s) * total^2 (total + 1) = w (n - w) + d (n - d) / 4 - w d.
        spread = win * (total - win) + 0.25 * draw * (total - draw) - win * draw
        # strength + 1 = mean (1 - mean) / Var(s) = up down (total + 1) / (total^2 spread)
        ratio = (up / total) * (down / total) * (total + 1.0) / jnp.maximum(
            spread / total**2, _TINY)
        strength = jnp.clip(ratio - 1.0, 1e-3, 1e12)
        alpha, beta = up / total * strength, down / total * strength
    return jnp.maximum(alpha, 1e-6), jnp.maximum(beta, 1e-6)


def fast_grid(alpha: Array, beta: Array, valid: Array) -> Array:
    """The shared grid's parameters ``[..., 4]``: ``(lo, hi, center, inner)``.

    ``[lo, hi]`` = the min / max over legal arms of ``mode -+ 4 sd`` (``mode =
    log(alpha / beta)``, ``sd^2 ~ 1/a + 1/(2 a^2)`` summed over both parameters, an
    approximation of the trigammas), clipped to +-20; ``center`` = the largest legal
    mode; ``inner`` = the smallest sd among arms that can reach the highest lower
    bound. Args ``[..., A]``.
    """
    mode = jnp.log(alpha) - jnp.log(beta)  # [..., A]
    sd = jnp.sqrt(1.0 / alpha + 0.5 / alpha**2 + 1.0 / beta + 0.5 / beta**2)
    limit = _FAST_LOGIT_LIMIT
    low_bound = jnp.clip(mode - _FAST_RANGE_SIGMAS * sd, -limit, limit)
    high_bound = jnp.clip(mode + _FAST_RANGE_SIGMAS * sd, -limit, limit)
    lo = jnp.min(jnp.where(valid, low_bound, limit), axis=-1)
    hi = jnp.max(jnp.where(valid, high_bound, -limit), axis=-1)
    hi = jnp.maximum(hi, lo + 1e-6)
    center = jnp.clip(jnp.max(jnp.where(valid, mode, -limit), axis=-1), lo, hi)
    floor = jnp.max(jnp.where(valid, low_bound, -limit), axis=-1, keepdims=True)
    relevant = valid & (high_bound >= floor)
    inner = jnp.min(jnp.where(relevant, sd, jnp.inf), axis=-1)
    inner = jnp.clip(inner, 1e-6 * (hi - lo), hi - lo)  # finite even with no legal arm
    return jnp.stack([lo, hi, center, inner], axis=-1)


def _grid_points(grid: Array, grid_size: int) -> tuple[Array, Array]:
    """``(points [..., G + 1], widths [..., G - 1])``: the two ends and the midpoints of
    the G - 1 finite cells of the edges ``c + w sinh(t)``, ``t`` uniform on
    ``[-asinh((c - lo) / w), asinh((hi - c) / w)]``: fine where the leaders compete,
    widening sinh-like (a log scale) towards flat or far-away arms."""
    lo, hi, center, inner = (grid[..., i] for i in range(4))
    t_low = -jnp.arcsinh((center - lo) / inner)
    t_high = jnp.arcsinh((hi - center) / inner)
    fraction = jnp.linspace(0.0, 1.0, grid_size)
    t = t_low[..., None] + (t_high - t_low)[..., None] * fraction  # [..., G]
    edges = center[..., None] + inner[..., None] * jnp.sinh(t)
    edges = edges.at[..., 0].set(lo).at[..., -1].set(hi)
    middles = 0.5 * (edges[..., 1:] + edges[..., :-1])  # [..., G - 1]
    widths = jnp.maximum(edges[..., 1:] - edges[..., :-1], _TINY)
    points = jnp.concatenate([edges[..., :1], middles, edges[..., -1:]], axis=-1)
    return points, widths


def fast_cells(alpha: Array, beta: Array, grid: Array, grid_size: int) -> tuple[Array, Array]:
    """Per arm, ``G + 1`` cell masses and the CDFs at the cell midpoints, ``[..., A, C]``.

    In ``z = logit(score)`` the score's Beta has the unnormalized log-density
    ``alpha log x + beta log(1 - x)`` (the Jacobian included); ``log x`` and
    ``log(1 - x)`` are computed once per grid point. ``G - 1`` finite cells by the
    midpoint rule (log-density at the midpoint plus log width) and two half-line tail
    cells with an exponential tail (``f(edge) / |d log f / dz|``), scaled per arm by
    their maximum (the cell products do not depend on an arm's scale): no gammaln, no
    betainc. ``middle = prefix sum - mass / 2`` in one matmul. Row ``a`` depends only on
    arm ``a``'s ``alpha, beta`` and the grid.

    Args:
      alpha, beta: ``[..., A]``; grid: ``[..., 4]`` (``fast_grid``); grid_size: G >= 2.
    """
    points, widths = _grid_points(grid, grid_size)
    # Float32 rounding of the large terms (alpha ~ 1e4) costs ~1e-3 relative in a mass.
    log_x = -jax.nn.softplus(-points)[..., None, :]
    log_rest = -jax.nn.softplus(points)[..., None, :]
    a, b = alpha[..., None], beta[..., None]
    log_density = a * log_x + b * log_rest  # [..., A, G + 1]
    # d log f / dz = alpha (1 - x) - beta x at the ends, for the exponential tails.
    x_ends = jax.nn.sigmoid(points[..., None, ::grid_size])  # [..., 1, 2]
    slope = a * (1.0 - x_ends) - b * x_ends  # [..., A, 2]
    lower_tail = log_density[..., :1] - jnp.log(jnp.maximum(slope[..., :1], _FAST_MIN_TAIL_SLOPE))
    upper_tail = log_density[..., -1:] - jnp.log(
        jnp.maximum(-slope[..., 1:], _FAST_MIN_TAIL_SLOPE))
    inside = log_density[..., 1:-1] + jnp.log(widths)[..., None, :]
    log_mass = jnp.concatenate([lower_tail, inside, upper_tail], axis=-1)  # [..., A, G + 1]
    # Materialized once: otherwise XLA:CPU computes the log-densities twice (for the
    # maximum and for the exp).
    log_mass = jax.lax.optimization_barrier(log_mass)
    mass = jnp.exp(log_mass - jnp.max(log_mass, axis=-1, keepdims=True))
    size = mass.shape[-1]
    half_open = jnp.triu(jnp.ones((size, size), mass.dtype)) - 0.5 * jnp.eye(size)
    middle = jnp.matmul(mass, half_open, precision=jax.lax.Precision.HIGHEST)
    return mass, middle


def cell_terms(mass: Array, middle: Array, valid: Array) -> tuple[Array, Array]:
    """``(ratio, log_middle)`` ``[..., A, C]`` for ``best_from_terms``.

    ``ratio = mass / middle`` (in [0, 2]; 0 where ``middle = 0``, since then ``mass = 0``)
    and ``log(middle)`` (``-inf`` where 0); illegal arms' ``middle`` is taken as 1, so
    they never lower another arm's product.
    """
    middle = jnp.where(valid[..., None], middle, 1.0)
    # log(0) = -inf: a zero CDF makes the cell's log-sum -inf (never NaN: no +inf).
    return mass / jnp.where(middle > 0.0, middle, 1.0), jnp.log(middle)


def best_from_terms(ratio: Array, log_middle: Array, valid: Array) -> Array:
    """P(a is best) ``[..., A]`` from ``cell_terms``, normalized over legal arms.

    ``sum_c mass_a,c prod_{b != a} middle_b,c = sum_c ratio_a,c prod_b middle_b,c``
    exactly (``mass_a = 0`` wherever ``middle_a = 0``): one log per entry for
    ``S_c = sum_b log middle_b`` and one division, instead of a log and an exp per
    entry for ``exp(S_c - log middle_a)``. ``S_c`` is shifted by its maximum over cells
    before the exp, so nothing overflows and the cells that matter do not underflow.
    Written for XLA:CPU: the cell sum is a contraction.
    """
    total_log = jnp.sum(log_middle, axis=-2)  # [..., C]
    peak = jnp.max(total_log, axis=-1, keepdims=True)
    peak = jnp.where(jnp.isfinite(peak), peak, 0.0)
    weight = jnp.exp(total_log - peak)  # [..., C], 0 where some CDF is 0
    probability = jnp.einsum("...ac,...c->...a", ratio, weight,
                             precision=jax.lax.Precision.HIGHEST)
    return normalize_legal(probability, valid)


def normalize_legal(probability: Array, valid: Array) -> Array:
    """``probability [..., A]`` zeroed for illegal arms and normalized (all 0 if none)."""
    probability = jnp.where(valid, probability, 0.0)
    normalizer = jnp.sum(probability, axis=-1, keepdims=True)
    return jnp.where(normalizer > 0, probability / jnp.where(normalizer > 0, normalizer, 1.0), 0.0)


def others_product(cdf: Array) -> Array:
    """``prod_{b != a} F_b`` over the arm axis -2 of ``cdf [..., A, C]``, ``[..., A, C]``.

    ``exp(S - log F_a)`` with ``S = sum_b log F_b``; zero CDFs are counted, not logged.
    """
    is_zero = cdf <= 0.0
    log_cdf = jnp.log(jnp.where(is_zero, 1.0, cdf))
    total_log = jnp.sum(log_cdf, axis=-2, keepdims=True)
    total_zeros = jnp.sum(is_zero, axis=-2, keepdims=True)
    return jnp.where(total_zeros - is_zero > 0, 0.0, jnp.exp(total_log - log_cdf))


def _simpson_best_probability(mass: Array, middle: Array, valid: Array) -> Array:
    """The ``"simpson"`` within-cell rule on ``fast_cells``' output, ``[..., A]``."""
    mass = mass / jnp.sum(mass, axis=-1, keepdims=True)
    mass = jnp.where(valid[..., None], mass, 0.0)
    upper = jnp.minimum(_prefix_sum(mass), 1.0)
    lower = upper - mass
    upper = jnp.where(valid[..., None], upper, 1.0)
    lower = jnp.where(valid[..., None], jnp.maximum(lower, 0.0), 1.0)
    middle = jnp.where(valid[..., None], lower + 0.5 * mass, 1.0)
    edge_cdf = jnp.concatenate([lower[..., :1], upper], axis=-1)  # [..., A, C + 1]
    edge_product = others_product(edge_cdf)
    weight = (edge_product[..., :-1] + 4.0 * others_product(middle)
              + edge_product[..., 1:]) / 6.0
    return normalize_legal(jnp.sum(mass * weight, axis=-1), valid)


def fast_best_arm_probability(
    concentrations: Array, valid: Array, grid_size: int, rule: str = "midpoint"
) -> Array:
    """``best_arm_probability(..., method="fast")``: one cheap shared grid, O(A G).

    1. ``fast_grid``, 2. ``fast_cells``, 3. within a cell each arm is taken as uniform,
    so P(a best in the cell) is ``m_a int_0^1 prod_{b != a} (L_b + m_b t) dt`` (``L`` =
    CDF at the cell's lower edge); summed over arms this is exactly ``prod U - prod L``,
    so the model telescopes to 1. ``rule="midpoint"`` (default) evaluates the product
    at t = 1/2 only (``cell_terms``, ``best_from_terms``); ``"simpson"`` integrates it
    with Simpson's rule (exact for up to 4 arms sharing a cell). Measured, both have
    the same error (the one-density-per-cell masses dominate it), so the default does
    half the work. Ties split evenly; identical arms get identical values.

    Errors: cells can be much wider than a sharp arm's spread when flat and sharp arms
    meet, and masses come from one density value per cell, so it is less accurate
    than ``"accurate"``; measured errors are in tests/test_beliefs.py and
    results/bench/README.md.

    Args:
      concentrations: ``[..., A, K]`` (already floored; illegal arms any stand-in).
      valid: ``[..., A]`` bool.
      grid_size: G >= 2 edges (static).
      rule: ``"midpoint"`` or ``"simpson"`` within-cell rule (static).

    Returns:
      ``[..., A]`` probabilities (0 for illegal arms; all 0 if none is legal).
    """
    if grid_size < 2:
        raise ValueError(f"grid_size must be >= 2, got {grid_size}")
    if rule not in WITHIN_CELL_RULES:
        raise ValueError(f"unknown within-cell rule {rule!r}; choose from {WITHIN_CELL_RULES}")
    alpha, beta = score_beta(concentrations)
    mass, middle = fast_cells(alpha, beta, fast_grid(alpha, beta, valid), grid_size)
    if rule == "simpson":
        return _simpson_best_probability(mass, middle, valid)
    return best_from_terms(*cell_terms(mass, middle, valid), valid)
