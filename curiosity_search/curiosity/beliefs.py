"""Outcome beliefs: Beta (win/loss) and Dirichlet (win/draw/loss) arithmetic.

A belief is a concentration vector ``[..., K]`` over the outcome probabilities of the
player to move: ``K = 2`` is ``(win, loss)`` (a Beta over p(win)); ``K = 3`` is
``(win, draw, loss)`` (a Dirichlet). The *score* of a belief is the expected outcome
``s = p_win + p_draw / 2`` in ``[0, 1]`` (win 1, draw 1/2, loss 0); for ``K = 2`` it is
``p_win`` itself. Everything that compares beliefs (``best_arm_probability``,
``sample_best_arm``) compares scores.

P(a is best) over a node's children is ``best_arm.best_arm_probability``; this module
samples from it. A proven (exact) result is a Dirac, not a concentration vector: where
it must enter an average of parameter vectors (the backup's mixture) it is
``exact_belief`` = its total concentration on the one outcome it is.

All functions are pure, jit/vmap-able and never branch in Python on traced values.
"""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
from jax.scipy.special import digamma, gammaln

from curiosity_search.curiosity.best_arm import best_arm_probability

Array = jax.Array

_LN2 = math.log(2.0)
_TINY = 1e-30

__all__ = [
    "belief_mean_score",
    "combine_with_prior",
    "cumulative_probability",
    "entropy_bits",
    "exact_belief",
    "flip_perspective",
    "inverse_cdf_index",
    "kl_dirichlet_bits",
    "sample_best_arm",
    "sample_from_cumulative",
    "sample_from_probability",
    "stage_index",
    "two_stage_index",
    "summarize_mixture",
    "to_value",
]


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


def exact_belief(score: Array, total: Array, num_outcomes: int) -> Array:
    """The parameter vector of a proven result: ``total`` on the outcome of ``score``.

    Args:
      score: ``[...]`` exact outcome for the player to move: 1 (win), 1/2 (draw,
        K = 3 only) or 0 (loss).
      total: ``[...]`` the concentration kept (e.g. the node's last belief total).
      num_outcomes: K (2 or 3), static.

    Returns:
      ``[..., K]``: ``total * one_hot(outcome)``. Its mean is the exact outcome, so it
      serves as a proven node's stored belief and as its term in a parent's average of
      parameter vectors; it is a Dirac's summary, never a belief to integrate.
    """
    score = jnp.asarray(score, jnp.float32)
    total = jnp.asarray(total, jnp.float32)
    if num_outcomes == 2:
        weights = jnp.stack([score, 1.0 - score], axis=-1)
    elif num_outcomes == 3:
        win = jnp.clip(2.0 * score - 1.0, 0.0, 1.0)
        loss = jnp.clip(1.0 - 2.0 * score, 0.0, 1.0)
        weights = jnp.stack([win, 1.0 - win - loss, loss], axis=-1)
    else:
        raise ValueError(f"beliefs have K = 2 or 3 outcomes, got {num_outcomes}")
    return total[..., None] * weights


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
# Sampling an arm from P(best)
# --------------------------------------------------------------------------------------


def sample_best_arm(
    rng_key: chex.PRNGKey,
    concentrations: Array,
    invalid_actions: Array | None = None,
    grid_size: int = 21,
    method: str = "fast",
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
    ``inverse_cdf_index`` relies on to never return it. XLA:CPU lowers ``cumsum`` to a
    padded reduce-window, slow per draw; a curiosity search's draws therefore run a
    native pass on the CPU (``policy._draw``).
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


def stage_index(weights: Array, uniform: Array) -> tuple[Array, Array]:
    """The first stage of a two-stage inverse-CDF draw (``two_stage_index``): ``(stage
    [...] int32, inside [...])``, the stage ``uniform`` picks over the running sum of
    ``weights [..., S]`` and its position inside that stage's interval, rescaled to
    ``[0, 1 - 2^-23]`` (the second stage's uniform)."""
    uniform = jnp.asarray(uniform, jnp.float32)
    cumulative = cumulative_probability(weights)
    stage = inverse_cdf_index(cumulative, uniform)
    high = jnp.take_along_axis(cumulative, stage[..., None], axis=-1)[..., 0]
    low = jnp.where(stage > 0, jnp.take_along_axis(
        cumulative, jnp.maximum(stage - 1, 0)[..., None], axis=-1)[..., 0], 0.0)
    target = uniform * cumulative[..., -1]
    width = high - low
    inside = jnp.where(width > 0, (target - low) / jnp.where(width > 0, width, 1.0), uniform)
    return stage, jnp.clip(inside, 0.0, 1.0 - 2.0**-23)


def two_stage_index(weights: Array, table: Array, uniform: Array) -> Array:
    """The index a two-stage inverse-CDF draw picks, ``[...]`` int32: ``a`` has
    probability ``sum_s w_s table[a, s] / sum_b table[b, s]`` (normalized over s).

    Args:
      weights: ``[..., S]`` non-negative stage weights ``w_s`` (need not sum to 1).
      table: ``[..., A, S]`` non-negative; column ``s`` is the second stage's
        distribution.
      uniform: ``[...]`` in ``[0, 1)``.

    ``uniform`` picks ``s`` (``stage_index``); its position inside ``s``'s interval
    picks ``a`` over the running sum of column ``s`` (``inverse_cdf_index``). Only
    column ``s`` of the table is read. With ``S = 1`` this is ``inverse_cdf_index`` over
    ``table[:, 0]``'s running sum, draw for draw. An entry of zero probability is never
    drawn.
    """
    stage, inside = stage_index(weights, uniform)
    column = jnp.take_along_axis(table, stage[..., None, None], axis=-1)[..., 0]
    return inverse_cdf_index(cumulative_probability(column), inside)


def sample_from_probability(rng_key: chex.PRNGKey, probability: Array) -> Array:
    """Inverse-CDF draw of one index from ``probability [..., A]``, ``[...]`` int32.

    The draw ``sample_best_arm`` makes once P(best) is known: one uniform per draw
    (``sample_from_cumulative``); zero-probability entries are never drawn unless all
    are zero.
    """
    return sample_from_cumulative(rng_key, cumulative_probability(probability))
