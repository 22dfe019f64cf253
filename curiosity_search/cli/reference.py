"""``curiosity-search reference --config FILE [--set ...] [--workdir DIR] [--out DIR]
[--simulations N] [--games G] [--seed S]``: train, freeze and assess a reference."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from curiosity_search.cli.arguments import add_overrides, positive_int


def add_parser(verbs: argparse._SubParsersAction) -> None:
    """Adds the ``reference`` subparser."""
    p = verbs.add_parser(
        "reference",
        help="train, freeze (params only) and assess a reference opponent",
        description="Trains the config (resuming; skipped when finished), freezes the "
        "parameters into curiosity_search/references/<game><size> (or --out) and "
        "writes its measured quality to reference.json there. Play it with the "
        "player spec `reference[@SIMS]`.",
    )
    p.add_argument("--config", type=Path, required=True, help="e.g. configs/references/hex5.yaml")
    add_overrides(p)
    p.add_argument("--workdir", type=Path, help="training run directory (default runs/<name>)")
    p.add_argument("--out", type=Path, help="frozen reference folder (default: the package's)")
    p.add_argument("--simulations", type=positive_int,
                   help="simulations it plays with (default: search.eval_num_simulations)")
    p.add_argument("--games", type=positive_int, default=64,
                   help="games per assessment match (default 64)")
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    """Builds the reference; exit code 1 (one ``error: reference: ...`` line) on a
    ``FileNotFoundError`` or ``RuntimeError`` (e.g. a training run that did not finish)."""
    from curiosity_search.eval.references import build_reference

    try:
        build_reference(
            args.config,
            overrides=args.set or (),
            workdir=args.workdir,
            out=args.out,
            simulations=args.simulations,
            games=args.games,
            seed=args.seed,
        )
    except (FileNotFoundError, RuntimeError) as error:
        print(f"error: reference: {error}", file=sys.stderr)
        return 1
    return 0
