"""``python -m curiosity_search.cli.htp_engine (--player SPEC | --checkpoint DIR)
[--simulations N] [--size N] [--seed S]``: any player spec (or a checkpoint) behind the
HTP engine on stdin/stdout, e.g. as the opponent ``htp:COMMAND`` of a match."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

PROG = "python -m curiosity_search.cli.htp_engine"


def main(argv: Sequence[str] | None = None) -> int:
    """Parses ``argv`` (default ``sys.argv[1:]``) and serves the engine; returns the exit
    code (2 after one ``error: play: ...`` line when the player cannot be built)."""
    parser = argparse.ArgumentParser(prog=PROG)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--player", help="random, mcts:SIMS, solver, checkpoint:DIR[@SIMS]")
    group.add_argument("--checkpoint", help="run directory or checkpoint")
    parser.add_argument("--simulations", type=int, help="with --checkpoint")
    parser.add_argument("--size", type=int, default=11, help="initial board size (default 11)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from curiosity_search.compilation_cache import enable_compilation_cache
    from curiosity_search.eval.htp_play import play_checkpoint, play_spec

    enable_compilation_cache()
    if args.checkpoint:
        return play_checkpoint(args.checkpoint, args.simulations, args.seed)
    return play_spec(args.player, args.size, args.seed)


if __name__ == "__main__":
    raise SystemExit(main())
