"""Argument types and flags shared by the verbs, and the usage error they raise."""

from __future__ import annotations

import argparse

from curiosity_search.errors import UserError


class UsageError(UserError):
    """A flag combination argparse cannot express; printed as ``error: ...``, exit 2."""


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


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


def add_overrides(parser: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE ...``: config overrides, collected in ``args.set``."""
    parser.add_argument(
        "--set",
        dest="set",
        action="extend",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set search.num_simulations=32 train.iterations=10",
    )
