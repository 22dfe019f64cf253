"""Checks the late-game judge (``envs.late_game``) against independent answers.

    python scripts/late_game_check.py table [--max-empty 16]
    python scripts/late_game_check.py brute [--sizes 5 6 7 8 9] [--empty 6 8 10]
        [--positions 200] [--seed 0]

``table``: every non-terminal 4x4 position (stone counts of normal play) with at most
``--max-empty`` empty cells, against the retrograde table of ``envs.solve("hex",
size=4)``: the value for the side to move and the full set of winning moves must agree.

``brute``: positions from uniformly random play with exactly E empty cells on larger
boards, against a memoized plain negamax over the empty cells (no pruning, no proof
sets, an independent connection test), value and winning-move set.

Each mode appends one row per (size, E) to ``--out`` (default
``results/late_game/agreement.csv``): mode, size, max_empty / empty, positions,
agreements, mismatches, seconds.
"""

from __future__ import annotations

import argparse
import functools
import random
import time
from collections import deque
from pathlib import Path

import numpy as np

from curiosity_search.atomic_io import write_csv_atomically
from curiosity_search.envs.late_game import ProofSearch
from curiosity_search.envs.retrograde import hex_win_check


def table_check(max_empty: int, chunk: int = 1 << 20) -> list[dict]:
    """Every non-terminal 4x4 position with <= max_empty empties vs the retrograde table."""
    from curiosity_search import envs

    size, cells = 4, 16
    values = envs.solve("hex", size=4).values  # int8 [3**16]
    pow3 = 3 ** np.arange(cells, dtype=np.int64)
    bit = np.int64(1) << np.arange(cells, dtype=np.int64)
    has_won = hex_win_check(size)
    search = ProofSearch(size)
    start = time.perf_counter()
    count = mismatches = 0
    for low in range(0, 3**cells, chunk):
        codes = np.arange(low, min(low + chunk, 3**cells), dtype=np.int64)
        digits = (codes[:, None] // pow3) % 3  # [chunk, C]
        first = (digits == 1).sum(axis=1)
        second = (digits == 2).sum(axis=1)
        legal = (first == second) | (first == second + 1)
        empties = cells - first - second
        black = ((digits == 1) * bit).sum(axis=1)
        white = ((digits == 2) * bit).sum(axis=1)
        terminal = has_won(black, 0) | has_won(white, 1)
        keep = legal & ~terminal & (empties <= max_empty) & (empties > 0)
        codes, digits, black, white = codes[keep], digits[keep], black[keep], white[keep]
        to_move = (first[keep] != second[keep]).astype(np.int64)  # 1: second player
        # winning moves from the table: empty cells whose child is lost for the opponent
        child = codes[:, None] + (to_move[:, None] + 1) * pow3[None, :]
        child_value = values[np.where(digits == 0, child, 0)]
        winning_table = ((digits == 0) & (child_value == -1)) * bit
        expected_moves = winning_table.sum(axis=1)
        value_table = values[codes]
        for i in range(codes.shape[0]):
            win, moves = search.winning_moves(int(black[i]), int(white[i]), int(to_move[i]))
            if win != (value_table[i] == 1) or moves != int(expected_moves[i]):
                mismatches += 1
                if mismatches <= 5:
                    print(f"mismatch: code {codes[i]} win {win} table {value_table[i]} "
                          f"moves {moves:016b} table {int(expected_moves[i]):016b}", flush=True)
        count += int(codes.shape[0])
        print(f"  codes < {low + chunk}: {count} positions, {mismatches} mismatches, "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    return [{
        "mode": "table", "size": size, "empty": f"1..{max_empty}", "positions": count,
        "agreements": count - mismatches, "mismatches": mismatches,
        "seconds": round(time.perf_counter() - start, 1),
    }]


def _connected(stones: int, size: int, colour: int) -> bool:
    """BFS over cells: colour 0 joins row 0 to row size-1, colour 1 column 0 to size-1."""
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
            cell = nr * size + nc
            if 0 <= nr < size and 0 <= nc < size and (stones >> cell) & 1:
                if (nr, nc) not in seen:
                    seen.add((nr, nc))
                    queue.append((nr, nc))
    return False


def brute_force(size: int):
    """``wins(black, white, to_move)``: plain memoized negamax (True: the mover wins)."""

    @functools.cache
    def wins(black: int, white: int, to_move: int) -> bool:
        occupied = black | white
        for cell in range(size * size):
            if (occupied >> cell) & 1:
                continue
            if to_move == 0:
                child = black | (1 << cell)
                if _connected(child, size, 0) or not wins(child, white, 1):
                    return True
            else:
                child = white | (1 << cell)
                if _connected(child, size, 1) or not wins(black, child, 0):
                    return True
        return False

    return wins


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
        if not _connected(black, size, 0) and not _connected(white, size, 1):
            return black, white, (size * size - empty) % 2


def brute_check(sizes: list[int], empties: list[int], positions: int, seed: int) -> list[dict]:
    rows = []
    for size in sizes:
        wins = brute_force(size)
        for empty in empties:
            rng = random.Random(seed * 1000 + size * 100 + empty)
            start = time.perf_counter()
            mismatches = 0
            for _ in range(positions):
                black, white, to_move = random_position(size, empty, rng)
                win, moves = ProofSearch(size).winning_moves(black, white, to_move)
                expected = 0
                for cell in range(size * size):
                    if ((black | white) >> cell) & 1:
                        continue
                    if to_move == 0:
                        child = black | (1 << cell)
                        keeps = _connected(child, size, 0) or not wins(child, white, 1)
                    else:
                        child = white | (1 << cell)
                        keeps = _connected(child, size, 1) or not wins(black, child, 0)
                    expected |= int(keeps) << cell
                if win != wins(black, white, to_move) or moves != expected:
                    mismatches += 1
            rows.append({
                "mode": "brute", "size": size, "empty": empty, "positions": positions,
                "agreements": positions - mismatches, "mismatches": mismatches,
                "seconds": round(time.perf_counter() - start, 1),
            })
            print(rows[-1], flush=True)
        wins.cache_clear()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    table = sub.add_parser("table")
    table.add_argument("--max-empty", type=int, default=16)
    brute = sub.add_parser("brute")
    brute.add_argument("--sizes", type=int, nargs="+", default=[5, 6, 7, 8, 9])
    brute.add_argument("--empty", type=int, nargs="+", default=[6, 8, 10])
    brute.add_argument("--positions", type=int, default=200)
    brute.add_argument("--seed", type=int, default=0)
    for p in (table, brute):
        p.add_argument("--out", type=Path, default=Path("results/late_game/agreement.csv"))
    args = parser.parse_args()
    if args.mode == "table":
        rows = table_check(args.max_empty)
    else:
        rows = brute_check(args.sizes, args.empty, args.positions, args.seed)
    previous = []
    if args.out.exists():
        import csv

        with open(args.out, newline="") as handle:
            previous = list(csv.DictReader(handle))
    write_csv_atomically(args.out, previous + rows)
    for row in rows:
        print(row)
    print(f"appended to {args.out}")


if __name__ == "__main__":
    main()
