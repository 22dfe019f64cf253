"""``curiosity-search bench {search,train}``: throughput benchmarks, written to CSV.

``bench search`` times our search policies against mctx's on the same model
(``search.bench.bench_search``) and writes ``results/bench/search_<device>.csv``.
``bench train`` times one compiled training iteration (self-play moves + updates) for
the given config and writes ``results/bench/train_<device>.csv``. Both print ratios
measured side by side in one process: compare rows of one run, never across machines.
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from curiosity_search.atomic_io import write_csv_atomically

DEFAULT_OUT_DIR = Path("results/bench")


def _timed(fn: Callable[[], Any]) -> float:
    """Seconds ``fn()`` takes, its result waited for."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def _user_loop(cfg: Any, iterations: int) -> list[dict[str, Any]]:
    """Runs ``train`` (the run loop a user runs) for ``iterations`` in a temporary run
    directory, progress bar off; returns its ``metrics.jsonl`` rows."""
    from curiosity_search.config import replace_path
    from curiosity_search.train.metrics_log import METRICS_FILENAME
    from curiosity_search.train.run import train

    cfg = replace_path(cfg, "train.iterations", iterations)
    cfg = replace_path(cfg, "train.time_limit_s", None)
    cfg = replace_path(cfg, "logging.progress", False)
    with tempfile.TemporaryDirectory(prefix="bench_train_") as workdir:
        train(cfg, workdir)
        lines = (Path(workdir) / METRICS_FILENAME).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def bench_train(cfg: Any, repeats: int = 3) -> dict[str, Any]:
    """Times one training iteration of ``cfg``, as a user runs it and split in phases.

    1. The run loop itself (``train.run.train`` in a temporary run directory) for
       ``1 + repeats`` iterations: ``first_iteration_seconds`` (compilation included,
       with JAX's persistent cache as configured), then the steady state's
       ``iteration_seconds`` (the compiled step and its metrics sync), ``host_seconds``
       (the loop's own work between steps: metrics, checkpoints, evaluation, progress)
       and ``positions_per_sec`` = positions / (iteration + host seconds).
    2. The phases, each jitted on its own in this process and timed in interleaved
       rounds (fastest of ``repeats``) on the same state: ``selfplay_seconds`` (the
       iteration's ``S`` moves, ``Trainer.self_play_phase``), ``updates_seconds`` (its
       ``K`` updates in one ``lax.scan``, ``Trainer.update_phase``) and
       ``update_alone_seconds`` (one ``Trainer.update``); ``update_in_scan_ratio`` =
       ``updates_seconds / K / update_alone_seconds`` (the conv-gradient problem of
       ``nets/conv.py`` shows here); ``compile_seconds``: the whole iteration's
       ``lower().compile()``.
    """
    from curiosity_search.train.trainer import build_trainer

    rows = _user_loop(cfg, 1 + repeats)
    steady = rows[1:]
    iteration_seconds = sum(r["iteration_time_s"] for r in steady) / len(steady)
    host_seconds = sum(r["host_time_s"] for r in steady) / len(steady)

    trainer = build_trainer(cfg)
    root_key = jax.random.key(cfg.seed)
    state = jax.jit(trainer.init)(root_key)
    start = time.perf_counter()
    iteration = jax.jit(trainer.iteration).lower(state, root_key).compile()
    compile_seconds = time.perf_counter() - start
    # One iteration first, so the phases below train on a non-empty replay.
    state, _ = jax.block_until_ready(iteration(state, jax.random.fold_in(root_key, 0)))
    play = jax.jit(trainer.self_play_phase)
    updates = jax.jit(trainer.update_phase)
    learning_rate = state.hyperparams.learning_rate if trainer.scale_updates_by_learning_rate \
        else None
    one_update = jax.jit(lambda s, k: trainer.update(s.params, s.opt_state, k, s.replay,
                                                     learning_rate))
    phases = {
        "selfplay_seconds": lambda k: play(state, k),
        "updates_seconds": lambda k: updates(state, k),
        "update_alone_seconds": lambda k: one_update(state, k),
    }
    for fn in phases.values():  # compile and warm up
        jax.block_until_ready(fn(jax.random.key(1)))
    best = {name: float("inf") for name in phases}
    for round_index in range(repeats):
        key = jax.random.fold_in(root_key, 100 + round_index)
        for name, fn in phases.items():
            best[name] = min(best[name], _timed(functools.partial(fn, key)))

    positions = cfg.selfplay.batch_size * cfg.selfplay.moves_per_iteration
    updates_per_iteration = cfg.train.updates_per_iteration
    return {
        "config": getattr(cfg, "name", None),
        "env": cfg.env.name if cfg.env.name != "hex" else f"hex{cfg.env.size}",
        "algorithm": cfg.algorithm,
        "rule": cfg.search.rule,
        "num_simulations": cfg.search.num_simulations,
        "network": f"{cfg.network.trunk} {cfg.network.blocks}x{cfg.network.width}",
        "conv_gradient": cfg.network.conv_gradient,
        "games": cfg.selfplay.batch_size,
        "moves_per_iteration": cfg.selfplay.moves_per_iteration,
        "updates_per_iteration": updates_per_iteration,
        "train_batch": cfg.train.batch_size,
        "positions_per_sec": round(positions / (iteration_seconds + host_seconds), 1),
        "iteration_seconds": round(iteration_seconds, 4),
        "host_seconds": round(host_seconds, 4),
        "first_iteration_seconds": round(rows[0]["iteration_time_s"], 3),
        "compile_seconds": round(compile_seconds, 3),
        "selfplay_seconds": round(best["selfplay_seconds"], 4),
        "updates_seconds": round(best["updates_seconds"], 4),
        "update_alone_seconds": round(best["update_alone_seconds"], 4),
        "update_in_scan_ratio": round(
            best["updates_seconds"] / updates_per_iteration / best["update_alone_seconds"], 3),
        "selfplay_fraction": round(
            best["selfplay_seconds"] / (best["selfplay_seconds"] + best["updates_seconds"]), 3),
        "device": jax.devices()[0].platform,
        "num_devices": jax.device_count(),
    }


def bench_main(args: argparse.Namespace) -> int:
    """Entry point of ``curiosity-search bench``."""
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
