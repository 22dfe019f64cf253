"""The late-game optimal-move rate of evaluation: fixed winning positions, exactly judged.

``build_late_game_set`` draws positions with exactly E empty cells (default
``envs.late_game.DEFAULT_MAX_EMPTY``) from two sources,

- ``random``: ``games`` games of uniformly random play, and
- ``reference``: ``games`` games of the evaluation's reference against itself after 4
  uniformly random opening moves (a ``JaxPlayer``; skipped for host players),

keeps the distinct ones where the side to move can force a win (the exact judge,
``envs.late_game``), and records every winning move. ``LateGameSet.rate`` is then the
share of those positions where a player's move keeps the win. The set depends only on
the key, the board and the reference, so every checkpoint and run of a sweep is measured
on the same positions, solved once (and cached on disk by the judge).

``play_out`` plays positions to the end between two players (used to check that a
player converts every won position).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search.eval.players import ApplyFn, JaxPlayer

Array = jax.Array
REFERENCE_OPENING_MOVES = 4


@dataclasses.dataclass(frozen=True, eq=False)
class LateGameSet:
    """Winning late-game positions with their winning moves.

    Attributes:
      positions: env states [P], the side to move can force a win in each.
      winning: bool [P, A]: the moves that keep the win.
      source: int [P]: 0 random play, 1 reference self-play.
      empty: E, the empty cells of every position.
      reference: the name of the reference whose games were used ("" for none).
    """

    positions: Any
    winning: np.ndarray
    source: np.ndarray
    empty: int
    reference: str

    @property
    def size(self) -> int:
        """P, the number of positions."""
        return int(self.winning.shape[0])

    def counts(self) -> dict[str, int]:
        """Positions per source: ``{"random": R, "reference": S}``."""
        return {"random": int((self.source == 0).sum()), "reference": int((self.source == 1).sum())}

    def describe_source(self) -> str:
        """E.g. ``random play + self-play of reference:hex5@64``."""
        if self.reference and (self.source == 1).any():
            return f"random play + self-play of {self.reference}"
        return "random play"

    def keeps_win(self, actions: np.ndarray) -> np.ndarray:
        """bool [P]: whether each action (int [P]) keeps the win."""
        actions = np.clip(np.asarray(actions, np.int64), 0, self.winning.shape[1] - 1)
        return self.winning[np.arange(self.size), actions]

    def rate(self, apply: ApplyFn, params: Any, key: Array) -> float:
        """The share of positions where ``apply(params, key, positions)``'s move keeps
        the win; NaN for an empty set."""
        if self.size == 0:
            return float("nan")
        return float(self.keeps_win(np.asarray(apply(params, key, self.positions))).mean())


def build_late_game_set(
    key: Array,
    env: Any,
    *,
    reference: Any = None,
    games: int = 512,
    empty: int | None = None,
    judge: Any = None,
) -> LateGameSet:
    """Draws, judges and keeps the winning late positions (see the module docstring).

    Args:
      key: PRNG key (the set is a function of it).
      env: a Hex env without the swap move.
      reference: a ``JaxPlayer`` whose self-play games give the second source, or None.
      games: games per source.
      empty: E (default: the judge's ``max_empty``).
      judge: an ``envs.late_game.LateGameJudge`` for the board (default: a new one).
    """
    from curiosity_search.envs.late_game import LateGameJudge, winning_positions
    from curiosity_search.envs.late_positions import (
        late_positions_from_play,
        random_late_positions,
    )

    size = int(round((env.num_actions - 1) ** 0.5))
    if judge is None:
        judge = LateGameJudge(size) if empty is None else LateGameJudge(size, max_empty=empty)
    empty = judge.max_empty if empty is None else int(empty)
    sample = jax.jit(random_late_positions, static_argnums=(0, 2, 3))
    states, live = sample(env, jax.random.fold_in(key, 0), games, empty)
    parts = [winning_positions(judge, states, live)]
    name = ""
    if isinstance(reference, JaxPlayer):
        name = reference.name
        states, live = late_positions_from_play(
            jax.random.fold_in(key, 1), reference.apply, reference.params, reference.apply,
            reference.params, env, games, empty, opening_moves=REFERENCE_OPENING_MOVES,
        )
        parts.append(winning_positions(judge, states, live))
    positions = jax.tree.map(lambda *xs: jnp.concatenate(xs), *[p[0] for p in parts])
    winning = np.concatenate([p[1].winning for p in parts])
    source = np.concatenate(
        [np.full(p[1].winning.shape[0], i, np.int32) for i, p in enumerate(parts)]
    )
    return LateGameSet(positions=positions, winning=winning, source=source, empty=empty,
                       reference=name)


@functools.lru_cache(maxsize=8)
def _play_out_fn(apply_a: ApplyFn, apply_b: ApplyFn, env: Any, max_moves: int) -> Any:
    step = jax.vmap(env.step)

    def play(key: Array, params_a: Any, params_b: Any, states: Any) -> Array:
        rows = jnp.arange(states.current_player.shape[0])
        a_id = states.current_player  # A is the side to move in every position
        returns_a = jnp.zeros(rows.shape[0], jnp.float32)

        def cond(carry: tuple) -> Array:
            states, _, _, moves = carry
            return jnp.any(~states.terminated) & (moves < max_moves)

        def body(carry: tuple) -> tuple:
            states, returns_a, key, moves = carry
            key, key_a, key_b = jax.random.split(key, 3)
            action = jnp.where(states.current_player == a_id,
                               apply_a(params_a, key_a, states), apply_b(params_b, key_b, states))
            states = step(states, action)
            return states, returns_a + states.rewards[rows, a_id], key, moves + 1

        _, returns_a, _, _ = jax.lax.while_loop(
            cond, body, (states, returns_a, key, jnp.int32(0))
        )
        return returns_a

    return jax.jit(play)


def play_out(key: Array, mover: JaxPlayer, other: JaxPlayer, env: Any, states: Any) -> np.ndarray:
    """Plays every position [P] to the end, ``mover`` moving first (it is the side to move
    in each), ``other`` replying; returns ``mover``'s outcome, float [P] in {-1, 0, 1}
    (0: not finished within ``env.num_actions`` moves)."""
    play = _play_out_fn(mover.apply, other.apply, env, int(env.num_actions))
    return np.asarray(play(key, mover.params, other.params, states))
