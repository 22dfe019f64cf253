"""The late-game judge (``envs.late_game``) against independent answers: the 4x4
retrograde table, a plain memoized negamax on larger boards, known first moves; the
pgx state encoding, the disk cache, and the late-position samplers."""

from __future__ import annotations

import functools
import random
from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.envs import make, solve
from curiosity_search.envs.late_game import (
    DEFAULT_MAX_EMPTY,
    LateGameJudge,
    ProofSearch,
    bitboards_from_states,
    winning_positions,
)
from curiosity_search.envs.late_positions import late_positions_from_play, random_late_positions

# --- an independent reference: BFS connection test and plain negamax ---------------------


def connected(stones: int, size: int, colour: int) -> bool:
    """Colour 0 joins row 0 to row size-1, colour 1 column 0 to column size-1 (pgx)."""
    steps = ((0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1))
    cells = [(i // size, i % size) for i in range(size * size) if (stones >> i) & 1]
    start = [(r, c) for r, c in cells if (r if colour == 0 else c) == 0]
    seen, queue = set(start), deque(start)
    while queue:
        r, c = queue.popleft()
        if (r if colour == 0 else c) == size - 1:
            return True
        for dr, dc in steps:
            nr, nc = r + dr, c + dc
            if 0 <= nr < size and 0 <= nc < size and (stones >> (nr * size + nc)) & 1:
                if (nr, nc) not in seen:
                    seen.add((nr, nc))
                    queue.append((nr, nc))
    return False


@functools.cache
def negamax(size: int):
    @functools.cache
    def wins(black: int, white: int, to_move: int) -> bool:
        for cell in range(size * size):
            if ((black | white) >> cell) & 1:
                continue
            if to_move == 0:
                child = black | (1 << cell)
                if connected(child, size, 0) or not wins(child, white, 1):
                    return True
            else:
                child = white | (1 << cell)
                if connected(child, size, 1) or not wins(black, child, 0):
                    return True
        return False

    return wins


def brute_winning_moves(size: int, black: int, white: int, to_move: int) -> int:
    wins = negamax(size)
    moves = 0
    for cell in range(size * size):
        if ((black | white) >> cell) & 1:
            continue
        if to_move == 0:
            child = black | (1 << cell)
            keeps = connected(child, size, 0) or not wins(child, white, 1)
        else:
            child = white | (1 << cell)
            keeps = connected(child, size, 1) or not wins(black, child, 0)
        moves |= int(keeps) << cell
    return moves


def random_position(size: int, empty: int, rng: random.Random) -> tuple[int, int, int]:
    """A non-terminal position of uniformly random play with ``empty`` empty cells."""
    while True:
        order = list(range(size * size))
        rng.shuffle(order)
        black = white = 0
        for ply, cell in enumerate(order[: size * size - empty]):
            if ply % 2 == 0:
                black |= 1 << cell
            else:
                white |= 1 << cell
        if not connected(black, size, 0) and not connected(white, size, 1):
            return black, white, (size * size - empty) % 2


# --- tests ------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "winning"), [(3, [2, 3, 4, 5, 6]), (4, [3, 6, 9, 12])])
def test_known_winning_first_moves(size, winning):
    win, moves = ProofSearch(size).winning_moves(0, 0, 0)
    assert win
    assert [c for c in range(size * size) if (moves >> c) & 1] == winning


def test_agrees_with_the_4x4_retrograde_table_on_sampled_positions():
    """1,500 random 4x4 positions with 1..E empty cells: value and every winning move
    (``scripts/late_game_check.py table`` checks every position)."""
    values = solve("hex", size=4).values
    pow3 = 3 ** np.arange(16)
    rng = random.Random(0)
    search = ProofSearch(4)
    for index in range(1500):
        black, white, to_move = random_position(4, 1 + index % DEFAULT_MAX_EMPTY, rng)
        digits = np.array([((black >> c) & 1) + 2 * ((white >> c) & 1) for c in range(16)])
        code = int((digits * pow3).sum())
        expected = 0
        for cell in np.nonzero(digits == 0)[0]:
            if values[code + (to_move + 1) * pow3[cell]] == -1:
                expected |= 1 << int(cell)
        win, moves = search.winning_moves(black, white, to_move)
        assert win == (values[code] == 1), (black, white, to_move)
        assert moves == expected, (black, white, to_move)


@pytest.mark.parametrize("size", [5, 6, 7, 9])
def test_agrees_with_brute_force_on_random_late_positions(size):
    rng = random.Random(size)
    for empty in (4, 6, 8):
        for _ in range(15):
            black, white, to_move = random_position(size, empty, rng)
            win, moves = ProofSearch(size).winning_moves(black, white, to_move)
            assert win == negamax(size)(black, white, to_move)
            assert moves == brute_winning_moves(size, black, white, to_move)


def test_judge_states_matches_the_exact_solver_on_4x4_states():
    env = make("hex", size=4, swap=False)
    solution = solve("hex", size=4)
    states, live = jax.jit(random_late_positions, static_argnums=(0, 2, 3))(
        env, jax.random.key(1), 64, 10
    )
    verdict = LateGameJudge(4, max_empty=10, cache=False).judge_states(states)
    live = np.asarray(live)
    assert verdict.solved[live].all()
    assert (verdict.num_empty[live] == 10).all()
    value = np.asarray(solution.state_value(states))
    winning = np.asarray(solution.winning_action_mask(states))
    np.testing.assert_array_equal(verdict.value[live], value[live])
    np.testing.assert_array_equal(verdict.winning[live], winning[live])


def test_bitboards_follow_pgx_geometry():
    """Black (the first mover, colour 0) joins the top and bottom rows: on 3x3, black
    stones on cells 0 and 3 (column 0) win with cell 6."""
    env = make("hex", size=3, swap=False)
    state = env.init(jax.random.key(0))
    for action in (0, 1, 3, 2):  # black 0, white 1, black 3, white 2
        state = env.step(state, jnp.int32(action))
    batch = jax.tree.map(lambda x: x[None], state)
    black, white, to_move, terminated = bitboards_from_states(batch)
    assert (black[0], white[0], int(to_move[0]), bool(terminated[0])) == (0b1001, 0b110, 0, False)
    verdict = LateGameJudge(3, cache=False).judge_states(batch)
    assert verdict.value[0] == 1 and verdict.winning[0, 6]  # black completes 0-3-6
    state = env.step(state, jnp.int32(6))
    assert bool(state.terminated)


def test_too_many_empty_cells_are_not_solved_and_the_cache_persists(tmp_path):
    judge = LateGameJudge(5, max_empty=6, cache_dir=tmp_path)
    rng = random.Random(3)
    late = random_position(5, 6, rng)
    early = random_position(5, 12, rng)
    verdict = judge.judge_bitboards([late[0], early[0]], [late[1], early[1]],
                                    [late[2], early[2]])
    assert verdict.solved.tolist() == [True, False] and verdict.value[1] == 0
    assert not verdict.winning[1].any()
    judge.close()
    again = LateGameJudge(5, max_empty=6, cache_dir=tmp_path)
    key = f"{late[0]:x}/{late[1]:x}/{late[2]}"
    assert key in again.cache.get_many([key])
    repeat = again.judge_bitboards([late[0]], [late[1]], [late[2]])
    np.testing.assert_array_equal(repeat.winning[0], verdict.winning[0])
    assert again.search.nodes == 0  # answered from the disk cache


def test_late_position_samplers_stop_at_exactly_e_empty_cells():
    env = make("hex", size=5, swap=False)
    states, live = jax.jit(random_late_positions, static_argnums=(0, 2, 3))(
        env, jax.random.key(0), 32, 9
    )
    live = np.asarray(live)
    empties = (np.asarray(states._x.board) == 0).sum(axis=1)
    assert live.sum() > 20 and (empties[live] == 9).all()

    def first_legal(params, key, states):
        del params, key
        return jnp.argmax(states.legal_action_mask, axis=-1).astype(jnp.int32)

    states, live = late_positions_from_play(
        jax.random.key(1), first_legal, (), first_legal, (), env, 8, 12, opening_moves=2
    )
    live = np.asarray(live)
    empties = (np.asarray(states._x.board) == 0).sum(axis=1)
    assert (empties[live] == 12).all()
    kept, verdict = winning_positions(LateGameJudge(5, cache=False), states, live)
    assert verdict.won.all() and kept._x.board.shape[0] == verdict.value.shape[0]
