"""The ``curiosity-search`` command line: a thin argparse front over each layer's entry point.

Each verb parses its flags, validates what it can without JAX (configs above all), then
imports its handler lazily and calls it with the parsed ``argparse.Namespace``:

=========  ==================================================
train      ``curiosity_search.train.run.train_main(args)``
eval       ``curiosity_search.eval.evaluation.eval_main(args)``
sweep      ``curiosity_search.eval.sweep.sweep_main(args)``
plot       ``curiosity_search.eval.plots.plot_main(args)``
bench      ``curiosity_search.bench.bench_main(args)``
play       ``curiosity_search.eval.htp.play_main(args)``
explain    ``curiosity_search.eval.explain.explain_main(args)``
=========  ==================================================

A handler returns an exit code (``None`` means 0). A ``UserError`` anywhere (a bad
config, run directory, checkpoint or sweep file: ``curiosity_search.errors``) or an
``OSError`` (a file that cannot be read or written) prints ``error: <message>`` on one
line and exits 2; usage errors exit 2 through argparse. Warnings raised by the package
(a damaged checkpoint skipped, a hole in ``metrics.jsonl``) print as one
``warning: <message>`` line. A closed stdout (``... | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from curiosity_search import __version__
from curiosity_search.errors import UserError

PROG = "curiosity-search"

# verb -> (module, function); the module is imported only when the verb runs.
HANDLERS: dict[str, tuple[str, str]] = {
    "train": ("curiosity_search.train.run", "train_main"),
    "eval": ("curiosity_search.eval.evaluation", "eval_main"),
    "sweep": ("curiosity_search.eval.sweep", "sweep_main"),
    "plot": ("curiosity_search.eval.plots", "plot_main"),
    "bench": ("curiosity_search.bench", "bench_main"),
    "play": ("curiosity_search.eval.htp", "play_main"),
    "explain": ("curiosity_search.eval.explain", "explain_main"),
    "reference": ("curiosity_search.eval.references", "reference_main"),
}
# Verbs that never touch JAX skip the compilation cache (and its JAX import).
NO_JAX_VERBS = frozenset({"plot"})


class UsageError(UserError):
    """A flag combination argparse cannot express; printed as ``error: ...``, exit 2."""


# ----------------------------------------------------------------------------- arg types
def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def shard_spec(text: str) -> tuple[int, int]:
    """argparse type: ``I/N`` with 0 <= I < N, e.g. ``2/8`` -> ``(2, 8)``."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not sep or n < 1 or not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N with 0 <= I < N (e.g. 0/4)")
    return i, n


# ----------------------------------------------------------------------------- parser
def _add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="set",
        action="extend",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set search.num_simulations=32 train.iterations=10",
    )


def build_parser() -> argparse.ArgumentParser:
    """The full parser: one subparser per verb."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Self-play and tree search (PUCT, Gumbel, curiosity) for board games.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = verbs.add_parser("train", help="train an agent from a YAML config")
    p.add_argument("--config", type=Path, help="YAML config (may `extends:` another)")
    _add_overrides(p)
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

    p = verbs.add_parser("eval", help="play a checkpoint against an opponent")
    p.add_argument("--checkpoint", type=Path, required=True, help="run directory or checkpoint")
    p.add_argument(
        "--opponent",
        default="random",
        metavar="SPEC",
        help="opponent, e.g. random, solver, or another run directory (default: random)",
    )
    p.add_argument("--games", type=positive_int, default=64, help="games to play (default 64)")
    p.add_argument("--simulations", type=non_negative_int, help="search simulations per move")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="write the result table here")

    p = verbs.add_parser("sweep", help="launch (a shard of) a sweep of training runs")
    p.add_argument("file", type=Path, metavar="FILE", help="sweep YAML")
    p.add_argument("--dry-run", action="store_true", help="list the runs without starting them")
    p.add_argument(
        "--shard", type=shard_spec, default=(0, 1), metavar="I/N", help="run slice I of N"
    )
    p.add_argument("--jobs", type=positive_int, default=1, help="runs at a time (default 1)")
    p.add_argument("--workdir", type=Path, help="root folder for the sweep's run directories")

    p = verbs.add_parser("plot", help="draw figures from run or sweep directories")
    p.add_argument("dirs", type=Path, nargs="+", metavar="DIR", help="run or sweep directory")
    p.add_argument("--out", type=Path, help="folder for the figures (default: DIR)")

    p = verbs.add_parser("bench", help="time the search kernel or a training iteration")
    p.add_argument("kind", choices=["search", "train"], help="what to time")
    p.add_argument("--config", type=Path, help="YAML config (default: the schema defaults)")
    _add_overrides(p)
    p.add_argument("--repeats", type=positive_int, default=3, help="timed repeats (default 3)")
    p.add_argument("--out", type=Path, help="CSV to write (default results/bench/KIND_DEVICE.csv)")
    p.add_argument("--batch", type=positive_int, nargs="+", help="search: batches")
    p.add_argument("--sims", type=positive_int, nargs="+", help="search: simulation counts")

    p = verbs.add_parser("play", help="HTP engine on stdin/stdout (for HexGui and friends)")
    p.add_argument("--checkpoint", type=Path, required=True, help="run directory or checkpoint")
    p.add_argument("--simulations", type=non_negative_int, help="search simulations per move")
    p.add_argument("--seed", type=int, default=0)

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

    p = verbs.add_parser(
        "reference",
        help="train, freeze (params only) and assess a reference opponent",
        description="Trains the config (resuming; skipped when finished), freezes the "
        "parameters into curiosity_search/references/<game><size> (or --out) and "
        "writes its measured quality to reference.json there. Play it with the "
        "player spec `reference[@SIMS]`.",
    )
    p.add_argument("--config", type=Path, required=True, help="e.g. configs/references/hex5.yaml")
    _add_overrides(p)
    p.add_argument("--workdir", type=Path, help="training run directory (default runs/<name>)")
    p.add_argument("--out", type=Path, help="frozen reference folder (default: the package's)")
    p.add_argument("--simulations", type=positive_int,
                   help="simulations it plays with (default: search.eval_num_simulations)")
    p.add_argument("--games", type=positive_int, default=64,
                   help="games per assessment match (default 64)")
    p.add_argument("--seed", type=int, default=0)
    return parser


# ----------------------------------------------------------------------------- verbs
def prepare_train(args: argparse.Namespace) -> None:
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


def prepare_bench(args: argparse.Namespace) -> None:
    """Validates the benchmark's config (file or schema defaults) into ``args.cfg``."""
    from curiosity_search.config import apply_overrides, config_from_dict, load_config

    if args.config is not None:
        args.cfg = load_config(args.config, args.set)
    else:
        args.cfg = config_from_dict(apply_overrides({}, args.set))


PREPARE = {"train": prepare_train, "bench": prepare_bench}


def dispatch(verb: str, args: argparse.Namespace) -> int:
    """Imports the verb's handler and runs it."""
    module_name, func_name = HANDLERS[verb]
    module: ModuleType = importlib.import_module(module_name)
    handler = getattr(module, func_name, None)
    if handler is None:
        print(f"error: {module_name} has no {func_name}(args)", file=sys.stderr)
        return 1
    if verb not in NO_JAX_VERBS:
        from curiosity_search.compilation_cache import enable_compilation_cache

        enable_compilation_cache()
    result = handler(args)
    return 0 if result is None else int(result)


DEFAULT_FORMATWARNING = warnings.formatwarning


def one_line_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int,
    line: str | None = None,
) -> str:
    """``warnings.formatwarning`` for the CLI: the package's own warnings as one
    ``warning: ...`` line, every other warning as Python formats it."""
    if category.__module__.startswith("curiosity_search") or "curiosity_search" in filename:
        return f"warning: {message}\n"
    return DEFAULT_FORMATWARNING(message, category, filename, lineno, line)


def _quiet_stdout() -> None:
    """Points stdout at /dev/null once its reader has gone (no second BrokenPipeError
    when Python flushes it at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) and usage errors (2)
        return exit_.code if isinstance(exit_.code, int) else 2
    previous_format = warnings.formatwarning
    warnings.formatwarning = one_line_warning
    try:
        prepare = PREPARE.get(args.command)
        if prepare is not None:
            prepare(args)
        return dispatch(args.command, args)
    except UserError as err:  # ConfigError, RunDirError, CheckpointError, SweepError...
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        _quiet_stdout()
        return 141  # 128 + SIGPIPE, as if the shell had stopped us
    except OSError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = previous_format


if __name__ == "__main__":
    raise SystemExit(main())
