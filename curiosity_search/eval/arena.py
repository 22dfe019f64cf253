"""Matches between two players over both colours, with Wilson intervals, into CSV tables.

``play_match`` plays N games of two ``JaxPlayer``s in one jitted ``lax.while_loop``:
the first half of the games player A moves first, the second half player B does, and
game i of one half starts from the same (optionally randomized) opening as game i of
the other half, so that colour and opening luck cancel. ``play_host_match`` plays the
same schedule one game at a time on the host, for HTP programs. ``run_match`` picks.
"""

from __future__ import annotations

import csv
import functools
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search.eval.players import ApplyFn, JaxPlayer

Array = jax.Array


def wilson_interval(successes: float, trials: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% for z = 1.96).

    ``successes`` may be fractional (a draw counts one half), which treats the score as
    a proportion; with no trials the interval is (0, 1).
    """
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class MatchResult:
    """Outcome of a match, from player A's side.

    ``score`` = (wins + draws / 2) / games, with its Wilson interval [ci_low, ci_high].
    ``score_first`` / ``score_second``: A's score in the games where A moved first /
    second. ``illegal_a`` / ``illegal_b``: games lost by an illegal move (or an HTP
    resignation); ``truncated``: games cut at the move limit (scored as draws).
    """

    player_a: str
    player_b: str
    games: int
    wins: int
    draws: int
    losses: int
    score: float
    ci_low: float
    ci_high: float
    score_first: float
    score_second: float
    illegal_a: int
    illegal_b: int
    truncated: int
    opening_moves: int
    seconds: float

    def to_row(self) -> dict[str, Any]:
        """The result as a flat dict (one CSV row)."""
        return asdict(self)

    def summary(self) -> str:
        """One human-readable line."""
        return (
            f"{self.player_a} vs {self.player_b}: {self.wins}W {self.draws}D {self.losses}L "
            f"of {self.games}, score {self.score:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}] "
            f"(first {self.score_first:.3f}, second {self.score_second:.3f}) "
            f"in {self.seconds:.1f} s"
        )


def summarize(
    player_a: str,
    player_b: str,
    returns_a: np.ndarray,
    a_first: np.ndarray,
    *,
    illegal_a: int = 0,
    illegal_b: int = 0,
    truncated: int = 0,
    opening_moves: int = 0,
    seconds: float = 0.0,
) -> MatchResult:
    """Builds a ``MatchResult`` from per-game returns of A ([G] in {-1, 0, 1}) and colours."""
    returns_a = np.asarray(returns_a, dtype=np.float64)
    a_first = np.asarray(a_first, dtype=bool)
    games = int(returns_a.size)
    wins = int(np.sum(returns_a > 0))
    losses = int(np.sum(returns_a < 0))
    draws = games - wins - losses
    points = (np.sign(returns_a) + 1) / 2
    low, high = wilson_interval(float(points.sum()), games)

    def mean(mask: np.ndarray) -> float:
        return float(points[mask].mean()) if mask.any() else float("nan")

    return MatchResult(
        player_a,
        player_b,
        games,
        wins,
        draws,
        losses,
        float(points.mean()) if games else float("nan"),
        low,
        high,
        mean(a_first),
        mean(~a_first),
        illegal_a,
        illegal_b,
        truncated,
        opening_moves,
        seconds,
    )


def _tile_pairs(x: Array, pairs: int, games: int) -> Array:
    """[pairs, ...] -> [games, ...]: game i and game i + pairs share row i."""
    return jnp.concatenate([x, x], axis=0)[:games]


@functools.lru_cache(maxsize=32)
def _match_fn(
    apply_a: ApplyFn, apply_b: ApplyFn, env: Any, games: int, opening_moves: int, max_moves: int
) -> Any:
    """The jitted ``play(key, params_a, params_b) -> (returns_a [G], a_first [G], illegal_a,
    illegal_b, truncated)``, cached so that new params reuse the compiled program."""
    pairs = (games + 1) // 2
    num_actions = env.num_actions
    step = jax.vmap(env.step)
    rows = jnp.arange(games)

    def play(key: Array, params_a: Any, params_b: Any) -> tuple:
        init_key, opening_key, loop_key = jax.random.split(key, 3)
        states = jax.vmap(env.init)(_tile_pairs(jax.random.split(init_key, pairs), pairs, games))
        a_first = rows < pairs
        first_mover = states.current_player
        a_id = jnp.where(a_first, first_mover, 1 - first_mover)
        returns_a = jnp.zeros(games, jnp.float32)
        for key_i in jax.random.split(opening_key, opening_moves):
            noise = _tile_pairs(jax.random.gumbel(key_i, (pairs, num_actions)), pairs, games)
            action = jnp.argmax(jnp.where(states.legal_action_mask, noise, -jnp.inf), axis=-1)
            states = step(states, action)
            returns_a = returns_a + states.rewards[rows, a_id]

        def cond(carry: tuple) -> Array:
            states, _, _, _, _, moves = carry
            return jnp.any(~states.terminated) & (moves < max_moves)

        def body(carry: tuple) -> tuple:
            states, returns_a, illegal_a, illegal_b, key, moves = carry
            key, key_a, key_b = jax.random.split(key, 3)
            a_moves = states.current_player == a_id
            action_a = apply_a(params_a, key_a, states)
            action = jnp.where(a_moves, action_a, apply_b(params_b, key_b, states))
            illegal = ~states.legal_action_mask[rows, action] & ~states.terminated
            illegal_a = illegal_a + jnp.sum(illegal & a_moves)
            illegal_b = illegal_b + jnp.sum(illegal & ~a_moves)
            states = step(states, action)
            returns_a = returns_a + states.rewards[rows, a_id]
            return states, returns_a, illegal_a, illegal_b, key, moves + 1

        zero = jnp.int32(0)
        carry = (states, returns_a, zero, zero, loop_key, zero)
        states, returns_a, illegal_a, illegal_b, _, _ = jax.lax.while_loop(cond, body, carry)
        truncated = jnp.sum(~states.terminated)
        return returns_a, a_first, illegal_a, illegal_b, truncated

    return jax.jit(play)


def play_match(
    key: Array,
    player_a: JaxPlayer,
    player_b: JaxPlayer,
    env: Any,
    num_games: int,
    *,
    opening_moves: int = 0,
    max_moves: int | None = None,
) -> MatchResult:
    """Plays ``num_games`` games of A vs B in one jitted loop, half with each colour.

    Args:
      key: PRNG key.
      player_a, player_b: batched players; both are evaluated on the whole batch of
        G = num_games states each move and the mover's action is kept.
      env: a pgx-compatible env.
      num_games: G; odd G gives A the extra first move.
      opening_moves: k uniformly random moves played before the players take over,
        shared by game i (A first) and game i + G/2 (B first).
      max_moves: move cap after the opening (default 4 * num_actions + 16); unfinished
        games count as draws and are reported as truncated.
    """
    if num_games < 1:
        raise ValueError(f"num_games={num_games}; allowed: >= 1")
    if opening_moves < 0:
        raise ValueError(f"opening_moves={opening_moves}; allowed: >= 0")
    max_moves = int(max_moves or 4 * env.num_actions + 16)
    play = _match_fn(player_a.apply, player_b.apply, env, num_games, opening_moves, max_moves)
    start = time.perf_counter()
    outputs = play(key, player_a.params, player_b.params)
    returns_a, a_first, illegal_a, illegal_b, truncated = jax.device_get(outputs)
    return summarize(
        player_a.name,
        player_b.name,
        returns_a,
        a_first,
        illegal_a=int(illegal_a),
        illegal_b=int(illegal_b),
        truncated=int(truncated),
        opening_moves=opening_moves,
        seconds=time.perf_counter() - start,
    )


def run_match(
    key: Array,
    player_a: Any,
    player_b: Any,
    env: Any,
    num_games: int,
    *,
    opening_moves: int = 0,
    max_moves: int | None = None,
) -> MatchResult:
    """``play_match`` for two JAX players, ``play_host_match`` when either speaks HTP."""
    if isinstance(player_a, JaxPlayer) and isinstance(player_b, JaxPlayer):
        return play_match(
            key,
            player_a,
            player_b,
            env,
            num_games,
            opening_moves=opening_moves,
            max_moves=max_moves,
        )
    from curiosity_search.eval.host_match import play_host_match

    return play_host_match(
        key, player_a, player_b, env, num_games, opening_moves=opening_moves, max_moves=max_moves
    )


def append_csv(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> None:
    """Appends rows to a CSV file, writing the header when the file is new.

    An existing file keeps its header; a row with a column the header lacks raises
    ``ValueError`` naming the columns (missing columns are left empty).
    """
    rows = [dict(row) for row in rows]
    if not rows:
        return
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    header: list[str] | None = None
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path, newline="") as handle:
            header = next(csv.reader(handle), None)
    if header is None:
        header = list(dict.fromkeys(key for row in rows for key in row))
        mode = "w"
    else:
        extra = sorted({key for row in rows for key in row} - set(header))
        if extra:
            raise ValueError(f"{path}: columns {extra} are not in the existing header {header}")
        mode = "a"
    with open(path, mode, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        if mode == "w":
            writer.writeheader()
        writer.writerows(rows)


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    """Reads a CSV table written by ``append_csv`` (values as strings)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def eval_main(args: Any) -> int:
    """``curiosity-search eval --checkpoint DIR --opponent SPEC --games N``.

    Plays the checkpoint (with ``--simulations``, default the run's
    ``search.eval_num_simulations``; 0 for the raw policy) against the opponent spec
    (see ``players.parse_player``) over both colours with one random opening move per
    colour pair, prints the result and appends it to ``--out`` (default
    ``<run dir>/arena.csv``).
    """
    from pathlib import Path

    from curiosity_search import load_agent
    from curiosity_search.eval.evaluation import game_spec
    from curiosity_search.eval.players import checkpoint_player, parse_player

    agent = load_agent(args.checkpoint)
    sims = getattr(args, "simulations", None)
    sims = agent.config.search.eval_num_simulations if sims is None else int(sims)
    player = checkpoint_player(args.checkpoint, sims, agent=agent)
    opponent = parse_player(args.opponent, game_spec(agent.config), agent.env)
    opening_moves = int(getattr(args, "opening_moves", 1) or 0)
    key = jax.random.key(int(getattr(args, "seed", 0) or 0))
    try:
        result = run_match(
            key, player, opponent, agent.env, args.games, opening_moves=opening_moves
        )
    finally:
        close = getattr(opponent, "close", None)
        if close is not None:
            close()
    print(result.summary())
    out = getattr(args, "out", None)
    if out is None:
        path = Path(args.checkpoint)
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path
        out = run_dir / "arena.csv"
    row = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "iteration": agent.iteration,
        "simulations": sims,
        "seed": getattr(args, "seed", 0),
        **result.to_row(),
    }
    append_csv(out, [row])
    print(f"appended to {out}")
    return 0
