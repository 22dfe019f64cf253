"""Player specs: the strings that name a player on the command line and in configs.

``parse_player(spec, game, env)`` builds one:

- ``random``               uniform over legal moves.
- ``mcts:SIMS``            classic UCT expert: PUCT over a uniform prior with random
                           rollouts to the end of the game as leaf values (mctx).
- ``solver``               uniform among the optimal moves of the exact solver
                           (``envs.solve``; tiny boards only).
- ``checkpoint:DIR[@SIMS]`` a trained network from a run directory or checkpoint; no
                           ``@SIMS`` means the raw policy (0 simulations, the apprentice),
                           ``@32`` the network with its search rule at 32 simulations.
- ``htp:COMMAND``          an external HTP engine, e.g. ``htp:mohex --use-logfile=0``.
- ``reference[@SIMS]``     the frozen reference network for the game being played
                           (``eval.reference_player``), at its own or ``SIMS`` simulations.

A bare existing directory (``DIR`` or ``DIR@SIMS``) is read as ``checkpoint:``.
"""

from __future__ import annotations

import os
from typing import Any

from curiosity_search.eval.players import (
    GameSpec,
    checkpoint_player,
    mcts_player,
    random_player,
    solver_player,
)
from curiosity_search.eval.reference_player import reference_player
from curiosity_search.htp.client import HtpPlayer


def _parse_count(kind: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < minimum:
        raise ValueError(f"player spec {kind}:{text!r}: expected an integer >= {minimum}")
    return value


def parse_player(spec: str, game: GameSpec, env: Any = None) -> Any:
    """Builds a player from its spec string (see the module docstring).

    Args:
      spec: ``random``, ``mcts:SIMS``, ``solver``, ``checkpoint:DIR[@SIMS]`` or
        ``htp:COMMAND``.
      game: the game played (for the solver, the env, and the HTP board size).
      env: the env instance, built from ``game`` when omitted.

    Returns:
      a ``JaxPlayer``, or an ``HtpPlayer`` for ``htp:``.
    """
    spec = spec.strip()
    kind, _, arg = spec.partition(":")
    if kind == "random" and not arg:
        return random_player()
    if kind == "solver" and not arg:
        return solver_player(game)
    if kind == "mcts":
        env = env if env is not None else game.make_env()
        return mcts_player(env, _parse_count("mcts", arg, 1))
    if kind == "checkpoint" and arg:
        path, sims = arg, 0
        head, at, tail = arg.rpartition("@")
        if at and tail.isdigit():
            path, sims = head, int(tail)
        return checkpoint_player(path, sims)
    ref, at, sims_text = spec.partition("@")
    if ref == "reference" and (not at or sims_text.isdigit()):
        return reference_player(game, int(sims_text) if at else None)
    if kind == "htp" and arg:
        size = dict(game.kwargs).get("size")
        if game.name != "hex" or size is None:
            raise ValueError(f"htp players need game 'hex' with a size; got {game}")
        return HtpPlayer(arg, size=int(size), swap=bool(dict(game.kwargs).get("swap", False)))
    head, at, tail = spec.rpartition("@")
    path, sims = (head, int(tail)) if at and tail.isdigit() else (spec, 0)
    if os.path.isdir(path):  # a bare run directory or checkpoint folder
        return checkpoint_player(path, sims)
    raise ValueError(
        f"unknown player spec {spec!r}; allowed: random, mcts:SIMS, solver, "
        "checkpoint:DIR[@SIMS], reference[@SIMS], htp:COMMAND"
    )
