"""CDFs of a belief's score on a grid: the numerics under ``best_arm``'s accurate method.

For ``K = 2`` the score is ``p ~ Beta(alpha, beta)``; its CDF is tabulated in
``z = logit(p)`` on sinh-stretched nodes around the mode, which stays accurate in
float32 from very flat (concentration 1) to very sharp (10^4) beliefs and for
``alpha`` or ``beta`` << 1; K = 2 works on logit edges ``[..., G]``. For ``K = 3`` the
score ``win + draw / 2`` of a Dirichlet is integrated from the same tables, on edges of
the score axis ``y = sign(z) |z|^(1 / SCORE_AXIS_POWER)``, which keeps scores within
e^-1000 of 1/2 (a Dirichlet at its draw vertex) in order.
All functions are pure and jit/vmap-able. On the CPU, K = 3's per-arm passes
(``score_cdf_and_density_dirichlet``, ``score_sample``) run as native custom calls
(``native_cpu``, ``score_cdf_cpu.cc``), elsewhere as their array programs
(``_score_cdf_and_density_dirichlet_array``, ``_score_sample_array``): the same numbers
to float32 rounding.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma, polygamma

from curiosity_search.curiosity import native_cpu

Array = jax.Array

_TINY = 1e-30
# Per-arm CDF tables: S nodes spanning +-_TABLE_HALF_WIDTH standard deviations of
# logit(score) around its mean.
_TABLE_NODES = 65  # odd: u = 0 (the mode) is a node
_TABLE_HALF_WIDTH = 10.0
# K = 3: Gauss-Legendre nodes on the quantile scale of the integration variable, read
# from a per-arm table of its quantile function at uniform logits of the level.
_QUANTILE_NODES = 8
_QUANTILE_LOGITS = np.linspace(-16.0, 16.0, 33).astype(np.float32)
_QUANTILE_NEWTON_STEPS = 3


def _gauss_legendre_unit(order: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on ``[0, 1]``, ``[order]`` each (float32)."""
    nodes, weights = np.polynomial.legendre.leggauss(order)
    return (0.5 * (nodes + 1.0)).astype(np.float32), (0.5 * weights).astype(np.float32)


_GAUSS_LEGENDRE = _gauss_legendre_unit(_QUANTILE_NODES)


# --------------------------------------------------------------------------------------
# CDF of logit(p) for p ~ Beta(alpha, beta), accurate in float32 for any concentration
# --------------------------------------------------------------------------------------


class _LogitBetaTable(NamedTuple):
    """Tabulated CDF of ``z = logit(p)``, ``p ~ Beta(alpha, beta)``; leading shape ``[...]``.

    Nodes sit at ``z_k = mode + inner * sinh(stretch * u_k)`` with ``u_k`` uniform on
    ``[-_TABLE_HALF_WIDTH, _TABLE_HALF_WIDTH]`` (``[S]``, S odd so the mode is a node)
    and ``(inner, stretch)`` taken from the side of the mode: fine (at most unit)
    spacing near the mode where the density bends, widening sinh-like into the tails,
    whose widths can differ by orders of magnitude (``alpha`` or ``beta`` << 1).
    """

    mode: Array  # [...] log(alpha / beta), the mode of the z-density
    inner: Array  # [..., 2] spacing scale at the mode (below, above)
    stretch: Array  # [..., 2] sinh stretch factor (below, above)
    cdf: Array  # [..., S] normalized CDF at the nodes
    density: Array  # [..., S] normalized z-density at the nodes


def _logit_beta_log_density(alpha: Array, beta: Array, delta: Array) -> tuple[Array, Array]:
    """Log-density of z = logit(p) relative to its mode, and its derivative.

    Args:
      alpha, beta: ``[...]``, broadcastable against ``delta``.
      delta: ``z - log(alpha / beta)``.

    Returns:
      ``(log f(z) - log f(mode), d log f / dz)``, each shaped like ``delta``. Written
      so that no large terms cancel: accurate for concentrations up to ~1e7 in float32.
    """
    # The density is symmetric under (alpha, beta, delta) -> (beta, alpha, -delta);
    # evaluate it on the side where the smaller parameter leads, so that the
    # ratio r = a / n <= 1/2 and log1p never sees -1.
    mirrored = alpha > beta
    a = jnp.where(mirrored, beta, alpha)
    b = jnp.where(mirrored, alpha, beta)
    d = jnp.where(mirrored, -delta, delta)
    total = a + b
    r = a / total
    log_r = jnp.log(a) - jnp.log(total)
    # log(1 + r * expm1(d)) = log((1 - r) + r e^d); log1p keeps full relative
    # accuracy (it multiplies the large total), logaddexp only avoids overflow.
    expm1 = jnp.expm1(jnp.minimum(d, 80.0))
    log_small = jnp.log1p(r * expm1)
    log_large = jnp.logaddexp(jnp.log1p(-r), log_r + d)
    log_mix = jnp.where(d < 80.0, log_small, log_large)
    log_density = a * d - total * log_mix
    slope_d = -(a * b / total) * expm1 / (1.0 + r * expm1)
    slope = jnp.where(mirrored, -slope_d, slope_d)
    return log_density, slope


def _node_offsets() -> Array:
    """Standardized node positions ``u_k``, ``[S]``."""
    return jnp.linspace(-_TABLE_HALF_WIDTH, _TABLE_HALF_WIDTH, _TABLE_NODES)


def _side(table: _LogitBetaTable, below: Array) -> tuple[Array, Array]:
    """``(inner, stretch)`` for positions below / above the mode; ``below: [..., Q]``."""
    inner = jnp.where(below, table.inner[..., :1], table.inner[..., 1:])
    stretch = jnp.where(below, table.stretch[..., :1], table.stretch[..., 1:])
    return inner, stretch


def _table_offsets(table: _LogitBetaTable) -> Array:
    """``z_k - mode`` for the table nodes, ``[..., S]``."""
    u = _node_offsets()
    inner, stretch = _side(table, u < 0)
    return inner * jnp.sinh(stretch * u)


def _logit_beta_table(alpha: Array, beta: Array) -> _LogitBetaTable:
    """Tabulates the CDF of logit(Beta(alpha, beta)); ``alpha, beta: [...]``.

    z = log G_alpha - log G_beta for independent Gammas; log G_a has a left tail of
    width ~sqrt(trigamma(a)) (1/a for small a) and a right tail of width
    ~min(1, sqrt(trigamma(a))). The table's two sides combine them, reaching
    _TABLE_HALF_WIDTH such widths from the mode.
    """
    alpha = jnp.maximum(alpha, 1e-6)
    beta = jnp.maximum(beta, 1e-6)
    mode = jnp.log(alpha) - jnp.log(beta)
    spread_alpha = polygamma(1, alpha)
    spread_beta = polygamma(1, beta)
    scale = jnp.stack(
        [
            jnp.sqrt(spread_alpha + jnp.minimum(spread_beta, 1.0)),
            jnp.sqrt(jnp.minimum(spread_alpha, 1.0) + spread_beta),
        ],
        axis=-1,
    )  # [..., 2]
    inner = jnp.minimum(scale, 1.0)
    stretch = jnp.arcsinh(_TABLE_HALF_WIDTH * scale / inner) / _TABLE_HALF_WIDTH
    table = _LogitBetaTable(mode, inner, stretch, jnp.zeros(()), jnp.zeros(()))
    delta = _table_offsets(table)  # [..., S]
    log_density, slope = _logit_beta_log_density(alpha[..., None], beta[..., None], delta)
    density = jnp.exp(log_density - jnp.max(log_density, axis=-1, keepdims=True))
    density_slope = density * slope  # d density / dz
    width = delta[..., 1:] - delta[..., :-1]  # [..., S - 1] cell widths in z
    # Trapezoid with the Euler-Maclaurin end correction: exact for cubic densities.
    segments = 0.5 * width * (density[..., :-1] + density[..., 1:]) + (width**2 / 12.0) * (
        density_slope[..., :-1] - density_slope[..., 1:]
    )
    segments = jnp.maximum(segments, 0.0)
    cumulative = jnp.concatenate(
        [jnp.zeros_like(segments[..., :1]), prefix_sum(segments)], axis=-1
    )  # prefix_sum: XLA:CPU's cumsum is a slow reduce-window
    total = jnp.maximum(cumulative[..., -1:], _TINY)
    return _LogitBetaTable(mode, inner, stretch, cumulative / total, density / total)


def _table_cdf(table: _LogitBetaTable, z: Array) -> Array:
    """CDF of the tabulated logit-Beta at ``z: [..., Q]`` (may be +-inf); ``[..., Q]``.

    Cubic Hermite interpolation in z of the tabulated CDF (its derivative is the
    density), consistent with the tabulation rule; 0 below and 1 above the table.
    """
    return _table_cdf_and_density(table, z)[0]


def _table_cdf_and_density(table: _LogitBetaTable, z: Array) -> tuple[Array, Array]:
    """``_table_cdf`` and its derivative in z (the interpolant's density), ``[..., Q]`` each.

    The derivative is written out (d/dtau of the Hermite cubic over the cell width),
    equal to ``jax.jvp`` of ``_table_cdf`` with a unit tangent away from cell edges, at
    about half the cost: 0 outside the table and where the CDF is clipped.
    """
    du = 2.0 * _TABLE_HALF_WIDTH / (_TABLE_NODES - 1)
    delta = z - table.mode[..., None]
    inner, stretch = _side(table, delta < 0)
    u = jnp.arcsinh(delta / inner) / stretch
    u_clipped = jnp.clip(u, -_TABLE_HALF_WIDTH, _TABLE_HALF_WIDTH)
    index = jnp.floor((u_clipped + _TABLE_HALF_WIDTH) / du)
    index = jnp.clip(index, 0, _TABLE_NODES - 2).astype(jnp.int32)
    offsets = _table_offsets(table)
    take = lambda values, idx: jnp.take_along_axis(values, idx, axis=-1)
    left, right = take(offsets, index), take(offsets, index + 1)
    width = right - left
    delta_clipped = jnp.clip(delta, left, right)
    tau = jnp.clip((delta_clipped - left) / jnp.maximum(width, _TINY), 0.0, 1.0)
    c0, c1 = take(table.cdf, index), take(table.cdf, index + 1)
    d0, d1 = take(table.density, index) * width, take(table.density, index + 1) * width
    tau2, tau3 = tau * tau, tau * tau * tau
    cdf = (
        (2 * tau3 - 3 * tau2 + 1) * c0
        + (tau3 - 2 * tau2 + tau) * d0
        + (-2 * tau3 + 3 * tau2) * c1
        + (tau3 - tau2) * d1
    )
    slope = (
        (6 * tau2 - 6 * tau) * c0
        + (3 * tau2 - 4 * tau + 1) * d0
        + (-6 * tau2 + 6 * tau) * c1
        + (3 * tau2 - 2 * tau) * d1
    )
    # Not zeroed where delta falls a rounding error outside its cell (asinh of the
    # position against sinh of the nodes): the clipped tau reads the density at the
    # cell's end there, which is the density at delta.
    inside = width > _TINY
    density = jnp.where(inside, slope / jnp.where(inside, width, 1.0), 0.0)
    outside = (u < -_TABLE_HALF_WIDTH) | (u > _TABLE_HALF_WIDTH)
    cdf = jnp.where(u < -_TABLE_HALF_WIDTH, 0.0, jnp.where(u > _TABLE_HALF_WIDTH, 1.0, cdf))
    density = jnp.where(outside | (cdf < 0.0) | (cdf > 1.0), 0.0, density)
    return jnp.clip(cdf, 0.0, 1.0), density




# --------------------------------------------------------------------------------------
# CDF of the score on logit edges
# --------------------------------------------------------------------------------------


def score_location(concentrations: Array) -> tuple[Array, Array]:
    """Approximate mean and std of logit(score), ``[..., A]`` each (grid placement only).

    K = 2 uses the exact logit-Beta moments; K = 3 those of the Beta with the score's
    mean and variance.
    """
    if concentrations.shape[-1] == 2:
        alpha, beta = concentrations[..., 0], concentrations[..., 1]
    else:
        total = jnp.sum(concentrations, axis=-1)
        win, draw = concentrations[..., 0], concentrations[..., 1]
        mean = (win + 0.5 * draw) / total
        # Var(p_w + p_d / 2) for a Dirichlet.
        variance = (win * (total - win) + 0.25 * draw * (total - draw) - win * draw) / (
            total**2 * (total + 1.0)
        )
        strength = mean * (1.0 - mean) / jnp.maximum(variance, _TINY) - 1.0
        strength = jnp.clip(strength, 1e-3, 1e12)
        alpha = jnp.maximum(mean * strength, 1e-6)
        beta = jnp.maximum((1.0 - mean) * strength, 1e-6)
    alpha = jnp.maximum(alpha, 1e-6)
    beta = jnp.maximum(beta, 1e-6)
    center = digamma(alpha) - digamma(beta)
    scale = jnp.sqrt(polygamma(1, alpha) + polygamma(1, beta))
    return center, scale


def score_cdf_and_density_beta(concentrations: Array, edges: Array) -> tuple[Array, Array]:
    """K = 2: CDF of p(win) and its density in logit space at the edges, ``[..., A, G]``."""
    table = _logit_beta_table(concentrations[..., 0], concentrations[..., 1])
    edges = jnp.broadcast_to(edges[..., None, :], table.mode.shape + edges.shape[-1:])
    return _table_cdf_and_density(table, edges)


def _table_quantiles(table: _LogitBetaTable, quantiles: Array) -> Array:
    """Logit positions ``[..., Q]`` where the tabulated CDF reaches ``quantiles [..., Q]``.

    Finds each quantile's cell by counting nodes (``[..., Q, S]`` comparisons: for a few
    levels per arm), then solves the cell's Hermite cubic (``_table_cdf``'s interpolant)
    by Newton steps from the linear guess: the inverse of ``_table_cdf``.
    """
    below = table.cdf[..., None, :] <= quantiles[..., None]  # [..., Q, S]
    index = jnp.clip(jnp.sum(below, axis=-1) - 1, 0, _TABLE_NODES - 2).astype(jnp.int32)
    offsets = _table_offsets(table)
    take = lambda values, idx: jnp.take_along_axis(values, idx, axis=-1)
    left, right = take(offsets, index), take(offsets, index + 1)
    width = right - left
    c0, c1 = take(table.cdf, index), take(table.cdf, index + 1)
    d0, d1 = take(table.density, index) * width, take(table.density, index + 1) * width
    tau = jnp.clip((quantiles - c0) / jnp.maximum(c1 - c0, _TINY), 0.0, 1.0)
    for _ in range(_QUANTILE_NEWTON_STEPS):
        tau2, tau3 = tau * tau, tau * tau * tau
        value = ((2 * tau3 - 3 * tau2 + 1) * c0 + (tau3 - 2 * tau2 + tau) * d0
                 + (-2 * tau3 + 3 * tau2) * c1 + (tau3 - tau2) * d1)
        slope = ((6 * tau2 - 6 * tau) * (c0 - c1) + (3 * tau2 - 4 * tau + 1) * d0
                 + (3 * tau2 - 2 * tau) * d1)
        step = jnp.where(slope > _TINY, (value - quantiles) / jnp.maximum(slope, _TINY), 0.0)
        tau = jnp.clip(tau - step, 0.0, 1.0)
    return table.mode[..., None] + left + tau * width


class _QuantileTable(NamedTuple):
    """A logit-Beta's quantile function ``z(l)`` at the uniform logits ``l`` of its level
    ``_QUANTILE_LOGITS``, and its slopes ``dz / dl``; ``[..., M]`` each."""

    value: Array
    slope: Array


def _quantile_table(table: _LogitBetaTable) -> _QuantileTable:
    """Tabulates the quantile function of ``table``'s distribution (leading shape ``[...]``)."""
    logits = jnp.asarray(_QUANTILE_LOGITS)
    levels = jnp.broadcast_to(jax.nn.sigmoid(logits), table.mode.shape + logits.shape)
    value = _table_quantiles(table, levels)
    density = _table_cdf_and_density(table, value)[1]
    # dz/dl = u (1 - u) / f(z); where the tabulated density is negligible (clipped tails),
    # the centred difference of the values (linear extension at the ends).
    exact = levels * (1.0 - levels) / jnp.maximum(density, _TINY)
    spacing = logits[1] - logits[0]
    padded = jnp.concatenate([2 * value[..., :1] - value[..., 1:2], value,
                              2 * value[..., -1:] - value[..., -2:-1]], axis=-1)
    difference = (padded[..., 2:] - padded[..., :-2]) / (2.0 * spacing)
    slope = jnp.where(density > 1e-6 * jnp.max(density, axis=-1, keepdims=True),
                      jnp.minimum(exact, 10.0 * jnp.abs(difference) + 1e-3), difference)
    return _QuantileTable(value, jnp.maximum(slope, 0.0))


def _quantile_table_lookup(table: _QuantileTable, logit_u: Array) -> Array:
    """Quantiles ``[..., Q]`` at the logits ``logit_u [..., Q]`` of their levels: cubic
    Hermite inside the table, linear in the logit beyond it (logit-Beta tails are
    exponential, so the quantile is asymptotically linear in the level's logit)."""
    low, high = float(_QUANTILE_LOGITS[0]), float(_QUANTILE_LOGITS[-1])
    spacing = (high - low) / (len(_QUANTILE_LOGITS) - 1)
    position = (jnp.clip(logit_u, low, high) - low) / spacing
    index = jnp.clip(jnp.floor(position), 0, len(_QUANTILE_LOGITS) - 2).astype(jnp.int32)
    tau = position - index
    take = lambda values, idx: jnp.take_along_axis(values, idx, axis=-1)
    z0, z1 = take(table.value, index), take(table.value, index + 1)
    m0, m1 = take(table.slope, index) * spacing, take(table.slope, index + 1) * spacing
    tau2, tau3 = tau * tau, tau * tau * tau
    inside = ((2 * tau3 - 3 * tau2 + 1) * z0 + (tau3 - 2 * tau2 + tau) * m0
              + (-2 * tau3 + 3 * tau2) * z1 + (tau3 - tau2) * m1)
    below = table.value[..., :1] + table.slope[..., :1] * (logit_u - low)
    above = table.value[..., -1:] + table.slope[..., -1:] * (logit_u - high)
    return jnp.where(logit_u < low, below, jnp.where(logit_u > high, above, inside))




def _log_two_cosh(a: Array) -> Array:
    """``log(2 cosh(a))``, any ``a``."""
    return jnp.abs(a) + jnp.log1p(jnp.exp(-2.0 * jnp.abs(a)))


# --------------------------------------------------------------------------------------
# K = 3: the score axis and the score's CDF on it
# --------------------------------------------------------------------------------------

# A Dirichlet near its draw vertex puts its score within e^-1000 of 1/2 (logit(score)
# below float32's range), where comparisons are decided by sign and log |logit|. K = 3
# works on y = sign(z) |z|^(1 / SCORE_AXIS_POWER), z = logit(score): monotone, y = 0 at
# score 1/2, and log |z| = P log |y| is kept to ~P * 1.2e-7 (1.5e-5: sharper than a
# 1e6-strength belief's spread) for |log |z|| up to ~87 P (11,000).
SCORE_AXIS_POWER = 128.0
# K = 3 grid candidates: stratified quantiles of p_d and of p_w / (p_w + p_l), paired.
_PRODUCT_LEVELS = 10


def logit_to_score_axis(logits: Array) -> Array:
    """K = 3's score axis ``y [...]`` at logits of the score ``z [...]`` (+-inf kept)."""
    return jnp.sign(logits) * jnp.exp(jnp.log(jnp.abs(logits)) / SCORE_AXIS_POWER)


def _log_tanh_half(log_abs_z: Array) -> Array:
    """``log tanh(|z| / 2) = log |2 sigmoid(z) - 1|`` from ``log |z|`` (any, -inf at z = 0)."""
    a = jnp.exp(jnp.minimum(log_abs_z, 80.0))
    direct = jnp.log(-jnp.expm1(-jnp.maximum(a, 1e-3))) - jnp.log1p(jnp.exp(-a))
    series = log_abs_z - math.log(2.0) - jnp.exp(2.0 * jnp.minimum(log_abs_z, 0.0)) / 12.0
    return jnp.where(log_abs_z < -6.0, series, direct)


def score_sample(concentrations: Array) -> Array:
    """K = 3: ``_score_sample_array`` (read its docstring), by the native pass
    ``score_cdf_cpu.cc`` on the CPU (``native_cpu.native_or_array``);
    ``concentrations [..., A, 3]`` -> ``[..., A, _PRODUCT_LEVELS**2]``."""
    concentrations = jnp.asarray(concentrations, jnp.float32)
    return native_cpu.native_or_array(
        lambda conc: native_cpu.native_dirichlet_score_sample(conc, _PRODUCT_LEVELS**2),
        _score_sample_array, concentrations)


def _score_sample_array(concentrations: Array) -> Array:
    """K = 3: an equal-weight sample ``[..., A, M]`` (unsorted, ``M = _PRODUCT_LEVELS**2``)
    of each arm's score on the score axis, which follows its mass wherever it sits (at
    1/2's draw vertex, deep in a win or loss vertex's tail, or in between): grid
    candidates that the score's moments cannot place.

    The score s = 1/2 + (1 - t)(B - 1/2) at the pairs of stratified quantiles of
    t = p_d ~ Beta(d, w + l) and B = p_w / (p_w + p_l) ~ Beta(w, l) (independent).
    ``log |2 s - 1| = log(1 - t) + log |2 B - 1|`` and ``log(1 - |2 s - 1|) = log(t + (1 -
    t) 2 min(B, 1 - B))`` keep draws within e^-1000 of 1/2, 0 or 1 apart.
    """
    win, draw, loss = concentrations[..., 0], concentrations[..., 1], concentrations[..., 2]
    levels = (np.arange(_PRODUCT_LEVELS) + 0.5) / _PRODUCT_LEVELS
    level_logits = jnp.asarray(np.log(levels) - np.log1p(-levels), jnp.float32)

    def quantiles(table: _LogitBetaTable) -> Array:
        logits = jnp.broadcast_to(level_logits, table.mode.shape + level_logits.shape)
        return _quantile_table_lookup(_quantile_table(table), logits)  # [..., A, L]

    draw_logit = quantiles(_logit_beta_table(draw, win + loss))[..., :, None]  # [..., A, L, 1]
    ratio_logit = quantiles(_logit_beta_table(win, loss))[..., None, :]  # [..., A, 1, L]
    log_t, log_one_minus_t = jax.nn.log_sigmoid(draw_logit), jax.nn.log_sigmoid(-draw_logit)
    log_gap = log_one_minus_t + _log_tanh_half(jnp.log(jnp.abs(ratio_logit)))  # log |2s - 1|
    log_rest = jnp.logaddexp(log_t, log_one_minus_t + math.log(2.0)
                             + jax.nn.log_sigmoid(-jnp.abs(ratio_logit)))  # log(1 - |2s - 1|)
    gap = jnp.exp(log_gap)
    # |logit(s)| = log(1 + g) - log(1 - g) = 2 atanh(g), ~2 g for small g.
    log_abs_z = jnp.where(log_gap < -8.0, math.log(2.0) + log_gap,
                          jnp.log(jnp.maximum(jnp.log1p(gap) - log_rest, _TINY)))
    y = jnp.sign(ratio_logit) * jnp.exp(log_abs_z / SCORE_AXIS_POWER)
    return y.reshape(y.shape[:-2] + (-1,))  # [..., A, L * L]


def score_cdf_and_density_dirichlet(concentrations: Array, edges: Array) -> tuple[Array, Array]:
    """K = 3: ``_score_cdf_and_density_dirichlet_array`` (read its docstring), by the
    native pass ``score_cdf_cpu.cc`` on the CPU (``native_cpu.native_or_array``).

    ``concentrations [..., A, 3]``, ``edges [..., G]`` -> ``([..., A, G], [..., A, G])``.
    """
    concentrations = jnp.asarray(concentrations, jnp.float32)
    edges = jnp.broadcast_to(jnp.asarray(edges, jnp.float32),
                             concentrations.shape[:-2] + jnp.shape(edges)[-1:])
    return native_cpu.native_or_array(native_cpu.native_dirichlet_score_cdf,
                                      _score_cdf_and_density_dirichlet_array,
                                      concentrations, edges)


def _score_cdf_and_density_dirichlet_array(concentrations: Array,
                                           edges: Array) -> tuple[Array, Array]:
    """K = 3: CDF of s = p_w + p_d / 2 and its density on the score axis at its edges.

    ``concentrations [..., A, 3]``, ``edges [..., G]`` on the score axis
    (``logit_to_score_axis``) -> ``([..., A, G], [..., A, G])``.

    Exact representation: t = p_d ~ Beta(d, w + l) and B = p_w / (p_w + p_l) ~
    Beta(w, l) are independent and s - 1/2 = (1 - t)(B - 1/2). The CDF is a 1-D
    integral, over t of F_B(.) or over B of F_t(.); we integrate over the variable that
    moves s less, per arm, and read the other's CDF from its table. Given the edge x, the
    conditional CDF is constant (0 or 1) on one side of a cusp of the integration variable
    (t = 2 min(x, 1 - x), or B = x) and smooth on the other: ``_QUANTILE_NODES``-point
    Gauss-Legendre in the integration variable's quantile over that side only (its
    quantiles from a per-arm quantile table). The density is the same sum of the other's
    table density times the derivative of its argument in the edge (the moving end's
    terms cancel against the constant side: the conditional CDF is continuous there).
    Every quantity that involves x - 1/2 is formed from log |logit(x)|, so draws within
    e^-1000 of 1/2 keep their order.
    """
    win, draw, loss = concentrations[..., 0], concentrations[..., 1], concentrations[..., 2]
    # Spread of s induced by each variable (linearized at the means): integrate over the
    # one that moves s less, per arm.
    total = win + draw + loss
    mean_t = draw / total
    sd_t = jnp.sqrt(mean_t * (1.0 - mean_t) / (total + 1.0))
    mean_b = win / (win + loss)
    sd_b = jnp.sqrt(mean_b * (1.0 - mean_b) / (win + loss + 1.0))
    use_t = jnp.abs(0.5 - mean_b) * sd_t <= (1.0 - mean_t) * sd_b  # [..., A]
    draw_table = _logit_beta_table(draw, win + loss)  # t
    ratio_table = _logit_beta_table(win, loss)  # B
    # The integration variable's table and the conditional one, chosen per arm, so each
    # arm makes one set of table lookups.
    pick = lambda first, second: jax.tree.map(
        lambda a, b: jnp.where(use_t.reshape(use_t.shape + (1,) * (a.ndim - use_t.ndim)), a, b),
        first, second)
    outer_table = pick(draw_table, ratio_table)
    inner_table = pick(ratio_table, draw_table)

    # The edge x as the sign and log |.| of z = logit(x).
    y = edges[..., None, :]  # [..., 1, G]
    sign = jnp.sign(y)
    log_abs_z = SCORE_AXIS_POWER * jnp.log(jnp.abs(y))
    z = sign * jnp.exp(jnp.minimum(log_abs_z, 80.0))
    log_gap = _log_tanh_half(log_abs_z)  # log |2 x - 1|
    # The cusp: over t, s > x for t > 2x (x < 1/2) and s < x for t > 2 (1 - x) (x > 1/2),
    # logit(2 min(x, 1 - x)) = log 2 + log sigmoid(-|z|) - log |2 x - 1|; over B, s > x
    # for B > x (x < 1/2) and s < x for B < x (x > 1/2). Its quantile splits [0, 1] into
    # the constant side and the integrated one, [start, start + length].
    cusp_t = math.log(2.0) + jax.nn.log_sigmoid(-jnp.abs(z)) - log_gap  # +inf at x = 1/2
    use_t = use_t[..., None]  # [..., A, 1]
    cusp = _table_cdf(outer_table, jnp.where(use_t, cusp_t, z))  # [..., A, G]
    upper_side = ~use_t & (sign > 0)
    start = jnp.where(upper_side, cusp, 0.0)
    length = jnp.where(upper_side, 1.0 - cusp, cusp)
    constant = jnp.where(sign > 0, 1.0 - length, 0.0)  # the constant side: 1 above x = 1/2

    unit_nodes, weights = (jnp.asarray(v) for v in _GAUSS_LEGENDRE)  # [N] each
    # The nodes' levels u = start + length * xi as log u and log(1 - u), each from the
    # side where it is precise (the interval's end at 0 or 1 is exact).
    length = length[..., None]
    log_length = jnp.log(jnp.maximum(length, _TINY))
    upper = upper_side[..., None]
    log_u = jnp.where(upper, jnp.log(start[..., None] + length * unit_nodes),
                      log_length + jnp.log(unit_nodes))
    log_v = jnp.where(upper, log_length + jnp.log1p(-unit_nodes),
                      jnp.log1p(-length * unit_nodes))
    shape = log_u.shape  # [..., A, G, N]
    flat = lambda x: x.reshape(shape[:-2] + (-1,))
    nodes = _quantile_table_lookup(_quantile_table(outer_table), flat(log_u - log_v))
    nodes = nodes.reshape(shape)  # the integration variable's logit at the Gauss nodes
    use_t = use_t[..., None]  # [..., A, 1, 1]
    positive = (nodes > 0) & ~use_t
    log_two_cosh_node = _log_two_cosh(0.5 * nodes)
    softplus_node = jax.nn.softplus(nodes)  # -log(1 - t) at t nodes
    log_sigmoid_node = jax.nn.log_sigmoid(nodes)  # log t at t nodes
    edge_sign = sign[..., None]  # [..., 1, G, 1]

    def argument(log_abs_z: Array) -> Array:
        """The conditional CDF's argument ``[..., A, G, N]`` at ``log |logit(x)|``
        ``[..., 1, G, 1]`` (the edge's sign fixed)."""
        log_gap = _log_tanh_half(log_abs_z)
        # Over t (nodes = logit t): s <= x iff B <= 1/2 + (x - 1/2) / (1 - t), i.e.
        # logit(B) <= 2 atanh(v), v = (2 x - 1) / (1 - t) (|v| < 1 on the integrated side).
        # log(1 - |v|) = log(1 - t - |2 x - 1|) - log(1 - t): from log |v| while |z| <= 1
        # (x near 1/2, where 1 - t can be as small as |2x - 1|), else from 2 sigmoid(-|z|)
        # - t, its logs exact in the tails (x near 0 or 1, where t is).
        log_ratio = jnp.minimum(log_gap + softplus_node, 0.0)  # log |v|
        near_half = jnp.log(-jnp.expm1(jnp.minimum(log_ratio, -_TINY)))
        log_two_tail = math.log(2.0) - jax.nn.softplus(jnp.exp(jnp.minimum(log_abs_z, 80.0)))
        ratio = jnp.exp(jnp.minimum(log_sigmoid_node - log_two_tail, 0.0))  # t / (2 sig(-|z|))
        in_tail = log_two_tail + jnp.log1p(-jnp.minimum(ratio, 1.0 - 1e-7)) + softplus_node
        log_complement = jnp.where(log_abs_z > 0.0, in_tail, near_half)
        arg_t = edge_sign * (jnp.log1p(jnp.exp(log_ratio)) - log_complement)
        # Over B (nodes = logit B), with c = 2B - 1 and th = 2x - 1, s <= x iff
        # (1 - t) c <= th: c > 0: P = 1 - F_t(log(c - th) - log(th)); c < 0:
        # P = F_t(log(th - c) - log(-th)), i.e. log|B - x| - log|x - 1/2| in both, each a
        # difference of sigmoids in closed form from the logits (exact in the tails).
        z = edge_sign * jnp.exp(jnp.minimum(log_abs_z, 80.0))
        gap = 0.5 * jnp.abs(nodes - z)
        log_two_sinh = gap + jnp.log(-jnp.expm1(-2.0 * jnp.maximum(gap, _TINY)))
        log_node_gap = log_two_sinh - log_two_cosh_node - _log_two_cosh(0.5 * z)
        arg_b = log_node_gap - (log_gap - math.log(2.0))
        arg = jnp.where(use_t, arg_t, arg_b)
        return jnp.where(jnp.isnan(arg), 0.0, arg)

    edge = log_abs_z[..., None]  # [..., 1, G, 1]
    arg, arg_slope = jax.jvp(argument, (edge,), (jnp.ones_like(edge),))  # elementwise
    conditional, density = _table_cdf_and_density(inner_table, flat(arg))
    conditional, density = conditional.reshape(shape), density.reshape(shape)
    conditional = jnp.where(positive, 1.0 - conditional, conditional)
    # d/dlog|z| of F(arg) (or of 1 - F(arg)); 0 where the argument is infinite (F flat).
    slope = jnp.where(jnp.isfinite(arg) & jnp.isfinite(arg_slope),
                      jnp.where(positive, -density, density) * arg_slope, 0.0)
    cdf = constant + length[..., 0] * jnp.sum(conditional * weights, axis=-1)
    # The density in log |z| times d log|z| / dy = P / |y| (on the edge's side).
    log_density = jnp.log(jnp.maximum(edge_sign[..., 0] * length[..., 0]
                                      * jnp.sum(slope * weights, axis=-1), 0.0))
    log_jacobian = math.log(SCORE_AXIS_POWER) - jnp.log(jnp.abs(y))
    density_y = jnp.where(y != 0.0, jnp.exp(jnp.minimum(log_density + log_jacobian, 80.0)), 0.0)
    return jnp.clip(cdf, 0.0, 1.0), density_y


def score_cdf_and_density(concentrations: Array, edges: Array) -> tuple[Array, Array]:
    """CDF of each arm's score at the edges and its density along their axis.

    ``concentrations: [..., A, K]`` (K = 2 or 3), ``edges: [..., G]`` ->
    ``([..., A, G], [..., A, G])``. K = 2: edges are logits of the score; K = 3: points
    of the score axis (``logit_to_score_axis``).
    """
    if concentrations.shape[-1] == 2:
        return score_cdf_and_density_beta(concentrations, edges)
    if concentrations.shape[-1] == 3:
        return score_cdf_and_density_dirichlet(concentrations, edges)
    raise ValueError(f"beliefs have K = 2 or 3 outcomes, got {concentrations.shape[-1]}")


def prefix_sum(values: Array) -> Array:
    """Inclusive prefix sum over the last axis of ``values [..., C]``, ``[..., C]``.

    A ``[C, C]`` upper-triangular matmul instead of ``jnp.cumsum``: XLA:CPU lowers
    ``cumsum`` to a padded reduce-window, which took ~0.9 ms of the fast P(best)'s
    ~1.3 ms on ``[64, 122, 22]``; the matmul ~0.1 ms. ``HIGHEST`` keeps it float32 on
    accelerators. C is a grid size (~20), so the O(C^2) work is small.
    """
    size = values.shape[-1]
    upper = jnp.triu(jnp.ones((size, size), values.dtype))
    return jnp.matmul(values, upper, precision=jax.lax.Precision.HIGHEST)
