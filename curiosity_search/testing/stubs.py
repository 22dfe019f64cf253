"""Stub models with known answers, for tests and the reference search.

- ``HashModel``: a random but deterministic model. A node's embedding is a uint32 id;
  the child's id hashes (id, action), and its logits, value and reward are rows of
  fixed random tables indexed by the id. The same step exists in JAX (batched
  ``recurrent_fn``) and in numpy (``step``, one node), bit-identical ids and tables.
- ``BanditModel``: a one-move bandit; arm ``a`` pays ``means[a]`` and ends the episode.
"""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax.numpy as jnp
import numpy as np

from curiosity_search.search.base import RecurrentFnOutput, RootFnOutput

_M1, _M2, _M3 = 2654435761, 40503, 2246822519


def hash_np(node_id: np.ndarray, action: np.ndarray) -> np.ndarray:
    x = node_id.astype(np.uint32) * np.uint32(_M1) + (action.astype(np.uint32) + 1) * np.uint32(
        _M2
    )
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(_M3)
    return x ^ (x >> np.uint32(13))


def hash_jnp(node_id: chex.Array, action: chex.Array) -> chex.Array:
    x = node_id.astype(jnp.uint32) * jnp.uint32(_M1) + (
        action.astype(jnp.uint32) + 1
    ) * jnp.uint32(_M2)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(_M3)
    return x ^ (x >> 13)


@dataclasses.dataclass(frozen=True)
class HashModel:
    """Deterministic random model over ``num_actions`` actions.

    discount: the discount of every edge (-1: two-player zero-sum, as mctx's pgx
    examples; 1 or 0.9: single player). reward_scale: rewards are uniform in
    ``[-reward_scale, reward_scale]`` (0: rewards are zero).
    """

    num_actions: int
    table_size: int = 97
    seed: int = 0
    discount: float = -1.0
    reward_scale: float = 0.0
    logit_scale: float = 1.0

    @functools.cached_property
    def tables(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        t, a = self.table_size, self.num_actions
        return {
            "logits": (self.logit_scale * rng.standard_normal((t, a))).astype(np.float32),
            "values": rng.uniform(-1.0, 1.0, t).astype(np.float32),
            "rewards": (self.reward_scale * rng.uniform(-1.0, 1.0, t)).astype(np.float32),
        }

    def root(self, batch_size: int, offset: int = 0) -> RootFnOutput:
        """Roots with ids ``offset .. offset + B - 1``: prior_logits ``[B, A]``, value ``[B]``."""
        ids = np.arange(offset, offset + batch_size, dtype=np.uint32)
        rows = ids % self.table_size
        return RootFnOutput(
            prior_logits=jnp.asarray(self.tables["logits"][rows]),
            value=jnp.asarray(self.tables["values"][rows]),
            embedding=jnp.asarray(ids),
        )

    def recurrent_fn(self, params, rng_key, action, embedding):
        """mctx-style: ``(params, key, action [B], ids [B]) -> (RecurrentFnOutput, ids)``."""
        del params, rng_key
        child = hash_jnp(embedding, action)
        rows = (child % jnp.uint32(self.table_size)).astype(jnp.int32)
        out = RecurrentFnOutput(
            reward=jnp.asarray(self.tables["rewards"])[rows],
            discount=jnp.full(action.shape, self.discount, jnp.float32),
            prior_logits=jnp.asarray(self.tables["logits"])[rows],
            value=jnp.asarray(self.tables["values"])[rows],
        )
        return out, child

    def step(self, node_id: int, action: int):
        """One node in numpy: ``(reward, discount, prior_logits [A], value, child_id)``."""
        child = hash_np(np.asarray([node_id]), np.asarray([action]))[0]
        row = int(child % np.uint32(self.table_size))
        return (
            float(self.tables["rewards"][row]),
            float(self.discount),
            self.tables["logits"][row].astype(np.float64),
            float(self.tables["values"][row]),
            int(child),
        )


@dataclasses.dataclass(frozen=True)
class BanditModel:
    """A one-move bandit: arm ``a`` pays ``means[a]`` and ends the episode (discount 0).

    Priors are uniform and values zero, so only the search can find the best arm.
    """

    means: tuple[float, ...]

    def root(self, batch_size: int) -> RootFnOutput:
        a = len(self.means)
        return RootFnOutput(
            prior_logits=jnp.zeros((batch_size, a)),
            value=jnp.zeros((batch_size,)),
            embedding=jnp.zeros((batch_size,), jnp.int32),
        )

    def recurrent_fn(self, params, rng_key, action, embedding):
        del params, rng_key
        means = jnp.asarray(self.means, jnp.float32)
        out = RecurrentFnOutput(
            reward=means[action],
            discount=jnp.zeros(action.shape, jnp.float32),
            prior_logits=jnp.zeros((action.shape[0], len(self.means))),
            value=jnp.zeros(action.shape, jnp.float32),
        )
        return out, embedding + 1
