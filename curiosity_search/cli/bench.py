"""``curiosity-search bench {search,train} [--config FILE] [--set ...] [--repeats N]
[--out CSV] [--batch B ...] [--sims S ...] [--baseline FILE] [--rounds R]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from curiosity_search.cli.arguments import UsageError, add_overrides, positive_int


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
    p.add_argument("--baseline", type=Path,
                   help="train: a second YAML config timed side by side in this process "
                        "(alternating rounds); rows get positions/s over the baseline's")
    p.add_argument("--rounds", type=positive_int, default=2,
                   help="train with --baseline: rounds of both configs (default 2, ABBA)")


def prepare(args: argparse.Namespace) -> None:
    """Validates the benchmark's config (file or schema defaults) into ``args.cfg`` and
    the baseline's (its file as written, without ``--set``) into ``args.baseline_cfg``."""
    from curiosity_search.config import apply_overrides, config_from_dict, load_config

    if args.config is not None:
        args.cfg = load_config(args.config, args.set)
    else:
        args.cfg = config_from_dict(apply_overrides({}, args.set))
    if args.baseline is not None and args.kind != "train":
        raise UsageError(f"bench {args.kind}: --baseline {args.baseline} applies to "
                         "'bench train' only")
    args.baseline_cfg = load_config(args.baseline) if args.baseline is not None else None


def run(args: argparse.Namespace) -> int:
    """Times the search policies or one training iteration and writes the CSV."""
    if args.kind == "search":
        from curiosity_search.bench.search import run_search_bench

        run_search_bench(
            args.batch or (64, 256), args.sims or (32, 128), repeats=args.repeats, out=args.out,
            search_cfg=args.cfg.search,
        )
        return 0
    from curiosity_search.bench.train import run_train_bench

    run_train_bench(args.cfg, repeats=args.repeats, out=args.out, baseline=args.baseline_cfg,
                    rounds=args.rounds)
    return 0
