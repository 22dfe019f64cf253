"""A fixed-size device ring buffer of labelled training positions.

``Positions`` is one record layout used everywhere a position travels: the per-game
trajectory buffer of the games in progress (leading axes ``[B, T]``), the replay buffer
(leading axis ``[C]``) and a training batch (leading axis ``[N]``). Optional targets are
``None`` (an empty pytree node) when the run does not use them, so their shapes never
cost memory.

The ring semantics: ``add`` writes the masked entries of a batch in order at
``insert_index``, wrapping around; once the buffer is full the oldest entries are
overwritten. Valid entries always form the prefix ``[0, size)`` of the storage (before
the first wrap) or all of it (after), so uniform sampling over valid entries is a
uniform integer below ``size``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class Positions:
    """A batch of positions with their training targets; ``...`` is the leading shape.

    Attributes:
      observation: ``[..., *obs]`` the env observation, from the player to move.
      legal_action_mask: ``[..., A]`` bool.
      policy_target: ``[..., A]`` float32, a distribution over legal actions.
      value_target: ``[...]`` float32 in [-1, 1], from the player to move: the game
        outcome ``z`` (written when the game ends) or the root search value.
      belief_target: ``[..., K]`` Dirichlet concentrations of the root search belief,
        or ``None`` when the run does not train on search beliefs.
      belief_target_proven: ``[...]`` bool, the root's result is exact (the target is
        then the one-hot outcome ``belief_target`` is the mean of), or ``None``.
      action_belief_target: ``[..., A, K]`` concentrations of the root children's search
        beliefs (curiosity only), or ``None``.
      action_belief_mask: ``[..., A]`` bool, which children carry an action-belief
        target (expanded at the root), or ``None``.
      action_belief_proven: ``[..., A]`` bool, children whose result is exact, or
        ``None``.
      outcome: ``[...]`` float32 game outcome ``z`` from the mover's view, filled in
        when the game ends, when a loss needs it besides ``value_target`` (curiosity's
        outcome auxiliary), else ``None``.
      played_action: ``[...]`` int32, the move played from this position, when a loss
        needs it (curiosity's played-move outcome auxiliary), else ``None``.
      player: ``[...]`` int32, the player to move.
      valid: ``[...]`` bool, whether the slot holds a real position.
      regret_target: ``[...]`` float32, search control's regret ``R(s)`` (seeds/003), or
        ``None`` when the network has no regret heads. While the game is in progress
        the trajectory holds ``V_selected(s)`` here, the searched value of the move
        played; it is replaced by the regret when the game ends.
    """

    observation: jax.Array
    legal_action_mask: jax.Array
    policy_target: jax.Array
    value_target: jax.Array
    belief_target: jax.Array | None
    action_belief_target: jax.Array | None
    action_belief_mask: jax.Array | None
    player: jax.Array
    valid: jax.Array
    regret_target: jax.Array | None = None
    belief_target_proven: jax.Array | None = None
    action_belief_proven: jax.Array | None = None
    outcome: jax.Array | None = None
    played_action: jax.Array | None = None


def empty_positions(example: Positions, leading_shape: tuple[int, ...]) -> Positions:
    """Zero-filled ``Positions`` with ``leading_shape`` prepended to one example's shapes.

    Args:
      example: a single position (no leading axes); only shapes and dtypes are used.
      leading_shape: e.g. ``(C,)`` for a replay buffer or ``(B, T)`` for trajectories.
    """
    return jax.tree.map(lambda x: jnp.zeros(leading_shape + x.shape, x.dtype), example)


@struct.dataclass
class ReplayBuffer:
    """Ring buffer of ``C`` positions.

    Attributes:
      data: ``Positions`` with leading axis ``[C]``.
      insert_index: ``[]`` int32, the slot the next entry goes to.
      size: ``[]`` int32, number of valid entries, at most ``C``.
      total_added: ``[]`` int32, entries ever written (wraps after 2**31).
    """

    data: Positions
    insert_index: jax.Array
    size: jax.Array
    total_added: jax.Array

    @property
    def capacity(self) -> int:
        return self.data.valid.shape[0]


def init_replay(example: Positions, capacity: int) -> ReplayBuffer:
    """An empty buffer of ``capacity`` slots shaped like ``example`` (one position)."""
    return ReplayBuffer(
        data=empty_positions(example, (capacity,)),
        insert_index=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
        total_added=jnp.zeros((), jnp.int32),
    )


def add(buffer: ReplayBuffer, positions: Positions, mask: jax.Array) -> ReplayBuffer:
    """Writes the masked entries of ``positions`` in order, wrapping around.

    Args:
      buffer: the ring buffer, capacity ``C``.
      positions: ``Positions`` with leading axis ``[N]``.
      mask: ``[N]`` bool, which entries to write. If more than ``C`` are masked, only
        the last ``C`` of them are kept (as sequential writes would leave them).

    Returns:
      The buffer with the entries written (``valid`` set) and counters advanced.
    """
    capacity = buffer.capacity
    mask = mask.astype(bool)
    rank = jnp.cumsum(mask.astype(jnp.int32)) - 1  # [N] order among masked entries
    count = jnp.sum(mask.astype(jnp.int32))
    keep = mask & (rank >= count - capacity)  # only the last C survive
    slots = (buffer.insert_index + rank) % capacity
    slots = jnp.where(keep, slots, capacity)  # out of range: dropped by the scatter
    written = positions.replace(valid=jnp.ones_like(positions.valid))

    def scatter(stored: jax.Array, new: jax.Array) -> jax.Array:
        return stored.at[slots].set(new.astype(stored.dtype), mode="drop")

    data = jax.tree.map(scatter, buffer.data, written)
    return ReplayBuffer(
        data=data,
        insert_index=(buffer.insert_index + count) % capacity,
        size=jnp.minimum(buffer.size + count, capacity),
        total_added=buffer.total_added + count,
    )


def clear(buffer: ReplayBuffer) -> ReplayBuffer:
    """The buffer emptied (batch ExIt: each iteration trains on a fresh dataset).

    Slots are marked invalid and the counters reset; ``total_added`` keeps counting.
    """
    return buffer.replace(
        data=buffer.data.replace(valid=jnp.zeros_like(buffer.data.valid)),
        insert_index=jnp.zeros_like(buffer.insert_index),
        size=jnp.zeros_like(buffer.size),
    )


def keep(buffer: ReplayBuffer) -> ReplayBuffer:
    """The buffer unchanged (online ExIt: datasets aggregate in the ring buffer)."""
    return buffer


DATASET_MODES = {"online": keep, "batch": clear}


def sample(key: jax.Array, buffer: ReplayBuffer, batch_size: int) -> Positions:
    """Draws ``batch_size`` entries uniformly with replacement from the valid ones.

    Args:
      key: PRNG key.
      buffer: the ring buffer.
      batch_size: ``N``, static.

    Returns:
      ``Positions`` with leading axis ``[N]``. While the buffer is empty every entry
      has ``valid == False`` (callers weight losses by ``valid``).
    """
    indices = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda x: x[indices], buffer.data)
