"""Outcome beliefs: Beta (win/loss) and Dirichlet (win/draw/loss) arithmetic.

A belief is a concentration vector ``[..., K]`` over the outcome probabilities of the
player to move: ``K = 2`` is ``(win, loss)`` (a Beta over p(win)); ``K = 3`` is
``(win, draw, loss)`` (a Dirichlet). The *score* of a belief is the expected outcome
``s = p_win + p_draw / 2`` in ``[0, 1]`` (win 1, draw 1/2, loss 0); for ``K = 2`` it is
``p_win`` itself. Everything that compares beliefs (``best_arm_probability``,
``sample_best_arm``) compares scores.

``best_arm_probability`` computes ``P(a is best) = int f_a(x) prod_{b != a} F_b(x) dx``
on a shared grid of ``G`` points in O(A G) (see its docstring for the numerics).

All functions are pure, jit/vmap-able and never branch in Python on traced values.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax.scipy.special import digamma, gammaln, polygamma

Array = jax.Array

_LN2 = math.log(2.0)
_TINY = 1e-30

# Per-arm CDF tables: S nodes spanning +-_TABLE_HALF_WIDTH standard deviations of
# logit(score) around its mean.
_TABLE_NODES = 65  # odd: u = 0 (the mode) is a node
_TABLE_HALF_WIDTH = 10.0
# Shared-grid placement: per-arm candidate points at +-_CANDIDATE_RANGE standard
# deviations; the region below the second-largest (mean - _RELEVANCE_SIGMAS * std)
# cannot decide any comparison and gets no grid points.
_CANDIDATE_RANGE = 3.5
_RELEVANCE_SIGMAS = 3.0
# Three-point Gauss-Legendre rule on [0, 1] for the within-cell integral.
_GAUSS_T = (0.5 - 0.5 * math.sqrt(0.6), 0.5, 0.5 + 0.5 * math.sqrt(0.6))
_GAUSS_W = (5.0 / 18.0, 8.0 / 18.0, 5.0 / 18.0)
# "fast" P(best): the grid spans every legal arm's mode +-_FAST_RANGE_SIGMAS logit
# standard deviations, clipped to +-_FAST_LOGIT_LIMIT (score 2e-9 .. 1 - 2e-9).
PBEST_METHODS = ("accurate", "fast")
_FAST_RANGE_SIGMAS = 4.0
_FAST_LOGIT_LIMIT = 20.0
_FAST_MIN_TAIL_SLOPE = 1e-3  # a tail cell is at most 1000 logit units "wide"


# --------------------------------------------------------------------------------------
# Small belief algebra
# --------------------------------------------------------------------------------------


def _score_weights(num_outcomes: int) -> Array:
    """Outcome values from the mover's view, ``[K]``: (1, 0) or (1, 1/2, 0)."""
    return jnp.linspace(1.0, 0.0, num_outcomes)


def belief_mean_score(concentrations: Array) -> Array:
    """Expected outcome in ``[0, 1]`` for the player to move.

    Args:
      concentrations: ``[..., K]`` with K = 2 ``(win, loss)`` or K = 3
        ``(win, draw, loss)``.

    Returns:
      ``[...]``: ``alpha / (alpha + beta)`` or ``(w + d / 2) / (w + d + l)``.
    """
    weights = _score_weights(concentrations.shape[-1])
    total = jnp.sum(concentrations, axis=-1)
    return jnp.sum(concentrations * weights, axis=-1) / jnp.maximum(total, _TINY)


def to_value(concentrations: Array) -> Array:
    """Value in ``[-1, 1]`` (``2 * mean_score - 1``) for the player to move, ``[...]``."""
    return 2.0 * belief_mean_score(concentrations) - 1.0


def flip_perspective(concentrations: Array) -> Array:
    """The same belief seen by the other player: swap win and loss, ``[..., K]``.

    A child node's belief is stored for the child's mover; its parent reads
    ``flip_perspective(child_belief)`` (two-player zero-sum, alternating moves).
    """
    return concentrations[..., ::-1]


def dirac_belief(
    outcome: Array, num_outcomes: int, strength: float = 1e4, floor: float = 1.0
) -> Array:
    """Near-Dirac belief for a proven result (terminal state or solved node).

    ``floor + strength * one_hot(outcome)``: with the defaults a proven win is
    Beta(10001, 1), whose mean score is 0.9999 and whose score standard deviation
    is 1e-4, so it beats any network belief with overwhelming probability while
    every concentration stays positive (the KL loss and the CDFs stay finite).

    Args:
      outcome: ``[...]`` int outcome index for the player to move: 0 = win,
        ``K - 1`` = loss, 1 = draw when ``K = 3``.
      num_outcomes: K (2 or 3).
      strength: concentration added to the proven outcome.
      floor: concentration of every outcome (must be > 0).

    Returns:
      ``[..., K]`` concentrations.
    """
    one_hot = jax.nn.one_hot(outcome, num_outcomes)
    return floor + strength * one_hot


def score_belief(
    score: Array, num_outcomes: int, strength: float = 1e4, floor: float = 1.0
) -> Array:
    """Near-Dirac belief with a given exact expected outcome (``score`` in ``[0, 1]``).

    Generalizes ``dirac_belief`` to fractional results (a bandit payoff, a proven
    draw under K = 2): K = 2 puts ``strength * (s, 1 - s)`` on (win, loss); K = 3 puts
    the strength on the two outcomes adjacent to ``s`` (win/draw above 1/2, draw/loss
    below), so scores 1, 1/2, 0 give exactly ``dirac_belief`` of win, draw, loss.

    Args:
      score: ``[...]`` expected outcome for the player to move.
      num_outcomes: K (2 or 3).

    Returns:
      ``[..., K]`` concentrations ``floor + strength * weights``.
    """
    score = jnp.clip(jnp.asarray(score, jnp.float32), 0.0, 1.0)
    if num_outcomes == 2:
        weights = jnp.stack([score, 1.0 - score], axis=-1)
    elif num_outcomes == 3:
        upper = score >= 0.5
        win = jnp.where(upper, 2.0 * score - 1.0, 0.0)
        loss = jnp.where(upper, 0.0, 1.0 - 2.0 * score)
        weights = jnp.stack([win, 1.0 - win - loss, loss], axis=-1)
    else:
        raise ValueError(f"beliefs have K = 2 or 3 outcomes, got {num_outcomes}")
    return floor + strength * weights


def combine_with_prior(
    value_belief: Array, mixture_belief: Array, evidence: Array, kappa: Array | float
) -> Array:
    """Pseudo-Bayesian backup ``C = (1 - gamma) V + gamma Qbar``, ``gamma = n / (kappa + n)``.

    Args:
      value_belief: ``[..., K]`` the network's value belief V.
      mixture_belief: ``[..., K]`` the summarized children mixture Qbar.
      evidence: ``[...]`` search evidence n below the node (e.g. its visit count).
      kappa: prior strength, scalar or ``[...]``; ``kappa = n = 0`` gives gamma = 0.

    Returns:
      ``[..., K]`` the node's search belief C.
    """
    evidence = jnp.asarray(evidence, value_belief.dtype)
    denominator = kappa + evidence
    gamma = jnp.where(denominator > 0, evidence / jnp.where(denominator > 0, denominator, 1.0), 0.0)
    gamma = gamma[..., None]
    return (1.0 - gamma) * value_belief + gamma * mixture_belief


def summarize_mixture(weights: Array, concentrations: Array, method: str = "average") -> Array:
    """One Beta/Dirichlet summarizing the mixture ``sum_a w_a Dir(c_a)``.

    Args:
      weights: ``[..., A]`` non-negative mixture weights (normalized here; rows of
        all zeros give the unweighted average).
      concentrations: ``[..., A, K]``.
      method: ``"average"`` — weighted average of the parameter vectors (the blog's
        rule); ``"moment_match"`` — the Dirichlet with the mixture's mean vector and
        total variance ``sum_k Var(p_k)`` (for K = 2 this matches the mean and the
        variance of p(win), i.e. of the score). Static.

    Returns:
      ``[..., K]`` concentrations.
    """
    total_weight = jnp.sum(weights, axis=-1, keepdims=True)
    num_actions = weights.shape[-1]
    weights = jnp.where(total_weight > 0, weights / jnp.where(total_weight > 0, total_weight, 1.0),
                        1.0 / num_actions)
    if method == "average":
        return jnp.einsum("...a,...ak->...k", weights, concentrations)
    if method != "moment_match":
        raise ValueError(f"unknown mixture summary {method!r}")
    strength = jnp.sum(concentrations, axis=-1, keepdims=True)
    mean = concentrations / jnp.maximum(strength, _TINY)  # [..., A, K]
    # 1 - mean_k as the sum of the other components: no cancellation near a vertex.
    rest = (strength - concentrations) / jnp.maximum(strength, _TINY)
    mix_mean = jnp.einsum("...a,...ak->...k", weights, mean)
    mix_rest = jnp.einsum("...a,...ak->...k", weights, rest)
    # Law of total variance, summed over outcomes: within (Dirichlet variances) plus
    # between (spread of the component means), both without E[p^2] - E[p]^2.
    within = mean * rest / (strength + 1.0)
    between = (mean - mix_mean[..., None, :]) ** 2
    total_variance = jnp.einsum("...a,...ak->...", weights, within + between)
    spread = jnp.sum(mix_mean * mix_rest, axis=-1)  # = (n + 1) * total variance for a Dirichlet
    strength_matched = spread / jnp.maximum(total_variance, _TINY) - 1.0
    strength_matched = jnp.clip(strength_matched, 1e-3, 1e8)
    return mix_mean * strength_matched[..., None]


def kl_dirichlet_bits(p_concentrations: Array, q_concentrations: Array) -> Array:
    """``KL(Dir(p) || Dir(q))`` in bits (Beta when K = 2), closed form.

    Use ``p = q_search`` (the target) and ``q = q_theta`` (the network).

    Args:
      p_concentrations: ``[..., K]``.
      q_concentrations: ``[..., K]``.

    Returns:
      ``[...]`` KL divergence in bits (>= 0).
    """
    p_total = jnp.sum(p_concentrations, axis=-1)
    q_total = jnp.sum(q_concentrations, axis=-1)
    kl = (
        gammaln(p_total)
        - jnp.sum(gammaln(p_concentrations), axis=-1)
        - gammaln(q_total)
        + jnp.sum(gammaln(q_concentrations), axis=-1)
        + jnp.sum(
            (p_concentrations - q_concentrations)
            * (digamma(p_concentrations) - digamma(p_total)[..., None]),
            axis=-1,
        )
    )
    return kl / _LN2


def entropy_bits(concentrations: Array) -> Array:
    """Differential entropy of ``Dir(c)`` (Beta when K = 2) in bits, ``[...]``.

    Can be negative (sharp beliefs); Dir(1, ..., 1) has entropy ``-log2((K - 1)!)``.
    """
    total = jnp.sum(concentrations, axis=-1)
    num_outcomes = concentrations.shape[-1]
    log_beta = jnp.sum(gammaln(concentrations), axis=-1) - gammaln(total)
    entropy = (
        log_beta
        + (total - num_outcomes) * digamma(total)
        - jnp.sum((concentrations - 1.0) * digamma(concentrations), axis=-1)
    )
    return entropy / _LN2


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
        [jnp.zeros_like(segments[..., :1]), _prefix_sum(segments)], axis=-1
    )  # _prefix_sum: XLA:CPU's cumsum is a slow reduce-window
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
    inside = (delta >= left) & (delta <= right) & (width > _TINY)
    density = jnp.where(inside, slope / jnp.where(inside, width, 1.0), 0.0)
    outside = (u < -_TABLE_HALF_WIDTH) | (u > _TABLE_HALF_WIDTH)
    cdf = jnp.where(u < -_TABLE_HALF_WIDTH, 0.0, jnp.where(u > _TABLE_HALF_WIDTH, 1.0, cdf))
    density = jnp.where(outside | (cdf < 0.0) | (cdf > 1.0), 0.0, density)
    return jnp.clip(cdf, 0.0, 1.0), density


def _safe_log(x: Array) -> Array:
    """``log(x)`` for ``x > 0``, ``-inf`` otherwise, with finite tangents."""
    positive = x > 0
    return jnp.where(positive, jnp.log(jnp.where(positive, x, 1.0)), -jnp.inf)


# --------------------------------------------------------------------------------------
# CDF of the score on logit edges
# --------------------------------------------------------------------------------------


def _score_location(concentrations: Array) -> tuple[Array, Array]:
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


def _score_cdf_beta(concentrations: Array, edges: Array) -> Array:
    """K = 2: CDF of p(win) at logit edges. ``[..., A, 2]``, ``[..., G]`` -> ``[..., A, G]``."""
    return _score_cdf_and_density_beta(concentrations, edges)[0]


def _score_cdf_and_density_beta(concentrations: Array, edges: Array) -> tuple[Array, Array]:
    """K = 2: CDF of p(win) and its density in logit space at the edges, ``[..., A, G]``."""
    table = _logit_beta_table(concentrations[..., 0], concentrations[..., 1])
    edges = jnp.broadcast_to(edges[..., None, :], table.mode.shape + edges.shape[-1:])
    return _table_cdf_and_density(table, edges)


def _table_nodes(table: _LogitBetaTable) -> Array:
    """Logit positions of the table nodes, ``[..., S]``."""
    return table.mode[..., None] + _table_offsets(table)


def _trapezoid_weights(table: _LogitBetaTable) -> Array:
    """Trapezoid quadrature weights on the table nodes, ``[..., S]`` (sum to 1)."""
    offsets = _table_offsets(table)
    width = offsets[..., 1:] - offsets[..., :-1]
    zeros = jnp.zeros_like(width[..., :1])
    span = 0.5 * (jnp.concatenate([zeros, width], -1) + jnp.concatenate([width, zeros], -1))
    weights = table.density * span
    return weights / jnp.maximum(jnp.sum(weights, axis=-1, keepdims=True), _TINY)


def _score_cdf_dirichlet(concentrations: Array, edges: Array) -> Array:
    """K = 3: CDF of s = p_w + p_d / 2 at logit edges, ``[..., A, G]``.

    Exact representation: t = p_d ~ Beta(d, w + l) and B = p_w / (p_w + p_l) ~
    Beta(w, l) are independent and s - 1/2 = (1 - t)(B - 1/2). The CDF is a 1-D
    integral, over t of F_B(.) or over B of F_t(.); we integrate over the variable that
    moves s less (then the integrand is smooth on the node spacing) with the
    trapezoid rule on its table nodes, and read the other CDF from its table.
    """
    win, draw, loss = concentrations[..., 0], concentrations[..., 1], concentrations[..., 2]
    draw_table = _logit_beta_table(draw, win + loss)  # t
    ratio_table = _logit_beta_table(win, loss)  # B
    # th = 2 x - 1 for the edge x = sigmoid(edge).
    th = jnp.tanh(0.5 * edges)[..., None, :, None]  # [..., 1, G, 1]

    # Integrate over t: P(s <= x | t) = F_B(logit((x - t/2) / (1 - t))).
    t_nodes = _table_nodes(draw_table)[..., None, :]  # [..., A, 1, S]
    one_minus_t = jax.nn.sigmoid(-t_nodes)
    arg_t = _safe_log(one_minus_t + th) - _safe_log(one_minus_t - th)  # [..., A, G, S]
    arg_t = jnp.where(jnp.isnan(arg_t), 0.0, arg_t)
    shape = arg_t.shape
    cond_b = _table_cdf(ratio_table, arg_t.reshape(shape[:-2] + (-1,))).reshape(shape)
    cdf_over_t = jnp.sum(cond_b * _trapezoid_weights(draw_table)[..., None, :], axis=-1)

    # Integrate over B: with c = 2B - 1, s <= x iff (1 - t) c <= th.
    c = jnp.tanh(0.5 * _table_nodes(ratio_table))[..., None, :]  # [..., A, 1, S]
    positive = c > 0
    arg_pos = _safe_log(c - th) - _safe_log(th)  # P = 1 - F_t(arg_pos)
    arg_neg = _safe_log(th - c) - _safe_log(-th)  # P = F_t(arg_neg)
    arg_b = jnp.where(positive, arg_pos, arg_neg)
    arg_b = jnp.where(jnp.isnan(arg_b), 0.0, arg_b)
    cond_t = _table_cdf(draw_table, arg_b.reshape(shape[:-2] + (-1,))).reshape(shape)
    cond_t = jnp.where(positive, 1.0 - cond_t, cond_t)
    cdf_over_b = jnp.sum(cond_t * _trapezoid_weights(ratio_table)[..., None, :], axis=-1)

    # Spread of s induced by each variable (linearized at the means).
    total = win + draw + loss
    mean_t = draw / total
    sd_t = jnp.sqrt(mean_t * (1.0 - mean_t) / (total + 1.0))
    mean_b = win / (win + loss)
    sd_b = jnp.sqrt(mean_b * (1.0 - mean_b) / (win + loss + 1.0))
    moved_by_t = jnp.abs(0.5 - mean_b) * sd_t
    moved_by_b = (1.0 - mean_t) * sd_b
    use_t = (moved_by_t <= moved_by_b)[..., None]
    return jnp.where(use_t, cdf_over_t, cdf_over_b)


def _score_cdf(concentrations: Array, edges: Array) -> Array:
    """CDF of each arm's score at ``sigmoid(edges)``.

    ``concentrations: [..., A, K]``, ``edges: [..., G]`` -> ``[..., A, G]``.
    """
    if concentrations.shape[-1] == 2:
        return _score_cdf_beta(concentrations, edges)
    if concentrations.shape[-1] == 3:
        return _score_cdf_dirichlet(concentrations, edges)
    raise ValueError(f"beliefs have K = 2 or 3 outcomes, got {concentrations.shape[-1]}")


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


def _score_beta(concentrations: Array) -> tuple[Array, Array]:
    """``(alpha, beta)`` ``[..., A]`` of the score's Beta; K = 3 moment-matched.

    K = 2: the belief itself. K = 3: the Beta with the mean and variance of
    ``s = p_w + p_d / 2`` under the Dirichlet (closed form); without draws it is
    exactly ``Beta(w, l)``.
    """
    if concentrations.shape[-1] == 2:
        return concentrations[..., 0], concentrations[..., 1]
    win, draw, loss = concentrations[..., 0], concentrations[..., 1], concentrations[..., 2]
    total = win + draw + loss
    up = win + 0.5 * draw  # total * mean
    down = loss + 0.5 * draw  # total * (1 - mean), no cancellation
    # Var(s) * total^2 (total + 1) = w (n - w) + d (n - d) / 4 - w d.
    spread = win * (total - win) + 0.25 * draw * (total - draw) - win * draw
    # strength + 1 = mean (1 - mean) / Var(s) = up * down * (total + 1) / (total^2 spread)
    ratio = (up / total) * (down / total) * (total + 1.0) / jnp.maximum(spread / total**2, _TINY)
    strength = jnp.clip(ratio - 1.0, 1e-3, 1e12)
    return up / total * strength, down / total * strength


def _others_product(cdf: Array) -> Array:
    """``prod_{b != a} F_b`` over the arm axis -2 of ``cdf [..., A, C]``, ``[..., A, C]``.

    ``exp(S - log F_a)`` with ``S = sum_b log F_b``; zero CDFs are counted, not logged.
    """
    is_zero = cdf <= 0.0
    log_cdf = jnp.log(jnp.where(is_zero, 1.0, cdf))
    total_log = jnp.sum(log_cdf, axis=-2, keepdims=True)
    total_zeros = jnp.sum(is_zero, axis=-2, keepdims=True)
    return jnp.where(total_zeros - is_zero > 0, 0.0, jnp.exp(total_log - log_cdf))


def _prefix_sum(values: Array) -> Array:
    """Inclusive prefix sum over the last axis of ``values [..., C]``, ``[..., C]``.

    A ``[C, C]`` upper-triangular matmul instead of ``jnp.cumsum``: XLA:CPU lowers
    ``cumsum`` to a padded reduce-window, which took ~0.9 ms of the fast P(best)'s
    ~1.3 ms on ``[64, 122, 22]``; the matmul ~0.1 ms. ``HIGHEST`` keeps it float32 on
    accelerators. C is a grid size (~20), so the O(C^2) work is small.
    """
    size = values.shape[-1]
    upper = jnp.triu(jnp.ones((size, size), values.dtype))
    return jnp.matmul(values, upper, precision=jax.lax.Precision.HIGHEST)


def _cell_best_probability(mass: Array, middle: Array) -> Array:
    """``sum_c mass_a,c prod_{b != a} middle_b,c`` over cells, up to one factor, ``[..., A]``.

    Args:
      mass: ``[..., A, C]`` cell masses, with ``0 <= mass <= 2 middle``.
      middle: ``[..., A, C]`` CDFs at the cells' evaluation points (1 for illegal arms).

    Returns:
      ``[..., A]``, the sum times a positive factor common to all arms of a batch
      element (normalize over arms). Because ``mass_a = 0`` wherever ``middle_a = 0``,
      ``mass_a prod_{b != a} middle_b = (mass_a / middle_a) prod_b middle_b`` exactly
      (both 0 where ``middle_a = 0``): one log per entry for ``S_c = sum_b log middle_b``
      (a zero makes the cell's product exactly 0) and one division, instead of a log
      and an exp per entry for ``exp(S_c - log middle_a)``. ``S_c`` is shifted by its
      maximum over cells before the exp, so nothing can overflow, and the cells that
      matter (where the maximum's CDF ``prod_b middle_b`` is not negligible) do not
      underflow.
    """
    positive = middle > 0.0
    safe_middle = jnp.where(positive, middle, 1.0)
    ratio = jnp.where(positive, mass / safe_middle, 0.0)  # in [0, 2]
    total_log = jnp.sum(jnp.log(safe_middle), axis=-2)  # [..., C]
    total_log = jnp.where(jnp.all(positive, axis=-2), total_log, -jnp.inf)
    peak = jnp.max(total_log, axis=-1, keepdims=True)
    peak = jnp.where(jnp.isfinite(peak), peak, 0.0)
    weight = jnp.exp(total_log - peak)  # [..., C], 0 where some CDF is 0
    return jnp.sum(ratio * weight[..., None, :], axis=-1)


def _fast_best_arm_probability(
    concentrations: Array, valid: Array, grid_size: int, rule: str = "midpoint"
) -> Array:
    """``method="fast"`` of ``best_arm_probability``: one cheap shared grid, O(A G).

    Works in ``z = logit(score)``, where the score's Beta(alpha, beta) has the
    unnormalized log-density ``alpha log x + beta log(1 - x)`` (the Jacobian
    included); ``log x``, ``log(1 - x)`` are computed once per grid point.

    1. Range and grid (reductions only): ``[lo, hi]`` = the min / max over legal arms of
       ``mode -+ 4 sd`` (``mode = log(alpha / beta)``, ``sd^2 ~ 1/a + 1/(2 a^2)`` summed
       over both parameters, an approximation of the trigammas), clipped to +-20. The
       ``G`` edges are ``c + w sinh(t)``, ``t`` uniform, centred at the largest legal
       mode ``c`` with inner scale ``w`` = the smallest sd among arms that can reach the
       highest lower bound: fine where the leaders compete, widening sinh-like (a log
       scale) towards flat or far-away arms.
    2. Per arm, ``G + 1`` cell masses: ``G - 1`` finite cells by the midpoint rule
       (log-density at the midpoint plus log width) and two half-line tail cells with
       an exponential tail (``f(edge) / |d log f / dz|``), normalized per arm with a
       logsumexp: no gammaln, no betainc. CDFs by prefix sum (``_prefix_sum``).
    3. Within a cell each arm is taken as uniform, so P(a best in the cell) is
       ``m_a int_0^1 prod_{b != a} (L_b + m_b t) dt`` (``L`` = CDF at the cell's lower
       edge); summed over arms this is exactly ``prod U - prod L``, so the model
       telescopes to 1. ``rule="midpoint"`` (default) evaluates the product at t = 1/2
       only (then normalizes); ``"simpson"`` integrates it with Simpson's rule (exact
       for up to 4 arms sharing a cell). Measured, both have the same error (the
       one-density-per-cell masses dominate it), so the default does half the work.
       Ties split evenly; identical arms get identical values; the midpoint rule's
       products through ``_cell_best_probability``, Simpson's through ``_others_product``.
    4. Normalize over legal arms.

    Errors: cells can be much wider than a sharp arm's spread when flat and sharp arms
    meet, and masses come from one density value per cell, so it is less accurate
    than ``"accurate"``; measured errors are in tests/test_beliefs.py and
    results/bench/README.md.

    Args:
      concentrations: ``[..., A, K]`` (already floored; illegal arms any stand-in).
      valid: ``[..., A]`` bool.
      grid_size: G >= 2 edges (static).
      rule: ``"simpson"`` or ``"midpoint"`` within-cell rule (static).

    Returns:
      ``[..., A]`` probabilities (0 for illegal arms; all 0 if none is legal).
    """
    if grid_size < 2:
        raise ValueError(f"grid_size must be >= 2, got {grid_size}")
    alpha, beta = _score_beta(concentrations)
    alpha = jnp.maximum(alpha, 1e-6)
    beta = jnp.maximum(beta, 1e-6)
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
    # Edges c + w sinh(t), t uniform on [-asinh((c - lo) / w), asinh((hi - c) / w)].
    t_low = -jnp.arcsinh((center - lo) / inner)
    t_high = jnp.arcsinh((hi - center) / inner)
    fraction = jnp.linspace(0.0, 1.0, grid_size)
    t = t_low[..., None] + (t_high - t_low)[..., None] * fraction  # [..., G]
    edges = center[..., None] + inner[..., None] * jnp.sinh(t)
    edges = edges.at[..., 0].set(lo).at[..., -1].set(hi)
    middles = 0.5 * (edges[..., 1:] + edges[..., :-1])  # [..., G - 1]
    widths = jnp.maximum(edges[..., 1:] - edges[..., :-1], _TINY)

    # Log-densities at the midpoints and the two ends: log x and log(1 - x) depend on
    # the point only ([..., G + 1]); per arm it is two multiply-adds. Float32 rounding
    # of the large terms (alpha ~ 1e4) costs ~1e-3 relative in a cell's mass.
    points = jnp.concatenate([edges[..., :1], middles, edges[..., -1:]], axis=-1)
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
    mass = jnp.exp(log_mass - jnp.max(log_mass, axis=-1, keepdims=True))
    mass = mass / jnp.sum(mass, axis=-1, keepdims=True)
    mass = jnp.where(valid[..., None], mass, 0.0)
    upper = jnp.minimum(_prefix_sum(mass), 1.0)
    lower = upper - mass
    # Illegal arms: CDF 1 everywhere, so they never lower another arm's product.
    upper = jnp.where(valid[..., None], upper, 1.0)
    lower = jnp.where(valid[..., None], jnp.maximum(lower, 0.0), 1.0)
    middle = jnp.where(valid[..., None], lower + 0.5 * mass, 1.0)
    if rule == "midpoint":
        probability = _cell_best_probability(mass, middle)
    elif rule == "simpson":
        edge_cdf = jnp.concatenate([lower[..., :1], upper], axis=-1)  # [..., A, G + 2]
        edge_product = _others_product(edge_cdf)
        weight = (edge_product[..., :-1] + 4.0 * _others_product(middle)
                  + edge_product[..., 1:]) / 6.0
        probability = jnp.sum(mass * weight, axis=-1)
    else:
        raise ValueError(f"unknown within-cell rule {rule!r}")
    probability = jnp.where(valid, probability, 0.0)
    normalizer = jnp.sum(probability, axis=-1, keepdims=True)
    return jnp.where(normalizer > 0, probability / jnp.where(normalizer > 0, normalizer, 1.0), 0.0)


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

    ``method="fast"`` (``_fast_best_arm_probability``) trades accuracy for speed: one
    shared sinh-logit grid per batch element from min/max reductions, cell masses from
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
        return _fast_best_arm_probability(concentrations, valid, grid_size)

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


def sample_best_arm(
    rng_key: chex.PRNGKey,
    concentrations: Array,
    invalid_actions: Array | None = None,
    grid_size: int = 21,
    method: str = "accurate",
) -> Array:
    """Thompson selection: one arm drawn from P(a is best) (inverse CDF), ``[...]`` int32.

    Equivalent in distribution to drawing one score per arm and taking the argmax, but
    O(A G) and free of Beta/Gamma rejection sampling. Illegal arms are never drawn
    (when at least one arm is legal).

    Args:
      rng_key: PRNG key.
      concentrations: ``[..., A, K]``.
      invalid_actions: ``[..., A]`` bool or None.
      grid_size: G (static).
      method: ``"accurate"`` or ``"fast"`` P(best) (static, see ``best_arm_probability``).
    """
    probability = best_arm_probability(concentrations, invalid_actions, grid_size, method)
    return sample_from_probability(rng_key, probability)


def cumulative_probability(probability: Array) -> Array:
    """Running sum over the last axis of ``probability [..., A]``, ``[..., A]`` float32.

    ``jnp.cumsum`` (a left-to-right sum per entry), so the result is non-decreasing and
    an entry with probability 0 repeats its predecessor exactly, which
    ``inverse_cdf_index`` relies on to never return it. Computed once per cached
    P(best) (not per draw), so ``cumsum``'s cost on XLA:CPU does not matter here.
    """
    return jnp.cumsum(jnp.asarray(probability, jnp.float32), axis=-1)


def inverse_cdf_index(cumulative: Array, uniform: Array) -> Array:
    """The index an inverse-CDF draw picks, ``[...]`` int32.

    Args:
      cumulative: ``[..., A]`` from ``cumulative_probability`` (need not end at 1).
      uniform: ``[...]`` in ``[0, 1)`` (``jax.random.uniform``).

    Returns:
      The number of entries with ``cumulative <= u * total``, ``total`` the last entry,
      i.e. the ``i`` with ``cumulative[i - 1] <= u total < cumulative[i]``: ``i`` has
      probability ``cumulative[i] - cumulative[i - 1] > 0``. In float32, ``u <= 1 -
      2^-23`` gives ``u total < total``, so a zero-probability entry is never returned
      (all-zero input: the last index). One comparison per entry: no log, no per-entry
      random numbers.
    """
    total = cumulative[..., -1:]
    target = jnp.asarray(uniform, jnp.float32)[..., None] * total
    count = jnp.sum((cumulative <= target).astype(jnp.int32), axis=-1)
    return jnp.minimum(count, cumulative.shape[-1] - 1).astype(jnp.int32)


def sample_from_cumulative(rng_key: chex.PRNGKey, cumulative: Array) -> Array:
    """One index drawn from ``cumulative [..., A]`` with one uniform per draw, ``[...]``.

    ``inverse_cdf_index(cumulative, jax.random.uniform(rng_key, cumulative.shape[:-1]))``.
    """
    uniform = jax.random.uniform(rng_key, cumulative.shape[:-1])
    return inverse_cdf_index(cumulative, uniform)


def sample_from_probability(rng_key: chex.PRNGKey, probability: Array) -> Array:
    """Inverse-CDF draw of one index from ``probability [..., A]``, ``[...]`` int32.

    The draw ``sample_best_arm`` makes once P(best) is known: one uniform per draw
    (``sample_from_cumulative``); zero-probability entries are never drawn unless all
    are zero.
    """
    return sample_from_cumulative(rng_key, cumulative_probability(probability))
