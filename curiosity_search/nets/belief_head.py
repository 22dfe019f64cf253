"""Bounded belief parametrisation: a mean over K outcomes times one squashed concentration.

A belief head predicts, per belief, ``K`` mean logits and one concentration logit ``t``:

    belief = concentration * mean,
    mean = MEAN_FLOOR + (1 - K MEAN_FLOOR) softmax(mean_logits),
    concentration = floor + (cap - floor) * sigmoid(t)          in [floor, cap].

``MEAN_FLOOR`` (1e-3) keeps every outcome's mean probability in ``[1e-3, 1 - 1e-3]``:
no network belief is more certain than that (a certain result is a proof, handled
exactly by the search), and every component is at least ``1e-3 * floor``, inside the
fast P(best) kernel's envelope (``curiosity.best_arm``) for the default floor 1.

So every Beta / Dirichlet the network predicts has a total concentration (its
confidence, alpha + beta) between ``floor`` and ``cap``: a belief can neither collapse
to a near-Dirac (a few hundred bits of negative entropy, where Thompson selection stops
exploring) nor become flatter than ``floor`` pseudo-counts. The mean is free. This is
the bounded form of the curiosity blog's author's code (GitHub Francesco215/Scacchi:
``floor + (clip - floor) * sigmoid(t)``, e.g. floor 3, clip 16).

A fresh head starts near a broad prior: mean logits near 0 (uniform mean) and ``t`` at
the bias that gives ``init`` (default K: Beta(1, 1) / Dir(1, 1, 1)).

Shapes: ``...`` leading axes (``[B]`` or ``[B, A]``), ``K`` outcomes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp

MEAN_FLOOR = 1e-3
"""The smallest mean probability of an outcome predicted by a belief head."""


@dataclasses.dataclass(frozen=True)
class BeliefBounds:
    """The total-concentration range of predicted beliefs and its initial value.

    Attributes:
      floor: the smallest total concentration (> 0).
      cap: the largest (> floor).
      init: a fresh head's total concentration, strictly between floor and cap; None
        means K (the uniform Beta(1, 1) / Dir(1, 1, 1)).
    """

    floor: float = 1.0
    cap: float = 16.0
    init: float | None = None

    def initial(self, num_outcomes: int) -> float:
        """The fresh head's total concentration for ``K = num_outcomes``."""
        return float(num_outcomes if self.init is None else self.init)

    def validate(self, num_outcomes: int) -> None:
        """Raises ``ValueError`` naming the bad bound unless 0 < floor < init < cap."""
        init = self.initial(num_outcomes)
        for name, value in (("floor", self.floor), ("cap", self.cap), ("init", init)):
            if not math.isfinite(value):
                raise ValueError(f"belief {name} must be finite, got {value}")
        if not 0.0 < self.floor < self.cap:
            raise ValueError(f"belief floor and cap need 0 < floor < cap, got "
                             f"floor={self.floor}, cap={self.cap}")
        if not self.floor < init < self.cap:
            raise ValueError(f"belief init must lie strictly between floor {self.floor} and "
                             f"cap {self.cap}, got {init} (K = {num_outcomes} when null)")

    def concentration_bias(self, num_outcomes: int) -> float:
        """The logit ``t`` with ``floor + (cap - floor) * sigmoid(t) = init``."""
        fraction = (self.initial(num_outcomes) - self.floor) / (self.cap - self.floor)
        return math.log(fraction) - math.log1p(-fraction)


def bounded_belief(
    mean_logits: jax.Array, concentration_logit: jax.Array, bounds: BeliefBounds
) -> jax.Array:
    """``[..., K]`` concentrations from ``mean_logits [..., K]`` and ``concentration_logit
    [...]``: ``(floor + (cap - floor) sigmoid(t)) * mean`` (module docstring), float32."""
    num_outcomes = mean_logits.shape[-1]
    # The softmax runs on the K outcome slices, each a [...] array, and the result is
    # stacked back: the same numbers, but XLA:CPU reduces a minor axis of 2 or 3 elements
    # with scalar code. A softmax over a leading outcome axis moved to the front and back
    # was ~4.5x slower than these slices at [256, 122] (it was ~20% of a 11x11
    # curiosity search with P(best) stubbed; results/bench/README.md).
    logits = [mean_logits[..., k].astype(jnp.float32) for k in range(num_outcomes)]
    top = functools.reduce(jnp.maximum, logits)
    weights = [jnp.exp(logit - top) for logit in logits]
    total = bounds.floor + (bounds.cap - bounds.floor) * jax.nn.sigmoid(
        concentration_logit.astype(jnp.float32))
    spread = total * (1.0 - num_outcomes * MEAN_FLOOR) / functools.reduce(jnp.add, weights)
    return jnp.stack([total * MEAN_FLOOR + spread * weight for weight in weights], axis=-1)


def concentration_logit(beliefs: jax.Array, bounds: BeliefBounds) -> jax.Array:
    """``[...]`` the logit ``t`` behind beliefs ``[..., K]`` of ``bounded_belief``: the
    inverse of ``floor + (cap - floor) * sigmoid(t)`` at their total concentration.

    Differentiable, with ``d t / d t_head`` about 1 (the squash's slope cancels), so a loss
    on ``t`` reaches the head even where ``sigmoid`` is flat. From float32 totals it is
    within ~0.1 of ``t`` down to about -15 and up to about 12 (coarser beyond; the
    fraction is clipped to ``[1e-12, 1 - 1e-7]``).
    """
    total = jnp.sum(beliefs.astype(jnp.float32), axis=-1)
    fraction = jnp.clip((total - bounds.floor) / (bounds.cap - bounds.floor), 1e-12, 1 - 1e-7)
    return jnp.log(fraction) - jnp.log1p(-fraction)


def belief_head_bias(bounds: BeliefBounds, num_outcomes: int, num_beliefs: int):
    """The output-layer bias initializer of a head predicting ``num_beliefs`` beliefs,
    laid out ``[num_beliefs * K mean logits, num_beliefs concentration logits]``: zeros
    for the means, ``bounds.concentration_bias(K)`` for the concentrations."""
    bias = bounds.concentration_bias(num_outcomes)

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        del key
        means = jnp.zeros((num_beliefs * num_outcomes,), dtype)
        return jnp.concatenate([means, jnp.full((num_beliefs,), bias, dtype)]).reshape(shape)

    return init


def split_belief_outputs(
    raw: jax.Array, num_beliefs: int, num_outcomes: int, bounds: BeliefBounds
) -> jax.Array:
    """``[B, num_beliefs, K]`` beliefs from a head's raw outputs ``[B, num_beliefs * (K + 1)]``
    (layout of ``belief_head_bias``)."""
    batch = raw.shape[0]
    mean_logits = raw[:, : num_beliefs * num_outcomes].reshape(batch, num_beliefs, num_outcomes)
    concentration_logit = raw[:, num_beliefs * num_outcomes:]
    return bounded_belief(mean_logits, concentration_logit, bounds)
