"""``curiosity-search eval --checkpoint DIR [--opponent SPEC] [--games N] [--simulations N]
[--seed S] [--out CSV]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from curiosity_search.cli.arguments import non_negative_int, positive_int


def add_parser(verbs: argparse._SubParsersAction) -> None:
    """Adds the ``eval`` subparser."""
    p = verbs.add_parser("eval", help="play a checkpoint against an opponent")
    p.add_argument("--checkpoint", type=Path, required=True, help="run directory or checkpoint")
    p.add_argument(
        "--opponent",
        default="random",
        metavar="SPEC",
        help="opponent, e.g. random, solver, or another run directory (default: random)",
    )
    p.add_argument("--games", type=positive_int, default=64, help="games to play (default 64)")
    p.add_argument("--simulations", type=non_negative_int, help="search simulations per move")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="write the result table here")


def run(args: argparse.Namespace) -> int:
    """Plays the match, prints it and appends it to the result table."""
    from curiosity_search.eval.evaluation import evaluate_checkpoint

    evaluate_checkpoint(
        args.checkpoint,
        args.opponent,
        args.games,
        simulations=args.simulations,
        seed=args.seed,
        out=args.out,
    )
    return 0
