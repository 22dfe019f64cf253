"""Hex on an n x n board (3 <= n <= 19), with or without the swap move, as a pgx ``Env``.

pgx 2.6.0's own ``pgx.hex.Hex(size=n)`` crashes for n != 11 because its state hard-codes
121 cells. Its game logic (``pgx._src.games.hex.Game``) does take ``size``, so this module
reuses it and only builds the state with the right shapes, plus two fixes for play
without the swap move:

- the swap action (``n * n``) is masked illegal at every ply, and
- the observation's "swap is legal" plane stays zero (pgx sets it at ply 1 regardless).

Geometry is pgx's: cell = row * size + col; the first mover (pgx ``_x.color == 0``,
HTP ``black``) joins row 0 to row size-1, the second joins column 0 to column size-1.
With ``size=11, swap=True`` the environment matches ``pgx.make("hex")`` step for step.

State layout (same fields as ``pgx.hex.State``; C = size * size cells, A = C + 1 actions):
    current_player     int32 []          player id (0/1) to move
    observation        bool  [n, n, 4]   own stones, opponent stones, colour plane, can-swap plane
    rewards            float32 [2]       per player id, nonzero only on the terminating step
    terminated         bool  []
    truncated          bool  []
    legal_action_mask  bool  [A]         the last entry is the swap move
    _step_count        int32 []
    _player_order      int32 [2]         player id of colour 0 and colour 1
    _x                 pgx GameState     step_count [], board int32 [C] (>0 mover's groups,
                                         <0 opponent's, 0 empty), terminated []
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pgx.core as core
from pgx._src.games.hex import Game, GameState
from pgx._src.games.hex import _step as _place_stone
from pgx._src.struct import dataclass

Array = jax.Array

MIN_SIZE = 3
MAX_SIZE = 19

FALSE = jnp.bool_(False)
TRUE = jnp.bool_(True)


@dataclass
class State(core.State):
    """Hex state with pgx's fields; shapes depend on the board size (see the module doc)."""

    current_player: Array
    observation: Array
    rewards: Array
    terminated: Array
    truncated: Array
    legal_action_mask: Array
    _step_count: Array
    _player_order: Array
    _x: GameState

    @property
    def env_id(self) -> core.EnvId:
        return "hex"


def validate_size(size: object) -> int:
    """Returns ``size`` as an int, or raises ValueError naming the argument and the range."""
    if isinstance(size, bool) or not isinstance(size, int):
        raise ValueError(f"hex: size must be an int in [{MIN_SIZE}, {MAX_SIZE}], got {size!r}")
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(
            f"hex: size={size} is out of range; allowed {MIN_SIZE} <= size <= {MAX_SIZE}"
        )
    return size


class Hex(core.Env):
    """Hex of any size in [3, 19], with the swap move optional.

    Args:
      size: board side n; the board has n * n cells and the env n * n + 1 actions.
      swap: whether the second player may swap at ply 1 (action n * n). When False the
        swap action is never legal and the observation's swap plane is always zero.

    Instances compare equal (and hash equal) when size and swap agree, so passing the env
    as a static argument to ``jax.jit`` does not recompile per instance.
    """

    def __init__(self, *, size: int = 11, swap: bool = True):
        super().__init__()
        self.size = validate_size(size)
        if not isinstance(swap, bool):
            raise ValueError(f"hex: swap must be a bool (True or False), got {swap!r}")
        self.swap = swap
        self._game = Game(size=self.size)

    # --- identity: static, hashable ---------------------------------------------------
    def _key(self) -> tuple[str, int, bool]:
        return ("hex", self.size, self.swap)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hex) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Hex(size={self.size}, swap={self.swap})"

    # --- pgx Env API ------------------------------------------------------------------
    @property
    def num_cells(self) -> int:
        return self.size * self.size

    @property
    def swap_action(self) -> int:
        """The swap move's action id (n * n); always illegal when ``swap=False``."""
        return self.num_cells

    def _legal_action_mask(self, x: GameState) -> Array:
        """bool [A]: empty cells, plus the swap move at ply 1 when swap is enabled."""
        can_swap = (x.step_count == 1) & self.swap
        return jnp.append(x.board == 0, can_swap)

    def _init(self, key: Array) -> State:
        player_order = jnp.array([[0, 1], [1, 0]])[jax.random.bernoulli(key).astype(jnp.int32)]
        x = GameState(
            step_count=jnp.int32(0),
            board=jnp.zeros(self.num_cells, jnp.int32),
            terminated=FALSE,
        )
        n = self.size
        return State(
            current_player=player_order[x.color],
            observation=jnp.zeros((n, n, 4), jnp.bool_),
            rewards=jnp.zeros(2, jnp.float32),
            terminated=FALSE,
            truncated=FALSE,
            legal_action_mask=self._legal_action_mask(x),
            _step_count=jnp.int32(0),
            _player_order=player_order,
            _x=x,
        )

    def _game_step(self, x: GameState, action: Array) -> GameState:
        if self.swap:
            return self._game.step(x, action)
        # Without swap, action n*n can only arrive as an illegal move (the base class then
        # ends the game with a penalty); make it a pass so the board stays meaningful.
        placed = _place_stone(x, jnp.minimum(action, self.num_cells - 1), self.size)
        passed = x._replace(step_count=x.step_count + 1, board=-x.board)
        return jax.tree.map(lambda p, q: jnp.where(action == self.num_cells, q, p), placed, passed)

    def _step(self, state: core.State, action: Array, key: Array | None) -> State:
        del key
        assert isinstance(state, State)
        x = self._game_step(state._x, action)
        return state.replace(  # type: ignore[attr-defined]
            current_player=state._player_order[x.color],
            legal_action_mask=self._legal_action_mask(x),
            terminated=self._game.is_terminal(x),
            rewards=self._game.rewards(x)[state._player_order],
            _x=x,
        )

    def _observe(self, state: core.State, player_id: Array) -> Array:
        """bool [n, n, 4] from ``player_id``'s view: own, opponent, colour, can-swap."""
        assert isinstance(state, State)
        color = jax.lax.select(
            player_id == state.current_player, state._x.color, 1 - state._x.color
        )
        obs = self._game.observe(state._x, color)
        if not self.swap:
            obs = obs.at[..., 3].set(False)
        return obs

    @property
    def id(self) -> core.EnvId:
        return "hex"

    @property
    def version(self) -> str:
        return "v0"

    @property
    def num_players(self) -> int:
        return 2

    @property
    def num_actions(self) -> int:
        return self.num_cells + 1

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return (self.size, self.size, 4)


def action_to_cell(action: int, size: int) -> str:
    """HTP cell name of a pgx Hex action: ``r * size + c`` -> ``chr(ord('a') + c) + str(r + 1)``.

    The swap action (``size * size``) is named ``"swap"``.
    """
    action = int(action)
    if action == size * size:
        return "swap"
    if not 0 <= action < size * size:
        raise ValueError(f"action={action} is out of range; allowed 0 <= action <= {size * size}")
    row, col = divmod(action, size)
    return f"{chr(ord('a') + col)}{row + 1}"


def cell_to_action(cell: str, size: int) -> int:
    """Inverse of ``action_to_cell``: ``"c2"`` -> ``1 * size + 2``, ``"swap"`` -> ``size**2``."""
    name = cell.strip().lower()
    if name == "swap":
        return size * size
    col = ord(name[0]) - ord("a") if name else -1
    try:
        row = int(name[1:]) - 1
    except ValueError:
        row = -1
    if not (0 <= col < size and 0 <= row < size):
        raise ValueError(f"cell={cell!r} is not on a {size}x{size} board")
    return row * size + col
