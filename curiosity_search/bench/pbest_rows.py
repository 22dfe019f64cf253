"""Counting a curiosity search's P(best) rows by site, for the profiling scripts.

The backup levels (``curiosity.backup``) and the lazy prior fills (``curiosity.nodes``)
compute their P(best) rows through ``compaction.compacted_map``, on the active trees'
rows gathered into the smallest slot that holds them (or the whole batch).
``count_pbest_rows`` replaces that function in both modules, for as long as the context
is open, by one that also counts, per call and at run time, the active rows and the
rows actually computed (``computed_rows``: the slot chosen from the slots that call
passed; the whole batch without usable slots; none without an active row otherwise;
whole chunks for a chunked call).
Programs must be traced inside the context to be counted; their results are unchanged
(up to float32 rounding: the backup levels and prior fills run as XLA programs inside
the context, ``without_native_passes``; the native CPU passes compute the same rows
without ``compacted_map``).
Rows recomputed by a call's ``fallback`` (the accurate P(best) for the rows the fast
kernel cannot serve: one pass over the whole batch, only when some row needs it) are
not counted.

Sites are named after the function the call maps, not after the module that calls
``compacted_map`` (a backup level's work reaches it through ``nodes``'
``CuriosityOptions.compacted_pbest_map``): ``backup_<update>`` for a function of
``curiosity.backup`` (``_full_update``: a node below the root or any node with ``full``
updates, ``_rebuilt_update``: an ``incremental`` root rebuilt in full), ``lazy_fill``
for anything else (a node's prior P(best), ``nodes.fill_prior_best``).
"""

from __future__ import annotations

import collections
import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from unittest import mock

import jax
import jax.numpy as jnp

from curiosity_search.curiosity import backup, compaction, nodes


def computed_rows(active_rows: int, batch_size: int, slots: Sequence[int],
                  chunk: int | None = None) -> int:
    """The rows ``compaction.compacted_map`` computes for ``active_rows`` of
    ``batch_size``, given the call's ``slots`` (or ``chunk``)."""
    if chunk is not None:  # whole chunks, as many as the active rows need
        chunk = max(1, min(int(chunk), batch_size))
        return -(-active_rows // chunk) * chunk
    sizes = sorted({int(s) for s in slots if 1 <= int(s) < batch_size})
    if not sizes:  # no usable slot: the whole batch, active rows or not
        return batch_size
    if active_rows == 0:
        return 0
    return next(size for size in sizes + [batch_size] if active_rows <= size)


def _site(fn: Callable[..., Any]) -> str:
    """The site ``fn`` (a mapped function, possibly a ``functools.partial``) counts
    under: ``backup_<name>`` for a function of ``curiosity.backup``, else ``lazy_fill``."""
    inner = fn.func if isinstance(fn, functools.partial) else fn
    if getattr(inner, "__module__", None) == backup.__name__:
        return f"backup_{inner.__name__.strip('_')}"
    return "lazy_fill"


def _counting(counts: collections.Counter) -> Callable[..., Any]:
    """A ``compacted_map`` that adds each call's rows to ``counts`` under its site."""

    def counted(fn, active, *rows, slots=(), fill=0.0, fallback=None, chunk=None):
        name = _site(fn)
        batch_size = active.shape[0]

        def record(count) -> None:
            count = int(count)
            counts[f"rows_active_{name}"] += count
            counts[f"rows_computed_{name}"] += computed_rows(count, batch_size, slots, chunk)

        jax.debug.callback(record, jnp.sum(active))
        return compaction.compacted_map(fn, active, *rows, slots=slots, fill=fill,
                                        fallback=fallback, chunk=chunk)

    return counted


@contextlib.contextmanager
def without_native_passes() -> Iterator[None]:
    """Inside: curiosity searches traced run their backup levels, root updates and lazy
    prior fills as the batched XLA programs, not as the native CPU passes
    (``curiosity.native_cpu``)."""
    with mock.patch.object(backup, "native_levels_apply", lambda tree, options: False), \
            mock.patch.object(nodes, "native_fill_applies", lambda num_outcomes, options: False):
        yield


@contextlib.contextmanager
def count_pbest_rows() -> Iterator[collections.Counter]:
    """Counts P(best) rows while open: yields a ``Counter`` of ``rows_active_<site>`` and
    ``rows_computed_<site>`` (see the module docstring), filled as compiled programs
    traced inside the context run. Clear it between a warm-up call and the counted one."""
    counts: collections.Counter = collections.Counter()
    counted = _counting(counts)
    with mock.patch.object(backup, "compacted_map", counted), \
            mock.patch.object(nodes, "compacted_map", counted), without_native_passes():
        yield counts
