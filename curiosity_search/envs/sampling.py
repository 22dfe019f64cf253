"""Positions drawn from uniformly random play, e.g. to measure optimal-move rates."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pgx


def sample_random_positions(
    env: pgx.Env, key: jax.Array, num_games: int, max_plies: int | None = None
) -> pgx.State:
    """One non-terminal state [B = num_games] per game of uniformly random legal play,
    taken at a uniformly random ply of that game.

    Each game is played for ``max_plies`` moves (default ``env.num_actions``, enough for
    Hex and tic-tac-toe to end) and the kept state is chosen by reservoir sampling over
    its non-terminal plies, so every ply of the game is equally likely. A game that has
    not ended after ``max_plies`` moves is sampled over the plies played.

    Pure and traceable: ``jax.jit(sample_random_positions, static_argnums=(0, 2, 3))``.

    Args:
      env: a pgx environment (hashable, e.g. from ``envs.make``).
      key: PRNG key.
      num_games: B, the number of games and of returned states.
      max_plies: moves per game (static).

    Returns:
      A batched State [B].
    """
    if max_plies is None:
        max_plies = env.num_actions
    key_init, key_play = jax.random.split(key)
    state = jax.vmap(env.init)(jax.random.split(key_init, num_games))

    def body(carry, step_key):
        state, kept, seen = carry
        key_keep, key_act = jax.random.split(step_key)
        live = ~state.terminated  # [B]
        seen = seen + live
        # reservoir sampling: the t-th live state replaces the kept one with prob 1/t
        keep_new = live & (jax.random.uniform(key_keep, (num_games,)) * jnp.maximum(seen, 1) < 1.0)
        kept = jax.tree.map(
            lambda new, old: jnp.where(_expand(keep_new, new), new, old), state, kept
        )
        logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)  # [B, A]
        action = jax.random.categorical(key_act, logits, axis=-1)
        state = jax.vmap(env.step)(state, action)
        return (state, kept, seen), None

    seen0 = jnp.zeros(num_games, jnp.int32)
    (_, kept, _), _ = jax.lax.scan(
        body, (state, state, seen0), jax.random.split(key_play, max_plies)
    )
    return kept


def _expand(mask: jax.Array, like: jax.Array) -> jax.Array:
    """bool [B] -> broadcastable against ``like`` [B, ...]."""
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))
