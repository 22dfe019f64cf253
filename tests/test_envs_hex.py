"""Sized Hex: step-for-step equality with pgx at 11x11, winners against an independent
flood fill at 3x3..9x9, illegal moves, the swap=False variant, and ``make``'s dispatch."""

from __future__ import annotations

from collections import deque
from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest
from pgx.tic_tac_toe import TicTacToe

from curiosity_search.envs import Hex, action_to_cell, cell_to_action, make


def _random_action(key: jax.Array, state, swap_prob: float, illegal_prob: float) -> jax.Array:
    """One action for one state: uniform over legal moves; at ply 1 the swap move (if legal)
    with probability ``swap_prob``; with probability ``illegal_prob`` any action at all."""
    key_legal, key_any, key_swap, key_illegal = jax.random.split(key, 4)
    num_actions = state.legal_action_mask.shape[-1]
    legal = jax.random.categorical(key_legal, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))
    swap = num_actions - 1
    take_swap = state.legal_action_mask[swap] & jax.random.bernoulli(key_swap, swap_prob)
    action = jnp.where(take_swap, swap, legal)
    any_action = jax.random.randint(key_any, (), 0, num_actions)
    return jnp.where(jax.random.bernoulli(key_illegal, illegal_prob), any_action, action)


@partial(jax.jit, static_argnames=("num_games", "num_steps"))
def _compare_with_pgx(key: jax.Array, num_games: int, num_steps: int) -> jax.Array:
    """Plays ``num_games`` random 11x11 games in both envs; bool [B]: every field agreed at
    every step. A fifth of the games take a uniformly random (often illegal) action 2% of
    the time; play continues past termination."""
    ours, theirs = Hex(size=11, swap=True), make("hex")  # make: pgx.make, import-safe in jit
    key_init, key_kind, key_play = jax.random.split(key, 3)
    init_keys = jax.random.split(key_init, num_games)
    illegal_prob = jnp.where(jax.random.bernoulli(key_kind, 0.2, (num_games,)), 0.02, 0.0)
    state_a = jax.vmap(ours.init)(init_keys)
    state_b = jax.vmap(theirs.init)(init_keys)

    def same(a, b) -> jax.Array:
        leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
        assert len(leaves_a) == len(leaves_b)
        agree = [
            (x == y).reshape(num_games, -1).all(axis=1)
            for x, y in zip(leaves_a, leaves_b, strict=True)
        ]
        return jnp.stack(agree).all(axis=0)

    def body(carry, step_key):
        a, b, ok = carry
        keys = jax.random.split(step_key, num_games)
        actions = jax.vmap(_random_action, in_axes=(0, 0, None, 0))(keys, a, 0.3, illegal_prob)
        a = jax.vmap(ours.step)(a, actions)
        b = jax.vmap(theirs.step)(b, actions)
        return (a, b, ok & same(a, b)), a.terminated.mean()

    ok0 = same(state_a, state_b)
    (_, _, ok), _ = jax.lax.scan(
        body, (state_a, state_b, ok0), jax.random.split(key_play, num_steps)
    )
    return ok


def test_matches_pgx_hex_step_for_step_on_11x11():
    ok = _compare_with_pgx(jax.random.key(0), num_games=1000, num_steps=125)
    assert ok.shape == (1000,)
    assert bool(ok.all()), f"{int((~ok).sum())} games diverged from pgx"


def _flood_fill_connected(stones: np.ndarray, size: int, color: int) -> bool:
    """Independent check: colour 0 joins row 0 to row size-1, colour 1 col 0 to col size-1.
    ``stones`` is bool [size, size]; neighbours as in pgx (and HexGui / MoHex)."""
    steps = [(0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1)]
    if color == 0:
        start = [(0, c) for c in range(size) if stones[0, c]]
    else:
        start = [(r, 0) for r in range(size) if stones[r, 0]]
    seen = set(start)
    queue = deque(start)
    while queue:
        r, c = queue.popleft()
        if (color == 0 and r == size - 1) or (color == 1 and c == size - 1):
            return True
        for dr, dc in steps:
            nr, nc = r + dr, c + dc
            if 0 <= nr < size and 0 <= nc < size and stones[nr, nc] and (nr, nc) not in seen:
                seen.add((nr, nc))
                queue.append((nr, nc))
    return False


@partial(jax.jit, static_argnames=("env", "num_games"))
def _random_trajectories(env: Hex, key: jax.Array, num_games: int):
    """Random legal games; returns the stacked states [T, B] after each of T = A moves."""
    key_init, key_play = jax.random.split(key)
    state = jax.vmap(env.init)(jax.random.split(key_init, num_games))

    def body(state, step_key):
        keys = jax.random.split(step_key, num_games)
        actions = jax.vmap(_random_action, in_axes=(0, 0, None, None))(keys, state, 0.3, 0.0)
        state = jax.vmap(env.step)(state, actions)
        return state, state

    _, states = jax.lax.scan(body, state, jax.random.split(key_play, env.num_actions))
    return states


@pytest.mark.parametrize("size", [3, 4, 5, 6, 7, 8, 9])
def test_terminal_and_winner_match_flood_fill(size):
    env = make("hex", size=size, swap=size % 2 == 0)  # exercise both variants
    states = jax.device_get(_random_trajectories(env, jax.random.key(size), num_games=60))
    num_steps, num_games = states.terminated.shape
    assert bool(states.terminated[-1].all()), "every game must end within n*n + 1 moves"
    for g in range(num_games):
        done_before = False
        for t in range(num_steps):
            if done_before:
                assert (states.rewards[t, g] == 0).all()
                continue
            board = states._x.board[t, g]
            color = int(states._x.color[t, g])  # colour to move
            black = (board > 0) if color == 0 else (board < 0)
            white = (board < 0) if color == 0 else (board > 0)
            black_won = _flood_fill_connected(black.reshape(size, size), size, 0)
            white_won = _flood_fill_connected(white.reshape(size, size), size, 1)
            assert not (black_won and white_won)
            assert bool(states.terminated[t, g]) == (black_won or white_won), (g, t)
            if black_won or white_won:
                winner_color = 0 if black_won else 1
                assert winner_color == 1 - color, "the player who just moved wins"
                winner_id = int(states._player_order[t, g][winner_color])
                expected = np.full(2, -1.0, np.float32)
                expected[winner_id] = 1.0
                np.testing.assert_array_equal(states.rewards[t, g], expected)
                done_before = True
            else:
                assert (states.rewards[t, g] == 0).all()


def test_illegal_moves_end_the_game_as_in_pgx():
    ours, theirs = make("hex", size=11, swap=True), pgx.make("hex")
    key = jax.random.key(1)

    steppers = {ours: jax.jit(ours.step), theirs: jax.jit(theirs.step)}

    def play(env, actions):
        state, step = env.init(key), steppers[env]
        out = []
        for a in actions:
            state = step(state, jnp.int32(a))
            out.append(state)
        return out

    # swap at ply 0 (illegal), a stone on an occupied cell, and swap at ply 2 (illegal)
    for actions in ([121, 5], [5, 5, 7], [5, 6, 121, 8], [60, 121, 121]):
        for a, b in zip(play(ours, actions), play(theirs, actions), strict=True):
            for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
                np.testing.assert_array_equal(x, y)
    loser = int(ours.init(key).current_player)
    final = play(ours, [5, 5])[-1]
    assert bool(final.terminated)
    assert float(final.rewards[1 - loser]) == -1.0  # the second mover played the illegal move


def test_swap_false_never_offers_swap():
    env = make("hex", size=5, swap=False)
    assert env.num_actions == 26 and env.observation_shape == (5, 5, 4)
    states = jax.device_get(_random_trajectories(env, jax.random.key(7), num_games=60))
    live = ~states.terminated
    assert not states.legal_action_mask[..., 25][live].any()
    assert not states.observation[..., 3].any()
    init = env.init(jax.random.key(0))
    assert not bool(init.legal_action_mask[25])
    step = jax.jit(env.step)
    after_one = step(init, jnp.int32(12))
    assert not bool(after_one.legal_action_mask[25])
    assert not bool(after_one.observation[..., 3].any())
    # with swap, the move and its observation plane are offered at ply 1 only
    env_swap = make("hex", size=5, swap=True)
    after_one = jax.jit(env_swap.step)(env_swap.init(jax.random.key(0)), jnp.int32(12))
    assert bool(after_one.legal_action_mask[25]) and bool(after_one.observation[..., 3].all())
    # an (illegal) swap attempt without swap ends the game and leaves the stones alone
    after_one = step(init, jnp.int32(12))
    penalised = step(after_one, jnp.int32(25))
    assert bool(penalised.terminated)
    assert float(penalised.rewards[after_one.current_player]) == -1.0
    np.testing.assert_array_equal(penalised._x.board, -after_one._x.board)


def test_make_dispatch_and_errors():
    assert isinstance(make("tic_tac_toe"), TicTacToe)
    assert make("tic_tac_toe") is make("tic_tac_toe")
    assert type(make("hex")).__module__ == "pgx.hex"
    assert isinstance(make("hex", size=7), Hex) and isinstance(make("hex", size=7), pgx.Env)
    assert make("hex", size=7, swap=False) == make("hex", size=7, swap=False)
    assert make("hex", size=7, swap=False) != make("hex", size=7, swap=True)
    for bad in (2, 20, 0):
        with pytest.raises(ValueError, match=rf"size={bad}.*3 <= size <= 19"):
            make("hex", size=bad)
    with pytest.raises(ValueError, match="size"):
        make("hex", size=5.0)
    with pytest.raises(ValueError, match="boardsize"):
        make("hex", boardsize=5)
    with pytest.raises(ValueError, match="keyword"):
        make("tic_tac_toe", size=3)
    with pytest.raises(ValueError):
        make("no_such_game")


def test_no_recompile_across_equal_envs():
    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(state, action):
        return jax.vmap(make("hex", size=6, swap=False).step)(state, action)

    env = make("hex", size=6, swap=False)
    state = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 4))
    for a in range(3):
        state = step(state, jnp.full(4, a, jnp.int32))
    # equal envs as static arguments share one compiled program
    f = jax.jit(lambda e, k: e.init(k), static_argnums=0)
    f(make("hex", size=6, swap=False), jax.random.key(0))
    f(make("hex", size=6, swap=False), jax.random.key(1))
    assert f._cache_size() == 1


def test_cell_names():
    assert action_to_cell(0, 5) == "a1"
    assert action_to_cell(1 * 5 + 2, 5) == "c2"
    assert action_to_cell(25, 5) == "swap"
    for a in range(26):
        assert cell_to_action(action_to_cell(a, 5), 5) == a
    with pytest.raises(ValueError):
        cell_to_action("f1", 5)
