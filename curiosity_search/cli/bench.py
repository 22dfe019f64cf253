"""``curiosity-search bench {search,train} [--config FILE] [--set ...] [--repeats N]
[--out CSV] [--batch B ...] [--sims S ...]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from curiosity_search.cli.arguments import add_overrides, positive_int


def add_parser(verbs: argparse._SubParsersAction) -> None:
    """Adds the ``bench`` subparser."""
    p = verbs.add_parser("bench", help="time the search kernel or a training iteration")
    p.add_argument("kind", choices=["search", "train"], help="what to time")
    p.add_argument("--config", type=Path, help="YAML config (default: the schema defaults)")
    add_overrides(p)
    p.add_argument("--repeats", type=positive_int, default=3, help="timed repeats (default 3)")
    p.add_argument("--out", type=Path, help="CSV to write (default results/bench/KIND_DEVICE.csv)")
    p.add_argument("--batch", type=positive_int, nargs="+", help="search: batches")
    p.add_argument("--sims", type=positive_int, nargs="+", help="search: simulation counts")


def prepare(args: argparse.Namespace) -> None:
    """Validates the benchmark's config (file or schema defaults) into ``args.cfg``."""
    from curiosity_search.config import apply_overrides, config_from_dict, load_config

    if args.config is not None:
        args.cfg = load_config(args.config, args.set)
    else:
        args.cfg = config_from_dict(apply_overrides({}, args.set))


def run(args: argparse.Namespace) -> int:
    """Times the search policies or one training iteration and writes the CSV."""
    if args.kind == "search":
        from curiosity_search.bench.search import run_search_bench

        run_search_bench(
            args.batch or (64, 256), args.sims or (32, 128), repeats=args.repeats, out=args.out
        )
        return 0
    from curiosity_search.bench.train import run_train_bench

    run_train_bench(args.cfg, repeats=args.repeats, out=args.out)
    return 0
