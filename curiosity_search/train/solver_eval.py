"""In-training evaluation against an exact solver: the optimal-move rate.

Where the game has an exact solution (``envs.solve``: Hex up to 4x4 without the swap
move, tic-tac-toe) the run measures, every ``eval.every`` iterations and at the end,
the fraction of a fixed set of random-play positions on which the agent plays an
optimal move: once with the raw policy (argmax over legal moves, no search) and once
with the run's search at ``search.eval_num_simulations``. The positions and the
evaluation keys depend only on the seed (and the iteration), so a resumed run reports
the same numbers as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import jax

# Fold-in index of the evaluation key stream (iterations use 0, 1, 2, ...).
EVAL_STREAM = 2**31 - 2
RAW_KEY = "eval/raw_optimal_move_rate"
SEARCH_KEY = "eval/search_optimal_move_rate"
# Where a position can be drawn, "optimal" means keeping the game-theoretic value.
GAMES_WITH_DRAWS = frozenset({"tic_tac_toe"})


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


def make_solver_evaluation(cfg: Any, trainer: Any) -> SolverEvaluation | None:
    """Builds the evaluation for ``cfg``, or ``None`` (no solver, or turned off).

    Solving the game happens here, once per run (a few seconds for 4x4 Hex).
    """
    kwargs = solver_kwargs(cfg)
    if kwargs is None or cfg.eval.num_positions == 0:
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
