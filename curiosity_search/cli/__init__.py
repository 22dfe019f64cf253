"""The ``curiosity-search`` command line: one small module per verb over typed library calls.

Each verb module (``cli/<verb>.py``) adds its subparser (``add_parser``), may validate
what it can without JAX (``prepare``: configs above all), and runs (``run(args)``) by
importing its library function lazily and calling it with typed arguments:

=========  ==================================================
train      ``curiosity_search.train.run.train_and_report``
eval       ``curiosity_search.eval.evaluation.evaluate_checkpoint``
sweep      ``curiosity_search.sweeps.sweep.load_sweep`` / ``run_sweep``
plot       ``curiosity_search.plots.make.make_plots``
bench      ``curiosity_search.bench.search.run_search_bench`` /
           ``curiosity_search.bench.train.run_train_bench``
play       ``curiosity_search.eval.htp_play.play_checkpoint``
explain    ``curiosity_search.eval.explain.explain_checkpoint``
reference  ``curiosity_search.eval.references.build_reference``
=========  ==================================================

Entry points run with ``python -m`` (not verbs): ``cli.reassess`` (re-assess a frozen
reference), ``cli.htp_engine`` (any player spec behind the HTP engine) and
``cli.sweep_run`` (one run of a sweep, the child process of ``sweep --jobs``).

A verb returns an exit code (``None`` means 0). A ``UserError`` anywhere (a bad
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
from types import ModuleType

from curiosity_search import __version__
from curiosity_search.errors import UserError

PROG = "curiosity-search"

VERBS = ("train", "eval", "sweep", "plot", "bench", "play", "explain", "reference")
# verb -> (module, function); the module's library imports happen only when the verb runs.
HANDLERS: dict[str, tuple[str, str]] = {verb: (f"{__name__}.{verb}", "run") for verb in VERBS}
# Verbs that never touch JAX skip the compilation cache (and its JAX import).
NO_JAX_VERBS = frozenset({"plot"})


def verb_module(verb: str) -> ModuleType:
    """The module ``cli/<verb>.py`` (argparse only at import time)."""
    return importlib.import_module(f"{__name__}.{verb}")


def build_parser() -> argparse.ArgumentParser:
    """The full parser: one subparser per verb."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Self-play and tree search (PUCT, Gumbel, curiosity) for board games.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for verb in VERBS:
        verb_module(verb).add_parser(verbs)
    return parser


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
        prepare = getattr(verb_module(args.command), "prepare", None)
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
