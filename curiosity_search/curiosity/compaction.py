"""Batched work on the active rows only: gather them into a few slots, compute, scatter.

A batched search step often has work for only some trees: in a backup, only the trees
whose path is still below the root at this level; the rest would compute a value and
throw it away. Under ``jax.vmap`` nothing can be skipped per tree, so an expensive
per-tree function (``best_arm.best_arm_probability``, O(A G) per row) costs the whole
batch every time. ``compacted_map`` instead counts the active rows, picks the smallest
static slot count that holds them, gathers those rows, applies the function to the
slots only, and scatters the results back. The branch is chosen with ``lax.switch``
on the batch-level count (one branch per slot size, plus the full batch), so the
program stays static and the result is exact: every active row gets exactly
``fn`` of its own inputs. With no active row, ``fn`` is not run at all. For costly
rows it can instead loop over fixed chunks of the active rows (``chunk``), and keep a
costly path that few rows need out of its branches (``fallback``).

Shapes: ``B`` batch, ``S`` slots.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

Array = jax.Array


def default_slots(batch_size: int) -> tuple[int, ...]:
    """Slot sizes tried before the full batch: ``B / 8``, ``B / 4`` and ``B / 2`` (those
    >= 1), e.g. ``(8, 16, 32)`` for B = 64.

    The work done is at most twice the active count (or the full batch past B / 2).
    Each size is one ``lax.switch`` branch, a copy of ``fn`` in the program: with
    curiosity's P(best) inside, each copy costs compile time, so three sizes, not the
    eight multiples of B / 8 measured (no faster on CPU at B = 64) before the accurate
    fallback joined the program.
    """
    sizes = {batch_size // 8, batch_size // 4, batch_size // 2}
    return tuple(sorted(s for s in sizes if 1 <= s < batch_size))


def compacted_map(
    fn: Callable[..., Any],
    active: Array,
    *rows: Any,
    slots: Sequence[int] = (),
    fill: float = 0.0,
    fallback: Callable[..., Any] | None = None,
    chunk: int | None = None,
) -> Any:
    """``fn(*rows)`` evaluated on the active rows only; inactive rows get ``fill``.

    Every slot size is a copy of ``fn`` in the program. When ``fn`` has a costly path
    that only a few rows need (curiosity's accurate P(best) behind the fast kernel,
    ~40% of a curiosity search's compilation), ``fallback`` keeps one copy of it
    instead of one per slot size: ``fn`` then returns ``(output, redo [S] bool)``
    without taking that path, and the active rows with ``redo`` set get
    ``fallback(*rows)`` instead (``fn``'s output structure), computed in one pass over
    the whole batch, run only when some row needs it. Each row's result is still the
    function of its own inputs.

    With ``chunk``, the active rows are instead gathered into chunks of ``chunk`` rows
    and ``fn`` runs on one chunk at a time in a loop, as many times as the active rows
    need: one copy of ``fn`` in the program, and at most ``chunk - 1`` rows computed for
    nothing. That pays where a row costs far more than a call (curiosity's K = 3
    P(best), ~0.4 ms a 9-arm row); the slot sizes suit cheap rows, where each call's
    fixed cost counts.

    Args:
      fn: a batched function of pytrees of ``[S, ...]`` arrays returning a pytree of
        ``[S, ...]`` arrays whose rows depend only on the same rows of the inputs
        (no mixing across the batch axis).
      active: ``[B]`` bool.
      *rows: pytrees of ``[B, ...]`` arrays, the inputs.
      slots: static slot sizes ``S`` to try (ascending; sizes >= B are ignored); the
        full batch is the last resort. Empty: always the full batch (active rows
        still get ``fn``'s value, inactive rows ``fill``).
      fill: value of the inactive rows of every output.
      fallback: None, or the function that recomputes the rows ``fn`` flags (above).
      chunk: None (the slot sizes), or the rows per call of a chunked loop (above;
        ``slots`` is then ignored).

    Returns:
      A pytree of ``[B, ...]`` arrays: ``fn``'s output for active rows, ``fill`` for
      the others.
    """
    if fallback is not None:
        out, redo = compacted_map(fn, active, *rows, slots=slots, fill=fill, chunk=chunk)
        redo = redo & active

        def recompute(out: Any) -> Any:
            again = compacted_map(fallback, redo, *rows, fill=fill)  # the whole batch
            return jax.tree.map(
                lambda a, o: jnp.where(redo.reshape((-1,) + (1,) * (o.ndim - 1)), a, o),
                again, out)

        return jax.lax.cond(jnp.any(redo), recompute, lambda out: out, out)

    batch_size = active.shape[0]
    sizes = sorted({int(s) for s in slots if 1 <= int(s) < batch_size})

    # Rows that are not active hold whatever the caller had there (an unexpanded node's
    # zeros, say), which can send ``fn`` down a costly path for nothing; every row that
    # is computed and thrown away is a copy of the first active row instead.
    first_active = jnp.argmax(active)

    if chunk is not None:
        return _chunked_map(fn, active, rows, int(chunk), fill, first_active)

    def full() -> Any:
        index = jnp.where(active, jnp.arange(batch_size), first_active)
        out = fn(*_take_rows(rows, index))
        return jax.tree.map(
            lambda o: jnp.where(active.reshape((-1,) + (1,) * (o.ndim - 1)), o,
                                jnp.asarray(fill, o.dtype)),
            out,
        )

    def on_slots(size: int) -> Callable[[], Any]:
        def run() -> Any:
            # Active row indices first; unused slots point past the batch: they
            # compute a throwaway copy of the first active row and the scatter drops them.
            index = jnp.nonzero(active, size=size, fill_value=batch_size)[0]  # [S]
            source = jnp.where(index < batch_size, index, first_active)
            out = fn(*_take_rows(rows, source))
            return jax.tree.map(
                lambda o: jnp.full((batch_size,) + o.shape[1:], fill, o.dtype)
                .at[index].set(o, mode="drop"),
                out,
            )

        return run

    def nothing() -> Any:  # no active row: only the fill, no call of fn
        shapes = jax.eval_shape(fn, *rows)
        return jax.tree.map(lambda s: jnp.full(s.shape, fill, s.dtype), shapes)

    if not sizes:
        return full()
    count = jnp.sum(active.astype(jnp.int32))
    # 0: no active row; then the smallest slot size that holds them; last: full batch.
    branch = jnp.where(count > 0, 1 + jnp.sum((count > jnp.asarray(sizes)).astype(jnp.int32)),
                       0)
    branches = [nothing] + [on_slots(s) for s in sizes] + [full]
    return jax.lax.switch(branch, [lambda _, f=f: f() for f in branches], None)


def _take_rows(rows: tuple, index: Array) -> list:
    """Each pytree of ``rows`` at the batch rows ``index [S]``: ``[S, ...]`` arrays."""
    return [jax.tree.map(lambda x: jnp.take(x, index, axis=0), r) for r in rows]


def _chunked_map(fn: Callable[..., Any], active: Array, rows: tuple, chunk: int, fill: float,
                 first_active: Array) -> Any:
    """``compacted_map`` with ``chunk``: the active rows, in order, ``chunk`` at a time."""
    batch_size = active.shape[0]
    chunk = max(1, min(chunk, batch_size))
    padded = -(-batch_size // chunk) * chunk
    # Active row indices first; the rest point past the batch (dropped by the scatter).
    index = jnp.nonzero(active, size=padded, fill_value=batch_size)[0]  # [padded]
    calls = -(-jnp.sum(active.astype(jnp.int32)) // chunk)
    shapes = jax.eval_shape(fn, *[jax.tree.map(lambda x: x[:chunk], r) for r in rows])
    out = jax.tree.map(lambda s: jnp.full((batch_size,) + s.shape[1:], fill, s.dtype), shapes)

    def one_chunk(call: Array, out: Any) -> Any:
        at = jax.lax.dynamic_slice_in_dim(index, call * chunk, chunk)  # [chunk]
        source = jnp.where(at < batch_size, at, first_active)
        result = fn(*_take_rows(rows, source))
        return jax.tree.map(lambda o, r: o.at[at].set(r, mode="drop"), out, result)

    return jax.lax.fori_loop(0, calls, one_chunk, out)
