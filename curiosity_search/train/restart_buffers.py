"""Device-side restart buffers for search control, and the restart decision.

- ``RegretBuffer`` (RGSC's prioritized regret buffer, PRB, seeds/003): ``K`` states with
  their regrets. A game started from the empty board offers one state when it ends
  (``prb_offer``: it enters if there is room or its regret beats the buffer's minimum);
  a game restarted from a buffer state blends its new regret into that entry by EMA
  (``prb_update_regret``); restarts sample ``P(s_i) ~ R_i^(1/tau)`` (``prb_sample``).
- ``StateArchive`` (the Go-Exploit baseline): a FIFO ring of visited states, sampled
  uniformly (``archive_add``, ``archive_sample``).
- ``choose_starts``: per game, restart from a sampled stored state with probability
  ``lambda`` (only when the buffer holds something), else start fresh.

States are any pytree whose leaves carry the leading axis (``[K, ...]`` stored,
``[B, ...]`` offered); the buffers never look inside them, except that a pytree with
pgx's ``terminated`` / ``truncated`` fields has its finished states refused: a finished
game is never stored, so never restarted. Everything is jittable, shapes are static,
and nothing goes back to the host.

Slots are stable: an entry stays in its slot until evicted, so the slot index a
restarted game remembers still names its state when the game ends, unless that entry
was evicted meanwhile. ``entry_ids`` (unique per insertion) detect that case: pass the
ids read at restart time to ``prb_update_regret`` and stale updates are dropped.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

DEFAULT_CAPACITY = 100  # K
DEFAULT_RESTART_PROB = 0.5  # lambda
DEFAULT_TAU = 0.1  # sampling temperature
DEFAULT_ALPHA = 0.5  # regret EMA rate
REGRET_EPS = 1e-6  # sampling logits are log(R + eps) / tau


def _stack(example_state: Any, capacity: int) -> Any:
    """``capacity`` copies of one unbatched state, leading axis ``[K]``."""
    return jax.tree.map(
        lambda x: jnp.broadcast_to(jnp.asarray(x), (capacity,) + jnp.shape(x)), example_state
    )


def _live(states: Any, batch_size: int) -> jax.Array:
    """``[B]`` bool: states that are not terminated or truncated (if the pytree says)."""
    live = jnp.ones((batch_size,), bool)
    for field in ("terminated", "truncated"):
        flag = getattr(states, field, None)
        if flag is not None:
            live = live & ~flag.astype(bool)
    return live


def _scatter(stored: Any, new: Any, slots: jax.Array) -> Any:
    """Writes ``new[b]`` into ``stored[slots[b]]``; out-of-range slots are dropped."""
    return jax.tree.map(lambda s, n: s.at[slots].set(n.astype(s.dtype), mode="drop"), stored, new)


def _gather(stored: Any, indices: jax.Array) -> Any:
    return jax.tree.map(lambda s: s[indices], stored)


def _select(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per entry ``b``, ``new[b]`` where ``mask[b]`` else ``old[b]``."""

    def select(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree.map(select, new, old)


def _batch_size(states: Any) -> int:
    return jax.tree.leaves(states)[0].shape[0]


# --- Prioritized regret buffer -------------------------------------------------------


@struct.dataclass
class RegretBuffer:
    """RGSC's prioritized regret buffer of ``K`` states.

    Attributes:
      states: state pytree, leaves ``[K, ...]`` (placeholders where not ``valid``).
      regrets: ``[K]`` float32, each entry's current regret ``R``.
      valid: ``[K]`` bool, occupied slots.
      entry_ids: ``[K]`` int32, a unique id per insertion (-1 for never-used slots).
      total_inserted: ``[]`` int32, entries ever inserted (the next id).
    """

    states: Any
    regrets: jax.Array
    valid: jax.Array
    entry_ids: jax.Array
    total_inserted: jax.Array

    @property
    def capacity(self) -> int:
        return self.valid.shape[0]


def prb_init(example_state: Any, capacity: int = DEFAULT_CAPACITY) -> RegretBuffer:
    """An empty buffer of ``capacity`` (``K``) slots shaped like one unbatched state."""
    return RegretBuffer(
        states=_stack(example_state, capacity),
        regrets=jnp.zeros((capacity,), jnp.float32),
        valid=jnp.zeros((capacity,), bool),
        entry_ids=jnp.full((capacity,), -1, jnp.int32),
        total_inserted=jnp.zeros((), jnp.int32),
    )


def prb_offer(
    buffer: RegretBuffer,
    candidate_states: Any,
    candidate_regrets: jax.Array,
    offer_mask: jax.Array,
) -> RegretBuffer:
    """Offers ``B`` candidate states at once; each enters if it makes the top ``K``.

    Equivalent, as a set, to offering them one by one in order, each entering if the
    buffer has room or its regret strictly beats the buffer's current minimum, which it
    then replaces (among tied minima, the most recently inserted): both keep the ``K``
    highest regrets of old entries and offers, ties going to the earlier insertion.
    Done vectorised with one sort. Surviving entries keep their slots; accepted offers
    fill the freed slots in order of increasing slot index.

    Args:
      buffer: the buffer, capacity ``K``.
      candidate_states: state pytree ``[B, ...]``; terminated / truncated pgx states are
        refused.
      candidate_regrets: ``[B]`` float, their regrets ``R``.
      offer_mask: ``[B]`` bool, which games offer (fresh games that just ended and have
        a candidate).

    Returns:
      The updated buffer.
    """
    capacity = buffer.capacity
    batch_size = candidate_regrets.shape[0]
    regrets = candidate_regrets.astype(jnp.float32)
    offered = offer_mask.astype(bool) & _live(candidate_states, batch_size) & jnp.isfinite(regrets)
    scores = jnp.concatenate(
        [jnp.where(buffer.valid, buffer.regrets, -jnp.inf), jnp.where(offered, regrets, -jnp.inf)]
    )  # [K + B]
    # Ties go to the earlier insertion: old entries by id, then offers in order.
    age = jnp.concatenate(
        [buffer.entry_ids, buffer.total_inserted + jnp.arange(batch_size, dtype=jnp.int32)]
    )
    eligible = jnp.concatenate([buffer.valid, offered])
    order = jnp.lexsort((age, -scores))
    rank = jnp.zeros_like(order).at[order].set(jnp.arange(capacity + batch_size))
    selected = eligible & (rank < capacity)
    keep = selected[:capacity]  # [K] old entries that stay
    accept = selected[capacity:]  # [B] offers that enter

    free = ~keep
    free_slots = jnp.argsort((~free).astype(jnp.int32), stable=True)  # free slots first
    offer_rank = jnp.cumsum(accept.astype(jnp.int32)) - 1  # [B]
    slots = jnp.where(accept, free_slots[jnp.maximum(offer_rank, 0)], capacity)  # [B]
    filled = jnp.zeros((capacity,), bool).at[slots].set(True, mode="drop")
    new_ids = buffer.total_inserted + offer_rank
    return RegretBuffer(
        states=_scatter(buffer.states, candidate_states, slots),
        regrets=jnp.where(keep, buffer.regrets, 0.0).at[slots].set(regrets, mode="drop"),
        valid=keep | filled,
        entry_ids=buffer.entry_ids.at[slots].set(new_ids, mode="drop"),
        total_inserted=buffer.total_inserted + jnp.sum(accept.astype(jnp.int32)),
    )


def prb_update_regret(
    buffer: RegretBuffer,
    indices: jax.Array,
    new_regrets: jax.Array,
    mask: jax.Array,
    alpha: float | jax.Array = DEFAULT_ALPHA,
    entry_ids: jax.Array | None = None,
) -> RegretBuffer:
    """EMA of the regrets of entries that games were restarted from.

    ``R <- (1 - alpha) R + alpha R_new`` per updated slot. Several games restarted from
    the same slot update it once, with the mean of their ``R_new`` (order independent).

    Args:
      buffer: the buffer, capacity ``K``.
      indices: ``[B]`` int32 slots the games restarted from (-1: not restarted).
      new_regrets: ``[B]`` float, each game's regret of its start state (its first
        position, ``regret.first_position_regret``).
      mask: ``[B]`` bool, which games update (restarted games that just ended).
      alpha: EMA rate in (0, 1].
      entry_ids: ``[B]`` int32 or None; the ``buffer.entry_ids[indices]`` read when the
        games restarted. Updates whose slot has been refilled since are dropped.

    Returns:
      The updated buffer.
    """
    capacity = buffer.capacity
    safe = jnp.clip(indices, 0, capacity - 1)
    mask = mask.astype(bool) & (indices >= 0) & (indices < capacity) & buffer.valid[safe]
    if entry_ids is not None:
        mask = mask & (buffer.entry_ids[safe] == entry_ids)
    slots = jnp.where(mask, indices, capacity)
    sums = (
        jnp.zeros((capacity,), jnp.float32)
        .at[slots]
        .add(new_regrets.astype(jnp.float32), mode="drop")
    )
    counts = jnp.zeros((capacity,), jnp.float32).at[slots].add(1.0, mode="drop")
    mean = sums / jnp.maximum(counts, 1.0)
    blended = (1.0 - alpha) * buffer.regrets + alpha * mean
    return buffer.replace(regrets=jnp.where(counts > 0, blended, buffer.regrets))


def prb_sample_logits(buffer: RegretBuffer, tau: float | jax.Array = DEFAULT_TAU) -> jax.Array:
    """``[K]`` sampling logits ``log(R + eps) / tau`` (-inf on empty slots)."""
    logits = jnp.log(jnp.maximum(buffer.regrets, 0.0) + REGRET_EPS) / tau
    return jnp.where(buffer.valid, logits, -jnp.inf)


def prb_sample(
    key: jax.Array, buffer: RegretBuffer, num: int, tau: float | jax.Array = DEFAULT_TAU
) -> tuple[jax.Array, Any]:
    """Draws ``num`` entries with replacement, ``P(s_i) ~ R_i^(1/tau)`` over valid ones.

    Args:
      key: PRNG key.
      buffer: the buffer, capacity ``K``.
      num: number of draws (static).
      tau: temperature; small ``tau`` concentrates on the highest regrets.

    Returns:
      ``(indices [num] int32, states [num, ...])``. From an empty buffer the draws are
      uniform over placeholder slots: callers must check ``buffer.valid`` (as
      ``choose_starts`` does).
    """
    logits = prb_sample_logits(buffer, tau)
    logits = jnp.where(jnp.any(buffer.valid), logits, 0.0)
    indices = jax.random.categorical(key, logits, shape=(num,)).astype(jnp.int32)
    return indices, _gather(buffer.states, indices)


def prb_metrics(buffer: RegretBuffer) -> dict[str, jax.Array]:
    """Scalar metrics: ``prb_size``, ``prb_mean_regret``, ``prb_max_regret``, ``prb_min_regret``."""
    weights = buffer.valid.astype(jnp.float32)
    size = jnp.sum(weights)
    any_valid = size > 0
    return {
        "prb_size": size,
        "prb_mean_regret": jnp.sum(buffer.regrets * weights) / jnp.maximum(size, 1.0),
        "prb_max_regret": jnp.where(
            any_valid, jnp.max(jnp.where(buffer.valid, buffer.regrets, -jnp.inf)), 0.0
        ),
        "prb_min_regret": jnp.where(
            any_valid, jnp.min(jnp.where(buffer.valid, buffer.regrets, jnp.inf)), 0.0
        ),
    }


# --- Go-Exploit archive --------------------------------------------------------------


@struct.dataclass
class StateArchive:
    """FIFO ring of ``K`` visited states (Go-Exploit).

    Attributes:
      states: state pytree, leaves ``[K, ...]``.
      valid: ``[K]`` bool, occupied slots (always the prefix ``[0, size)`` or all).
      insert_index: ``[]`` int32, the slot the next state goes to.
      size: ``[]`` int32, occupied slots, at most ``K``.
    """

    states: Any
    valid: jax.Array
    insert_index: jax.Array
    size: jax.Array

    @property
    def capacity(self) -> int:
        return self.valid.shape[0]


def archive_init(example_state: Any, capacity: int = DEFAULT_CAPACITY) -> StateArchive:
    """An empty archive of ``capacity`` (``K``) slots shaped like one unbatched state."""
    return StateArchive(
        states=_stack(example_state, capacity),
        valid=jnp.zeros((capacity,), bool),
        insert_index=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
    )


def archive_add(archive: StateArchive, states: Any, mask: jax.Array) -> StateArchive:
    """Appends the masked, live states of a batch in order, overwriting the oldest.

    Args:
      archive: the archive, capacity ``K``.
      states: state pytree ``[B, ...]``; terminated / truncated pgx states are skipped.
      mask: ``[B]`` bool, which states to add. If more than ``K`` qualify only the last
        ``K`` of them are kept (as sequential writes would leave them).
    """
    capacity = archive.capacity
    mask = mask.astype(bool) & _live(states, mask.shape[0])
    rank = jnp.cumsum(mask.astype(jnp.int32)) - 1
    count = jnp.sum(mask.astype(jnp.int32))
    keep = mask & (rank >= count - capacity)
    slots = jnp.where(keep, (archive.insert_index + rank) % capacity, capacity)
    return StateArchive(
        states=_scatter(archive.states, states, slots),
        valid=archive.valid.at[slots].set(True, mode="drop"),
        insert_index=(archive.insert_index + count) % capacity,
        size=jnp.minimum(archive.size + count, capacity),
    )


def archive_sample(key: jax.Array, archive: StateArchive, num: int) -> tuple[jax.Array, Any]:
    """``(indices [num] int32, states [num, ...])`` drawn uniformly over occupied slots.

    From an empty archive every draw is slot 0, a placeholder (check ``archive.valid``).
    """
    indices = jax.random.randint(key, (num,), 0, jnp.maximum(archive.size, 1), jnp.int32)
    return indices, _gather(archive.states, indices)


# --- The restart decision ------------------------------------------------------------


def choose_starts(
    key: jax.Array,
    fresh_states: Any,
    buffer: RegretBuffer | StateArchive,
    restart_prob: float | jax.Array = DEFAULT_RESTART_PROB,
    tau: float | jax.Array = DEFAULT_TAU,
    starting: jax.Array | None = None,
) -> tuple[Any, jax.Array, jax.Array]:
    """Where each of ``B`` new games starts: a stored state (prob. lambda) or fresh.

    Each game independently restarts with probability ``restart_prob`` from a state
    drawn from ``buffer`` (``prb_sample`` for a ``RegretBuffer``, ``archive_sample`` for
    a ``StateArchive``; the type is static), but only while the buffer holds a state.

    Args:
      key: PRNG key.
      fresh_states: state pytree ``[B, ...]``, the empty-board starts.
      buffer: a ``RegretBuffer`` or a ``StateArchive``.
      restart_prob: lambda in [0, 1].
      tau: PRB sampling temperature (ignored for the archive).
      starting: ``[B]`` bool or None; games that start now (others never restart).

    Returns:
      ``(start_states [B, ...], restarted [B] bool, buffer_indices [B] int32)``; the
      index is the slot a game restarted from, -1 for fresh starts.
    """
    batch_size = _batch_size(fresh_states)
    coin_key, sample_key = jax.random.split(key)
    restarted = jax.random.bernoulli(coin_key, restart_prob, (batch_size,))
    restarted = restarted & jnp.any(buffer.valid)
    if starting is not None:
        restarted = restarted & starting.astype(bool)
    if isinstance(buffer, RegretBuffer):
        indices, sampled = prb_sample(sample_key, buffer, batch_size, tau)
    elif isinstance(buffer, StateArchive):
        indices, sampled = archive_sample(sample_key, buffer, batch_size)
    else:
        raise TypeError(f"expected a RegretBuffer or StateArchive, got {type(buffer).__name__}")
    start_states = _select(restarted, sampled, fresh_states)
    return start_states, restarted, jnp.where(restarted, indices, -1).astype(jnp.int32)
