"""Exact solutions of tiny games: Hex up to 4x4 without swap, and tic-tac-toe.

    solution = solve("hex", size=4)             # or solve("tic_tac_toe")
    value = solution.state_value(states)        # int32 [B], for the player to move
    mask = solution.optimal_action_mask(states) # bool [B, A]

The table (``solution.values``, int8 [3**C], see ``envs.retrograde``) is computed once by
retrograde analysis (4x4 Hex: ~10 s on 2 CPU cores) and cached on disk under
``$CURIOSITY_SEARCH_SOLVER_CACHE`` or ``~/.cache/curiosity_search/solvers/``.

``Solution`` is a pytree whose only leaf is the device copy of the table, so the lookup
methods work inside ``jax.jit``. For 4x4 Hex (43 MB) pass the solution as an *argument*
of the jitted function (``jax.jit(f)(solution, states)``): closing over it embeds the
table as a constant in every compiled program (slow to compile, bloats the compilation
cache). Tables for 3x3 boards (19,683 entries) are harmless either way.

Board encoding from pgx states (digit 1 = first mover's stone, 2 = second mover's):
- Hex (ours or pgx's): ``_x.board`` is relative to the colour to move
  (``_x.step_count % 2``): > 0 that colour's stones, < 0 the other's.
- tic-tac-toe: ``_x.board`` is absolute: -1 empty, 0 X (first mover), 1 O.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pgx

from curiosity_search.atomic_io import atomic_path
from curiosity_search.envs import retrograde
from curiosity_search.envs.hex import Hex

Array = jax.Array

SOLVER_VERSION = 1  # bump when the table layout or the rules change
MAX_HEX_SIZE = 4
ILLEGAL = -2  # action value of an illegal move, below every game value


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["table"],
    meta_fields=["name", "size", "num_cells", "num_actions"],
)
@dataclasses.dataclass(frozen=True, eq=False)
class Solution:
    """The exact solution of a tiny game.

    Attributes:
      name: "hex" or "tic_tac_toe".
      size: board side (3 or 4 for Hex, 3 for tic-tac-toe).
      num_cells: C = size * size.
      num_actions: A, as the env's (Hex: C + 1, the swap move never legal; tic-tac-toe: 9).
      table: int8 [3**C] on device: value for the player to move of every position code.

    Methods take pgx states of ``self.env()`` (or pgx's own env of that game) with any
    leading batch shape, written [B] below.
    """

    name: str
    size: int
    num_cells: int
    num_actions: int
    table: Array

    @property
    def values(self) -> np.ndarray:
        """int8 [3**C]: value for the player to move (+1 win, 0 draw, -1 loss), per code."""
        return np.asarray(self.table)

    def env(self) -> pgx.Env:
        """The environment this solves: ``Hex(size, swap=False)`` or pgx's tic-tac-toe."""
        if self.name == "hex":
            return Hex(size=self.size, swap=False)
        return pgx.make("tic_tac_toe")

    # --- encoding ---------------------------------------------------------------------
    def _digits(self, state: pgx.State) -> tuple[Array, Array]:
        """(int32 [B, C] absolute digits 0/1/2, int32 [B] colour to move 0/1)."""
        board = state._x.board
        if board.shape[-1] != self.num_cells:
            raise ValueError(
                f"{self.name}: states have {board.shape[-1]} cells, solution has {self.num_cells}"
            )
        if self.name == "hex":
            colour = state._x.step_count % 2
            own = board > 0
            other = board < 0
            to_move_first = (colour == 0)[..., None]
            first = jnp.where(to_move_first, own, other)
            second = jnp.where(to_move_first, other, own)
            digits = first.astype(jnp.int32) + 2 * second.astype(jnp.int32)
        else:
            colour = state._x.color
            digits = board.astype(jnp.int32) + 1
        return digits, colour.astype(jnp.int32)

    def _pow3(self) -> Array:
        return jnp.asarray(3 ** np.arange(self.num_cells), jnp.int32)

    def position_code(self, state: pgx.State) -> Array:
        """int32 [B]: base-3 code of the board (index into ``values``)."""
        digits, _ = self._digits(state)
        return (digits * self._pow3()).sum(axis=-1)

    # --- lookups ----------------------------------------------------------------------
    def state_value(self, state: pgx.State) -> Array:
        """int32 [B]: game-theoretic value for the player to move (+1 / 0 / -1).

        Terminal states get the table's value (a lost Hex position is -1)."""
        return self.table[self.position_code(state)].astype(jnp.int32)

    def action_values(self, state: pgx.State) -> Array:
        """int32 [B, A]: value for the player to move after each action (+1 / 0 / -1);
        ``ILLEGAL`` (-2) for occupied cells, the swap move, and every action of a
        terminated state."""
        digits, colour = self._digits(state)
        pow3 = self._pow3()
        code = (digits * pow3).sum(axis=-1)
        empty = (digits == 0) & ~state.terminated[..., None]
        child = code[..., None] + (colour[..., None] + 1) * pow3
        child_value = self.table[jnp.where(empty, child, 0)].astype(jnp.int32)
        values = jnp.where(empty, -child_value, ILLEGAL)
        padding = self.num_actions - self.num_cells  # Hex: the swap move
        pad = jnp.full((*values.shape[:-1], padding), ILLEGAL, jnp.int32)
        return jnp.concatenate([values, pad], axis=-1)

    def optimal_action_mask(self, state: pgx.State) -> Array:
        """bool [B, A]: legal moves that keep the best achievable value (all False at
        terminal states)."""
        values = self.action_values(state)
        best = values.max(axis=-1, keepdims=True)
        return (values == best) & (values != ILLEGAL)

    def winning_action_mask(self, state: pgx.State) -> Array:
        """bool [B, A]: moves that keep a forced win (all False where there is none)."""
        return self.action_values(state) == 1

    def optimal_move_rate(self, state: pgx.State, action: Array) -> Array:
        """float32 []: over the non-terminal states [B] where the player to move can force
        a win, the share of ``action`` (int [B]) that keeps the forced win. States that are
        drawn or lost are left out (any move keeps a loss; in draw games such as
        tic-tac-toe see ``optimal_action_rate``). NaN when no state has a forced win."""
        winning = (self.state_value(state) == 1) & ~state.terminated
        keeps = _take(self.winning_action_mask(state), action)
        return (keeps & winning).sum() / winning.sum()

    def optimal_action_rate(self, state: pgx.State, action: Array) -> Array:
        """float32 []: over the non-terminal states [B], the share of ``action`` (int [B])
        that keeps the game-theoretic value. NaN when every state is terminal."""
        live = ~state.terminated
        keeps = _take(self.optimal_action_mask(state), action)
        return (keeps & live).sum() / live.sum()


def _take(mask: Array, action: Array) -> Array:
    """bool [B]: ``mask[..., action]`` per state (mask [B, A], action int [B])."""
    return jnp.take_along_axis(mask, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def solver_cache_dir() -> Path:
    """``$CURIOSITY_SEARCH_SOLVER_CACHE`` or ``~/.cache/curiosity_search/solvers``."""
    path = os.environ.get("CURIOSITY_SEARCH_SOLVER_CACHE")
    if path:
        return Path(path).expanduser()
    return Path.home() / ".cache" / "curiosity_search" / "solvers"


def _game(name: str, kwargs: dict) -> tuple[int, retrograde.WinCheck, int]:
    """(size, win check, num_actions) for a supported game; ValueError otherwise."""
    if name == "tic_tac_toe":
        if kwargs:
            raise ValueError(f"tic_tac_toe: solve takes no keyword arguments, got {sorted(kwargs)}")
        return 3, retrograde.tic_tac_toe_win_check, 9
    if name == "hex":
        unknown = sorted(set(kwargs) - {"size", "swap"})
        if unknown:
            raise ValueError(f"hex: unknown keyword argument(s) {unknown}; allowed: size, swap")
        if "size" not in kwargs:
            raise ValueError(f"hex: solve needs size, one of 3..{MAX_HEX_SIZE}")
        size, swap = kwargs["size"], kwargs.get("swap", False)
        if isinstance(size, bool) or not isinstance(size, int) or not 3 <= size <= MAX_HEX_SIZE:
            raise ValueError(
                f"hex: size={size!r} cannot be solved exactly; allowed 3 <= size <= {MAX_HEX_SIZE}"
            )
        if swap is not False:
            raise ValueError(f"hex: swap={swap!r}; only swap=False can be solved")
        return size, retrograde.hex_win_check(size), size * size + 1
    raise ValueError(
        f"solve: no exact solver for {name!r}; available: 'hex' (size<=4), 'tic_tac_toe'"
    )


def _load_or_solve(name: str, size: int, cache_dir: Path) -> np.ndarray:
    _, has_won, _ = _game(name, {"size": size} if name == "hex" else {})
    num_cells = size * size
    path = cache_dir / f"{name}_{size}x{size}_v{SOLVER_VERSION}.npy"
    if path.exists():
        try:
            values = np.load(path)
            if values.shape == (3**num_cells,) and values.dtype == np.int8:
                return values
        except (OSError, ValueError, EOFError):
            pass  # unreadable: solve again and overwrite
    values = retrograde.solve_table(num_cells, has_won)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, tmp.open("wb") as file:  # readers never see half a file
            np.save(file, values)
    except OSError:
        pass  # a read-only cache only costs a re-solve next time
    return values


def solve(name: str, **kwargs: object) -> Solution:
    """Exact solution of ``name``: ``"hex"`` with ``size`` 3 or 4 (``swap`` must be False,
    the default) or ``"tic_tac_toe"``; anything else raises ValueError.

    Loads the cached table when present, otherwise solves (4x4 Hex ~10 s) and caches it.
    Repeated calls in one process return the same ``Solution``."""
    size, _, _ = _game(name, dict(kwargs))
    return _solution(name, size, solver_cache_dir())


@functools.cache
def _solution(name: str, size: int, cache_dir: Path) -> Solution:
    _, _, num_actions = _game(name, {"size": size} if name == "hex" else {})
    values = _load_or_solve(name, size, cache_dir)
    return Solution(
        name=name,
        size=size,
        num_cells=size * size,
        num_actions=num_actions,
        table=jnp.asarray(values),
    )


__all__ = ["ILLEGAL", "Solution", "solve", "solver_cache_dir"]
