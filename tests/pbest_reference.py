"""An independent P(a is best) for tests: Monte Carlo with every comparison in logit space.

Gamma variates are drawn in log space by the boost identity ``log G_c = log G_{c+1} +
log(U) / c`` (``G_{c+1}`` from numpy's gamma sampler, U uniform), which is exact in
distribution for every concentration ``c > 0`` and never underflows, so arms whose
mass sits within 1e-300 of 0 or 1 still compare correctly (float64):

- K = 2, Beta(w, l): ``logit(p) = log G_w - log G_l``;
- K = 3, Dirichlet(w, d, l), score ``s = p_w + p_d / 2``:
  ``logit(s) = softplus(a) - softplus(b)`` with ``a = log G_w - log G_d + log 2`` and
  ``b = log G_l - log G_d + log 2``. Near the draw vertex (``G_d`` far above ``G_w`` and
  ``G_l``, which concentrations far below 1 make common) ``logit(s)`` is ``~e^a - e^b``,
  below float64's smallest number: formed directly it would be exactly 0 for many draws
  of many arms, and the argmax would break those ties by index. So each draw is kept as
  its sign and ``log |logit(s)|`` (exact for any magnitude) and compared through an
  order-preserving key (``score_keys``).

The best arm of a draw is the argmax of the legal arms' keys. With ``M`` samples the
standard error of each probability is at most ``0.5 / sqrt(M)``.
"""

from __future__ import annotations

import math

import numpy as np


def log_gamma_variates(rng: np.random.Generator, concentrations: np.ndarray,
                       num_samples: int) -> np.ndarray:
    """``[M, ...]`` float64 draws of ``log G``, ``G ~ Gamma(c)``, for ``c [...]`` > 0."""
    conc = np.asarray(concentrations, np.float64)
    shape = (num_samples,) + conc.shape
    boosted = rng.standard_gamma(conc + 1.0, size=shape)
    return np.log(boosted) + np.log(rng.random(shape)) / conc


_KEY_OFFSET = 1e7  # > |log |logit(s)|| for any float64 log-Gamma draw


def score_keys(rng: np.random.Generator, concentrations: np.ndarray,
               num_samples: int) -> np.ndarray:
    """``[M, ..., A]`` float64 keys, in the order of logit(score), for beliefs ``[..., A, K]``.

    K = 2: ``logit(p)`` itself. K = 3: ``sign * (log |logit(s)| + _KEY_OFFSET)``, which
    orders draws like ``logit(s)`` even where ``|logit(s)|`` underflows float64.
    """
    log_gamma = log_gamma_variates(rng, concentrations, num_samples)
    if log_gamma.shape[-1] == 2:
        return log_gamma[..., 0] - log_gamma[..., 1]
    a = log_gamma[..., 0] - log_gamma[..., 1] + math.log(2.0)
    b = log_gamma[..., 2] - log_gamma[..., 1] + math.log(2.0)
    gap = np.abs(a - b)
    sign = np.sign(a - b)
    # logit(s) = log1p(u), u = (e^a - e^b) / (1 + e^b), |u| from logs (no overflow).
    with np.errstate(divide="ignore"):
        log_abs_u = np.maximum(a, b) + np.log(-np.expm1(-gap)) - np.logaddexp(0.0, b)
    u = sign * np.exp(np.minimum(log_abs_u, 700.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_abs_logit = np.where(
            log_abs_u < -700.0, log_abs_u,  # log1p(u) = u to float64 precision
            np.where(log_abs_u > 700.0, np.log(log_abs_u),  # log1p(u) = log u
                     np.log(np.abs(np.log1p(u)))))
    return np.where(sign == 0, 0.0, sign * (log_abs_logit + _KEY_OFFSET))


def monte_carlo_best_arm(
    concentrations: np.ndarray,
    invalid: np.ndarray | None = None,
    num_samples: int = 200_000,
    seed: int = 0,
    chunk: int = 20_000,
) -> np.ndarray:
    """P(a is best) ``[..., A]`` by Monte Carlo in logit space (illegal arms 0)."""
    conc = np.asarray(concentrations, np.float64)
    shape = conc.shape[:-1]
    illegal = np.zeros(shape, bool) if invalid is None else np.asarray(invalid, bool)
    conc = np.where(illegal[..., None], 1.0, conc)
    rng = np.random.default_rng(seed)
    counts = np.zeros(shape, np.float64)
    for start in range(0, num_samples, chunk):
        scores = score_keys(rng, conc, min(chunk, num_samples - start))
        scores = np.where(illegal, -np.inf, scores)
        best = np.argmax(scores, axis=-1)  # [M, ...]
        counts += (best[..., None] == np.arange(shape[-1])).sum(0)
    counts = np.where(illegal.all(-1, keepdims=True), 0.0, counts)
    total = counts.sum(-1, keepdims=True)
    return np.where(total > 0, counts / np.maximum(total, 1.0), 0.0)
