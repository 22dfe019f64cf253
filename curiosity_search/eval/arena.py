"""Matches between two players over both colours, with Wilson intervals, into CSV tables.

``play_match`` plays N games of two ``JaxPlayer``s in one jitted ``lax.while_loop``:
the first half of the games player A moves first, the second half player B does, and
game i of one half starts from the same (optionally randomized) opening as game i of
the other half, so that colour and opening luck cancel. ``play_host_match`` plays the
same schedule one game at a time on the host, for HTP programs. ``run_match`` picks.
"""

from __future__ import annotations

import csv
import functools
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from curiosity_search.eval.host_match import play_host_match
from curiosity_search.eval.match_result import MatchResult, summarize
from curiosity_search.eval.players import ApplyFn, JaxPlayer

Array = jax.Array


def _tile_pairs(x: Array, games: int) -> Array:
    """[pairs, ...] -> [games, ...]: game i and game i + pairs share row i."""
    return jnp.concatenate([x, x], axis=0)[:games]


@functools.lru_cache(maxsize=32)
def _match_fn(
    apply_a: ApplyFn, apply_b: ApplyFn, env: Any, games: int, opening_moves: int, max_moves: int
) -> Any:
    """The jitted ``play(key, params_a, params_b) -> (returns_a [G], a_first [G], illegal_a,
    illegal_b, truncated)``, cached so that new params reuse the compiled program."""
    pairs = (games + 1) // 2
    num_actions = env.num_actions
    step = jax.vmap(env.step)
    rows = jnp.arange(games)

    def play(key: Array, params_a: Any, params_b: Any) -> tuple:
        init_key, opening_key, loop_key = jax.random.split(key, 3)
        states = jax.vmap(env.init)(_tile_pairs(jax.random.split(init_key, pairs), games))
        a_first = rows < pairs
        first_mover = states.current_player
        a_id = jnp.where(a_first, first_mover, 1 - first_mover)
        returns_a = jnp.zeros(games, jnp.float32)
        for key_i in jax.random.split(opening_key, opening_moves):
            noise = _tile_pairs(jax.random.gumbel(key_i, (pairs, num_actions)), games)
            action = jnp.argmax(jnp.where(states.legal_action_mask, noise, -jnp.inf), axis=-1)
            states = step(states, action)
            returns_a = returns_a + states.rewards[rows, a_id]

        def cond(carry: tuple) -> Array:
            states, _, _, _, _, moves = carry
            return jnp.any(~states.terminated) & (moves < max_moves)

        def body(carry: tuple) -> tuple:
            states, returns_a, illegal_a, illegal_b, key, moves = carry
            key, key_a, key_b = jax.random.split(key, 3)
            a_moves = states.current_player == a_id
            action_a = apply_a(params_a, key_a, states)
            action = jnp.where(a_moves, action_a, apply_b(params_b, key_b, states))
            illegal = ~states.legal_action_mask[rows, action] & ~states.terminated
            illegal_a = illegal_a + jnp.sum(illegal & a_moves)
            illegal_b = illegal_b + jnp.sum(illegal & ~a_moves)
            states = step(states, action)
            returns_a = returns_a + states.rewards[rows, a_id]
            return states, returns_a, illegal_a, illegal_b, key, moves + 1

        zero = jnp.int32(0)
        carry = (states, returns_a, zero, zero, loop_key, zero)
        states, returns_a, illegal_a, illegal_b, _, _ = jax.lax.while_loop(cond, body, carry)
        truncated = jnp.sum(~states.terminated)
        return returns_a, a_first, illegal_a, illegal_b, truncated

    return jax.jit(play)


def play_match(
    key: Array,
    player_a: JaxPlayer,
    player_b: JaxPlayer,
    env: Any,
    num_games: int,
    *,
    opening_moves: int = 0,
    max_moves: int | None = None,
) -> MatchResult:
    """Plays ``num_games`` games of A vs B in one jitted loop, half with each colour.

    Args:
      key: PRNG key.
      player_a, player_b: batched players; both are evaluated on the whole batch of
        G = num_games states each move and the mover's action is kept.
      env: a pgx-compatible env.
      num_games: G; odd G gives A the extra first move.
      opening_moves: k uniformly random moves played before the players take over,
        shared by game i (A first) and game i + G/2 (B first).
      max_moves: move cap after the opening (default 4 * num_actions + 16); unfinished
        games count as draws and are reported as truncated.
    """
    if num_games < 1:
        raise ValueError(f"num_games={num_games}; allowed: >= 1")
    if opening_moves < 0:
        raise ValueError(f"opening_moves={opening_moves}; allowed: >= 0")
    max_moves = int(max_moves or 4 * env.num_actions + 16)
    play = _match_fn(player_a.apply, player_b.apply, env, num_games, opening_moves, max_moves)
    start = time.perf_counter()
    outputs = play(key, player_a.params, player_b.params)
    returns_a, a_first, illegal_a, illegal_b, truncated = jax.device_get(outputs)
    return summarize(
        player_a.name,
        player_b.name,
        returns_a,
        a_first,
        illegal_a=int(illegal_a),
        illegal_b=int(illegal_b),
        truncated=int(truncated),
        opening_moves=opening_moves,
        seconds=time.perf_counter() - start,
    )


def run_match(
    key: Array,
    player_a: Any,
    player_b: Any,
    env: Any,
    num_games: int,
    *,
    opening_moves: int = 0,
    max_moves: int | None = None,
) -> MatchResult:
    """``play_match`` for two JAX players, ``play_host_match`` when either speaks HTP."""
    if isinstance(player_a, JaxPlayer) and isinstance(player_b, JaxPlayer):
        return play_match(
            key,
            player_a,
            player_b,
            env,
            num_games,
            opening_moves=opening_moves,
            max_moves=max_moves,
        )
    return play_host_match(
        key, player_a, player_b, env, num_games, opening_moves=opening_moves, max_moves=max_moves
    )


def append_csv(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> None:
    """Appends rows to a CSV file, writing the header when the file is new.

    An existing file keeps its header; a row with a column the header lacks raises
    ``ValueError`` naming the columns (missing columns are left empty).
    """
    rows = [dict(row) for row in rows]
    if not rows:
        return
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    header: list[str] | None = None
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path, newline="") as handle:
            header = next(csv.reader(handle), None)
    if header is None:
        header = list(dict.fromkeys(key for row in rows for key in row))
        mode = "w"
    else:
        extra = sorted({key for row in rows for key in row} - set(header))
        if extra:
            raise ValueError(f"{path}: columns {extra} are not in the existing header {header}")
        mode = "a"
    with open(path, mode, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        if mode == "w":
            writer.writeheader()
        writer.writerows(rows)


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    """Reads a CSV table written by ``append_csv`` (values as strings)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))
