"""``curiosity-search train --config FILE [--set KEY=VALUE ...] [--workdir DIR]
[--resume | --restart]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from curiosity_search.cli.arguments import UsageError, add_overrides


def add_parser(verbs: argparse._SubParsersAction) -> None:
    """Adds the ``train`` subparser."""
    p = verbs.add_parser("train", help="train an agent from a YAML config")
    p.add_argument("--config", type=Path, help="YAML config (may `extends:` another)")
    add_overrides(p)
    p.add_argument("--workdir", type=Path, help="run directory (default: runs/<config stem>)")
    again = p.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue from the newest good checkpoint in --workdir (--config optional then)",
    )
    again.add_argument(
        "--restart",
        action="store_true",
        help="delete the run in --workdir (checkpoints, metrics, TensorBoard, evaluation) "
        "and start over",
    )


def prepare(args: argparse.Namespace) -> None:
    """Loads and validates the config, picks the workdir, writes ``config.yaml`` there.

    Sets ``args.cfg`` (the resolved ``Config``), ``args.workdir`` (a ``Path``) and, for
    ``--resume`` or ``--restart`` without ``--config``, ``args.config`` (the run's saved
    ``config.yaml``).
    The workdir must be able to hold a run (``workdir_lock.check_workdir``; with
    ``--resume`` it must exist). ``config.yaml`` is written only into a workdir that has
    none yet: an existing run's file is left for the train layer, which rewrites it once
    the workdir checks and the restore have passed.
    """
    from curiosity_search.config import ConfigError, load_config, save_config
    from curiosity_search.train.workdir_lock import RunDirError, check_workdir

    resume = bool(getattr(args, "resume", False))
    again = "--resume" if resume else "--restart" if getattr(args, "restart", False) else None
    if args.config is None:
        if again is None or args.workdir is None:
            raise UsageError("train needs --config FILE (or --resume/--restart --workdir DIR)")
        check_workdir(args.workdir, must_exist=True)
        args.config = args.workdir / "config.yaml"
        if not args.config.exists():
            raise UsageError(f"{again}: {args.config} not found; pass --config FILE")
        try:
            args.cfg = load_config(args.config, args.set)
        except ConfigError as error:
            raise ConfigError(f"{error}; pass --config FILE (the run's config) with {again}") \
                from None
    else:
        args.cfg = load_config(args.config, args.set)
    if args.workdir is None:
        args.workdir = Path("runs") / args.config.stem
    check_workdir(args.workdir, must_exist=resume)
    target = args.workdir / "config.yaml"
    if not target.exists():
        try:
            save_config(args.cfg, target)
        except OSError as error:
            raise RunDirError(f"cannot write to run directory {args.workdir}: "
                              f"{error.strerror or error}; choose another --workdir") from None


def run(args: argparse.Namespace) -> int:
    """Trains ``args.cfg`` (set by ``prepare``) in ``args.workdir``."""
    from curiosity_search.train.run import train_and_report

    return train_and_report(args.cfg, args.workdir, resume=args.resume, restart=args.restart)
