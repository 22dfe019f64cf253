"""``curiosity-search plot DIR... [--out OUT]`` (default OUT: the first DIR)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(verbs: argparse._SubParsersAction) -> None:
    """Adds the ``plot`` subparser."""
    p = verbs.add_parser("plot", help="draw figures from run or sweep directories")
    p.add_argument("dirs", type=Path, nargs="+", metavar="DIR", help="run or sweep directory")
    p.add_argument("--out", type=Path, help="folder for the figures (default: DIR)")


def run(args: argparse.Namespace) -> int:
    """Draws every figure and prints the files written."""
    from curiosity_search.plots.make import make_plots

    for path in make_plots(args.dirs, args.out or args.dirs[0]):
        print(path)
    return 0
