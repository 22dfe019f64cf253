"""Evaluation points with compute accounting: a run's checkpoints vs fixed opponents.

Every evaluation point is one checkpoint of a run. It records the run's cumulative
training FLOPs and wall time at that checkpoint (from ``metrics.jsonl``) and plays both
the apprentice (raw policy, 0 simulations) and the expert (policy + the run's search
rule) against each opponent of the plan. ``evaluate_run`` writes the rows to the run's
``eval.csv`` (atomically: a crash leaves no half table), which ``plots`` reads.

An evaluation plan (the ``evaluation:`` section of a sweep file)::

    opponents: [random, "mcts:64"]   # player specs (see player_specs.parse_player)
    reference: [solver, "mcts:64"]   # the first one available for the run's game is the
                                     # reference (Elo anchor, win-rate curves)
    games: 64                        # per (point, role, opponent), half each colour
    opening_moves: 1                 # random opening moves, shared by colour pairs
    simulations: [0, 32]             # roles; null: [0, search.eval_num_simulations]
    checkpoints: all                 # all | last
    seed: 0
    late_game_games: 512             # Hex from 5x5 up: games per source of the late-game
                                     # positions (0: off), see below

On Hex from 5x5 up (no swap) every row also carries the **late-game optimal-move rate**
of its role (``eval.late_game``): on the positions with E empty cells
(``envs.late_game.DEFAULT_MAX_EMPTY``) of ``late_game_games`` random-play games and as
many self-play games of the reference where the side to move can force a win, the
share where the role's move keeps the win (columns ``late_game_rate``,
``late_game_positions``, ``late_game_empty_cells``, ``late_game_source``). The positions
depend only on the plan's seed, the board and the reference, so every checkpoint and
run of a board size is measured on the same ones.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax

from curiosity_search.atomic_io import atomic_path
from curiosity_search.eval.arena import append_csv, run_match
from curiosity_search.eval.match_result import MatchResult
from curiosity_search.eval.player_specs import parse_player
from curiosity_search.eval.players import ApplyFn, GameSpec, JaxPlayer

EVAL_FILENAME = "eval.csv"
_PLAN_KEYS = (
    "opponents",
    "reference",
    "games",
    "opening_moves",
    "simulations",
    "checkpoints",
    "seed",
    "late_game_games",
)
LATE_GAME_STREAM = 2**31 - 3  # fold-in index of the late-game positions' key


@dataclass(frozen=True)
class EvalPlan:
    """What to play at every evaluation point (see the module docstring)."""

    opponents: tuple[str, ...] = ("random",)
    reference: tuple[str, ...] = ("solver", "random")
    games: int = 64
    opening_moves: int = 1
    simulations: tuple[int, ...] | None = None
    checkpoints: str = "all"
    seed: int = 0
    late_game_games: int = 512
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)


def plan_from_dict(data: Mapping[str, Any] | None) -> EvalPlan:
    """Validates an ``evaluation:`` mapping; errors name the key, value and what is allowed."""
    data = dict(data or {})
    unknown = sorted(set(data) - set(_PLAN_KEYS))
    if unknown:
        raise ValueError(f"evaluation: unknown key(s) {unknown}; allowed: {list(_PLAN_KEYS)}")

    def specs(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = data.get(key, default)
        value = [value] if isinstance(value, str) else value
        if not value or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"evaluation.{key}: {value!r}; allowed: a list of player specs")
        return tuple(value)

    def count(key: str, default: int, minimum: int) -> int:
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"evaluation.{key}: {value!r}; allowed: an integer >= {minimum}")
        return value

    simulations = data.get("simulations")
    if simulations is not None:
        simulations = [simulations] if isinstance(simulations, int) else simulations
        if not simulations or not all(isinstance(s, int) and s >= 0 for s in simulations):
            raise ValueError(
                f"evaluation.simulations: {simulations!r}; allowed: integers >= 0 or null"
            )
        simulations = tuple(simulations)
    checkpoints = data.get("checkpoints", "all")
    if checkpoints not in ("all", "last"):
        raise ValueError(f"evaluation.checkpoints: {checkpoints!r}; allowed: all, last")
    return EvalPlan(
        opponents=specs("opponents", ("random",)),
        reference=specs("reference", ("solver", "random")),
        games=count("games", 64, 1),
        opening_moves=count("opening_moves", 1, 0),
        simulations=simulations,
        checkpoints=checkpoints,
        seed=count("seed", 0, 0),
        late_game_games=count("late_game_games", 512, 0),
    )


def game_spec(cfg: Any) -> GameSpec:
    """The run's game: Hex carries its size and swap flag, pgx ids none."""
    if cfg.env.name == "hex":
        return GameSpec("hex", {"size": cfg.env.size, "swap": cfg.env.swap})
    return GameSpec(cfg.env.name, {})


def run_labels(cfg: Any, run_dir: str | os.PathLike) -> dict[str, Any]:
    """Columns naming the run in every row: run, algorithm, board size, network, seed."""
    net = cfg.network
    return {
        "run": Path(run_dir).name,
        "algorithm": cfg.algorithm,
        "env": cfg.env.name,
        "board_size": cfg.env.size if cfg.env.name == "hex" else "",
        "network": f"{net.trunk}{net.blocks}x{net.width}",
        "seed": cfg.seed,
    }


def build_opponents(plan: EvalPlan, game: GameSpec, env: Any) -> list[tuple[JaxPlayer | Any, bool]]:
    """The plan's opponents for this game as ``(player, is_reference)``.

    The reference is the first spec of ``plan.reference`` that can be built here (a
    solver exists only for tiny boards); opponents that cannot be built are skipped
    with a note, except the reference candidates' last, whose error is raised.
    """
    reference = None
    for i, spec in enumerate(plan.reference):
        try:
            reference = (spec, parse_player(spec, game, env))
            break
        except (NotImplementedError, ValueError, KeyError, FileNotFoundError) as error:
            if i == len(plan.reference) - 1:
                raise ValueError(
                    f"evaluation.reference: none of {list(plan.reference)} "
                    f"is available for {game}: {error}"
                ) from error
    assert reference is not None
    out = [(reference[1], True)]
    for spec in plan.opponents:
        if spec == reference[0]:
            continue
        try:
            out.append((parse_player(spec, game, env), False))
        except (NotImplementedError, ValueError, KeyError) as error:
            print(f"note: opponent {spec!r} skipped for {game}: {error}", flush=True)
    return out


def late_game_set(plan: EvalPlan, game: GameSpec, env: Any,
                  opponents: Sequence[tuple[Any, bool]]) -> Any:
    """The plan's ``eval.late_game.LateGameSet`` for Hex from 5x5 up without swap (random
    play + self-play of the reference among ``opponents``), or None."""
    kwargs = dict(game.kwargs)
    if (game.name != "hex" or kwargs.get("swap") or int(kwargs.get("size") or 0) < 5
            or plan.late_game_games == 0):
        return None
    from curiosity_search.eval.late_game import build_late_game_set

    reference = next((player for player, is_reference in opponents if is_reference), None)
    key = jax.random.fold_in(jax.random.key(plan.seed), LATE_GAME_STREAM)
    return build_late_game_set(key, env, reference=reference, games=plan.late_game_games)


def late_game_columns(late: Any, apply: ApplyFn, params: Any, key: jax.Array) -> dict[str, Any]:
    """The late-game columns of a role's rows (empty without a late-game set)."""
    if late is None:
        return {}
    return {
        "late_game_rate": late.rate(apply, params, key),
        "late_game_positions": late.size,
        "late_game_empty_cells": late.empty,
        "late_game_source": late.describe_source(),
    }


def evaluate_point(
    key: jax.Array,
    *,
    params: Any,
    act_fn: Callable[[int], ApplyFn],
    env: Any,
    opponents: Sequence[tuple[Any, bool]],
    plan: EvalPlan,
    simulations: Sequence[int],
    iteration: int,
    train_flops: float,
    wall_time_s: float,
    labels: Mapping[str, Any],
    late_game: Any = None,
) -> list[dict[str, Any]]:
    """Plays one evaluation point: every role (simulation count) vs every opponent.

    Args:
      key: PRNG key.
      params: the network parameters at this point.
      act_fn: ``num_simulations -> apply(params, key, states [B]) -> actions [B]``;
        keep it cached so that points of one run share compiled matches.
      env, opponents, plan: from ``build_opponents`` / ``plan_from_dict``.
      simulations: the roles: 0 is the apprentice, > 0 an expert.
      iteration, train_flops, wall_time_s: the compute spent to reach this point.
      labels: constant columns (``run_labels``).
      late_game: a ``LateGameSet`` (``late_game_set``) or None: adds its columns.

    Returns:
      one row per (role, opponent).
    """
    rows = []
    label = labels.get("run", "run")
    for role_index, sims in enumerate(simulations):
        player = JaxPlayer(f"{label}@{iteration}:{sims}", act_fn(sims), params)
        late = late_game_columns(late_game, act_fn(sims), params,
                                 jax.random.fold_in(key, 10_000 + role_index))
        for opponent_index, (opponent, is_reference) in enumerate(opponents):
            match_key = jax.random.fold_in(key, role_index * 1000 + opponent_index)
            result = run_match(
                match_key, player, opponent, env, plan.games, opening_moves=plan.opening_moves
            )
            rows.append(
                {
                    **labels,
                    "iteration": iteration,
                    "train_flops": train_flops,
                    "wall_time_s": wall_time_s,
                    "role": "apprentice" if sims == 0 else "expert",
                    "simulations": sims,
                    "reference": int(is_reference),
                    **result.to_row(),
                    **late,
                }
            )
    return rows


def evaluate_run(
    run_dir: str | os.PathLike,
    plan: EvalPlan,
    *,
    labels: Mapping[str, Any] | None = None,
    build_trainer: Callable[[Any], Any] | None = None,
) -> list[dict[str, Any]]:
    """Evaluates a finished run's checkpoints and writes ``<run_dir>/eval.csv``.

    Returns the rows written. The table is replaced, not appended to, so that a
    re-evaluation after a crash never duplicates points.
    """
    from curiosity_search import load_agent
    from curiosity_search.config import load_config
    from curiosity_search.train.checkpoint import checkpoint_dir, complete_steps
    from curiosity_search.train.metrics_log import METRICS_FILENAME, read_rows

    run_dir = Path(run_dir)
    cfg = load_config(run_dir / "config.yaml")
    if build_trainer is None:
        from curiosity_search.train.trainer import build_trainer
    trainer = build_trainer(cfg)
    steps = complete_steps(checkpoint_dir(run_dir))
    if plan.checkpoints == "last":
        steps = steps[-1:]
    metrics = {int(row["iteration"]): row for row in read_rows(run_dir / METRICS_FILENAME)}
    labels = {**run_labels(cfg, run_dir), **dict(labels or {})}
    opponents = build_opponents(plan, game_spec(cfg), trainer.env)
    late = late_game_set(plan, game_spec(cfg), trainer.env, opponents)
    simulations = plan.simulations or (0, cfg.search.eval_num_simulations)
    act_fn = functools.cache(lambda n: jax.jit(trainer.make_act_fn(n)))
    rows: list[dict[str, Any]] = []
    for step in steps:
        agent = load_agent(checkpoint_dir(run_dir) / str(step), build_trainer=lambda _: trainer)
        row = metrics.get(step, {})
        rows += evaluate_point(
            jax.random.fold_in(jax.random.key(plan.seed), step),
            params=agent.params,
            act_fn=act_fn,
            env=trainer.env,
            opponents=opponents,
            plan=plan,
            simulations=simulations,
            iteration=step,
            train_flops=float(row.get("train_flops") or float("nan")),
            wall_time_s=float(row.get("wall_time_s") or float("nan")),
            labels=labels,
            late_game=late,
        )
    for opponent, _ in opponents:
        close = getattr(opponent, "close", None)
        if close is not None:
            close()
    if rows:
        with atomic_path(run_dir / EVAL_FILENAME) as tmp:
            append_csv(tmp, rows)
    return rows


def evaluate_checkpoint(
    checkpoint: str | os.PathLike,
    opponent: str = "random",
    games: int = 64,
    *,
    simulations: int | None = None,
    seed: int = 0,
    out: str | os.PathLike | None = None,
    opening_moves: int = 1,
) -> MatchResult:
    """``curiosity-search eval --checkpoint DIR --opponent SPEC --games N``.

    Plays the checkpoint (with ``simulations``, default the run's
    ``search.eval_num_simulations``; 0 for the raw policy) against the ``opponent`` spec
    (see ``player_specs.parse_player``) over both colours with ``opening_moves`` random
    opening moves per colour pair, prints the result and appends it to ``out`` (default
    ``<run dir>/arena.csv``).
    """
    from curiosity_search import load_agent
    from curiosity_search.eval.players import checkpoint_player

    agent = load_agent(checkpoint)
    sims = agent.config.search.eval_num_simulations if simulations is None else int(simulations)
    player = checkpoint_player(checkpoint, sims, agent=agent)
    rival = parse_player(opponent, game_spec(agent.config), agent.env)
    key = jax.random.key(seed)
    try:
        result = run_match(key, player, rival, agent.env, games, opening_moves=opening_moves)
    finally:
        close = getattr(rival, "close", None)
        if close is not None:
            close()
    print(result.summary())
    if out is None:
        path = Path(checkpoint)
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path
        out = run_dir / "arena.csv"
    row = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "iteration": agent.iteration,
        "simulations": sims,
        "seed": seed,
        **result.to_row(),
    }
    append_csv(out, [row])
    print(f"appended to {out}")
    return result
