"""One iteration on a 4-device mesh equals the same iteration on one device."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from train_fixtures import tiny_trainer

from curiosity_search.train.sharding import DATA_AXIS, jit_iteration, make_mesh, shard_state


@pytest.mark.skipif(len(jax.devices()) < 4, reason="needs 4 (host) devices")
def test_four_devices_match_one_device():
    trainer = tiny_trainer("gumbel", "train.updates_per_iteration=3")
    key = jax.random.key(7)

    single = jax.jit(trainer.iteration, donate_argnums=0)
    state_1 = trainer.init(jax.random.key(0))
    for i in range(2):
        state_1, metrics_1 = single(state_1, jax.random.fold_in(key, i))

    mesh = make_mesh(jax.devices()[:4])
    state_4 = shard_state(trainer.init(jax.random.key(0)), mesh)
    sharded = jit_iteration(trainer.iteration, state_4, mesh)
    for i in range(2):
        state_4, metrics_4 = sharded(state_4, jax.random.fold_in(key, i))

    spec = state_4.replay.data.observation.sharding.spec
    assert spec[0] == DATA_AXIS and len(state_4.games.observation.sharding.device_set) == 4
    assert metrics_1["replay_size"] > 0 and metrics_1["updates"] > 0
    for name in metrics_1:
        np.testing.assert_allclose(metrics_4[name], metrics_1[name], rtol=1e-4, atol=1e-6)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
        jax.device_get(state_4.params),
        jax.device_get(state_1.params),
    )
    # Same games played, same positions stored (targets up to float error).
    np.testing.assert_array_equal(
        np.asarray(state_4.replay.data.observation), np.asarray(state_1.replay.data.observation)
    )
    np.testing.assert_allclose(
        np.asarray(state_4.replay.data.policy_target),
        np.asarray(state_1.replay.data.policy_target),
        atol=1e-5,
    )
