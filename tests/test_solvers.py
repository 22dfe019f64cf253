"""Exact solvers: known results (3x3 / 4x4 Hex first moves, tic-tac-toe is a draw), every
reachable 3x3 Hex and tic-tac-toe position against an independent memoized negamax, the
cache file, and the random-position sampler."""

from __future__ import annotations

import functools
from collections import deque
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.envs import make, sample_random_positions, solve
from curiosity_search.envs import solvers as solvers_module

# --- an independent reference: plain Python negamax over absolute boards ----------------
# A board is a tuple of C digits: 0 empty, 1 first mover's stone, 2 second mover's.

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def hex_connected(board: tuple, size: int, digit: int) -> bool:
    """Digit 1 joins the top and bottom rows, digit 2 the left and right columns."""
    steps = [(0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1)]
    cells = [(r, c) for r in range(size) for c in range(size) if board[r * size + c] == digit]
    start = [(r, c) for r, c in cells if (r if digit == 1 else c) == 0]
    seen, queue = set(start), deque(start)
    while queue:
        r, c = queue.popleft()
        if (r if digit == 1 else c) == size - 1:
            return True
        for dr, dc in steps:
            nr, nc = r + dr, c + dc
            if 0 <= nr < size and 0 <= nc < size and board[nr * size + nc] == digit:
                if (nr, nc) not in seen:
                    seen.add((nr, nc))
                    queue.append((nr, nc))
    return False


def make_rules(name: str, size: int):
    def won(board: tuple, digit: int) -> bool:
        if name == "hex":
            return hex_connected(board, size, digit)
        return any(all(board[i] == digit for i in line) for line in LINES)

    @functools.cache
    def negamax(board: tuple) -> int:
        """Value for the player to move."""
        mover = 1 if board.count(1) == board.count(2) else 2
        if won(board, 3 - mover):
            return -1
        children = [negamax(child(board, a, mover)) for a in range(len(board)) if board[a] == 0]
        return max((-v for v in children), default=0)

    return won, negamax


def child(board: tuple, action: int, mover: int) -> tuple:
    return board[:action] + (mover,) + board[action + 1 :]


def reachable_positions(name: str, size: int) -> dict[tuple, list[int]]:
    """Every position reachable in play (terminal ones included) -> one move sequence."""
    won, _ = make_rules(name, size)
    start = (0,) * (size * size)
    found = {start: []}
    queue = deque([start])
    while queue:
        board = queue.popleft()
        mover = 1 if board.count(1) == board.count(2) else 2
        if won(board, 3 - mover):
            continue
        for a in range(len(board)):
            if board[a] == 0:
                nxt = child(board, a, mover)
                if nxt not in found:
                    found[nxt] = found[board] + [a]
                    queue.append(nxt)
    return found


@partial(jax.jit, static_argnums=0)
def replay(env, sequences: jax.Array):
    """States [N] after playing each row of ``sequences`` (int [N, T], -1 = no move)."""
    num = sequences.shape[0]
    state = jax.vmap(env.init)(jax.random.split(jax.random.key(0), num))

    def body(state, actions):
        moved = jax.vmap(env.step)(state, jnp.maximum(actions, 0))
        return jax.tree.map(
            lambda new, old: jnp.where(
                (actions >= 0).reshape((num,) + (1,) * (new.ndim - 1)), new, old
            ),
            moved,
            state,
        ), None

    state, _ = jax.lax.scan(body, state, sequences.T)
    return state


@jax.jit
def lookups(solution, states) -> dict[str, jax.Array]:
    """Every lookup in one compiled program (the table is an argument, not a constant)."""
    return {
        "value": solution.state_value(states),
        "action_values": solution.action_values(states),
        "optimal": solution.optimal_action_mask(states),
        "winning": solution.winning_action_mask(states),
        "code": solution.position_code(states),
    }


# --- tests ------------------------------------------------------------------------------


def first(states):
    return jax.tree.map(lambda x: x[None], states)


@pytest.mark.parametrize(("size", "winning"), [(3, [2, 3, 4, 5, 6]), (4, [3, 6, 9, 12])])
def test_hex_winning_first_moves(size, winning):
    solution = solve("hex", size=size)
    assert solution.values.shape == (3 ** (size * size),) and solution.values.dtype == np.int8
    env = make("hex", size=size, swap=False)
    out = jax.device_get(lookups(solution, first(env.init(jax.random.key(0)))))
    assert out["value"].tolist() == [1]
    assert np.nonzero(out["winning"][0])[0].tolist() == winning
    assert np.nonzero(out["optimal"][0])[0].tolist() == winning
    assert out["action_values"].shape == (1, size * size + 1)


def test_tic_tac_toe_is_a_draw():
    solution = solve("tic_tac_toe")
    env = make("tic_tac_toe")
    start = first(env.init(jax.random.key(0)))
    after_edge = jax.vmap(env.step)(start, jnp.array([1]))  # X on an edge
    both = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), start, after_edge)
    out = jax.device_get(lookups(solution, both))
    assert out["value"].tolist() == [0, 0]
    assert not out["winning"].any()
    assert out["optimal"][0].all()  # every opening move holds the draw
    # O must answer the edge with one of the moves that hold the draw: 0, 2, 4, 7
    assert np.nonzero(out["optimal"][1])[0].tolist() == [0, 2, 4, 7]


@pytest.mark.parametrize(("name", "size"), [("hex", 3), ("tic_tac_toe", 3)])
def test_matches_negamax_on_every_reachable_position(name, size):
    won, negamax = make_rules(name, size)
    positions = reachable_positions(name, size)
    boards = list(positions)
    cells = size * size
    sequences = np.full((len(boards), cells), -1, np.int32)
    for i, board in enumerate(boards):
        sequences[i, : len(positions[board])] = positions[board]
    env = make(name, size=size, swap=False) if name == "hex" else make(name)
    states = replay(env, jnp.asarray(sequences))
    solution = solve(name, size=size) if name == "hex" else solve(name)

    out = jax.device_get(lookups(solution, states))
    value, optimal, winning, code = out["value"], out["optimal"], out["winning"], out["code"]
    for i, board in enumerate(boards):
        assert code[i] == sum(d * 3**k for k, d in enumerate(board)), board
        assert value[i] == negamax(board), board
        mover = 1 if board.count(1) == board.count(2) else 2
        terminal = won(board, 3 - mover) or 0 not in board
        assert bool(states.terminated[i]) == terminal, board
        expect_optimal = np.zeros(solution.num_actions, bool)
        expect_winning = np.zeros(solution.num_actions, bool)
        if not terminal:
            for a in range(cells):
                if board[a] == 0:
                    v = -negamax(child(board, a, mover))
                    expect_optimal[a] = v == value[i]
                    expect_winning[a] = v == 1
        np.testing.assert_array_equal(optimal[i], expect_optimal, err_msg=str(board))
        np.testing.assert_array_equal(winning[i], expect_winning, err_msg=str(board))
    assert len(boards) > 4000  # 3x3 Hex and tic-tac-toe both have a few thousand


def test_4x4_sampled_positions_match_negamax_and_are_consistent():
    env = make("hex", size=4, swap=False)
    solution = solve("hex", size=4)
    states = jax.jit(sample_random_positions, static_argnums=(0, 2))(env, jax.random.key(3), 256)
    assert not bool(states.terminated.any())
    out = jax.device_get(lookups(solution, states))
    value, action_values, optimal = out["value"], out["action_values"], out["optimal"]
    # Bellman consistency: the value is the best action value, and it is never a draw
    np.testing.assert_array_equal(value, action_values.max(axis=1))
    assert set(np.unique(value)) <= {-1, 1}
    assert optimal.any(axis=1).all() and not optimal[:, 16].any()
    # the deeper positions against the reference (few empty cells: cheap in Python)
    _, negamax = make_rules("hex", 4)
    codes = out["code"]
    checked = 0
    for i in np.nonzero(np.asarray(states._step_count) >= 8)[0][:40]:
        board = tuple(int(codes[i]) // 3**k % 3 for k in range(16))
        assert value[i] == negamax(board)
        checked += 1
    assert checked >= 10


def test_optimal_move_rate():
    env = make("hex", size=3, swap=False)
    solution = solve("hex", size=3)
    states = jax.jit(sample_random_positions, static_argnums=(0, 2))(env, jax.random.key(5), 512)
    out = jax.device_get(lookups(solution, states))
    winning, optimal = out["winning"], out["optimal"]
    can_win = out["value"] == 1
    assert can_win.sum() > 100
    rates = jax.jit(lambda sol, s, a: (sol.optimal_move_rate(s, a), sol.optimal_action_rate(s, a)))
    good = winning.argmax(axis=1)  # a winning move where there is one
    assert float(rates(solution, states, jnp.asarray(good))[0]) == 1.0
    first_legal = np.asarray(states.legal_action_mask).argmax(axis=1)
    move_rate, action_rate = rates(solution, states, jnp.asarray(first_legal))
    rows = np.arange(len(first_legal))
    assert float(move_rate) == pytest.approx(winning[rows, first_legal][can_win].mean())
    assert float(action_rate) == pytest.approx(optimal[rows, first_legal].mean())
    # no state with a forced win -> NaN; any opening move holds tic-tac-toe's draw
    ttt = make("tic_tac_toe")
    start = first(ttt.init(jax.random.key(0)))
    ttt_rates = rates(solve("tic_tac_toe"), start, jnp.array([4]))
    assert np.isnan(float(ttt_rates[0])) and float(ttt_rates[1]) == 1.0


def test_sample_random_positions_are_live_and_spread_over_plies():
    env = make("tic_tac_toe")
    sample = jax.jit(sample_random_positions, static_argnums=(0, 2))
    states = sample(env, jax.random.key(0), 2000)
    assert states.legal_action_mask.shape == (2000, 9)
    assert not bool(states.terminated.any())
    plies = np.bincount(np.asarray(states._step_count), minlength=9)
    # every game lasts at least 5 plies, so plies 0..4 are (roughly) equally likely
    assert plies[:5].min() > 0.7 * plies[:5].max() and plies[8] > 0
    again = sample(env, jax.random.key(0), 2000)
    np.testing.assert_array_equal(again._x.board, states._x.board)  # deterministic per key


def test_table_is_cached_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("CURIOSITY_SEARCH_SOLVER_CACHE", str(tmp_path))
    solution = solve("hex", size=3)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [f"hex_3x3_v{solvers_module.SOLVER_VERSION}.npy"]  # no stray .tmp
    loaded = solvers_module._load_or_solve("hex", 3, tmp_path)
    np.testing.assert_array_equal(loaded, solution.values)
    (tmp_path / files[0]).write_bytes(b"garbage")  # a corrupt file is re-solved
    np.testing.assert_array_equal(
        solvers_module._load_or_solve("hex", 3, tmp_path), solution.values
    )
    assert solve("hex", size=3) is solution  # one table per process


@pytest.mark.parametrize(
    ("name", "kwargs", "match"),
    [
        ("hex", {"size": 5}, "size=5"),
        ("hex", {"size": 3, "swap": True}, "swap"),
        ("hex", {}, "size"),
        ("hex", {"board": 3}, "board"),
        ("go_9x9", {}, "go_9x9"),
        ("tic_tac_toe", {"size": 3}, "keyword"),
    ],
)
def test_solve_rejects_what_it_cannot_solve(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        solve(name, **kwargs)
