"""Regret of self-play positions and the regret heads' losses (seeds/003, RGSC).

Regret of the ``t``-th recorded position of a game of ``T`` recorded positions::

    R(s_t) = 1 / (T - t) * sum_{i=t}^{T-1} (V_selected(s_i) - z_i)^2

``V_selected(s_i)`` is the searched value of the action selected at ``s_i`` and ``z_i``
the final outcome, both from the view of the player to move at ``s_i`` (two-player
zero-sum: ``z_i = final_rewards[player_i]``, so ``z`` flips sign with the mover). The
square is the same from either player's view as long as ``V`` and ``z`` share it.

The ranking head (logits ``gamma``) learns which positions of a batch have high regret:
``L_rank = -log sum_s exp(log_softmax(gamma)_s + R(s))``; the regret-value head
regresses ``R`` (MSE) and scores search-tree nodes that have no trajectory of their own.

``CandidateTracker`` keeps, per game in progress, the top-ranked state seen so far (on
the trajectory or in its search trees): the one state a fresh game offers to the
prioritized regret buffer when it ends (``restart_buffers.prb_offer``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

_MASKED = -1e9


def reverse_cumsum(values: jax.Array, axis: int = -1) -> jax.Array:
    """``out[..., t] = sum_{i >= t} values[..., i]`` along ``axis`` (same shape)."""
    return jnp.flip(jnp.cumsum(jnp.flip(values, axis), axis=axis), axis)


def trajectory_regret(
    selected_values: jax.Array, outcomes: jax.Array, valid: jax.Array
) -> jax.Array:
    """Regret of every recorded position, from per-position outcomes.

    Args:
      selected_values: ``[B, T]`` float, ``V_selected(s_t)`` from the mover's view.
      outcomes: ``[B, T]`` float, the final outcome ``z`` from the same mover's view.
      valid: ``[B, T]`` bool, recorded positions. Usually a prefix of each row; gaps are
        skipped (``T - t`` counts the valid positions from ``t`` on).

    Returns:
      ``[B, T]`` float32 regrets, 0 where ``valid`` is False.
    """
    weights = valid.astype(jnp.float32)
    errors = jnp.square(selected_values.astype(jnp.float32) - outcomes.astype(jnp.float32))
    tail_sum = reverse_cumsum(errors * weights, axis=-1)  # [B, T]
    tail_count = reverse_cumsum(weights, axis=-1)  # [B, T], T - t on a prefix
    return jnp.where(valid, tail_sum / jnp.maximum(tail_count, 1.0), 0.0)


def regret_from_rewards(
    selected_values: jax.Array,
    players: jax.Array,
    valid: jax.Array,
    final_rewards: jax.Array,
) -> jax.Array:
    """Regret of every recorded position of finished games, from pgx final rewards.

    Args:
      selected_values: ``[B, T]`` float, ``V_selected(s_t)`` from the mover's view.
      players: ``[B, T]`` int, the player to move at each position.
      valid: ``[B, T]`` bool, recorded positions.
      final_rewards: ``[B, P]`` float, each player's reward at the game's end (pgx
        ``rewards`` of the terminal state; zeros for a game cut short, a draw).

    Returns:
      ``[B, T]`` float32 regrets, 0 where ``valid`` is False.
    """
    players = jnp.where(valid, players, 0).astype(jnp.int32)
    outcomes = jnp.take_along_axis(final_rewards.astype(jnp.float32), players, axis=1)
    return trajectory_regret(selected_values, outcomes, valid)


def first_position_regret(regrets: jax.Array, valid: jax.Array) -> jax.Array:
    """``[B]`` regret of each game's first valid position (0 for an empty row).

    For a game restarted from a buffer state this is ``R_new`` of that state, the value
    ``prb_update_regret`` blends in by EMA.
    """
    first = jnp.argmax(valid, axis=-1)  # [B]
    value = jnp.take_along_axis(regrets, first[:, None], axis=-1)[:, 0]
    return jnp.where(jnp.any(valid, axis=-1), value, 0.0)


def ranking_loss(
    rank_logits: jax.Array, regrets: jax.Array, mask: jax.Array | None = None
) -> jax.Array:
    """``L_rank = -log sum_s exp(log_softmax(gamma)_s + R(s))`` over one batch.

    Minimising it maximises ``sum_s softmax(gamma)_s exp(R(s))``: probability mass moves
    to the high-regret positions. The regrets are targets (no gradient flows to them).

    Args:
      rank_logits: ``[N]`` ranking logits ``gamma``.
      regrets: ``[N]`` regrets ``R >= 0``.
      mask: ``[N]`` bool, entries that take part (default all). With none, the loss is 0.

    Returns:
      ``[]`` float32 loss.
    """
    if mask is None:
        mask = jnp.ones(rank_logits.shape, bool)
    logits = jnp.where(mask, rank_logits.astype(jnp.float32), _MASKED)
    log_rho = jax.nn.log_softmax(logits)
    regrets = jax.lax.stop_gradient(regrets.astype(jnp.float32))
    # Finite fill (not -inf): keeps the gradient finite even when every entry is masked.
    terms = jnp.where(mask, log_rho + regrets, _MASKED)
    loss = -jax.nn.logsumexp(terms)
    return jnp.where(jnp.any(mask), loss, 0.0)


def regret_value_loss(
    regret_predictions: jax.Array, regrets: jax.Array, mask: jax.Array | None = None
) -> jax.Array:
    """``[]`` mean squared error of the regret-value head over ``mask`` (``[N]`` each)."""
    if mask is None:
        mask = jnp.ones(regret_predictions.shape, bool)
    weights = mask.astype(jnp.float32)
    errors = jnp.square(
        regret_predictions.astype(jnp.float32) - jax.lax.stop_gradient(regrets.astype(jnp.float32))
    )
    return jnp.sum(errors * weights) / jnp.maximum(jnp.sum(weights), 1.0)


@struct.dataclass
class CandidateTracker:
    """Per game in progress, the top-ranked state seen so far (its restart candidate).

    Attributes:
      states: env ``State`` pytree with leading axis ``[B]``.
      rank_logit: ``[B]`` float32 ranking logit of the candidate (-inf: none yet).
      position: ``[B]`` int32 trajectory index of the candidate, or -1 for a search-tree
        node (its regret is then ``regret_estimate``).
      regret_estimate: ``[B]`` float32 regret-value head estimate of the candidate.
    """

    states: Any
    rank_logit: jax.Array
    position: jax.Array
    regret_estimate: jax.Array


def candidate_init(example_states: Any) -> CandidateTracker:
    """An empty tracker shaped like ``example_states`` (a batched ``State`` ``[B]``)."""
    batch_size = jax.tree.leaves(example_states)[0].shape[0]
    return CandidateTracker(
        states=example_states,
        rank_logit=jnp.full((batch_size,), -jnp.inf, jnp.float32),
        position=jnp.full((batch_size,), -1, jnp.int32),
        regret_estimate=jnp.zeros((batch_size,), jnp.float32),
    )


def candidate_update(
    tracker: CandidateTracker,
    states: Any,
    rank_logit: jax.Array,
    position: jax.Array,
    regret_estimate: jax.Array,
    mask: jax.Array,
) -> CandidateTracker:
    """Keeps, per game, whichever of the current candidate and ``states`` ranks higher.

    Call once per move with the searched roots (``position`` = trajectory index) and,
    for tree nodes, once per offered node (``position = -1``). Ties keep the old one.

    Args:
      tracker: the tracker ``[B]``.
      states: env ``State`` ``[B]``, the new contenders.
      rank_logit: ``[B]`` their ranking logits ``gamma``.
      position: ``[B]`` int32 trajectory index, or -1 for a search-tree node.
      regret_estimate: ``[B]`` regret-value head estimates.
      mask: ``[B]`` bool, which contenders take part (e.g. fresh games, not terminated).
    """
    better = mask & (rank_logit.astype(jnp.float32) > tracker.rank_logit)

    def select(new: jax.Array, old: jax.Array) -> jax.Array:
        return jnp.where(better.reshape(better.shape + (1,) * (new.ndim - 1)), new, old)

    return CandidateTracker(
        states=jax.tree.map(select, states, tracker.states),
        rank_logit=jnp.where(better, rank_logit.astype(jnp.float32), tracker.rank_logit),
        position=jnp.where(better, position.astype(jnp.int32), tracker.position),
        regret_estimate=jnp.where(
            better, regret_estimate.astype(jnp.float32), tracker.regret_estimate
        ),
    )


def candidate_reset(tracker: CandidateTracker, done: jax.Array) -> CandidateTracker:
    """Forgets the candidates of the games marked ``done [B]`` (they start anew)."""
    return tracker.replace(
        rank_logit=jnp.where(done, -jnp.inf, tracker.rank_logit),
        position=jnp.where(done, -1, tracker.position),
        regret_estimate=jnp.where(done, 0.0, tracker.regret_estimate),
    )


def candidate_regret(tracker: CandidateTracker, regrets: jax.Array) -> jax.Array:
    """``[B]`` regret of each game's candidate when its game ends.

    Trajectory candidates read their computed regret ``regrets [B, T]`` at their
    position; tree-node candidates use the regret-value head estimate.
    """
    position = jnp.maximum(tracker.position, 0)
    on_trajectory = jnp.take_along_axis(regrets, position[:, None], axis=-1)[:, 0]
    return jnp.where(tracker.position >= 0, on_trajectory, tracker.regret_estimate)


def candidate_found(tracker: CandidateTracker) -> jax.Array:
    """``[B]`` bool, games that have a candidate."""
    return jnp.isfinite(tracker.rank_logit)
