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
   references (rollout MCTS, random, and the reference's own raw policy), and on Hex
   from 5x5 up the late-game checks below.

On Hex boards without an exact solver (5x5 and up, no swap) the reference plays the
exact late-game judge's move from ``late_game_empty`` empty cells on
(``eval.late_game_player``; ``default_late_game_empty``, recorded in ``reference.json``)
and, where the earlier positions are few enough (``MAX_BOOK_POSITIONS``: on 5x5 with
E_ref = 22, the 626 positions of 0 to 2 stones), an exact opening book (``book.json``:
a winning move for every such position, the network's own where it wins). Elsewhere,
and in lost positions, the network with its search moves. Its assessment adds

- ``late_game``: the late-game optimal-move rate (``eval.late_game``) on positions with
  E = ``envs.late_game.DEFAULT_MAX_EMPTY`` empty cells from random play and from its own
  self-play, for the reference and for its network alone (raw and with search); and the
  won positions converted: each position played out with the reference as the side to
  move against itself as the defender;
- ``opening_book``: for each first move, the winner when the reference plays both sides
  from there, the winner when a 16x deeper search of itself (``DEEP_FACTOR``; the
  network and the judge, without the book) does, and, where ``exact_openings`` is on,
  the game-theoretic winner from the exact solver.

The player spec ``reference[@SIMS]`` (``eval.reference_player``) loads the frozen
reference for the game being played, at ``SIMS`` simulations or, without ``@SIMS``,
the count it was assessed with (``simulations`` in ``reference.json``).

An existing frozen reference is re-assessed without training by
``python -m curiosity_search.cli.reassess DIR`` (``reassess_reference``).
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

from curiosity_search.atomic_io import write_text_atomically
from curiosity_search.eval.arena import run_match
from curiosity_search.eval.player_specs import parse_player
from curiosity_search.eval.players import GameSpec, JaxPlayer, checkpoint_player
from curiosity_search.eval.reference_player import (
    BOOK_FILENAME,
    REFERENCE_FILENAME,
    reference_as_player,
    reference_dir,
    reference_name,
)

WEAKER_OPPONENTS = ("mcts:256", "mcts:64", "random")
LATE_GAME_EMPTY_5X5 = 22
"""E_ref on 5x5: the judge's winning move costs ~0.05 s median, ~6 s at most on real
positions with 22 empty cells (``scripts/late_game_timing.py``)."""
MAX_BOOK_POSITIONS = 1000  # build an opening book only when it has at most this many
LATE_GAME_GAMES = 4096  # games per source of the late-game assessment's positions
DEEP_FACTOR = 16  # the opening-book check's deeper search: 16x the reference's simulations


def default_late_game_empty(game: GameSpec) -> int | None:
    """E_ref for Hex without swap and without an exact solver (5x5 and up):
    ``LATE_GAME_EMPTY_5X5`` on 5x5, ``envs.late_game.DEFAULT_MAX_EMPTY`` on larger
    boards; None for other games."""
    from curiosity_search.envs.late_game import DEFAULT_MAX_EMPTY

    kwargs = dict(game.kwargs)
    size = int(kwargs.get("size") or 0)
    if game.name != "hex" or kwargs.get("swap") or size < 5:
        return None
    return LATE_GAME_EMPTY_5X5 if size == 5 else DEFAULT_MAX_EMPTY


def book_positions(num_cells: int, max_stones: int) -> list[tuple[int, ...]]:
    """Every position of normal play with at most ``max_stones`` stones, as the move
    sequence reaching it (black's stones, in increasing order, interleaved with
    white's): one sequence per position."""
    out: list[tuple[int, ...]] = []
    for stones in range(max_stones + 1):
        blacks = (stones + 1) // 2
        for black in itertools.combinations(range(num_cells), blacks):
            rest = [c for c in range(num_cells) if c not in black]
            for white in itertools.combinations(rest, stones - blacks):
                sequence = [None] * stones
                sequence[0::2] = black
                sequence[1::2] = white
                out.append(tuple(sequence))
    return out


def build_opening_book(
    agent: Any, simulations: int, late_game_empty: int, key: jax.Array
) -> tuple[dict[str, int], dict[str, Any]] | None:
    """A winning move (the network's own at ``simulations`` when it wins) for every
    position with more than ``late_game_empty`` empty cells, or None when there are more
    than ``MAX_BOOK_POSITIONS``. Returns ``(book, stats)``; lost positions map to -1."""
    import math

    import jax.numpy as jnp
    import numpy as np

    from curiosity_search.envs.late_game import LateGameJudge, bitboards_from_states, position_key

    env = agent.env
    cells = env.num_actions - 1
    max_stones = cells - late_game_empty - 1
    count = sum(math.comb(cells, (k + 1) // 2) * math.comb(cells - (k + 1) // 2, k // 2)
                for k in range(max_stones + 1))
    if max_stones < 0 or count > MAX_BOOK_POSITIONS:
        return None
    start = time.perf_counter()
    judge = LateGameJudge(int(agent.config.env.size))
    act = agent.act_fn(simulations)
    book: dict[str, int] = {}
    kept = 0
    sequences = book_positions(cells, max_stones)
    init, step = jax.jit(jax.vmap(env.init)), jax.jit(jax.vmap(env.step))
    for stones in range(max_stones + 1):
        rows = [s for s in sequences if len(s) == stones]
        states = init(jax.random.split(jax.random.fold_in(key, stones), len(rows)))
        for ply in range(stones):
            states = step(states, jnp.array([r[ply] for r in rows], jnp.int32))
        moves = np.asarray(act(agent.params, jax.random.fold_in(key, 100 + stones), states))
        black, white, to_move, _ = bitboards_from_states(states)
        for i in range(len(rows)):
            move = judge.winning_move(black[i], white[i], int(to_move[i]),
                                      preferred=(int(moves[i]),))
            book[position_key(black[i], white[i], int(to_move[i]))] = -1 if move is None else move
            kept += move is not None and move == int(moves[i])
    won = sum(move >= 0 for move in book.values())
    stats = {"positions": len(book), "won": won, "network_move_wins": kept,
             "max_stones": max_stones, "network_simulations": simulations,
             "seconds": round(time.perf_counter() - start, 1)}
    return book, stats


def assess_reference(
    agent: Any,
    game: GameSpec,
    simulations: int,
    *,
    games: int = 64,
    seed: int = 0,
    opponents: Sequence[str] | None = None,
    late_game_empty: int | None = None,
    late_game_games: int = LATE_GAME_GAMES,
    exact_openings: bool = True,
    book: dict[str, int] | None = None,
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
      late_game_empty: E_ref, where the reference plays the late-game judge (None: never).
      late_game_games: games per source of the late-game positions.
      exact_openings: solve every opening exactly for the opening-book check.
      book: its opening book (``build_opening_book``), if any.

    Returns:
      ``{"matches": [row per opponent], "optimal_move_rate": {...} or absent,
      "late_game": {...}, "opening_book": {...}}`` (the last two for Hex from 5x5 up);
      a match row has the opponent, games, the reference's score and its Wilson
      interval, and its score as first and as second player.
    """
    env = agent.env
    player = reference_as_player(agent, simulations, late_game_empty,
                                 f"reference@{simulations}", book)
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
    if default_late_game_empty(game) is not None:
        out["late_game"] = assess_late_game(
            agent, player, simulations, jax.random.fold_in(key, 1000), late_game_games
        )
        out["opening_book"] = opening_book_check(
            agent, simulations, late_game_empty, jax.random.fold_in(key, 2000),
            exact=exact_openings, book=book,
        )
    return out


def assess_late_game(
    agent: Any, player: JaxPlayer, simulations: int, key: jax.Array, games: int
) -> dict[str, Any]:
    """The late-game optimal-move rate of ``player`` and of its network alone on the
    winning positions of ``eval.late_game.build_late_game_set`` (random play + the
    player's self-play), and how many of them ``player`` converts to a win as the side
    to move against itself."""
    from curiosity_search.eval.late_game import build_late_game_set, play_out

    start = time.perf_counter()
    late = build_late_game_set(jax.random.fold_in(key, 0), agent.env, reference=player,
                               games=games)
    built = time.perf_counter() - start
    rates = {
        "reference": late.rate(player.apply, player.params, jax.random.fold_in(key, 1)),
        "network raw": late.rate(agent.act_fn(0), agent.params, jax.random.fold_in(key, 2)),
        f"network search@{simulations}": late.rate(
            agent.act_fn(simulations), agent.params, jax.random.fold_in(key, 3)
        ),
    }
    outcome = play_out(jax.random.fold_in(key, 4), player, player, agent.env, late.positions)
    return {
        "empty_cells": late.empty,
        "positions": late.size,
        "positions_by_source": late.counts(),
        "source": late.describe_source(),
        "games_per_source": games,
        "optimal_move_rate": rates,
        "won_positions_played_out": {
            "positions": late.size,
            "won": int((outcome > 0).sum()),
            "lost": int((outcome < 0).sum()),
            "unfinished": int((outcome == 0).sum()),
            "opponent": "the reference itself",
        },
        "seconds": round(time.perf_counter() - start, 1),
        "seconds_building_positions": round(built, 1),
    }


def opening_book_check(
    agent: Any,
    simulations: int,
    late_game_empty: int | None,
    key: jax.Array,
    *,
    exact: bool = True,
    book: dict[str, int] | None = None,
) -> dict[str, Any]:
    """For every first move, the winner of self-play from there by

    - ``reference``: the reference (network at ``simulations``, judge, ``book``),
    - ``deep``: the same with ``DEEP_FACTOR`` x the simulations (a deeper search of
      itself),
    - ``deep_network``: the deeper network search and the judge without the book (what
      the network contributes), and
    - ``exact`` (where ``exact``): the game-theoretic winner from the exact solver.
    """
    from curiosity_search.envs.hex import action_to_cell
    from curiosity_search.envs.late_game import LateGameJudge, bitboards_from_states
    from curiosity_search.eval.late_game import play_out

    start = time.perf_counter()
    env = agent.env
    cells = env.num_actions - 1
    size = int(agent.config.env.size)
    init = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.fold_in(key, 0), cells))
    states = jax.jit(jax.vmap(env.step))(init, jax.numpy.arange(cells))
    deep = simulations * DEEP_FACTOR
    players = [("reference", simulations, book), ("deep", deep, book)]
    if book:
        players.append(("deep_network", deep, None))
    winners: dict[str, list[str | None]] = {}
    for index, (label, sims, with_book) in enumerate(players):
        player = reference_as_player(agent, sims, late_game_empty, f"reference@{sims}",
                                     with_book)
        outcome = play_out(jax.random.fold_in(key, 1 + index), player, player, env, states)
        winners[label] = ["second" if o > 0 else "first" if o < 0 else "none" for o in outcome]
    if exact:
        exact_start = time.perf_counter()
        judge = LateGameJudge(size)  # values cached on disk: a rerun is instant
        black, white, to_move, _ = bitboards_from_states(states)
        winners["exact"] = ["second" if judge.value(black[i], white[i], int(to_move[i]))
                            else "first" for i in range(cells)]
        exact_seconds = round(time.perf_counter() - exact_start, 1)
    openings = [{"move": action_to_cell(i, size), **{k: v[i] for k, v in winners.items()}}
                for i in range(cells)]
    out: dict[str, Any] = {
        "simulations": simulations,
        "deep_simulations": deep,
        "late_game_empty": late_game_empty,
        "reference_uses_book": bool(book),
        "openings": openings,
        "reference_equals_deep": sum(o["reference"] == o["deep"] for o in openings),
    }
    for label in winners:
        if label != "exact" and exact:
            out[f"{label}_equals_exact"] = sum(o[label] == o["exact"] for o in openings)
    if exact:
        out["exact_first_player_wins"] = sum(o["exact"] == "first" for o in openings)
        out["exact_seconds"] = exact_seconds
    out["seconds"] = round(time.perf_counter() - start, 1)
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
    from curiosity_search.train.solver_eval import (
        RAW_KEY,
        SEARCH_KEY,
        make_solver_evaluation,
        solver_kwargs,
    )

    cfg = agent.config
    if solver_kwargs(cfg) is None:  # no exact solver (from 5x5 up: see assess_late_game)
        return None
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
    judge = (f", exact late-game judge from {info['late_game_empty']} empty cells"
             if info.get("late_game_empty") is not None else "")
    book = (f", opening book of {info['book']['positions']} positions"
            if info.get("book") else "")
    lines = [f"reference {info['name']}: {info['network']}, {info['simulations']} simulations"
             f"{judge}{book}, trained {info['iterations']} iterations in "
             f"{info['training_wall_time_s']:.0f} s"]
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
    late = info["quality"].get("late_game")
    if late:
        parts = ", ".join(f"{k} {v:.2%}" for k, v in late["optimal_move_rate"].items())
        played = late["won_positions_played_out"]
        lines.append(
            f"  late-game optimal-move rate ({late['empty_cells']} empty cells, "
            f"{late['positions']} winning positions from {late['source']}): {parts}; "
            f"won positions played out: {played['won']} of {played['positions']} won"
        )
    book = info["quality"].get("opening_book")
    if book:
        exact = (f", the exact winner in {book['reference_equals_exact']} of "
                 f"{len(book['openings'])}" if "reference_equals_exact" in book else "")
        lines.append(
            f"  opening book: reference@{book['simulations']} self-play reaches the winner "
            f"of reference@{book['deep_simulations']} in {book['reference_equals_deep']} of "
            f"{len(book['openings'])} first moves{exact}"
        )
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
    late_game_empty: int | None | str = "default",
) -> dict[str, Any]:
    """Trains (or resumes), freezes and assesses a reference; returns ``reference.json``.

    ``late_game_empty``: E_ref (see the module docstring); ``"default"`` is
    ``default_late_game_empty(game)``, None never uses the judge."""
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
    if late_game_empty == "default":
        late_game_empty = default_late_game_empty(game)
    out_dir = Path(out) if out is not None else reference_dir(game)
    freeze_agent(agent, out_dir, source=str(workdir))
    info = {
        "name": reference_name(game),
        "game": {"name": game.name, **dict(game.kwargs)},
        "algorithm": agent.config.algorithm,
        "network": run_labels(agent.config, workdir)["network"],
        "simulations": sims,
        "late_game_empty": late_game_empty,
        "iterations": agent.iteration,
        "training_wall_time_s": float(last.get("wall_time_s", float("nan"))),
        "train_flops": float(last.get("train_flops", float("nan"))),
        "config": str(config_path),
        "overrides": list(overrides),
    }
    return _assess_and_write(agent, game, out_dir, info, games=games, seed=seed)


def _assess_and_write(agent: Any, game: GameSpec, out_dir: Path, info: dict[str, Any], *,
                      games: int, seed: int, **assess: Any) -> dict[str, Any]:
    """Builds the opening book (where it applies), assesses, writes ``reference.json``."""
    start = time.perf_counter()
    sims, empty = int(info["simulations"]), info.get("late_game_empty")
    book: dict[str, int] = {}
    built = None
    if empty is not None:
        built = build_opening_book(agent, sims, int(empty), jax.random.key(seed + 1))
    book_path = out_dir / BOOK_FILENAME
    if built is None:
        info.pop("book", None)
        book_path.unlink(missing_ok=True)
    else:
        book, stats = built
        write_text_atomically(book_path, json.dumps(
            {"size": int(agent.config.env.size), "late_game_empty": int(empty),
             "moves": book}, sort_keys=True) + "\n")
        info["book"] = {"file": BOOK_FILENAME, **stats}
    quality = assess_reference(agent, game, sims, games=games, seed=seed,
                               late_game_empty=empty, book=book, **assess)
    info = {
        **info,
        "assessment_seconds": round(time.perf_counter() - start, 1),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quality": quality,
    }
    write_text_atomically(out_dir / REFERENCE_FILENAME, json.dumps(info, indent=2) + "\n")
    print(describe(info))
    print(f"frozen reference written to {out_dir}")
    return info


def reassess_reference(
    path: str | os.PathLike[str],
    *,
    simulations: int | None = None,
    late_game_empty: int | None | str = "default",
    games: int = 64,
    seed: int = 0,
    late_game_games: int = LATE_GAME_GAMES,
    exact_openings: bool = True,
    command: str = "",
) -> dict[str, Any]:
    """Re-assesses a frozen reference in place (no training): new play settings and a
    fresh ``quality`` (and opening book); the training fields of its ``reference.json``
    are kept. Returns the new ``reference.json``.

    ``simulations``: None keeps the stored count. ``late_game_empty``: ``"default"`` is
    ``default_late_game_empty``, None plays without the judge, an int sets E_ref."""
    from curiosity_search import load_agent
    from curiosity_search.eval.evaluation import game_spec

    path = Path(path)
    info = json.loads((path / REFERENCE_FILENAME).read_text())
    agent = load_agent(path)
    game = game_spec(agent.config)
    if simulations is not None:
        info["simulations"] = int(simulations)
    if late_game_empty == "default":
        late_game_empty = default_late_game_empty(game)
    info["late_game_empty"] = late_game_empty
    info.pop("quality", None)
    info["assessed_by"] = command or f"reassess_reference({str(path)!r})"
    return _assess_and_write(agent, game, path, info, games=games, seed=seed,
                             late_game_games=late_game_games, exact_openings=exact_openings)
