"""An exact late-game judge for Hex of any size: proof-set alpha-beta over the empty cells.

    judge = LateGameJudge(size=7)          # max_empty E = DEFAULT_MAX_EMPTY (14)
    verdict = judge.judge_states(states)   # pgx states [B] of envs.make("hex", size=7, ...)
    verdict.value        # int8 [B]: +1 the side to move can force a win, -1 it cannot
    verdict.winning      # bool [B, A]: the moves that keep the forced win (A = C + 1)
    verdict.solved       # bool [B]: False where the position has more than max_empty empties

Geometry is pgx's (``envs.hex``): cell = r * size + c; colour 0 (the first mover, HTP
black) joins row 0 to row size - 1, colour 1 joins column 0 to column size - 1. A board
is two Python-int bitboards, bit ``cell`` set where that colour has a stone.

Algorithm (Hex has no draws, so every position is a win or a loss for the side to move):

- **Negamax with proof sets.** ``search`` returns ``(win, proof)``: whether the side to
  move wins, and a proof set, a bitboard of cells that hold the *winner's* stones or are
  empty, such that the winner still wins in any position that agrees on those cells
  (extra stones of the winner there, or anything at all elsewhere, cannot hurt, because
  an extra stone never hurts in Hex). A win proof is the child's proof plus the winning
  move; an immediate connection's proof is the connected group.
- **Must-play pruning.** When the side to move X tries a move and the opponent Y still
  wins with proof Q, every other move of X outside Q loses too (the position after it
  agrees with the refuted one on Q). So X's candidates shrink to the empty cells of Q,
  and a loss's proof is the union of the refutations' proofs. The same rule classifies
  the root's moves, which gives the full set of winning moves at little extra cost.
- **Threats.** A cell that completes the side to move's connection wins at once; one
  opponent cell that would complete the opponent's connection is the only candidate;
  two such opponent cells lose at once (with their two groups as the proof).
- **Bridge connections.** A player whose groups chain from edge to edge with every
  gap a bridge (two empty cells next to both sides, the pairs disjoint) connects
  whoever moves: the position is decided without search, the chain and its pairs
  being the proof.
- **Move ordering**: with many empty cells, by the current through each cell in both
  players' resistance circuits (``Circuit``; about 9x fewer nodes than the next rule on
  real 5x5 positions with 21 empty cells); near the end, cells on the mover's shortest
  (fewest empty cells) edge-to-edge paths first, then the opponent's.
- **Transposition table** keyed by the two bitboards and the colour to move, shared by
  a position and its 180-degree rotation (which maps each player's edges onto
  themselves), bounded in size.

Solved roots are cached per board size in ``<solver cache>/late_game_hex{n}_v{V}.sqlite``
(``envs.solvers.solver_cache_dir``), shared by processes; ``cache=False`` turns it off.

The solver is exact for any number of empty cells; ``max_empty`` (E) only bounds which
positions ``judge_states`` attempts, so that a position solves in well under a second
(see ``DEFAULT_MAX_EMPTY``; ``scripts/late_game_timing.py`` measures it).
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

SOLVER_VERSION = 1  # bump when the rules, the encoding or the cache layout change
DEFAULT_MAX_EMPTY = 14
"""E: the default bound on the empty cells of a judged position (all board sizes)."""
MAX_TABLE_ENTRIES = 2_000_000  # the transposition table is cleared when it grows past this
RESISTANCE_EMPTY = 8  # nodes with this many empty cells order moves by circuit currents
DISK_VALUE_EMPTY = 18  # ``LateGameJudge.value`` keeps positions with more empties on disk


@dataclasses.dataclass(frozen=True)
class HexBits:
    """Bit masks of a size x size Hex board with pgx's geometry.

    Attributes:
      size: n.
      num_cells: C = n * n.
      full: all C bits.
      not_first_col / not_last_col: cells that may step to column c - 1 / c + 1.
      edges: ``edges[colour] = (start edge, end edge)``: colour 0 rows 0 and n - 1,
        colour 1 columns 0 and n - 1.
      neighbours: ``neighbours[cell]``: the bitboard of the cell's (up to 6) neighbours.
    """

    size: int
    num_cells: int
    full: int
    not_first_col: int
    not_last_col: int
    edges: tuple[tuple[int, int], tuple[int, int]]
    neighbours: tuple[int, ...]

    @classmethod
    def of(cls, size: int) -> HexBits:
        cells = size * size

        def mask(pred) -> int:
            return sum(1 << i for i in range(cells) if pred(i // size, i % size))

        neighbours = []
        for i in range(cells):
            r, c = divmod(i, size)
            bits = 0
            for dr, dc in ((0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1)):
                rr, cc = r + dr, c + dc
                if 0 <= rr < size and 0 <= cc < size:
                    bits |= 1 << (rr * size + cc)
            neighbours.append(bits)
        return cls(
            size=size,
            num_cells=cells,
            full=(1 << cells) - 1,
            not_first_col=mask(lambda r, c: c != 0),
            not_last_col=mask(lambda r, c: c != size - 1),
            edges=(
                (mask(lambda r, c: r == 0), mask(lambda r, c: r == size - 1)),
                (mask(lambda r, c: c == 0), mask(lambda r, c: c == size - 1)),
            ),
            neighbours=tuple(neighbours),
        )

    def spread(self, reach: int) -> int:
        """``reach`` plus all its neighbours (a bitboard)."""
        left = reach & self.not_first_col
        right = reach & self.not_last_col
        n = self.size
        return (
            reach
            | (left >> 1)
            | (right << 1)
            | (reach >> n)
            | (reach << n)
            | (left << (n - 1))
            | (right >> (n - 1))
        ) & self.full

    def flood(self, seed: int, allowed: int) -> int:
        """The cells of ``allowed`` connected to ``seed & allowed`` through ``allowed``."""
        not_first, not_last, n = self.not_first_col, self.not_last_col, self.size
        n1 = n - 1
        reach = seed & allowed
        while True:
            left = reach & not_first
            right = reach & not_last
            grown = (
                reach | (left >> 1) | (right << 1) | (reach >> n) | (reach << n)
                | (left << n1) | (right >> n1)
            ) & allowed
            if grown == reach:
                return reach
            reach = grown

    def connected(self, stones: int, colour: int) -> bool:
        """Whether ``stones`` join ``colour``'s two edges."""
        start, end = self.edges[colour]
        return bool(self.flood(start, stones) & end)


class Circuit:
    """A player's position as an electric circuit (Anshelevich's Hex evaluation), for
    move ordering: a cell's resistance is ~0 with the player's stone, 1 empty, infinite
    with the opponent's; adjacent cells join with the sum of their resistances, and each
    edge row joins its terminal. ``currents`` is the current through every cell with 1
    volt across the player's two edges: the cells most of the flow needs matter most.

    Attributes (C cells, P adjacent pairs):
      first, second: int [P]: the pairs' cells.
      start_cells, end_cells: ``[colour] -> int [...]``: each colour's edge rows.
    """

    STONE = 1e-3  # the resistance of an own stone (not 0: keeps the system regular)

    def __init__(self, bits: HexBits):
        self.num_cells = bits.num_cells
        pairs = [(i, j) for i in range(bits.num_cells) for j in _bits(bits.neighbours[i]) if i < j]
        self.first = np.array([i for i, _ in pairs], np.int64)
        self.second = np.array([j for _, j in pairs], np.int64)
        self.start_cells = [np.array(_bits(bits.edges[c][0]), np.int64) for c in (0, 1)]
        self.end_cells = [np.array(_bits(bits.edges[c][1]), np.int64) for c in (0, 1)]
        self._bytes = (bits.num_cells + 7) // 8

    @classmethod
    def of(cls, bits: HexBits) -> Circuit:
        return cls(bits)

    def _cells(self, board: int) -> np.ndarray:
        """bool [C] from a bitboard."""
        raw = np.frombuffer(board.to_bytes(self._bytes, "little"), np.uint8)
        return np.unpackbits(raw, bitorder="little")[: self.num_cells].astype(bool)

    def currents(self, stones: int, empty: int, colour: int) -> np.ndarray:
        """float [C]: the current through each cell (0 on the opponent's stones)."""
        cells = self.num_cells
        resistance = np.full(cells, np.inf)
        resistance[self._cells(stones)] = self.STONE
        resistance[self._cells(empty)] = 1.0
        pair = 1.0 / (resistance[self.first] + resistance[self.second])  # [P], 0 if blocked
        start, end = self.start_cells[colour], self.end_cells[colour]
        to_start = 1.0 / resistance[start]
        to_end = 1.0 / resistance[end]
        laplacian = np.zeros((cells, cells))
        laplacian[self.first, self.second] = -pair
        laplacian[self.second, self.first] = -pair
        diagonal = np.bincount(self.first, pair, cells) + np.bincount(self.second, pair, cells)
        diagonal[start] += to_start
        diagonal[end] += to_end
        laplacian[np.arange(cells), np.arange(cells)] = diagonal + 1e-9
        source = np.zeros(cells)
        source[start] = to_start  # the start terminal at 1 volt, the end one at 0
        try:
            voltage = np.linalg.solve(laplacian, source)
        except np.linalg.LinAlgError:
            return np.zeros(cells)
        flow = np.abs(pair * (voltage[self.first] - voltage[self.second]))
        through = np.bincount(self.first, flow, cells) + np.bincount(self.second, flow, cells)
        through[start] += np.abs(to_start * (1.0 - voltage[start]))
        through[end] += np.abs(to_end * voltage[end])
        return through / 2


def _bits(mask: int) -> list[int]:
    """The set bits of ``mask``, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


class ProofSearch:
    """The proof-set negamax of the module docstring for one board size.

    ``search(black, white, to_move)`` -> ``(win, proof)`` for the side to move, and
    ``winning_moves(black, white, to_move)`` -> ``(win, winning-move bitboard)``.
    ``nodes`` counts searched (non-table) nodes. The table persists between calls.
    """

    def __init__(self, size: int, max_table_entries: int = MAX_TABLE_ENTRIES):
        self.bits = HexBits.of(size)
        self.table: dict[tuple[int, int, int], tuple[bool, int]] = {}
        self.max_table_entries = max_table_entries
        self.nodes = 0
        self._rotate_format = f"0{self.bits.num_cells}b"
        self.circuit = Circuit.of(self.bits)

    # --- threats ----------------------------------------------------------------------
    def _groups(self, stones: int, empty: int) -> tuple[list[int], list[int]]:
        """(the connected groups of ``stones``, each group's empty neighbours)."""
        bits = self.bits
        groups, near = [], []
        rest = stones
        while rest:
            group = bits.flood(rest & -rest, stones)
            rest &= ~group
            groups.append(group)
            near.append(bits.spread(group) & empty)
        return groups, near

    def _one_move_wins(self, groups: list[int], near: list[int], empty: int, colour: int) -> int:
        """Empty cells that would join ``colour``'s edges at once (a bitboard), from its
        groups and their empty neighbours (``_groups``)."""
        start, end = self.bits.edges[colour]
        near_start, near_end = start & empty, end & empty
        for group, neighbours in zip(groups, near, strict=True):
            if group & start:
                near_start |= neighbours
            if group & end:
                near_end |= neighbours
        return near_start & near_end

    def _virtual_connection(self, groups: list[int], near: list[int], colour: int) -> int:
        """A proof that ``colour`` connects whoever moves, or 0: a chain of its groups
        (``_groups``) from edge to edge whose gaps are all *bridges*, two empty cells
        next to both ends (either stones of a group on the edge row, or a group with two
        empty neighbours on the edge row), with pairwise disjoint pairs of cells. When
        the opponent takes one cell of a pair, the other one reconnects, so the chain
        connects on every full board. The proof is the chain's stones and pairs."""
        if not groups:
            return 0
        start, end = self.bits.edges[colour]

        def gap(index: int, edge: int) -> int | None:
            """The carrier from group ``index`` to an edge: 0 touching, 2 cells, None."""
            if groups[index] & edge:
                return 0
            pair = near[index] & edge
            if pair.bit_count() >= 2:
                low = pair & -pair
                pair &= ~low
                return low | (pair & -pair)
            return None

        # breadth-first over groups from the start edge; links carry their two cells
        parent: dict[int, tuple[int, int]] = {}
        frontier = []
        for index in range(len(groups)):
            carrier = gap(index, start)
            if carrier is not None:
                parent[index] = (-1, carrier)
                frontier.append(index)
        while frontier:
            following = []
            for index in frontier:
                carrier = gap(index, end)
                if carrier is not None:
                    proof, used = carrier, carrier
                    node = index
                    while node != -1:
                        above, link = parent[node]
                        if used & link:
                            return 0  # two gaps share a cell: not a proof (be safe)
                        used |= link
                        proof |= groups[node] | link
                        node = above
                    return proof
                for other in range(len(groups)):
                    if other in parent:
                        continue
                    common = near[index] & near[other]
                    if common.bit_count() >= 2:
                        low = common & -common
                        common &= ~low
                        parent[other] = (index, low | (common & -common))
                        following.append(other)
            frontier = following
        return 0

    def _group(self, stones: int, cell: int) -> int:
        """The group that a stone at ``cell`` joins (its proof of an immediate win)."""
        return self.bits.flood(1 << cell, stones | (1 << cell))

    # --- ordering ---------------------------------------------------------------------
    def _distance_layers(self, stones: int, empty: int, start: int) -> list[int]:
        """Cumulative layers ``L_k``: the cells reachable from edge ``start`` through own
        ``stones`` and at most k ``empty`` cells (an empty cell counts in its own layer)."""
        flood = self.bits.flood
        reach = flood(start, stones)
        layers = [reach]
        while True:
            grown = reach | (self.bits.spread(reach) & empty) | (start & empty)
            grown = flood(grown, stones | grown)
            if grown == reach:
                return layers
            reach = grown
            layers.append(reach)

    def _order(self, me: int, opp: int, empty: int, colour: int, candidates: int) -> list[int]:
        """Candidate cells, most urgent first. With at least ``RESISTANCE_EMPTY`` empty
        cells: by the current through the cell in both players' resistance circuits
        (``Circuit``), the opponent's weighted 4x the mover's; with fewer: by the empty
        cells on the mover's shortest edge-to-edge path through the cell, then on the
        opponent's (of the orders tried on real 5x5 positions, the fewest nodes)."""
        cells = _bits(candidates)
        if empty.bit_count() >= RESISTANCE_EMPTY:
            mine = self.circuit.currents(me, empty, colour)
            theirs = self.circuit.currents(opp, empty, 1 - colour)
            score = 0.25 * mine + theirs
            return sorted(cells, key=lambda c: (-score[c], c))
        return self._shortest_path_order(me, opp, empty, colour, cells, candidates)

    def _shortest_path_order(self, me: int, opp: int, empty: int, colour: int,
                             cells: list[int], candidates: int) -> list[int]:
        lengths = []
        for stones, who in ((me, colour), (opp, 1 - colour)):
            start, end = self.bits.edges[who]
            length = dict.fromkeys(cells, 0)
            for edge in (start, end):
                layers = self._distance_layers(stones, empty, edge)
                left = candidates
                for k, layer in enumerate(layers):
                    reached = layer & left
                    if reached:
                        left &= ~reached
                        for cell in _bits(reached):
                            length[cell] += k
                for cell in _bits(left):  # unreachable from this edge
                    length[cell] += 2 * len(layers)
            lengths.append(length)
        mine, theirs = lengths
        return sorted(cells, key=lambda c: (mine[c], theirs[c], c))

    # --- search -----------------------------------------------------------------------
    def search(self, black: int, white: int, to_move: int) -> tuple[bool, int]:
        """(whether ``to_move`` wins, the winner's proof set) of a non-terminal position."""
        rotated = self._rotate(black), self._rotate(white)
        flipped = rotated < (black, white)
        key = (*rotated, to_move) if flipped else (black, white, to_move)
        hit = self.table.get(key)
        if hit is not None:
            return (hit[0], self._rotate(hit[1])) if flipped else hit
        result = self._search(black, white, to_move)
        if len(self.table) >= self.max_table_entries:
            self.table.clear()
        self.table[key] = (result[0], self._rotate(result[1])) if flipped else result
        return result

    def _rotate(self, board: int) -> int:
        """The board turned by 180 degrees (cell i -> C - 1 - i), which maps each
        player's edges onto themselves: positions and proofs are equivalent."""
        return int(format(board, self._rotate_format)[::-1], 2)

    def _search(self, black: int, white: int, to_move: int) -> tuple[bool, int]:
        self.nodes += 1
        bits = self.bits
        me, opp = (black, white) if to_move == 0 else (white, black)
        empty = bits.full & ~(black | white)
        my_groups, my_near = self._groups(me, empty)
        wins = self._one_move_wins(my_groups, my_near, empty, to_move)
        if wins:
            cell = (wins & -wins).bit_length() - 1
            return True, self._group(me, cell)
        connection = self._virtual_connection(my_groups, my_near, to_move)
        if connection:
            return True, connection
        their_groups, their_near = self._groups(opp, empty)
        connection = self._virtual_connection(their_groups, their_near, 1 - to_move)
        if connection:
            return False, connection
        threats = self._one_move_wins(their_groups, their_near, empty, 1 - to_move)
        proof = 0
        if threats:
            first = (threats & -threats).bit_length() - 1
            proof = self._group(opp, first)
            rest = threats & ~(1 << first)
            if rest:  # two cells that each connect the opponent: one move blocks one
                second = (rest & -rest).bit_length() - 1
                return False, proof | self._group(opp, second)
            candidates = 1 << first
        else:
            candidates = empty
        mustplay = candidates
        order = self._order(me, opp, empty, to_move, candidates) if candidates & (candidates - 1) \
            else [(candidates & -candidates).bit_length() - 1]
        for cell in order:
            if not (mustplay >> cell) & 1:
                continue
            bit = 1 << cell
            if to_move == 0:
                child_win, child_proof = self.search(black | bit, white, 1)
            else:
                child_win, child_proof = self.search(black, white | bit, 0)
            if not child_win:
                return True, child_proof | bit
            mustplay &= child_proof
            proof |= child_proof
            if not mustplay:
                break
        return False, proof

    def winning_moves(self, black: int, white: int, to_move: int) -> tuple[bool, int]:
        """(whether ``to_move`` can force a win, the bitboard of every move that keeps it).

        A terminal position (someone has connected) is a loss for the side to move with
        no winning moves."""
        bits = self.bits
        if bits.connected(black, 0) or bits.connected(white, 1):
            return False, 0
        win, _ = self.search(black, white, to_move)
        if not win:
            return False, 0
        empty = bits.full & ~(black | white)
        undecided = empty
        winning = 0
        me, opp = (black, white) if to_move == 0 else (white, black)
        for cell in self._order(me, opp, empty, to_move, empty):
            if not (undecided >> cell) & 1:
                continue
            bit = 1 << cell
            undecided &= ~bit
            if bits.connected(me | bit, to_move):
                winning |= bit
                continue
            if to_move == 0:
                child_win, child_proof = self.search(black | bit, white, 1)
            else:
                child_win, child_proof = self.search(black, white | bit, 0)
            if child_win:  # the opponent wins after this move: so after any move off its proof
                undecided &= child_proof
            else:
                winning |= bit
        return True, winning



@dataclasses.dataclass(frozen=True)
class LateGameVerdict:
    """The judge's answer for a batch of B positions of an n x n board (A = n * n + 1
    actions, the last one the swap move, never winning).

    Attributes:
      value: int8 [B]: +1 the side to move can force a win, -1 it cannot (terminal
        positions are -1), 0 where the position was not solved.
      winning: bool [B, A]: the moves that keep the forced win (all False for a loss or
        an unsolved position).
      solved: bool [B]: the position had at most ``max_empty`` empty cells (or was
        terminal) and was solved.
      num_empty: int32 [B]: empty cells of each position.
    """

    value: np.ndarray
    winning: np.ndarray
    solved: np.ndarray
    num_empty: np.ndarray

    @property
    def won(self) -> np.ndarray:
        """bool [B]: solved positions where the side to move can force a win."""
        return self.value == 1

    def keeps_win(self, actions: np.ndarray) -> np.ndarray:
        """bool [B]: whether ``actions`` (int [B]) keep the forced win (False off ``won``)."""
        actions = np.asarray(actions, dtype=np.int64)
        rows = np.arange(actions.shape[0])
        return self.won & self.winning[rows, np.clip(actions, 0, self.winning.shape[1] - 1)]

    def subset(self, index: np.ndarray) -> LateGameVerdict:
        """The verdict of the positions ``index`` (int [K] or bool [B])."""
        return LateGameVerdict(value=self.value[index], winning=self.winning[index],
                               solved=self.solved[index], num_empty=self.num_empty[index])


def late_game_cache_dir() -> Path:
    """Where solved roots are cached: the exact solvers' folder (``envs.solvers``)."""
    from curiosity_search.envs.solvers import solver_cache_dir

    return solver_cache_dir()


class RootCache:
    """Solved roots of one board size in SQLite: key -> (win, winning-move bitboard) in
    table ``roots``, and key -> win alone (``LateGameJudge.value``) in table ``values``.

    Safe to share between processes (SQLite locking); any SQLite error turns the cache
    off for the rest of the process (a read-only or full disk only costs re-solving).
    """

    def __init__(self, path: Path):
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self.enabled = True

    def _connect(self) -> sqlite3.Connection | None:
        if self._connection is None and self.enabled:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(self.path, timeout=60)
                connection.execute(
                    "CREATE TABLE IF NOT EXISTS roots "
                    "(key TEXT PRIMARY KEY, win INTEGER, winning TEXT)"
                )
                connection.execute(
                    "CREATE TABLE IF NOT EXISTS \"values\" (key TEXT PRIMARY KEY, win INTEGER)"
                )
                connection.commit()
                self._connection = connection
            except (OSError, sqlite3.Error):
                self.enabled = False
        return self._connection

    def get_many(self, keys: Sequence[str]) -> dict[str, tuple[bool, int]]:
        connection = self._connect()
        if connection is None or not keys:
            return {}
        out: dict[str, tuple[bool, int]] = {}
        try:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = connection.execute(
                    f"SELECT key, win, winning FROM roots WHERE key IN ({marks})", chunk
                )
                for key, win, winning in rows:
                    out[key] = (bool(win), int(winning, 16))
        except sqlite3.Error:
            self.enabled = False
        return out

    def put_many(self, items: dict[str, tuple[bool, int]]) -> None:
        connection = self._connect()
        if connection is None or not items:
            return
        try:
            with connection:
                connection.executemany(
                    "INSERT OR IGNORE INTO roots (key, win, winning) VALUES (?, ?, ?)",
                    [(key, int(win), f"{winning:x}") for key, (win, winning) in items.items()],
                )
        except sqlite3.Error:
            self.enabled = False

    def get_value(self, key: str) -> bool | None:
        connection = self._connect()
        if connection is None:
            return None
        try:
            row = connection.execute(
                'SELECT win FROM "values" WHERE key = ?', (key,)
            ).fetchone()
        except sqlite3.Error:
            self.enabled = False
            return None
        return None if row is None else bool(row[0])

    def put_value(self, key: str, win: bool) -> None:
        connection = self._connect()
        if connection is None:
            return
        try:
            with connection:
                connection.execute(
                    'INSERT OR IGNORE INTO "values" (key, win) VALUES (?, ?)', (key, int(win))
                )
        except sqlite3.Error:
            self.enabled = False

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def position_key(black: int, white: int, to_move: int) -> str:
    """The cache key of a position: both bitboards in hex and the colour to move."""
    return f"{black:x}/{white:x}/{to_move}"


def bitboards_from_states(states: Any) -> tuple[list[int], list[int], np.ndarray, np.ndarray]:
    """Absolute bitboards of a batch of our (or pgx's) Hex states [B].

    Returns ``(black [B] ints, white [B] ints, to_move int [B] colour 0/1, terminated
    bool [B])``; black is colour 0, the first mover (see ``bitboards``).
    """
    black, white, to_move = bitboards(np.asarray(states._x.board),
                                      np.asarray(states._x.step_count))
    terminated = np.asarray(states.terminated).reshape(-1).astype(bool)
    return black, white, to_move, terminated


def bitboards(board: np.ndarray, step_count: np.ndarray) -> tuple[list[int], list[int], np.ndarray]:
    """``(black [B] ints, white [B] ints, to_move int [B])`` from pgx Hex boards.

    Args:
      board: int [B, C], ``_x.board``: relative to the colour to move, > 0 its stones,
        < 0 the other colour's, 0 empty.
      step_count: int [B], ``_x.step_count``: the colour to move is ``step_count % 2``.
    """
    board = np.asarray(board)
    board = board.reshape(-1, board.shape[-1])
    to_move = (np.asarray(step_count).reshape(-1) % 2).astype(np.int64)
    own, other = board > 0, board < 0
    first = np.where(to_move[:, None] == 0, own, other)
    second = np.where(to_move[:, None] == 0, other, own)
    return _to_ints(first), _to_ints(second), to_move


def _to_ints(cells: np.ndarray) -> list[int]:
    """bool [B, C] -> B Python ints with bit c set where ``cells[b, c]``."""
    packed = np.packbits(cells, axis=-1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


class LateGameJudge:
    """Exact values and winning moves of late Hex positions of one board size.

    Args:
      size: board side n (any size; 3..19 with ``envs.hex``).
      max_empty: E, the most empty cells of a position ``judge_*`` attempts.
      cache: keep solved roots on disk (``RootCache``) as well as in memory.
      cache_dir: the cache folder (default ``late_game_cache_dir()``).
    """

    def __init__(
        self,
        size: int,
        max_empty: int = DEFAULT_MAX_EMPTY,
        *,
        cache: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
    ):
        self.size = int(size)
        self.max_empty = int(max_empty)
        self.search = ProofSearch(self.size)
        self.num_cells = self.size * self.size
        self.num_actions = self.num_cells + 1
        self._roots: dict[str, tuple[bool, int]] = {}
        self._values: dict[str, bool] = {}
        folder = Path(cache_dir) if cache_dir is not None else late_game_cache_dir()
        name = f"late_game_hex{self.size}_v{SOLVER_VERSION}.sqlite"
        self.cache = RootCache(folder / name) if cache else None

    def solve(self, black: int, white: int, to_move: int) -> tuple[bool, int]:
        """(whether ``to_move`` can force a win, bitboard of the moves that keep it), for
        any number of empty cells (cached)."""
        key = position_key(black, white, to_move)
        hit = self._roots.get(key)
        if hit is None:
            hit = self.search.winning_moves(black, white, to_move)
            self._roots[key] = hit
        return hit

    def value(self, black: int, white: int, to_move: int) -> bool:
        """Whether ``to_move`` can force a win, for any number of empty cells (no move
        set: cheaper than ``solve`` on early positions). Cached in memory, and on disk
        for positions with more than ``DISK_VALUE_EMPTY`` empty cells (below that a
        search costs less than a disk write)."""
        key = position_key(black, white, to_move)
        hit = self._values.get(key)
        if hit is None and key in self._roots:
            hit = self._roots[key][0]
        if hit is not None:
            return hit
        bits = self.search.bits
        on_disk = self.cache is not None and (
            bits.num_cells - (black | white).bit_count() > DISK_VALUE_EMPTY
        )
        win = self.cache.get_value(key) if on_disk else None
        if win is None:
            if bits.connected(black, 0) or bits.connected(white, 1):
                win = False
            else:
                win, _ = self.search.search(black, white, to_move)
            if on_disk:
                self.cache.put_value(key, win)
        self._values[key] = win
        return win

    def judge_bitboards(
        self,
        black: Sequence[int],
        white: Sequence[int],
        to_move: Sequence[int],
    ) -> LateGameVerdict:
        """Judges B positions given as bitboards; see ``LateGameVerdict``."""
        full = self.search.bits.full
        count = len(black)
        value = np.zeros(count, np.int8)
        winning = np.zeros((count, self.num_actions), bool)
        solved = np.zeros(count, bool)
        num_empty = np.array(
            [bin(full & ~(b | w)).count("1") for b, w in zip(black, white, strict=True)],
            dtype=np.int32,
        ).reshape(count)
        keys = [position_key(b, w, int(t)) for b, w, t in zip(black, white, to_move, strict=True)]
        wanted = [i for i in range(count) if num_empty[i] <= self.max_empty]
        missing = [keys[i] for i in wanted if keys[i] not in self._roots]
        if self.cache is not None and missing:
            self._roots.update(self.cache.get_many(sorted(set(missing))))
        fresh: dict[str, tuple[bool, int]] = {}
        for i in wanted:
            if keys[i] not in self._roots:
                fresh[keys[i]] = self.solve(black[i], white[i], int(to_move[i]))
            win, moves = self._roots[keys[i]]
            solved[i] = True
            value[i] = 1 if win else -1
            for cell in _bits(moves):
                winning[i, cell] = True
        if self.cache is not None and fresh:
            self.cache.put_many(fresh)
        return LateGameVerdict(value=value, winning=winning, solved=solved, num_empty=num_empty)

    def judge_states(self, states: Any) -> LateGameVerdict:
        """Judges a batch of Hex states [B] of this size (see ``bitboards_from_states``)."""
        black, white, to_move, _ = bitboards_from_states(states)
        if states._x.board.shape[-1] != self.num_cells:
            raise ValueError(
                f"late-game judge for {self.size}x{self.size}: states have "
                f"{states._x.board.shape[-1]} cells"
            )
        return self.judge_bitboards(black, white, to_move)

    def winning_move(
        self, black: int, white: int, to_move: int, preferred: Sequence[int] = ()
    ) -> int | None:
        """One move that keeps ``to_move``'s forced win, or None when there is none.

        Tries the ``preferred`` cells first (e.g. a network's choice), then the others
        in the search's move order, each by its child's value (``value``: cached in
        memory and on disk), so that early positions cost one proof rather than the
        full set of winning moves. Any number of empty cells."""
        bits = self.search.bits
        empty = bits.full & ~(black | white)
        me = black if to_move == 0 else white
        order = [int(c) for c in preferred if 0 <= int(c) < self.num_cells
                 and (empty >> int(c)) & 1]
        if order and self._move_wins(black, white, to_move, me, order[0]):
            return order[0]
        if not self.value(black, white, to_move):
            return None
        opp = white if to_move == 0 else black
        rest = self.search._order(me, opp, empty, to_move, empty)
        for cell in dict.fromkeys(order[1:] + rest):
            if self._move_wins(black, white, to_move, me, cell):
                return cell
        raise AssertionError("a won position without a winning move")  # pragma: no cover

    def _move_wins(self, black: int, white: int, to_move: int, me: int, cell: int) -> bool:
        bit = 1 << cell
        if self.search.bits.connected(me | bit, to_move):
            return True
        if to_move == 0:
            return not self.value(black | bit, white, 1)
        return not self.value(black, white | bit, 0)

    def close(self) -> None:
        """Closes the disk cache (the judge stays usable; it reopens on demand)."""
        if self.cache is not None:
            self.cache.close()


def winning_positions(judge: LateGameJudge, states: Any, live: Any) -> tuple[Any, LateGameVerdict]:
    """The distinct ``live`` states (bool [B]) of a batch [B] where the side to move can
    force a win, in batch order: ``(State [K], LateGameVerdict [K])``. Positions with more
    than ``judge.max_empty`` empty cells are not judged and so never kept."""
    import jax

    black, white, to_move, _ = bitboards_from_states(states)
    seen: set[tuple[int, int, int]] = set()
    keep = []
    for i in np.nonzero(np.asarray(live))[0]:
        position = (black[i], white[i], int(to_move[i]))
        if position not in seen:
            seen.add(position)
            keep.append(int(i))
    verdict = judge.judge_bitboards(
        [black[i] for i in keep], [white[i] for i in keep], [int(to_move[i]) for i in keep]
    )
    won = np.array(keep, np.int64)[verdict.won]
    return jax.tree.map(lambda x: x[won], states), verdict.subset(verdict.won)
