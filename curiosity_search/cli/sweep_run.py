"""``python -m curiosity_search.cli.sweep_run FILE --run NAME [--workdir DIR]
[--parent-pid PID]``: trains, evaluates and marks one run of a sweep, and prints its
summary as one JSON line (the child process of ``curiosity-search sweep --jobs J``,
started by ``sweeps.jobs``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "python -m curiosity_search.cli.sweep_run"


def main(argv: Sequence[str] | None = None) -> int:
    """Parses ``argv`` (default ``sys.argv[1:]``) and runs the one run; returns the exit
    code (2 after one ``error: ...`` line for a bad sweep file or run name)."""
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("file", type=Path)
    parser.add_argument("--run", required=True, help="the one run to train and evaluate")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--parent-pid", type=int,
                        help="exit when this process (the sweep) has gone")
    args = parser.parse_args(argv)
    from curiosity_search.sweeps.jobs import die_with_parent

    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    from curiosity_search.compilation_cache import enable_compilation_cache
    from curiosity_search.errors import UserError
    from curiosity_search.sweeps.sweep import execute_run, load_sweep

    enable_compilation_cache()
    try:
        sweep = load_sweep(args.file, args.workdir)
        summary = execute_run(sweep, sweep.get(args.run))
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
