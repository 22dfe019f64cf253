"""``curiosity-search explain --checkpoint DIR [--moves "a1 b2"] [--simulations N]
[--seed S] [--out PATH.png]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from curiosity_search.cli.arguments import non_negative_int


def add_parser(verbs: argparse._SubParsersAction) -> None:
    """Adds the ``explain`` subparser."""
    p = verbs.add_parser(
        "explain",
        help="show the network and search view of a position (text report + PNG)",
        description="Prints the report on stdout and draws the board and the search at its "
        "root (prior, visits, policy target, Q or belief mean +- std, P(best)) into a PNG.",
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="run directory or checkpoint")
    p.add_argument("--moves", default="", help='moves from the empty board, e.g. "a1 b2"')
    p.add_argument("--simulations", type=non_negative_int, help="search simulations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("explain.png"),
                   help="PNG to write (default: explain.png in the current directory)")


def run(args: argparse.Namespace) -> int:
    """Prints the report and writes the figure."""
    from curiosity_search.eval.explain import explain_checkpoint

    return explain_checkpoint(
        args.checkpoint,
        moves=args.moves,
        simulations=args.simulations,
        seed=args.seed,
        out=args.out,
    )
