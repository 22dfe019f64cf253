"""Evaluation: players, matches, Elo, the HTP engine, sweeps and plots.

Modules (imported lazily, so ``plots`` and ``elo`` never pull in JAX):

- ``players``    ``parse_player(spec, game)``: random, ``mcts:SIMS``, solver,
                 ``checkpoint:DIR[@SIMS]``, ``htp:COMMAND``; ``JaxPlayer``.
- ``arena``      ``play_match`` / ``run_match`` over both colours, ``append_csv``.
- ``match_result`` ``MatchResult`` and ``summarize`` (no JAX).
- ``wilson``     ``wilson_interval``: the score's confidence interval (no JAX).
- ``host_match`` one-game-at-a-time matches for HTP programs.
- ``elo``        ``fit_elo``: Bradley-Terry maximum likelihood with standard errors.
- ``frontier``   ``fit_frontier``: elo = min(0, max(incline, plateau)) in log-compute.
- ``htp``        ``HtpEngine`` and ``play_main`` (``curiosity-search play``).
- ``htp_player`` ``HtpPlayer``: an external HTP program as a player.
- ``evaluation`` ``EvalPlan``, ``evaluate_point``, ``evaluate_run`` (writes ``eval.csv``),
                 ``eval_main`` (``curiosity-search eval``).
- ``sweep``      ``load_sweep``, ``run_sweep``, ``sweep_main`` (``curiosity-search sweep``).
- ``plots``      ``make_plots``, ``plot_main`` (``curiosity-search plot``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "JaxPlayer": "players",
    "GameSpec": "players",
    "parse_player": "players",
    "MatchResult": "match_result",
    "play_match": "arena",
    "run_match": "arena",
    "wilson_interval": "wilson",
    "fit_elo": "elo",
    "PairResult": "elo",
    "fit_frontier": "frontier",
    "HtpEngine": "htp",
    "HtpPlayer": "htp_player",
    "EvalPlan": "evaluation",
    "evaluate_run": "evaluation",
    "load_sweep": "sweep",
    "run_sweep": "sweep",
    "make_plots": "plots",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = sorted(_EXPORTS)
