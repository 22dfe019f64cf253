"""Retrograde analysis of tiny two-player placement games, vectorized with numpy.

A position is a board of C cells, each empty (digit 0), first player (1) or second
player (2), indexed by its base-3 code ``sum_i digit_i * 3**i``. The first player moves
when both have as many stones, so the stone count fixes the player to move. The table
``values`` (int8 [3**C]) holds the game-theoretic value for the player to move: +1 win,
0 draw, -1 loss. Positions with impossible stone counts keep 0 (never looked up).

Layers are filled from the full board down: a position whose previous mover has won is
-1; otherwise its value is max over empty cells of -value(child), or 0 (a draw) when the
board is full. Each layer is enumerated as (occupied cells) x (which of them are first
player's), so the codes, the per-player bitboards and the children are matrix products
and gathers, never Python loops over positions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

WinCheck = Callable[[np.ndarray, int], np.ndarray]
"""(bitboards int64 [...], colour 0/1) -> bool [...]: that colour's stones have won."""


def _combinations(n: int, k: int) -> np.ndarray:
    """int64 [C(n, k), k]: all k-subsets of range(n), each sorted."""
    rows = list(itertools.combinations(range(n), k))
    return np.array(rows, dtype=np.int64).reshape(len(rows), k)


def solve_table(num_cells: int, has_won: WinCheck) -> np.ndarray:
    """Values for the player to move of every position, int8 [3**num_cells]."""
    pow3 = 3 ** np.arange(num_cells, dtype=np.int64)
    values = np.zeros(3**num_cells, dtype=np.int8)
    for stones in range(num_cells, -1, -1):
        num_first = (stones + 1) // 2
        mover = stones % 2  # colour to move; its digit is mover + 1
        occupied = _combinations(num_cells, stones)  # [M, k]
        first = np.zeros((math.comb(stones, num_first), stones), np.int64)  # [S, k]
        for s, chosen in enumerate(itertools.combinations(range(stones), num_first)):
            first[s, list(chosen)] = 1
        digits = 2 - first  # 1 first player, 2 second
        codes = pow3[occupied] @ digits.T  # [M, S]
        bits = np.left_shift(np.int64(1), occupied)  # [M, k]
        first_bits = bits @ first.T  # [M, S], distinct bits so sum == or
        second_bits = bits @ (1 - first).T
        prev_bits = second_bits if mover == 0 else first_bits
        lost = has_won(prev_bits, 1 - mover)  # the previous mover has connected / lined up
        if stones == num_cells:
            layer = np.where(lost, -1, 0)
        else:
            empty = np.ones((occupied.shape[0], num_cells), bool)
            np.put_along_axis(empty, occupied, False, axis=1)
            empties = np.nonzero(empty)[1].reshape(occupied.shape[0], num_cells - stones)
            child_codes = codes[:, :, None] + (mover + 1) * pow3[empties][:, None, :]
            best = (-values[child_codes].astype(np.int8)).max(axis=-1)  # [M, S]
            layer = np.where(lost, -1, best)
        values[codes] = layer.astype(np.int8)
    return values


def hex_win_check(size: int) -> WinCheck:
    """Win check for Hex on a size x size board with pgx's geometry (cell = r * size + c):
    colour 0 joins row 0 to row size-1, colour 1 joins column 0 to column size-1.
    Neighbours of (r, c): (r, c-1), (r+1, c-1), (r-1, c), (r+1, c), (r-1, c+1), (r, c+1)."""
    cells = size * size
    full = (1 << cells) - 1
    col = np.arange(cells) % size
    row = np.arange(cells) // size

    def mask(selected: np.ndarray) -> int:
        return int(sum(1 << int(i) for i in np.nonzero(selected)[0]))

    not_first_col = mask(col != 0)  # cells that may step to c - 1
    not_last_col = mask(col != size - 1)  # cells that may step to c + 1
    edges = {
        0: (mask(row == 0), mask(row == size - 1)),
        1: (mask(col == 0), mask(col == size - 1)),
    }

    def spread(reach: np.ndarray) -> np.ndarray:
        left = reach & not_first_col
        right = reach & not_last_col
        grown = (
            reach
            | (left >> 1)  # (r, c-1)
            | (right << 1)  # (r, c+1)
            | (reach >> size)  # (r-1, c)
            | (reach << size)  # (r+1, c)
            | (left << (size - 1))  # (r+1, c-1)
            | (right >> (size - 1))  # (r-1, c+1)
        )
        return grown & full

    def has_won(bitboards: np.ndarray, colour: int) -> np.ndarray:
        start, end = edges[colour]
        reach = bitboards & start
        for _ in range(cells):
            grown = spread(reach) & bitboards
            if np.array_equal(grown, reach):
                break
            reach = grown
        return (reach & end) != 0

    return has_won


TIC_TAC_TOE_LINES = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6),
)  # fmt: skip


def tic_tac_toe_win_check(bitboards: np.ndarray, colour: int) -> np.ndarray:
    """Three in a row for the stones in ``bitboards`` (cells 0..8 row-major, as pgx)."""
    del colour
    won = np.zeros(np.shape(bitboards), bool)
    for line in TIC_TAC_TOE_LINES:
        line_bits = sum(1 << i for i in line)
        won |= (bitboards & line_bits) == line_bits
    return won
