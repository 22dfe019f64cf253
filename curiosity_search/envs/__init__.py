"""Environments: pgx games by id, Hex of any size in [3, 19], exact solvers for tiny boards,
and an exact late-game judge for Hex of any size.

Usage::

    env = make("hex", size=5, swap=False)    # our sized Hex (see ``envs.hex``)
    env = make("tic_tac_toe")                # any pgx id passes through to ``pgx.make``
    solution = solve("hex", size=4)          # exact values for 4x4 Hex without swap
    judge = LateGameJudge(size=7)            # exact values and winning moves of late
    verdict = judge.judge_states(states)     #   positions (<= 14 empty cells) of any size
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import pgx

from curiosity_search.envs.hex import Hex, State, action_to_cell, cell_to_action
from curiosity_search.envs.late_game import LateGameJudge, LateGameVerdict
from curiosity_search.envs.sampling import sample_random_positions
from curiosity_search.envs.solvers import Solution, solve

_HEX_KWARGS = ("size", "swap")


@functools.cache
def _pgx_env(name: str) -> pgx.Env:
    # pgx envs are stateless; one instance per id keeps them usable as static jit args.
    # pgx modules build jnp constants at import: keep them concrete even when the first
    # ``make`` happens inside a jit trace.
    with jax.ensure_compile_time_eval():
        return pgx.make(name)


def make(name: str, **kwargs: Any) -> pgx.Env:
    """Returns a pgx ``Env`` by id.

    ``make("hex", size=n, swap=...)`` (any Hex keyword given) returns our ``Hex`` (3 <= n
    <= 19, default size 11, swap True; ``n * n + 1`` actions, the last is the swap move).
    Every other call, including ``make("hex")`` with no keywords, returns ``pgx.make(name)``
    (the same instance for the same id). pgx's constructors take no keywords, so keywords
    for other ids raise ValueError, as do unknown ids and out-of-range Hex sizes.
    """
    if name == "hex" and kwargs:
        unknown = sorted(set(kwargs) - set(_HEX_KWARGS))
        if unknown:
            raise ValueError(
                f"hex: unknown keyword argument(s) {unknown}; allowed: {list(_HEX_KWARGS)}"
            )
        return Hex(**kwargs)
    if kwargs:
        raise ValueError(
            f"{name}: pgx environments take no keyword arguments, got {sorted(kwargs)}"
        )
    return _pgx_env(name)


__all__ = [
    "Hex",
    "LateGameJudge",
    "LateGameVerdict",
    "Solution",
    "State",
    "action_to_cell",
    "cell_to_action",
    "make",
    "sample_random_positions",
    "solve",
]
