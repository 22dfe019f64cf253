"""Random rollouts: the classic MCTS leaf evaluator (no network).

A rollout plays uniformly random legal moves from a state to the end of the game
(``lax.while_loop``, so it is jittable and stops as soon as the game ends) and returns
the outcome from the view of the player to move in the starting state. Used by the
evaluation ``mcts:SIMS`` player and by Expert Iteration's warm start (a pure-MCTS expert
for the first iterations). The env is any pgx-style env passed in; this module imports
no env.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

Array = jax.Array


def uniform_legal(key: Array, legal_action_mask: Array) -> Array:
    """A uniform legal action per row. legal_action_mask: [B, A] bool -> [B] int32.

    A row without any legal action (a terminal state) draws uniformly over all actions.
    """
    any_legal = jnp.any(legal_action_mask, axis=-1, keepdims=True)
    mask = jnp.where(any_legal, legal_action_mask, True)
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf), axis=-1).astype(jnp.int32)


def random_rollout(env: Any, max_steps: int, key: Array, state: Any) -> Array:
    """Plays uniformly random moves from one (unbatched) state to the end of the game.

    Returns the outcome ``[]`` float32 in [-1, 1] from the view of
    ``state.current_player``; 0 for a state that is already terminal or a rollout cut
    at ``max_steps`` (scored as a draw).
    """
    player = state.current_player

    def cond(carry: tuple) -> Array:
        current, _, _, steps = carry
        return ~current.terminated & (steps < max_steps)

    def body(carry: tuple) -> tuple:
        current, outcome, key, steps = carry
        key, action_key = jax.random.split(key)
        action = uniform_legal(action_key, current.legal_action_mask[None])[0]
        current = env.step(current, action)
        return current, outcome + current.rewards[player], key, steps + 1

    init = (state, jnp.float32(0.0), key, jnp.int32(0))
    _, outcome, _, _ = jax.lax.while_loop(cond, body, init)
    return outcome


def default_max_steps(num_actions: int) -> int:
    """Rollout cap when none is given: ``4 A + 16`` plies."""
    return 4 * num_actions + 16


def batched_rollout(env: Any, max_steps: int | None = None) -> Callable[[Array, Any], Array]:
    """``rollout(key, states [B]) -> outcomes [B]`` float32, one random playout each."""
    steps = int(max_steps or default_max_steps(env.num_actions))
    single = jax.vmap(functools.partial(random_rollout, env, steps))

    def rollout(key: Array, states: Any) -> Array:
        batch_size = states.legal_action_mask.shape[0]
        return single(jax.random.split(key, batch_size), states)

    return rollout
