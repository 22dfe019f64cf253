"""``curiosity-search play --checkpoint DIR [--simulations N] [--seed S]``: an HTP engine."""

from __future__ import annotations

import argparse
from pathlib import Path

from curiosity_search.cli.arguments import non_negative_int


def add_parser(verbs: argparse._SubParsersAction) -> None:
    """Adds the ``play`` subparser."""
    p = verbs.add_parser("play", help="HTP engine on stdin/stdout (for HexGui and friends)")
    p.add_argument("--checkpoint", type=Path, required=True, help="run directory or checkpoint")
    p.add_argument("--simulations", type=non_negative_int, help="search simulations per move")
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    """Serves the checkpoint over HTP until ``quit`` or end of input."""
    from curiosity_search.eval.htp_play import play_checkpoint

    return play_checkpoint(args.checkpoint, args.simulations, args.seed)
