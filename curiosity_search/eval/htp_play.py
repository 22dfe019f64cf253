"""A player behind the HTP engine: ``curiosity-search play`` and any player spec.

``play_checkpoint`` serves a checkpoint (its board size only) on stdin/stdout;
``play_spec`` serves any player spec (``player_specs.parse_player``) at every board size.
Both refuse a player they cannot build (a ``--checkpoint`` that is missing, not a run,
damaged or not Hex without swap) with one ``error: play: ...`` line and exit code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from curiosity_search.htp.engine import (
    GeneratorFactory,
    HtpEngine,
    HtpFailure,
    MoveGenerator,
    capped,
    serve,
)


def generator_from_player(player: Any, seed: int = 0) -> MoveGenerator:
    """Wraps a ``JaxPlayer`` as a move generator (batch of one, a fresh key per move)."""
    import jax

    act = jax.jit(player.apply)
    base_key = jax.random.key(seed)
    moves = [0]

    def generate(state: Any) -> int:
        batch = jax.tree.map(lambda x: x[None], state)
        moves[0] += 1
        return int(act(player.params, jax.random.fold_in(base_key, moves[0]), batch)[0])

    return generate


def spec_generator_factory(spec: str, seed: int = 0) -> GeneratorFactory:
    """A factory building ``parse_player(spec)`` for each board's env."""
    from curiosity_search.eval.player_specs import parse_player
    from curiosity_search.eval.players import GameSpec, JaxPlayer

    def make_generator(env: Any) -> MoveGenerator:
        game = GameSpec("hex", {"size": env.size, "swap": False})
        player = parse_player(spec, game, env)
        if not isinstance(player, JaxPlayer):
            raise HtpFailure(f"player {spec!r} cannot run inside the engine")
        return generator_from_player(player, seed)

    return make_generator


def checkpoint_engine(checkpoint: str, simulations: int | None = None, seed: int = 0) -> HtpEngine:
    """An engine playing a checkpoint (its board size only) with ``simulations``."""
    from curiosity_search import load_agent
    from curiosity_search.eval.players import checkpoint_player

    agent = load_agent(checkpoint)
    env_cfg = agent.config.env
    if env_cfg.name != "hex" or env_cfg.swap:
        raise ValueError(
            f"play: checkpoint {checkpoint} plays env.name={env_cfg.name!r} "
            f"swap={env_cfg.swap}; allowed: hex without swap"
        )
    sims = agent.config.search.eval_num_simulations if simulations is None else simulations
    player = checkpoint_player(checkpoint, sims, agent=agent)
    return HtpEngine(
        lambda env: generator_from_player(player, seed),
        size=env_cfg.size,
        sizes=[env_cfg.size],
        make_env=lambda size: agent.env,
        name=f"curiosity_search ({agent.config.algorithm}, {sims} simulations)",
    )


def _load_engine(build: Callable[[], HtpEngine]) -> HtpEngine | None:
    """``build()``, or ``None`` after printing one ``error: ...`` line for a bad
    checkpoint (missing, not a run directory, damaged, another game)."""
    from curiosity_search.errors import UserError

    try:
        return build()
    except (UserError, OSError, ValueError) as error:
        print(f"error: play: {capped(str(error), 400)}", file=sys.stderr)
        return None


def play_checkpoint(checkpoint: str | Path, simulations: int | None = None, seed: int = 0) -> int:
    """``curiosity-search play``: serves ``checkpoint`` with ``simulations`` (default the
    run's ``search.eval_num_simulations``) on stdin/stdout.

    Returns the exit code: 0 after ``quit``, end of input or a closed stdout; 2 when the
    checkpoint cannot be played (one ``error: ...`` line).
    """
    engine = _load_engine(lambda: checkpoint_engine(str(checkpoint), simulations, seed))
    if engine is None:
        return 2
    return serve(engine)


def play_spec(spec: str, size: int = 11, seed: int = 0) -> int:
    """Serves the player ``spec`` (e.g. ``random``, ``mcts:64``) on stdin/stdout, starting
    on a ``size`` x ``size`` board; exit codes as ``play_checkpoint``."""
    engine = _load_engine(lambda: HtpEngine(spec_generator_factory(spec, seed), size=size))
    if engine is None:
        return 2
    return serve(engine)
