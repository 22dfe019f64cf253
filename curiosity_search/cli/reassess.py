"""``python -m curiosity_search.cli.reassess DIR [--simulations N] [--late-game-empty E |
--no-late-game] [--games G] [--late-game-games G] [--no-exact-openings] [--seed S]``:
re-assess a frozen reference in place (no training; ``references.reassess_reference``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "python -m curiosity_search.cli.reassess"


def main(argv: Sequence[str] | None = None) -> int:
    """Parses ``argv`` (default ``sys.argv[1:]``) and re-assesses the reference; returns 0."""
    from curiosity_search.eval.references import LATE_GAME_GAMES

    parser = argparse.ArgumentParser(prog=PROG, description="re-assess a frozen reference in place")
    parser.add_argument("dir", type=Path)
    parser.add_argument("--simulations", type=int)
    parser.add_argument("--late-game-empty", type=int)
    parser.add_argument("--no-late-game", action="store_true")
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--late-game-games", type=int, default=LATE_GAME_GAMES)
    parser.add_argument("--no-exact-openings", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from curiosity_search.compilation_cache import enable_compilation_cache
    from curiosity_search.eval.references import reassess_reference

    enable_compilation_cache()
    empty: int | None | str = "default"
    if args.no_late_game:
        empty = None
    elif args.late_game_empty is not None:
        empty = args.late_game_empty
    command = f"{PROG} " + " ".join(argv if argv is not None else sys.argv[1:])
    reassess_reference(
        args.dir, simulations=args.simulations, late_game_empty=empty, games=args.games,
        seed=args.seed, late_game_games=args.late_game_games,
        exact_openings=not args.no_exact_openings, command=command,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
