"""``curiosity-search bench {search,train}``: throughput benchmarks, written to CSV.

``bench search`` times our search policies against mctx's on the same model
(``search.bench.bench_search``) and writes ``results/bench/search_<device>.csv``.
``bench train`` times one compiled training iteration (self-play moves + updates) for
the given config and writes ``results/bench/train_<device>.csv``. Both print ratios
measured side by side in one process: compare rows of one run, never across machines.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from curiosity_search.atomic_io import write_csv_atomically

DEFAULT_OUT_DIR = Path("results/bench")


def bench_train(cfg: Any, repeats: int = 3) -> dict[str, Any]:
    """Times the compiled iteration of ``cfg``: compile seconds, positions/s, updates/s."""
    import jax

    from curiosity_search.train.trainer import build_trainer

    trainer = build_trainer(cfg)
    root_key = jax.random.key(cfg.seed)
    state = jax.jit(trainer.init)(root_key)
    iteration = jax.jit(trainer.iteration, donate_argnums=0)
    start = time.perf_counter()
    state, metrics = iteration(state, jax.random.fold_in(root_key, 0))
    jax.block_until_ready(metrics)
    compile_and_first = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(repeats):
        state, metrics = iteration(state, jax.random.fold_in(root_key, i + 1))
    jax.block_until_ready(metrics)
    seconds = (time.perf_counter() - start) / repeats
    positions = cfg.selfplay.batch_size * cfg.selfplay.moves_per_iteration
    return {
        "env": cfg.env.name if cfg.env.name != "hex" else f"hex{cfg.env.size}",
        "algorithm": cfg.algorithm,
        "rule": cfg.search.rule,
        "num_simulations": cfg.search.num_simulations,
        "games": cfg.selfplay.batch_size,
        "moves_per_iteration": cfg.selfplay.moves_per_iteration,
        "updates_per_iteration": cfg.train.updates_per_iteration,
        "train_batch": cfg.train.batch_size,
        "first_call_seconds": round(compile_and_first, 3),
        "iteration_seconds": round(seconds, 4),
        "positions_per_sec": round(positions / seconds, 1),
        "updates_per_sec": round(cfg.train.updates_per_iteration / seconds, 2),
        "device": jax.devices()[0].platform,
        "num_devices": jax.device_count(),
    }


def bench_main(args: argparse.Namespace) -> int:
    """Entry point of ``curiosity-search bench``."""
    import jax

    device = jax.devices()[0].platform
    if args.kind == "search":
        from curiosity_search.search.bench import bench_search

        rows = bench_search(
            batch_sizes=args.batch or (64, 256),
            num_simulations=args.sims or (32, 128),
            repeats=args.repeats,
            out_dir=None,
        )
        path = write_csv_atomically(args.out or DEFAULT_OUT_DIR / f"search_{device}.csv", rows)
        print(f"wrote {path}")
        return 0
    from curiosity_search.eval.arena import append_csv

    row = bench_train(args.cfg, repeats=args.repeats)
    for key, value in row.items():
        print(f"{key:>22s}: {value}")
    path = args.out or DEFAULT_OUT_DIR / f"train_{device}.csv"
    append_csv(path, [row])
    print(f"appended to {path}")
    return 0
