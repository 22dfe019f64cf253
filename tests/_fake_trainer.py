"""A tiny stand-in for ``train.trainer`` honouring its contract, for the run-loop tests.

``init(key) -> FakeState``, ``iteration(state, key) -> (state, metrics)`` (a few SGD
steps on a toy regression whose data come from the key), ``make_act_fn(n)``,
``env`` (pgx tic-tac-toe) and ``network`` (a flax Dense layer on the flat observation).
Everything depends only on the key, so identical keys give identical metrics.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import pgx
from flax import struct


class TinyNet(nn.Module):
    """Logits ``[B, A]`` from observations ``[B, ...]``."""

    num_actions: int

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = obs.reshape(obs.shape[0], -1).astype(jnp.float32)
        return nn.Dense(self.num_actions)(x)


@struct.dataclass
class FakeState:
    params: Any
    counter: jax.Array  # [] int32, iterations run


class FakeTrainer:
    """See the module docstring. ``nan_at``: the iteration (1-based) whose loss is NaN."""

    def __init__(self, cfg: Any, nan_at: int | None = None) -> None:
        self.cfg = cfg
        self.env = pgx.make(cfg.env.name)
        self.network = TinyNet(self.env.num_actions)
        self.nan_at = nan_at
        self.act_traces: dict[int, int] = {}
        self._obs = jax.jit(self.env.init)(jax.random.key(0)).observation[None]

    def init(self, key: jax.Array) -> FakeState:
        return FakeState(params=self.network.init(key, self._obs), counter=jnp.zeros((), jnp.int32))

    def iteration(self, state: FakeState, key: jax.Array) -> tuple[FakeState, dict[str, jax.Array]]:
        obs_key, target_key = jax.random.split(key)
        obs = jax.random.bernoulli(obs_key, 0.3, (8, *self._obs.shape[1:]))
        target = jax.random.normal(target_key, (8, self.env.num_actions))

        def loss_fn(params: Any) -> jax.Array:
            return jnp.mean((self.network.apply(params, obs) - target) ** 2)

        params = state.params
        for _ in range(3):
            loss, grads = jax.value_and_grad(loss_fn)(params)
            params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
        counter = state.counter + 1
        if self.nan_at is not None:
            loss = jnp.where(counter == self.nan_at, jnp.nan, loss)
        metrics = {"loss": loss, "counter": counter, "selfplay/positions": jnp.float32(8.0)}
        return FakeState(params=params, counter=counter), metrics

    def make_act_fn(self, num_simulations: int):
        def act(params: Any, key: jax.Array, states: Any) -> jax.Array:
            self.act_traces[num_simulations] = self.act_traces.get(num_simulations, 0) + 1
            logits = self.network.apply(params, states.observation)
            if num_simulations > 0:
                logits = logits + jax.random.gumbel(key, logits.shape)
            logits = jnp.where(states.legal_action_mask, logits, -jnp.inf)
            return jnp.argmax(logits, axis=-1).astype(jnp.int32)

        return act
