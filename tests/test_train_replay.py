"""Replay ring buffer: wrap-around, valid mask, masked adds, uniform sampling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search.train import replay as replay_lib
from curiosity_search.train.replay import Positions


def _example(num_actions: int = 3) -> Positions:
    return Positions(
        observation=jnp.zeros((2,), jnp.float32),
        legal_action_mask=jnp.zeros((num_actions,), bool),
        policy_target=jnp.zeros((num_actions,), jnp.float32),
        value_target=jnp.zeros((), jnp.float32),
        belief_target=None,
        action_belief_target=None,
        action_belief_mask=None,
        player=jnp.zeros((), jnp.int32),
        valid=jnp.zeros((), bool),
    )


def _batch(values: list[float]) -> Positions:
    """Positions whose value_target (and observation[0]) carry an id."""
    ids = jnp.asarray(values, jnp.float32)
    n = len(values)
    return replay_lib.empty_positions(_example(), (n,)).replace(
        observation=jnp.stack([ids, -ids], axis=1), value_target=ids
    )


def _stored(buffer: replay_lib.ReplayBuffer) -> list[float]:
    return np.asarray(buffer.data.value_target).tolist()


def test_add_wraps_around_and_marks_valid():
    buffer = replay_lib.init_replay(_example(), 4)
    assert not np.asarray(buffer.data.valid).any()
    buffer = replay_lib.add(buffer, _batch([1, 2, 3]), jnp.array([True, False, True]))
    assert _stored(buffer) == [1, 3, 0, 0]
    assert np.asarray(buffer.data.valid).tolist() == [True, True, False, False]
    assert int(buffer.size) == 2 and int(buffer.insert_index) == 2
    buffer = replay_lib.add(buffer, _batch([4, 5, 6]), jnp.ones(3, bool))
    assert _stored(buffer) == [6, 3, 4, 5]  # 6 overwrote the oldest entry
    assert int(buffer.size) == 4 and int(buffer.insert_index) == 1
    assert int(buffer.total_added) == 5
    assert np.asarray(buffer.data.observation[:, 1]).tolist() == [-6, -3, -4, -5]


def test_add_more_than_capacity_keeps_the_last_entries():
    buffer = replay_lib.init_replay(_example(), 4)
    buffer = replay_lib.add(buffer, _batch([1, 2, 3, 4, 5, 6, 7]), jnp.ones(7, bool))
    assert sorted(_stored(buffer)) == [4, 5, 6, 7]
    assert int(buffer.size) == 4 and int(buffer.insert_index) == 3
    # Sequential writes would leave 7 in slot (0 + 6) % 4 = 2.
    assert _stored(buffer)[2] == 7


def test_add_nothing_is_a_no_op():
    buffer = replay_lib.init_replay(_example(), 4)
    buffer = replay_lib.add(buffer, _batch([1, 2]), jnp.zeros(2, bool))
    assert int(buffer.size) == 0 and _stored(buffer) == [0, 0, 0, 0]


def test_sample_is_uniform_over_valid_entries():
    buffer = replay_lib.init_replay(_example(), 8)
    empty = replay_lib.sample(jax.random.key(0), buffer, 4)
    assert not np.asarray(empty.valid).any()
    buffer = replay_lib.add(buffer, _batch([1, 2, 3, 4, 5]), jnp.ones(5, bool))
    batch = replay_lib.sample(jax.random.key(1), buffer, 5000)
    assert np.asarray(batch.valid).all()
    values, counts = np.unique(np.asarray(batch.value_target), return_counts=True)
    assert values.tolist() == [1, 2, 3, 4, 5]  # never an empty slot
    assert counts.min() > 900 and counts.max() < 1100  # ~1000 each
