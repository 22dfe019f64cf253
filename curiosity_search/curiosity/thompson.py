"""Thompson selection by drawing: one value per child from its belief, then the argmax.

Selection samples a child from P(a is best) (seeds/002). Drawing one score per child
from its belief and taking the argmax samples exactly that distribution, with no grid:
``thompson_draw``. The draw is made in log space, so that beliefs with concentrations
far below 1 and Dirichlets at their draw vertex keep their order:

- K = 2: ``logit p = log G_w - log G_l`` with ``G ~ Gamma(concentration)``, from
  ``jax.random.loggamma`` (which stays finite where a Gamma variate underflows to 0);
- K = 3: the score ``s = (G_w + G_d / 2) / (G_w + G_d + G_l)`` compared as ``sign(z)
  |z|^(1/128)``, ``z = logit(s)`` (the accurate P(best)'s score axis,
  ``score_cdf.logit_to_score_axis``), with ``log |z|`` formed without cancellation when
  the draw share dominates (``_logit_score``): scores within e^-1000 of 1/2 stay ordered.

Cost (``python scripts/thompson_draw_cost.py``, results/bench/README.md, 2026-12-05): a
draw costs 1.3-2x a fast K = 2 P(best) row, so at K = 2 the search keeps drawing from
its cached P(best) rows; at K = 3 it costs 1/39-1/47 of an accurate P(best) row, so the
K = 3 search draws instead of computing rows for selection
(``CuriosityOptions.selection_draw``).

Shapes: ``A`` actions, ``K`` outcomes.
"""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp

from curiosity_search.curiosity.score_cdf import SCORE_AXIS_POWER

_TINY = 1e-45


def _logit_score(log_gamma: chex.Array) -> tuple[chex.Array, chex.Array]:
    """``(sign z, log |z|)``, each ``[...]``, of ``z = logit((G_w + G_d / 2) / (G_w +
    G_d + G_l))`` from ``log G [..., 3]``.

    ``z = log(G_w + G_d / 2) - log(G_l + G_d / 2)``. Where ``G_d / 2`` exceeds both
    ``G_w`` and ``G_l`` the two logs nearly cancel, so there ``z = log1p(r)``, ``r = (u -
    v) / (1 + v)``, ``u, v = 2 G_w / G_d, 2 G_l / G_d``, with ``log |r|`` taken from the
    log-gamma draws and ``log |z| = log |r|`` once ``|r| < e^-8``.
    """
    log_w, log_d, log_l = log_gamma[..., 0], log_gamma[..., 1], log_gamma[..., 2]
    half_d = log_d - math.log(2.0)
    direct = jnp.logaddexp(log_w, half_d) - jnp.logaddexp(log_l, half_d)
    top = jnp.maximum(log_w, log_l)
    gap = jnp.abs(log_w - log_l)
    log_difference = top + jnp.log(-jnp.expm1(-jnp.maximum(gap, 1e-30)))  # log |G_w - G_l|
    log_v = log_l - half_d
    log_abs_r = log_difference - half_d - jnp.log1p(jnp.exp(jnp.minimum(log_v, 80.0)))
    sign_r = jnp.sign(log_w - log_l)
    r = sign_r * jnp.exp(jnp.minimum(log_abs_r, 80.0))
    log_abs_via_r = jnp.where(
        log_abs_r < -8.0, log_abs_r,
        jnp.log(jnp.maximum(jnp.abs(jnp.log1p(jnp.maximum(r, -1.0 + 1e-7))), _TINY)))
    dominated = half_d > top
    sign = jnp.where(dominated, sign_r, jnp.sign(direct))
    log_abs = jnp.where(dominated, log_abs_via_r, jnp.log(jnp.maximum(jnp.abs(direct), _TINY)))
    return sign, log_abs


def thompson_draw(key: chex.PRNGKey, concentrations: chex.Array,
                  valid: chex.Array) -> chex.Array:
    """One action per row, ``[...]`` int32: the argmax over the ``valid [..., A]`` arms
    of one score drawn from each arm's belief ``concentrations [..., A, K]`` (K = 2 or
    3; module docstring). Distributed as P(a is best) among the valid arms; a row with
    no valid arm gets 0."""
    log_gamma = jax.random.loggamma(key, jnp.asarray(concentrations, jnp.float32))
    if concentrations.shape[-1] == 2:
        value = log_gamma[..., 0] - log_gamma[..., 1]  # logit p: order-preserving
    elif concentrations.shape[-1] == 3:
        sign, log_abs_z = _logit_score(log_gamma)
        value = sign * jnp.exp(log_abs_z / SCORE_AXIS_POWER)  # the score axis
    else:
        raise ValueError(f"beliefs have K = 2 or 3 outcomes, got {concentrations.shape[-1]}")
    return jnp.argmax(jnp.where(valid, value, -jnp.inf), axis=-1).astype(jnp.int32)
