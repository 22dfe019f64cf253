"""``curiosity-search sweep FILE [--dry-run] [--shard I/N] [--jobs J] [--workdir DIR]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from curiosity_search.cli.arguments import positive_int, shard_spec


def add_parser(verbs: argparse._SubParsersAction) -> None:
    """Adds the ``sweep`` subparser."""
    p = verbs.add_parser("sweep", help="launch (a shard of) a sweep of training runs")
    p.add_argument("file", type=Path, metavar="FILE", help="sweep YAML")
    p.add_argument("--dry-run", action="store_true", help="list the runs without starting them")
    p.add_argument(
        "--shard", type=shard_spec, default=(0, 1), metavar="I/N", help="run slice I of N"
    )
    p.add_argument("--jobs", type=positive_int, default=1, help="runs at a time (default 1)")
    p.add_argument("--workdir", type=Path, help="root folder for the sweep's run directories")


def run(args: argparse.Namespace) -> int:
    """Runs (or lists) the shard's unfinished runs; exit code 1 when any run failed."""
    from curiosity_search.sweeps.sweep import load_sweep, parse_shard, run_sweep

    sweep = load_sweep(args.file, args.workdir)
    failed = run_sweep(
        sweep, shard_spec=parse_shard(args.shard), jobs=args.jobs, dry_run=args.dry_run
    )
    if failed:
        print(f"{len(failed)} run(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
