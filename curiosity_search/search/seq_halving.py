"""Sequential halving with Gumbel at the root (Danihelka et al., 2022).

The schedule is a static table: ``table[m, k]`` is the visit count that the action
chosen at root visit ``k`` must currently have when ``m`` actions are considered.
Choosing, among the actions with exactly that count, the one with the highest
``gumbel + logits + sigma(q)`` reproduces sequential halving one visit at a time.
"""

from __future__ import annotations

import math

import chex
import jax.numpy as jnp
import numpy as np


def considered_visit_sequence(num_considered: int, num_simulations: int) -> tuple[int, ...]:
    """Visit count required of the chosen action at each root visit. Length ``num_simulations``.

    Each phase gives each of the ``m_cur`` survivors
    ``max(1, floor(n / (ceil(log2 m) * m_cur)))`` visits, then halves ``m_cur``
    (never below 2).
    """
    if num_considered <= 1:
        return tuple(range(num_simulations))
    num_phases = int(math.ceil(math.log2(num_considered)))
    sequence: list[int] = []
    visits = [0] * num_considered
    current = num_considered
    while len(sequence) < num_simulations:
        extra = max(1, int(num_simulations / (num_phases * current)))
        for _ in range(extra):
            sequence.extend(visits[:current])
            for i in range(current):
                visits[i] += 1
        current = max(2, current // 2)
    return tuple(sequence[:num_simulations])


def considered_visit_table(max_num_considered: int, num_simulations: int) -> np.ndarray:
    """``[max_num_considered + 1, num_simulations]`` int32 table of the sequences above."""
    table = np.zeros((max_num_considered + 1, max(num_simulations, 1)), np.int32)
    for m in range(max_num_considered + 1):
        table[m, :num_simulations] = considered_visit_sequence(m, num_simulations)
    return table


def score_considered(
    considered_visit: chex.Array,
    gumbel: chex.Array,
    logits: chex.Array,
    normalized_qvalues: chex.Array,
    visit_counts: chex.Array,
) -> chex.Array:
    """Score for an argmax: ``gumbel + logits + sigma(q)`` where the visit count equals
    ``considered_visit``, ``-inf`` elsewhere. All ``[A]`` (or ``[B, A]`` with
    ``considered_visit`` ``[B, 1]``)."""
    low_logit = -1e9
    logits = logits - jnp.max(logits, keepdims=True, axis=-1)
    penalty = jnp.where(visit_counts == considered_visit, 0, -jnp.inf)
    return jnp.maximum(low_logit, gumbel + logits + normalized_qvalues) + penalty
