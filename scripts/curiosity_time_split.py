"""Where curiosity's search time goes, next to our gumbel, in one process.

    python scripts/curiosity_time_split.py [--batch 64 256] [--sims 32] [--repeats 10]
        [--out results/bench/curiosity_time_split_cpu.csv]

Times, on the benchmark's models (``curiosity_search.bench.search``: pgx Hex 11x11 + MLP),
interleaved rounds, fastest round kept:

- ``gumbel``: our ``gumbel_policy`` on the plain model (the 0.5x target's baseline);
- ``plain_model_only`` / ``belief_model_only``: ``sims`` calls of the plain / belief
  model's ``recurrent_fn`` in a ``fori_loop`` (pgx step + MLP, no tree): what any
  search on that model must pay;
- ``curiosity``: ``curiosity_policy`` (fast P(best)) with ``pbest_updates=
  "incremental"``: each backup updates the root's P(best) aggregates for the one child
  that changed (the other nodes on the path recompute theirs);
- ``curiosity_full_updates``: the same search recomputing every node's P(best) in
  full at every backup (``pbest_updates="full"``, the default below 36 actions);
- ``curiosity_pbest_stub``: the full-updates search with ``best_arm_probability``
  replaced by a softmax of the arms' mean scores (O(A); a diagnostic, not a search
  anyone should run: its trees differ). Everything else (the tree, the belief
  algebra, the level-wise backups, the compaction, the lazy prior fill, all as XLA
  programs) is unchanged,
  so ``curiosity - curiosity_pbest_stub`` is about what P(best) costs and
  ``gumbel / curiosity_pbest_stub`` bounds the ratio any cheaper P(best) could reach;
- ``pbest_call``: one fast P(best) on the root's ``[B, A, 2]`` action beliefs (one row
  per tree), for the cost per row.

It also counts, in one incremental search, the P(best) rows by site:
``rows_active_backup_<update>`` / ``rows_computed_backup_<update>`` (backup levels: trees
that need a row / rows computed, i.e. ``compacted_map``'s slot size or the whole batch;
``_full_update``: the nodes below the root, ``_rebuilt_update``: full O(A G) rebuilds
of roots whose grid moved), ``rows_active_backup_root`` (= B x sims: every backup ends
at the root, where the search makes O(G K) in-place updates); the same for
``lazy_fill`` (a node's prior P(best), the first time a descent stops on it); and
``rows_start_end`` (the root's P(best) before the first simulation and the returned
``action_weights``).

Prints the split and writes one CSV row per component: ``component``, ``batch``,
``num_simulations``, ``seconds`` (fastest round; empty for row counts),
``time_vs_gumbel``, ``rows`` (row counts only).
"""

from __future__ import annotations

import argparse
import functools
from unittest import mock

import jax
import jax.numpy as jnp

from curiosity_search.atomic_io import write_csv_atomically
from curiosity_search.bench.pbest_rows import count_pbest_rows, without_native_passes
from curiosity_search.bench.search import (
    interleaved_min_seconds,
    make_hex_belief_model,
    make_hex_model,
)
from curiosity_search.curiosity import best_arm, curiosity_policy, nodes
from curiosity_search.search import policies


def mean_score_softmax(concentrations, invalid_actions=None, grid_size=21, method="fast",
                       exact_scores=None, *, fallback=True):
    """Stand-in for ``best_arm_probability``: softmax of 3 x mean score, ``[..., A]``."""
    del grid_size, method, exact_scores, fallback
    mean = concentrations[..., 0] / jnp.sum(concentrations, axis=-1)
    weights = jnp.where(invalid_actions, 0.0, jnp.exp(3.0 * mean))
    return weights / jnp.sum(weights, axis=-1, keepdims=True)


def model_only(recurrent_fn, sims: int):
    """``sims`` chained ``recurrent_fn`` calls (first legal action), summed outputs."""

    def run(params, key, root, invalid):
        del invalid

        def body(_, carry):
            state, total = carry
            action = jnp.argmax(state.legal_action_mask, axis=-1).astype(jnp.int32)
            out, state = recurrent_fn(params, key, action, state)
            return state, total + sum(jnp.sum(leaf) for leaf in jax.tree.leaves(out))

        return jax.lax.fori_loop(0, sims, body, (root.embedding, jnp.float32(0.0)))[1]

    return jax.jit(run)


def time_split(batch: int, sims: int, repeats: int) -> dict[str, float]:
    """Fastest-round seconds per component (see the module docstring)."""
    plain_params, plain_root_fn, plain_recurrent = make_hex_model()
    belief_params, belief_root_fn, belief_recurrent = make_hex_belief_model()
    key = jax.random.PRNGKey(2)
    plain_args = (plain_params, key,
                  *jax.jit(plain_root_fn, static_argnums=2)(plain_params, jax.random.PRNGKey(1),
                                                            batch))
    belief_args = (belief_params, key,
                   *jax.jit(belief_root_fn, static_argnums=2)(belief_params,
                                                              jax.random.PRNGKey(1), batch))

    def curiosity(params, key, root, invalid, updates="incremental"):
        return curiosity_policy(params, key, root, belief_recurrent, sims,
                                invalid_actions=invalid,
                                options=nodes.CuriosityOptions(pbest_updates=updates)
                                ).action_weights

    gumbel = jax.jit(lambda p, k, r, i: policies.gumbel_policy(
        p, k, r, plain_recurrent, sims, invalid_actions=i).action_weights)
    real = jax.jit(curiosity)
    full = jax.jit(functools.partial(curiosity, updates="full"))
    stub = jax.jit(lambda *args: curiosity(*args, updates="full"))  # its own trace
    with mock.patch.object(nodes, "best_arm_probability", mean_score_softmax), \
            without_native_passes():
        jax.block_until_ready(stub(*belief_args))  # traced (and compiled) with the stand-in
    pbest = jax.jit(functools.partial(best_arm.best_arm_probability, method="fast"))
    root, invalid = belief_args[2], belief_args[3]
    runs = {
        "gumbel": functools.partial(gumbel, *plain_args),
        "plain_model_only": functools.partial(model_only(plain_recurrent, sims), *plain_args),
        "belief_model_only": functools.partial(model_only(belief_recurrent, sims),
                                               *belief_args),
        "curiosity": functools.partial(real, *belief_args),
        "curiosity_full_updates": functools.partial(full, *belief_args),
        "curiosity_pbest_stub": functools.partial(stub, *belief_args),
        "pbest_call": functools.partial(pbest, root.action_beliefs, invalid),
    }
    return interleaved_min_seconds(runs, repeats)


def pbest_rows(batch: int, sims: int) -> dict[str, int]:
    """P(best) rows in one curiosity search, by site (see the module docstring)."""
    params, root_fn, recurrent_fn = make_hex_belief_model()
    root, invalid = jax.jit(root_fn, static_argnums=2)(params, jax.random.PRNGKey(1), batch)
    with count_pbest_rows() as rows:
        search = jax.jit(lambda p, k, r, i: curiosity_policy(
            p, k, r, recurrent_fn, sims, invalid_actions=i,
            options=nodes.CuriosityOptions(pbest_updates="incremental")).action_weights)
        jax.block_until_ready(search(params, jax.random.PRNGKey(2), root, invalid))
    # Every simulation's backup ends with one root row per tree; the root's P(best) is
    # also computed once before the first simulation and once for the output.
    rows["rows_active_backup_root"] = batch * sims
    rows["rows_start_end"] = 2 * batch
    return dict(rows)


def report(seconds: dict[str, float], batch: int, sims: int) -> list[dict]:
    """Prints the split for one batch size; returns its CSV rows."""
    gumbel = seconds["gumbel"]
    rows = [{"component": name, "batch": batch, "num_simulations": sims,
             "seconds": value, "time_vs_gumbel": value / gumbel, "rows": ""}
            for name, value in seconds.items()]
    print(f"B={batch}, {sims} simulations:")
    for row in rows:
        print(f"  {row['component']:22s} {row['seconds'] * 1e3:8.2f} ms"
              f"  {row['time_vs_gumbel']:6.3f}x gumbel's time")
    pbest_seconds = seconds["curiosity"] - seconds["curiosity_pbest_stub"]
    print(f"  curiosity: {gumbel / seconds['curiosity']:.3f}x gumbel's sims/s; with P(best) "
          f"stubbed {gumbel / seconds['curiosity_pbest_stub']:.3f}x; "
          f"P(best) ~{pbest_seconds / seconds['curiosity']:.0%}"
          f" of curiosity's time, ~{seconds['pbest_call'] / batch * 1e6:.1f} us per row;"
          f" ~{pbest_seconds / seconds['pbest_call']:.1f} batch-wide calls' worth per search")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[64])
    parser.add_argument("--sims", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default=None,
                        help="CSV (default results/bench/curiosity_time_split_<backend>.csv)")
    args = parser.parse_args()
    rows = []
    for batch in args.batch:
        seconds = time_split(batch, args.sims, args.repeats)
        rows += report(seconds, batch, args.sims)
        counts = pbest_rows(batch, args.sims)
        print("  P(best) rows in one search: "
              + ", ".join(f"{name} {count}" for name, count in sorted(counts.items())))
        rows += [{"component": name, "batch": batch, "num_simulations": args.sims,
                  "seconds": "", "time_vs_gumbel": "", "rows": count}
                 for name, count in sorted(counts.items())]
    path = write_csv_atomically(
        args.out or f"results/bench/curiosity_time_split_{jax.default_backend()}.csv", rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
