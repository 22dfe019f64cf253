"""A player that plays exactly in the late game: a base player, overridden by the judge.

``late_game_player(base, size, max_empty, book=...)`` wraps any ``JaxPlayer`` (a network
with its search, say). On every position with at most ``max_empty`` empty cells where
the side to move can force a win, it plays a winning move: the base player's own move
when that keeps the win (one child proof), else the first winning move the exact judge
finds (``envs.late_game``). An opening ``book`` (position key -> move, -1 for a lost
position) answers the earlier positions it holds. Elsewhere, lost positions included,
the base player's move stands. The judge runs on the host through
``jax.pure_callback``, so the wrapped player stays a jittable ``JaxPlayer`` that the
arena's compiled loop can call.

The frozen 5x5 reference plays this way (``eval.references``: ``late_game_empty`` and
``book.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search.envs.late_game import LateGameJudge, bitboards, position_key
from curiosity_search.eval.players import JaxPlayer

Array = jax.Array


class LateGameOverride:
    """The host side: ``__call__(board [B, C], step_count [B], terminated [B],
    proposed [B]) -> actions [B]`` int32 (numpy in, numpy out).

    ``calls`` / ``overridden`` / ``book_hits`` count the positions judged, the moves
    replaced and the positions answered by the book."""

    def __init__(self, size: int, max_empty: int, book: Mapping[str, int] | None = None):
        self.judge = LateGameJudge(size, max_empty)
        self.max_empty = int(max_empty)
        self.book = dict(book or {})
        self.book_empty = min(
            (size * size - _stones(key) for key in self.book), default=size * size + 1
        )
        self.calls = 0
        self.overridden = 0
        self.book_hits = 0

    def __call__(self, board: np.ndarray, step_count: np.ndarray, terminated: np.ndarray,
                 proposed: np.ndarray) -> np.ndarray:
        board = np.asarray(board)
        actions = np.asarray(proposed).astype(np.int32).copy()
        empties = (board == 0).sum(axis=-1)
        live = ~np.asarray(terminated, bool)
        todo = np.nonzero(((empties <= self.max_empty) | (empties >= self.book_empty)) & live)[0]
        if todo.size == 0:
            return actions
        black, white, to_move = bitboards(board[todo], np.asarray(step_count)[todo])
        for row, index in enumerate(todo):
            if empties[index] > self.max_empty:
                move = self.book.get(position_key(black[row], white[row], int(to_move[row])))
                if move is not None:
                    self.book_hits += 1
                    if move >= 0 and move != actions[index]:
                        actions[index] = move
                        self.overridden += 1
                continue
            self.calls += 1
            move = self.judge.winning_move(
                black[row], white[row], int(to_move[row]), preferred=(int(actions[index]),)
            )
            if move is not None and move != actions[index]:
                actions[index] = move
                self.overridden += 1
        return actions


def _stones(key: str) -> int:
    """Stones of a position from its ``envs.late_game.position_key``."""
    black, white, _ = key.split("/")
    return int(black, 16).bit_count() + int(white, 16).bit_count()


def late_game_player(
    base: JaxPlayer,
    size: int,
    max_empty: int,
    *,
    book: Mapping[str, int] | None = None,
    name: str | None = None,
) -> JaxPlayer:
    """``base`` with the exact judge's winning move from ``max_empty`` empty cells on.

    Args:
      base: any ``JaxPlayer`` of ``size`` x ``size`` Hex without the swap move.
      size: the board side.
      max_empty: E_ref: positions with at most this many empty cells are judged.
      book: ``envs.late_game.position_key`` -> move (-1: lost, keep ``base``'s move)
        for earlier positions.
      name: the player's name (default ``<base>+late_game<E>``).

    Returns:
      a ``JaxPlayer`` with ``base``'s params; its ``apply`` carries the host override
      as ``apply.override`` (a ``LateGameOverride``, for its counters).
    """
    override = LateGameOverride(size, max_empty, book)

    def apply(params: Any, key: Array, states: Any) -> Array:
        proposed = base.apply(params, key, states).astype(jnp.int32)
        return jax.pure_callback(
            override,
            jax.ShapeDtypeStruct(proposed.shape, jnp.int32),
            states._x.board,
            states._x.step_count,
            states.terminated,
            proposed,
            vmap_method="sequential",
        )

    apply.override = override  # type: ignore[attr-defined]
    return JaxPlayer(name or f"{base.name}+late_game{max_empty}", apply, base.params)
