"""Matches between two players over both colours, with Wilson intervals, into CSV tables.

``play_match`` plays N games of two ``JaxPlayer``s as one batch: the first half of the
games player A moves first, the second half player B does, and game i of one half
starts from the same (optionally randomized) opening as game i of the other half, so
that colour and opening luck cancel. The move loop runs on the host over compiled
pieces, each player compiled on its own (``_compiled_player``): a network search is
compiled once and reused against every opponent (one program per player pair
compiled the search again for each: ~150 s per extra opponent for curiosity's search
on 2 CPU cores), at the cost of one device-to-host read per move.
``play_host_match`` plays the same schedule one game at a time on the host, for HTP
programs. ``run_match`` picks.
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
import numpy as np

from curiosity_search.eval.host_match import play_host_match
from curiosity_search.eval.match_result import MatchResult, summarize
from curiosity_search.eval.players import ApplyFn, JaxPlayer

Array = jax.Array


def _tile_pairs(x: Array, games: int) -> Array:
    """[pairs, ...] -> [games, ...]: game i and game i + pairs share row i."""
    return jnp.concatenate([x, x], axis=0)[:games]


@functools.lru_cache(maxsize=64)
def _compiled_player(apply: ApplyFn) -> Any:
    """``jax.jit(apply)``, one per player function: a player (a network search, the
    solver) compiles once per batch shape and every match it plays reuses the program,
    whoever the opponent is."""
    return jax.jit(apply)


@functools.lru_cache(maxsize=32)
def _match_steps(env: Any, games: int, opening_moves: int, max_moves: int) -> tuple[Any, Any]:
    """The match's own jitted pieces, the players left out: ``start(key) -> (carry, key_a,
    key_b, done)`` (the paired openings) and ``advance(carry, action_a, action_b) ->
    (carry, key_a, key_b, done)`` (one move of every game).

    ``carry = (states, a_id, returns_a [G], illegal_a, illegal_b, key, moves)``;
    ``key_a, key_b`` are the players' keys for the next move and ``done`` (a scalar) says
    that every game has ended or the move cap is reached.
    """
    pairs = (games + 1) // 2
    num_actions = env.num_actions
    step = jax.vmap(env.step)
    rows = jnp.arange(games)

    def next_move(states: Any, a_id: Array, returns_a: Array, illegal_a: Array,
                  illegal_b: Array, key: Array, moves: Array) -> tuple:
        key, key_a, key_b = jax.random.split(key, 3)
        done = ~(jnp.any(~states.terminated) & (moves < max_moves))
        return (states, a_id, returns_a, illegal_a, illegal_b, key, moves), key_a, key_b, done

    def start(key: Array) -> tuple:
        init_key, opening_key, loop_key = jax.random.split(key, 3)
        states = jax.vmap(env.init)(_tile_pairs(jax.random.split(init_key, pairs), games))
        a_first = _a_moves_first(games)
        first_mover = states.current_player
        a_id = jnp.where(a_first, first_mover, 1 - first_mover)
        returns_a = jnp.zeros(games, jnp.float32)
        for key_i in jax.random.split(opening_key, opening_moves):
            noise = _tile_pairs(jax.random.gumbel(key_i, (pairs, num_actions)), games)
            action = jnp.argmax(jnp.where(states.legal_action_mask, noise, -jnp.inf), axis=-1)
            states = step(states, action)
            returns_a = returns_a + states.rewards[rows, a_id]
        zero = jnp.int32(0)
        return next_move(states, a_id, returns_a, zero, zero, loop_key, zero)

    def advance(carry: tuple, action_a: Array, action_b: Array) -> tuple:
        states, a_id, returns_a, illegal_a, illegal_b, key, moves = carry
        a_moves = states.current_player == a_id
        action = jnp.where(a_moves, action_a, action_b)
        illegal = ~states.legal_action_mask[rows, action] & ~states.terminated
        illegal_a = illegal_a + jnp.sum(illegal & a_moves)
        illegal_b = illegal_b + jnp.sum(illegal & ~a_moves)
        states = step(states, action)
        returns_a = returns_a + states.rewards[rows, a_id]
        return next_move(states, a_id, returns_a, illegal_a, illegal_b, key, moves + 1)

    return jax.jit(start), jax.jit(advance)


def _a_moves_first(games: int) -> np.ndarray:
    """``[G]`` bool: games where A makes the first move (the first half, rounded up;
    game ``i + (G + 1) // 2`` replays game i's opening with the colours swapped)."""
    return np.arange(games) < (games + 1) // 2


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
    """Plays ``num_games`` games of A vs B as one batch, half with each colour.

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
    start_games, advance = _match_steps(env, num_games, opening_moves, max_moves)
    act_a, act_b = _compiled_player(player_a.apply), _compiled_player(player_b.apply)
    start = time.perf_counter()
    carry, key_a, key_b, done = start_games(key)
    while not bool(done):
        states = carry[0]
        action_a = act_a(player_a.params, key_a, states)
        action_b = act_b(player_b.params, key_b, states)
        carry, key_a, key_b, done = advance(carry, action_a, action_b)
    states, _, returns_a, illegal_a, illegal_b, _, _ = carry
    returns_a, illegal_a, illegal_b, truncated = jax.device_get(
        (returns_a, illegal_a, illegal_b, jnp.sum(~states.terminated)))
    a_first = _a_moves_first(num_games)
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
