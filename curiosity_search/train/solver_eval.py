"""In-training evaluation against an exact answer: the optimal-move rate.

Where the game has an exact solution (``envs.solve``: Hex up to 4x4 without the swap
move, tic-tac-toe) the run measures, every ``eval.every`` iterations and at the end,
the fraction of a fixed set of random-play positions on which the agent plays an
optimal move: once with the raw policy (argmax over legal moves, no search) and once
with the run's search at ``search.eval_num_simulations``. The positions and the
evaluation keys depend only on the seed (and the iteration), so a resumed run reports
the same numbers as an uninterrupted one.

On larger Hex boards (5x5 and up, no swap) it measures the **late-game optimal-move
rate** instead (``LateGameEvaluation``): positions with exactly E empty cells
(``envs.late_game.DEFAULT_MAX_EMPTY``) from ``eval.num_positions`` games of uniformly
random play (a fixed set) and from ``eval.num_positions`` games of the agent's raw
policy against itself after 4 random opening moves (new at every evaluation), keeping
the distinct ones where the side to move can force a win (``envs.late_game``'s exact
judge); the rate is the share where the agent's move keeps the win.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# Fold-in index of the evaluation key stream (iterations use 0, 1, 2, ...).
EVAL_STREAM = 2**31 - 2
RAW_KEY = "eval/raw_optimal_move_rate"
SEARCH_KEY = "eval/search_optimal_move_rate"
# Where a position can be drawn, "optimal" means keeping the game-theoretic value.
GAMES_WITH_DRAWS = frozenset({"tic_tac_toe"})
LATE_RAW_KEY = "eval/late_game_raw_optimal_move_rate"
LATE_SEARCH_KEY = "eval/late_game_search_optimal_move_rate"
LATE_POSITIONS_KEY = "eval/late_game_positions"  # winning positions judged, both sources
LATE_RANDOM_KEY = "eval/late_game_positions_random"
LATE_SELFPLAY_KEY = "eval/late_game_positions_selfplay"
LATE_EMPTY_KEY = "eval/late_game_empty_cells"  # E
SELFPLAY_OPENING_MOVES = 4  # random first moves of the self-play games (argmax after)


def solver_kwargs(cfg: Any) -> dict[str, Any] | None:
    """The ``envs.solve`` arguments for ``cfg.env``, or ``None`` if no solver covers it."""
    env = cfg.env
    if env.name == "tic_tac_toe":
        return {}
    if env.name == "hex" and not env.swap and env.size is not None and env.size <= 4:
        return {"size": env.size}
    return None


@dataclasses.dataclass(frozen=True, eq=False)
class SolverEvaluation:
    """Optimal-move rates of a policy on fixed positions of a solved game.

    Attributes:
      solution: the ``envs.solve`` result.
      rate_fn: ``(states, actions) -> []`` the solution's ``optimal_move_rate`` (the share
        of won positions where the move keeps the win), or, in games with draws,
        ``optimal_action_rate`` (the share of positions where it keeps the value).
      positions: a batch of ``P`` env states (leading axis ``[P]``).
      act_fns: ``{num_simulations: jitted act(params, key, states) -> [P] actions}``.
      key: the evaluation key stream's root.
    """

    solution: Any
    rate_fn: Callable[[Any, jax.Array], jax.Array]
    positions: Any
    act_fns: dict[int, Callable[..., jax.Array]]
    key: jax.Array

    @property
    def num_positions(self) -> int:
        """How many positions are evaluated."""
        return int(jax.tree.leaves(self.positions)[0].shape[0])

    def __call__(self, params: Any, iteration: int) -> dict[str, float]:
        """Returns ``{RAW_KEY: rate, SEARCH_KEY: rate}`` (rates in [0, 1])."""
        key = jax.random.fold_in(self.key, iteration)
        results = {}
        for num_simulations, act in self.act_fns.items():
            actions = act(params, jax.random.fold_in(key, num_simulations), self.positions)
            rate = float(self.rate_fn(self.positions, actions))
            results[RAW_KEY if num_simulations == 0 else SEARCH_KEY] = rate
        return results

    def describe(self, results: dict[str, float]) -> str:
        """One line, e.g. ``raw policy optimal-move rate 100.0% (search@32: 100.0%) ...``."""
        parts = []
        if RAW_KEY in results:
            parts.append(f"raw policy optimal-move rate {results[RAW_KEY]:.1%}")
        search = [n for n in self.act_fns if n > 0]
        if SEARCH_KEY in results and search:
            parts.append(f"with {search[0]}-simulation search {results[SEARCH_KEY]:.1%}")
        return ", ".join(parts) + f" over {self.num_positions} random-play positions"


def late_game_size(cfg: Any) -> int | None:
    """The board size for the late-game evaluation: Hex without swap, size >= 5 (smaller
    boards have the exact solver); ``None`` otherwise."""
    env = cfg.env
    if env.name == "hex" and not env.swap and env.size is not None and env.size >= 5:
        return int(env.size)
    return None


@dataclasses.dataclass(frozen=True, eq=False)
class LateGameEvaluation:
    """Late-game optimal-move rates (see the module docstring).

    Attributes:
      judge: the ``envs.late_game.LateGameJudge`` (E = ``judge.max_empty``).
      env: the run's env.
      random_positions: the won random-play positions, a State batch [R].
      random_verdict: their ``LateGameVerdict`` [R].
      act_fns: ``{num_simulations: jitted act(params, key, states) -> [P] actions}``.
      num_games: self-play games per evaluation (and random-play games at the start).
      key: the evaluation key stream's root.
    """

    judge: Any
    env: Any
    random_positions: Any
    random_verdict: Any
    act_fns: dict[int, Callable[..., jax.Array]]
    num_games: int
    key: jax.Array

    @property
    def num_random(self) -> int:
        return int(self.random_verdict.value.shape[0])

    def selfplay_positions(self, params: Any, key: jax.Array) -> tuple[Any, Any]:
        """The won, distinct positions with E empties of raw-policy self-play games
        (``num_games`` of them, 4 random opening moves): (State [S], verdict [S])."""
        from curiosity_search.envs.late_positions import late_positions_from_play

        act = self.act_fns[0]
        states, live = late_positions_from_play(
            key, act, params, act, params, self.env, self.num_games, self.judge.max_empty,
            opening_moves=SELFPLAY_OPENING_MOVES,
        )
        from curiosity_search.envs.late_game import winning_positions

        return winning_positions(self.judge, states, live)

    def __call__(self, params: Any, iteration: int) -> dict[str, float]:
        """Rates in [0, 1] (NaN without winning positions) and the position counts."""
        key = jax.random.fold_in(self.key, iteration)
        selfplay, selfplay_verdict = self.selfplay_positions(params, jax.random.fold_in(key, 0))
        positions = jax.tree.map(
            lambda a, b: jnp.concatenate([a, b]), self.random_positions, selfplay
        )
        winning = np.concatenate([self.random_verdict.winning, selfplay_verdict.winning])
        count = winning.shape[0]
        # pad to a fixed batch (2 * num_games) so that the act functions compile once
        padded = 2 * self.num_games
        index = np.concatenate([np.arange(count), np.zeros(padded - count, np.int64)])
        batch = jax.tree.map(lambda x: x[index], positions)
        results: dict[str, float] = {
            LATE_POSITIONS_KEY: count,
            LATE_RANDOM_KEY: self.num_random,
            LATE_SELFPLAY_KEY: count - self.num_random,
            LATE_EMPTY_KEY: self.judge.max_empty,
        }
        for num_simulations, act in self.act_fns.items():
            actions = np.asarray(act(params, jax.random.fold_in(key, 1 + num_simulations),
                                     batch))[:count]
            keeps = winning[np.arange(count), actions] if count else np.zeros(0, bool)
            rate = float(keeps.mean()) if count else float("nan")
            results[LATE_RAW_KEY if num_simulations == 0 else LATE_SEARCH_KEY] = rate
        return results

    def describe(self, results: dict[str, float]) -> str:
        """One line, e.g. ``late-game optimal-move rate (14 empty cells) raw 97.0%, ...``."""
        parts = [f"late-game optimal-move rate ({self.judge.max_empty} empty cells): "
                 f"raw policy {results.get(LATE_RAW_KEY, float('nan')):.1%}"]
        search = [n for n in self.act_fns if n > 0]
        if LATE_SEARCH_KEY in results and search:
            parts.append(f"with {search[0]}-simulation search {results[LATE_SEARCH_KEY]:.1%}")
        return ", ".join(parts) + (
            f" over {results.get(LATE_POSITIONS_KEY, 0)} winning positions "
            f"({results.get(LATE_RANDOM_KEY, 0)} random play, "
            f"{results.get(LATE_SELFPLAY_KEY, 0)} self-play)"
        )


def make_late_game_evaluation(cfg: Any, trainer: Any) -> LateGameEvaluation | None:
    """The late-game evaluation for Hex boards from 5x5 up, or ``None`` (another game,
    the swap move, or ``eval.num_positions == 0``). Solves the fixed random-play set
    here (cached on disk by the judge)."""
    size = late_game_size(cfg)
    if size is None or cfg.eval.num_positions == 0:
        return None
    from curiosity_search.envs.late_game import LateGameJudge, winning_positions
    from curiosity_search.envs.late_positions import random_late_positions

    judge = LateGameJudge(size)
    root = jax.random.fold_in(jax.random.key(cfg.seed), EVAL_STREAM)
    games = int(cfg.eval.num_positions)
    sample = jax.jit(random_late_positions, static_argnums=(0, 2, 3))
    states, live = sample(trainer.env, jax.random.fold_in(root, 0), games, judge.max_empty)
    positions, verdict = winning_positions(judge, states, live)
    act_fns = {0: jax.jit(trainer.make_act_fn(0))}
    if cfg.search.eval_num_simulations > 0:
        n = cfg.search.eval_num_simulations
        act_fns[n] = jax.jit(trainer.make_act_fn(n))
    return LateGameEvaluation(
        judge=judge, env=trainer.env, random_positions=positions, random_verdict=verdict,
        act_fns=act_fns, num_games=games, key=jax.random.fold_in(root, 1),
    )


def make_solver_evaluation(
    cfg: Any, trainer: Any
) -> SolverEvaluation | LateGameEvaluation | None:
    """Builds the evaluation for ``cfg``, or ``None`` (no solver, or turned off): the
    exact solver's where it covers the game, the late-game judge's on Hex from 5x5 up.

    Solving the game happens here, once per run (a few seconds for 4x4 Hex).
    """
    kwargs = solver_kwargs(cfg)
    if kwargs is None:
        return make_late_game_evaluation(cfg, trainer)
    if cfg.eval.num_positions == 0:
        return None
    from curiosity_search import envs

    try:
        solution = envs.solve(cfg.env.name, **kwargs)
    except (NotImplementedError, ValueError) as error:
        print(f"note: no solver for {cfg.env.name} {kwargs} ({error}); "
              "skipping the optimal-move rate", file=sys.stderr)
        return None
    root = jax.random.fold_in(jax.random.key(cfg.seed), EVAL_STREAM)
    sample = jax.jit(envs.sample_random_positions, static_argnums=(0, 2))
    positions = sample(trainer.env, jax.random.fold_in(root, 0), cfg.eval.num_positions)
    if cfg.env.name in GAMES_WITH_DRAWS:
        rate_fn = jax.jit(solution.optimal_action_rate)
    else:
        rate_fn = jax.jit(solution.optimal_move_rate)
    act_fns = {0: jax.jit(trainer.make_act_fn(0))}
    if cfg.search.eval_num_simulations > 0:  # reinforce too: its rule is for evaluation
        n = cfg.search.eval_num_simulations
        act_fns[n] = jax.jit(trainer.make_act_fn(n))
    return SolverEvaluation(
        solution=solution, rate_fn=rate_fn, positions=positions, act_fns=act_fns,
        key=jax.random.fold_in(root, 1),
    )
