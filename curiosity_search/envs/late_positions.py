"""Late-game positions for the exact judge: games played until E empty cells remain.

Two sources, both pure and jittable, both returning the states [B] reached after
``num_cells - num_empty`` moves (exactly ``num_empty`` empty cells on a Hex board without
the swap move) and a mask of the games still running there:

- ``random_late_positions``: uniformly random legal play.
- ``late_positions_from_play``: two policies ``apply(params, key, states) -> actions``
  (for example a network and a reference), each moving first in half of the games, after
  ``opening_moves`` uniformly random moves shared by game i and game i + B/2 (the
  arena's schedule).

A game that ends before reaching E empty cells has no late position; its entry of
``live`` is False and its state is the terminal one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

Array = jax.Array
ApplyFn = Callable[[Any, Array, Any], Array]


def _moves_to_play(env: Any, num_empty: int) -> int:
    cells = int(env.num_actions) - 1  # Hex: the last action is the swap move
    if not 0 <= num_empty < cells:
        raise ValueError(f"num_empty={num_empty}; allowed: 0 <= num_empty < {cells}")
    return cells - num_empty


def random_late_positions(
    env: Any, key: Array, num_games: int, num_empty: int
) -> tuple[Any, Array]:
    """States [B = num_games] after uniformly random play down to ``num_empty`` empty
    cells, and ``live`` bool [B] (the game had not ended there).

    Jittable with ``static_argnums=(0, 2, 3)``."""
    moves = _moves_to_play(env, num_empty)
    init_key, play_key = jax.random.split(key)
    states = jax.vmap(env.init)(jax.random.split(init_key, num_games))

    def body(states: Any, step_key: Array) -> tuple[Any, None]:
        logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)  # [B, A]
        action = jax.random.categorical(step_key, logits, axis=-1)
        return jax.vmap(env.step)(states, action), None

    states, _ = jax.lax.scan(body, states, jax.random.split(play_key, moves))
    return states, ~states.terminated


def _pair_tile(x: Array, pairs: int, games: int) -> Array:
    """[pairs, ...] -> [games, ...]: game i and game i + pairs share row i."""
    return jnp.concatenate([x, x], axis=0)[:games]


@functools.lru_cache(maxsize=16)
def _play_fn(
    apply_a: ApplyFn, apply_b: ApplyFn, env: Any, num_games: int, num_empty: int,
    opening_moves: int,
) -> Callable[..., tuple[Any, Array]]:
    moves = _moves_to_play(env, num_empty)
    if not 0 <= opening_moves <= moves:
        raise ValueError(f"opening_moves={opening_moves}; allowed: 0..{moves}")
    pairs = (num_games + 1) // 2
    step = jax.vmap(env.step)

    def play(key: Array, params_a: Any, params_b: Any) -> tuple[Any, Array]:
        init_key, opening_key, loop_key = jax.random.split(key, 3)
        keys = _pair_tile(jax.random.split(init_key, pairs), pairs, num_games)
        states = jax.vmap(env.init)(keys)
        a_first = jnp.arange(num_games) < pairs
        a_id = jnp.where(a_first, states.current_player, 1 - states.current_player)
        for opening_key_i in jax.random.split(opening_key, opening_moves):
            noise = _pair_tile(
                jax.random.gumbel(opening_key_i, (pairs, env.num_actions)), pairs, num_games
            )
            states = step(states, jnp.argmax(jnp.where(states.legal_action_mask, noise,
                                                       -jnp.inf), axis=-1))

        def body(states: Any, step_key: Array) -> tuple[Any, None]:
            key_a, key_b = jax.random.split(step_key)
            action_a = apply_a(params_a, key_a, states)
            action_b = apply_b(params_b, key_b, states)
            action = jnp.where(states.current_player == a_id, action_a, action_b)
            return step(states, action), None

        states, _ = jax.lax.scan(
            body, states, jax.random.split(loop_key, moves - opening_moves)
        )
        return states, ~states.terminated

    return jax.jit(play)


def late_positions_from_play(
    key: Array,
    apply_a: ApplyFn,
    params_a: Any,
    apply_b: ApplyFn,
    params_b: Any,
    env: Any,
    num_games: int,
    num_empty: int,
    *,
    opening_moves: int = 0,
) -> tuple[Any, Array]:
    """States [B = num_games] of games between two policies, truncated at ``num_empty``
    empty cells, and ``live`` bool [B].

    Args:
      key: PRNG key.
      apply_a, apply_b: ``apply(params, key, states [B]) -> actions [B]``; A moves first
        in games ``[0, ceil(B / 2))``, B in the rest. Pass the same policy twice for
        self-play. The compiled program is cached per (apply_a, apply_b, env, sizes).
      params_a, params_b: their parameters (arguments, not baked-in constants).
      env: a Hex env without the swap move.
      num_games: B.
      num_empty: E.
      opening_moves: uniformly random first moves, shared by game i and i + B/2.
    """
    play = _play_fn(apply_a, apply_b, env, int(num_games), int(num_empty), int(opening_moves))
    return play(key, params_a, params_b)
