"""Matches played one game at a time on the host, for HTP programs (``htp:`` players).

The schedule matches ``arena.play_match``: the first half of the games player A moves
first, game i and game i + G/2 share the same random opening. A JAX player is called on
a batch of one state; an ``HtpPlayer`` is told every move with ``play`` and asked for
its own with ``genmove``. A program that resigns, errors or answers an illegal move
loses that game (counted in ``illegal_a`` / ``illegal_b``).
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np

from curiosity_search.eval.match_result import MatchResult, summarize
from curiosity_search.eval.players import JaxPlayer
from curiosity_search.htp.client import HtpError, HtpPlayer
from curiosity_search.htp.coords import BLACK, WHITE


class _HostSide:
    """Adapts a JaxPlayer or an HtpPlayer to ``reset / observe / choose`` on one game."""

    def __init__(self, player: Any):
        self.player = player
        self.is_htp = isinstance(player, HtpPlayer)
        if not self.is_htp and not isinstance(player, JaxPlayer):
            raise TypeError(f"expected a JaxPlayer or HtpPlayer, got {type(player).__name__}")
        self._act = None if self.is_htp else jax.jit(player.act)

    def reset(self) -> None:
        if self.is_htp:
            self.player.new_game()

    def observe(self, colour: str, action: int) -> None:
        if self.is_htp:
            self.player.play(colour, action)

    def choose(self, key: jax.Array, state: Any, colour: str) -> int | None:
        if self.is_htp:
            return self.player.genmove(colour)
        batch = jax.tree.map(lambda x: x[None], state)
        return int(self._act(key, batch)[0])


def play_host_match(
    key: jax.Array,
    player_a: Any,
    player_b: Any,
    env: Any,
    num_games: int,
    *,
    opening_moves: int = 0,
    max_moves: int | None = None,
) -> MatchResult:
    """Plays ``num_games`` games sequentially; same meaning of arguments as ``play_match``.

    HTP colours: the pgx first mover is ``black``; colours alternate every move, so
    games with a swap move are not supported here.
    """
    if num_games < 1:
        raise ValueError(f"num_games={num_games}; allowed: >= 1")
    for player in (player_a, player_b):
        if isinstance(player, HtpPlayer) and player.swap:
            raise ValueError(f"{player.name}: host matches do not support the swap rule")
    max_moves = int(max_moves or 4 * env.num_actions + 16)
    side_a, side_b = _HostSide(player_a), _HostSide(player_b)
    init, step = jax.jit(env.init), jax.jit(env.step)
    pairs = (num_games + 1) // 2
    init_key, opening_key, play_key = jax.random.split(key, 3)
    init_keys = jax.random.split(init_key, pairs)
    opening_seeds = np.asarray(jax.random.randint(opening_key, (pairs,), 0, 2**31 - 1))
    returns_a = np.zeros(num_games)
    a_first = np.arange(num_games) < pairs
    illegal = {"a": 0, "b": 0}
    truncated = 0
    start = time.perf_counter()
    for game in range(num_games):
        pair = game % pairs
        state = init(init_keys[pair])
        a_id = int(state.current_player) if a_first[game] else 1 - int(state.current_player)
        for side in (side_a, side_b):
            side.reset()
        rng = np.random.default_rng(int(opening_seeds[pair]))
        ply, outcome, moves = 0, 0.0, 0
        while not bool(state.terminated) and moves < max_moves:
            a_moves = int(state.current_player) == a_id
            mover, other = (side_a, side_b) if a_moves else (side_b, side_a)
            colour = BLACK if ply % 2 == 0 else WHITE
            legal = np.asarray(state.legal_action_mask)
            if ply < opening_moves:
                action: int | None = int(rng.choice(np.flatnonzero(legal)))
                mover.observe(colour, action)
            else:
                play_key, move_key = jax.random.split(play_key)
                try:
                    action = mover.choose(move_key, state, colour)
                except HtpError:
                    action = None
                if action is not None and not (0 <= action < legal.size and legal[action]):
                    action = None
                if action is None:  # resignation, error or illegal move: the mover loses
                    illegal["a" if a_moves else "b"] += 1
                    outcome = -1.0 if a_moves else 1.0
                    break
                moves += 1
            other.observe(colour, action)
            state = step(state, action)
            outcome += float(state.rewards[a_id])
            ply += 1
        else:
            truncated += int(not bool(state.terminated))
        returns_a[game] = outcome
    return summarize(
        getattr(player_a, "name", "a"),
        getattr(player_b, "name", "b"),
        returns_a,
        a_first,
        illegal_a=illegal["a"],
        illegal_b=illegal["b"],
        truncated=truncated,
        opening_moves=opening_moves,
        seconds=time.perf_counter() - start,
    )
