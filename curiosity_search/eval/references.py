"""Frozen reference opponents: train once with a large search budget, freeze, assess.

The scaling curves need an opponent that plays "roughly optimally" on boards the exact
solver cannot reach. ``curiosity-search reference --config configs/references/hex5.yaml``

1. trains the config in ``--workdir`` (default ``runs/<name>``), resuming a partial
   run and skipping training when the run already finished all its iterations;
2. freezes the last checkpoint's parameters (``train.agent.freeze_agent``: config +
   ``params.msgpack``, no optimizer state or replay) into ``--out`` (default
   ``curiosity_search/references/<game><size>``, shipped with the package);
3. assesses it and writes the numbers to ``reference.json`` next to the parameters:
   where the exact solver exists, matches against perfect play and the optimal-move
   rate of the raw policy and of the search; elsewhere, matches against weaker
   references (rollout MCTS, random, and the reference's own raw policy).

The player spec ``reference[@SIMS]`` (see ``players.parse_player``) loads the frozen
reference for the game being played, at ``SIMS`` simulations or, without ``@SIMS``,
the count it was assessed with (``simulations`` in ``reference.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

from curiosity_search.atomic_io import write_text_atomically
from curiosity_search.eval.arena import run_match
from curiosity_search.eval.players import GameSpec, JaxPlayer, checkpoint_player, parse_player

REFERENCES_ROOT = Path(__file__).resolve().parent.parent / "references"
REFERENCE_FILENAME = "reference.json"
WEAKER_OPPONENTS = ("mcts:256", "mcts:64", "random")


def reference_name(game: GameSpec) -> str:
    """``hex5`` for 5x5 Hex, ``hex5_swap`` with the swap move, the pgx id otherwise."""
    kwargs = dict(game.kwargs)
    if game.name == "hex":
        return f"hex{kwargs['size']}" + ("_swap" if kwargs.get("swap") else "")
    return game.name


def reference_dir(game: GameSpec, root: str | os.PathLike[str] | None = None) -> Path:
    """Where the frozen reference for ``game`` lives (``root`` default: the package's)."""
    return Path(root or REFERENCES_ROOT) / reference_name(game)


def reference_player(
    game: GameSpec, num_simulations: int | None = None, *, root: str | os.PathLike | None = None
) -> JaxPlayer:
    """The frozen reference for ``game`` as a player (``num_simulations`` default: its own).

    Raises ``FileNotFoundError`` naming the command that builds it when it is missing.
    """
    path = reference_dir(game, root)
    info_path = path / REFERENCE_FILENAME
    if not info_path.is_file():
        raise FileNotFoundError(
            f"no frozen reference for {reference_name(game)} at {path}; build one with "
            f"`curiosity-search reference --config configs/references/{reference_name(game)}.yaml`"
        )
    info = json.loads(info_path.read_text())
    sims = int(info["simulations"] if num_simulations is None else num_simulations)
    return checkpoint_player(path, sims, label=f"reference:{reference_name(game)}@{sims}")


def assess_reference(
    agent: Any,
    game: GameSpec,
    simulations: int,
    *,
    games: int = 64,
    seed: int = 0,
    opponents: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Measures a reference's quality.

    Args:
      agent: the frozen ``Agent``.
      game: the game it plays.
      simulations: the search budget it plays with as a reference.
      games: games per match (half with each colour), 1 random opening move.
      seed: match seed.
      opponents: player specs (default: ``solver`` where one exists, else
        ``WEAKER_OPPONENTS``), plus always the reference's own raw policy.

    Returns:
      ``{"matches": [row per opponent], "optimal_move_rate": {...} or absent}``; a match
      row has the opponent, games, the reference's score and its Wilson interval, and
      its score as first and as second player.
    """
    env = agent.env
    player = checkpoint_player("", simulations, agent=agent, label=f"reference@{simulations}")
    specs = list(opponents) if opponents is not None else _default_opponents(game)
    rivals = [(spec, parse_player(spec, game, env)) for spec in specs]
    rivals.append(("raw policy (same network, 0 simulations)",
                   checkpoint_player("", 0, agent=agent, label="raw")))
    out: dict[str, Any] = {"matches": []}
    key = jax.random.key(seed)
    for index, (spec, rival) in enumerate(rivals):
        result = run_match(jax.random.fold_in(key, index), player, rival, env, games,
                           opening_moves=1)
        row = result.to_row()
        out["matches"].append({"opponent": spec, **{k: row[k] for k in _MATCH_COLUMNS if k in row}})
    rates = _optimal_move_rates(agent, simulations)
    if rates is not None:
        out["optimal_move_rate"] = rates
    return out


_MATCH_COLUMNS = ("games", "score", "ci_low", "ci_high", "wins", "draws", "losses",
                  "score_first", "score_second", "truncated", "seconds")


def _default_opponents(game: GameSpec) -> list[str]:
    try:
        parse_player("solver", game)
    except (NotImplementedError, ValueError, KeyError):
        return list(WEAKER_OPPONENTS)
    return ["solver", "random"]


def _optimal_move_rates(agent: Any, simulations: int) -> dict[str, Any] | None:
    """Raw and search optimal-move rates on 512 random-play positions, where solvable."""
    from curiosity_search.train.solver_eval import RAW_KEY, SEARCH_KEY, make_solver_evaluation

    cfg = agent.config
    cfg = dataclasses.replace(
        cfg,
        eval=dataclasses.replace(cfg.eval, num_positions=512),
        search=dataclasses.replace(cfg.search, eval_num_simulations=simulations),
    )
    evaluation = make_solver_evaluation(cfg, agent.trainer)
    if evaluation is None:
        return None
    rates = evaluation(agent.params, 0)
    return {
        "positions": evaluation.num_positions,
        "raw": rates.get(RAW_KEY),
        f"search@{simulations}": rates.get(SEARCH_KEY),
    }


def describe(info: dict[str, Any]) -> str:
    """A short human-readable table of ``reference.json``."""
    lines = [f"reference {info['name']}: {info['network']}, {info['simulations']} simulations, "
             f"trained {info['iterations']} iterations in {info['training_wall_time_s']:.0f} s"]
    for match in info["quality"]["matches"]:
        lines.append(
            f"  vs {match['opponent']:<42s} score {match['score']:.3f} "
            f"[{match['ci_low']:.3f}, {match['ci_high']:.3f}] over {match['games']} games "
            f"(first {match['score_first']:.2f}, second {match['score_second']:.2f})"
        )
    rates = info["quality"].get("optimal_move_rate")
    if rates:
        parts = ", ".join(f"{k} {v:.1%}" for k, v in rates.items() if k != "positions")
        lines.append(f"  optimal-move rate over {rates['positions']} positions: {parts}")
    return "\n".join(lines)


def build_reference(
    config_path: str | os.PathLike[str],
    *,
    overrides: Sequence[str] = (),
    workdir: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    simulations: int | None = None,
    games: int = 64,
    seed: int = 0,
) -> dict[str, Any]:
    """Trains (or resumes), freezes and assesses a reference; returns ``reference.json``."""
    from curiosity_search import load_agent
    from curiosity_search.config import load_config
    from curiosity_search.eval.evaluation import game_spec, run_labels
    from curiosity_search.train.agent import freeze_agent
    from curiosity_search.train.metrics_log import METRICS_FILENAME, read_rows
    from curiosity_search.train.run import train

    cfg = load_config(config_path, overrides)
    workdir = Path(workdir or Path("runs") / cfg.name)
    rows = read_rows(workdir / METRICS_FILENAME)  # [] when there is no run yet
    last = rows[-1] if rows else {}
    if int(last.get("iteration", 0)) < cfg.train.iterations:
        print(f"training {cfg.name} in {workdir}", flush=True)
        result = train(cfg, workdir, resume=workdir.exists())
        if result.status == "nonfinite":
            raise RuntimeError(f"training {cfg.name} diverged: {result}")
        rows = read_rows(workdir / METRICS_FILENAME)
        last = rows[-1]
    else:
        print(f"{workdir}: training already finished ({last['iteration']} iterations)")
    agent = load_agent(workdir)
    game = game_spec(agent.config)
    sims = int(simulations or agent.config.search.eval_num_simulations)
    out_dir = Path(out) if out is not None else reference_dir(game)
    freeze_agent(agent, out_dir, source=str(workdir))
    start = time.perf_counter()
    quality = assess_reference(agent, game, sims, games=games, seed=seed)
    info = {
        "name": reference_name(game),
        "game": {"name": game.name, **dict(game.kwargs)},
        "algorithm": agent.config.algorithm,
        "network": run_labels(agent.config, workdir)["network"],
        "simulations": sims,
        "iterations": agent.iteration,
        "training_wall_time_s": float(last.get("wall_time_s", float("nan"))),
        "train_flops": float(last.get("train_flops", float("nan"))),
        "config": str(config_path),
        "overrides": list(overrides),
        "assessment_seconds": round(time.perf_counter() - start, 1),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quality": quality,
    }
    write_text_atomically(out_dir / REFERENCE_FILENAME, json.dumps(info, indent=2) + "\n")
    print(describe(info))
    print(f"frozen reference written to {out_dir}")
    return info


def reference_main(args: argparse.Namespace) -> int:
    """``curiosity-search reference --config FILE [--workdir] [--out] [--simulations]``."""
    try:
        build_reference(
            args.config,
            overrides=args.set or (),
            workdir=args.workdir,
            out=args.out,
            simulations=args.simulations,
            games=args.games,
            seed=args.seed,
        )
    except (FileNotFoundError, RuntimeError) as error:
        print(f"error: reference: {error}", file=sys.stderr)
        return 1
    return 0
