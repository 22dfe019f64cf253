"""``curiosity-search bench {search,train}``: throughput benchmarks, written to CSV.

``bench search`` times our search policies against mctx's on the same model
(``bench.search.bench_search``) and writes ``results/bench/search_<device>.csv``.
``bench train`` times one compiled training iteration (self-play moves + updates) for
the given config, with its network evaluations/s and FLOP/s, and appends a row to
``results/bench/train_<device>.csv``; with a baseline config (``--baseline``) it times
both in one process, in alternating rounds (``compare_train``), and adds each row's
positions/s over the baseline's. Both print ratios measured side by side in one
process: compare rows of one run, never across machines.
"""

from __future__ import annotations

import functools
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from curiosity_search.bench import DEFAULT_OUT_DIR
from curiosity_search.errors import UserError


class BenchError(UserError):
    """The benchmarked run stopped before its iterations were done (a non-finite loss,
    say): there is nothing to time; the CLI prints the run's own message."""


def _timed(fn: Callable[[], Any]) -> float:
    """Seconds ``fn()`` takes, its result waited for."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def _user_loop(cfg: Any, iterations: int) -> list[dict[str, Any]]:
    """Runs ``train`` (the run loop a user runs) for ``iterations`` in a temporary run
    directory, progress bar off; returns its ``metrics.jsonl`` rows. Raises
    ``BenchError`` if the run stops early (``nonfinite``)."""
    from curiosity_search.config import replace_path
    from curiosity_search.train.metrics_log import METRICS_FILENAME
    from curiosity_search.train.run import train

    cfg = replace_path(cfg, "train.iterations", iterations)
    cfg = replace_path(cfg, "train.time_limit_s", None)
    cfg = replace_path(cfg, "logging.progress", False)
    with tempfile.TemporaryDirectory(prefix="bench_train_") as workdir:
        result = train(cfg, workdir)
        lines = (Path(workdir) / METRICS_FILENAME).read_text().splitlines()
    if result.status != "completed":
        raise BenchError(f"bench train: the run loop did not complete its {iterations} "
                         f"iterations ({result.status}): {result.message}")
    return [json.loads(line) for line in lines if line.strip()]


def _significant(value: float, digits: int = 4) -> float:
    """``value`` rounded to ``digits`` significant digits (NaN and inf unchanged)."""
    return float(f"{value:.{digits}g}")


def _compute(cfg: Any, trainer: Any, params: Any) -> Any:
    """The run loop's ``ComputeModel`` for ``cfg``; where XLA's cost analysis of the
    compiled forward pass reports no FLOPs (``make_compute_model`` then says NaN), the
    unoptimised program's count (``forward_flops(compiled=False)``, within a few
    percent) stands in."""
    import dataclasses
    import math

    from curiosity_search.nets.flops import forward_flops
    from curiosity_search.train.run import make_compute_model
    from curiosity_search.train.sharding import local_copy

    compute = make_compute_model(cfg, trainer, local_copy(params))
    if math.isfinite(compute.forward_flops):
        return compute
    try:
        example = jax.jit(trainer.env.init)(jax.random.key(0)).observation[None]
        flops = forward_flops(trainer.network, local_copy(params), example, compiled=False)
    except Exception:  # noqa: BLE001 - a benchmark row with NaN FLOPs beats no row
        return compute
    return dataclasses.replace(compute, forward_flops=flops)


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
       ``nets/conv.py`` shows here); ``compile_seconds``: the loop's first iteration
       less a steady one (the step's compilation, or its load from JAX's persistent
       cache; timing the compile on its own would compile the whole iteration once
       more, the longest part of this benchmark on an accelerator).
    3. The compute, counted as training counts it (``train.run.ComputeModel``: network
       FLOPs only, one forward pass measured by XLA's cost analysis, an update = 3
       forward passes): ``forward_flops`` per position, ``network_evaluations`` per
       iteration (self-play: ``games * moves * (simulations + 1)``),
       ``evaluations_per_sec`` over the user's iteration (``iteration + host``
       seconds) and ``selfplay_evaluations_per_sec`` over the self-play phase alone,
       ``flops_per_iteration`` (self-play evaluations plus updates) and
       ``flops_per_sec`` over the user's iteration. A chip's peak rate divided into
       ``flops_per_sec`` is the fraction of peak the whole training step reaches.
    4. ``curiosity_passes`` (rules with belief heads, ``rules.SearchRule.beliefs``;
       empty otherwise): the implementation of the curiosity search's CPU passes that
       ran, ``native`` or ``array`` (``curiosity.native_cpu.passes_on``), and
       ``pbest_fallback`` (``search.pbest_fallback``: whether the program holds the
       accurate P(best) fallback; its compilation is most of ``compile_seconds``'s
       difference from Gumbel's on small boards).
    """
    from curiosity_search import rules
    from curiosity_search.curiosity import native_cpu
    from curiosity_search.train.trainer import build_trainer

    rows = _user_loop(cfg, 1 + repeats)
    steady = rows[1:]
    iteration_seconds = sum(r["iteration_time_s"] for r in steady) / len(steady)
    host_seconds = sum(r["host_time_s"] for r in steady) / len(steady)

    first_iteration_seconds = rows[0]["iteration_time_s"]
    compile_seconds = max(0.0, first_iteration_seconds - iteration_seconds)

    trainer = build_trainer(cfg)
    root_key = jax.random.key(cfg.seed)
    state = jax.jit(trainer.init)(root_key)
    play = jax.jit(trainer.self_play_phase)
    updates = jax.jit(trainer.update_phase)
    # One self-play phase first (it compiles ``play``), so that the phases below start
    # from games in progress and, where games have ended, train on a non-empty replay.
    state, _ = jax.block_until_ready(play(state, jax.random.fold_in(root_key, 0)))
    learning_rate = state.hyperparams.learning_rate if trainer.scale_updates_by_learning_rate \
        else None
    one_update = jax.jit(lambda s, k: trainer.update(s.params, s.opt_state, k, s.replay,
                                                     learning_rate))
    phases = {
        "selfplay_seconds": lambda k: play(state, k),
        "updates_seconds": lambda k: updates(state, k),
        "update_alone_seconds": lambda k: one_update(state, k),
    }
    for name, fn in phases.items():  # compile and warm up (``play`` already ran)
        if name != "selfplay_seconds":
            jax.block_until_ready(fn(jax.random.key(1)))
    best = {name: float("inf") for name in phases}
    for round_index in range(repeats):
        key = jax.random.fold_in(root_key, 100 + round_index)
        for name, fn in phases.items():
            best[name] = min(best[name], _timed(functools.partial(fn, key)))

    positions = cfg.selfplay.batch_size * cfg.selfplay.moves_per_iteration
    updates_per_iteration = cfg.train.updates_per_iteration
    user_seconds = iteration_seconds + host_seconds
    compute = _compute(cfg, trainer, state.params)
    evaluations = compute.network_evaluations
    flops_per_iteration = (evaluations + compute.update_forwards) * compute.forward_flops
    platform = jax.devices()[0].platform
    beliefs = rules.get_rule(cfg.search.rule).beliefs
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
        "positions_per_sec": round(positions / user_seconds, 1),
        "iteration_seconds": round(iteration_seconds, 4),
        "host_seconds": round(host_seconds, 4),
        "first_iteration_seconds": round(first_iteration_seconds, 3),
        "compile_seconds": round(compile_seconds, 3),
        "selfplay_seconds": round(best["selfplay_seconds"], 4),
        "updates_seconds": round(best["updates_seconds"], 4),
        "update_alone_seconds": round(best["update_alone_seconds"], 4),
        "update_in_scan_ratio": round(
            best["updates_seconds"] / updates_per_iteration / best["update_alone_seconds"], 3),
        "selfplay_fraction": round(
            best["selfplay_seconds"] / (best["selfplay_seconds"] + best["updates_seconds"]), 3),
        "compute_dtype": cfg.network.compute_dtype,
        "forward_flops": _significant(compute.forward_flops),
        "network_evaluations": int(evaluations),
        "evaluations_per_sec": round(evaluations / user_seconds, 1),
        "selfplay_evaluations_per_sec": round(evaluations / best["selfplay_seconds"], 1),
        "flops_per_iteration": _significant(flops_per_iteration),
        "flops_per_sec": _significant(flops_per_iteration / user_seconds),
        "device": platform,
        "num_devices": jax.device_count(),
        "curiosity_passes": native_cpu.passes_on(platform) if beliefs else "",
        "pbest_fallback": cfg.search.pbest_fallback if beliefs else "",
    }


def compare_train(cfg: Any, baseline: Any, *, repeats: int = 3, rounds: int = 2,
                  bench: Callable[..., dict[str, Any]] = bench_train) -> list[dict[str, Any]]:
    """Times ``cfg`` and ``baseline`` side by side in this process: ``rounds`` rounds of
    one ``bench_train`` each, in the order baseline, config, then config, baseline, and
    so on (ABBA, so that a machine that drifts slower or faster favours neither).

    Returns the rows in the order they ran, each ``bench_train``'s with three columns in
    front: ``role`` (``"config"`` or ``"baseline"``), ``round`` (0-based) and
    ``positions_per_sec_vs_baseline``: the row's positions/s over the mean of the
    baseline rows' (the baseline rows' own values average 1). ``bench`` is the timer, a
    parameter so that tests can count calls."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    timed: list[tuple[str, int, dict[str, Any]]] = []
    for round_index in range(rounds):
        order = ("baseline", "config") if round_index % 2 == 0 else ("config", "baseline")
        for role in order:
            row = bench(cfg if role == "config" else baseline, repeats=repeats)
            timed.append((role, round_index, row))
    baseline_rates = [row["positions_per_sec"] for role, _, row in timed if role == "baseline"]
    baseline_rate = sum(baseline_rates) / len(baseline_rates)
    return [{"role": role, "round": round_index,
             "positions_per_sec_vs_baseline": round(row["positions_per_sec"] / baseline_rate, 3),
             **row} for role, round_index, row in timed]


def run_train_bench(cfg: Any, *, repeats: int = 3, out: str | Path | None = None,
                    baseline: Any = None, rounds: int = 2) -> Path:
    """``curiosity-search bench train``: times one training iteration of ``cfg``
    (``bench_train``), prints the row and appends it to ``out`` (default
    ``results/bench/train_<device>.csv``); returns the CSV's path. With a ``baseline``
    config it times both side by side (``compare_train``, ``rounds`` rounds), prints
    the ratio of the mean positions/s and appends every row to ``out`` (default
    ``results/bench/train_compare_<device>.csv``)."""
    from curiosity_search.eval.arena import append_csv

    device = jax.devices()[0].platform
    summary = None
    if baseline is None:
        rows = [bench_train(cfg, repeats=repeats)]
        default_name = f"train_{device}.csv"
    else:
        rows = compare_train(cfg, baseline, repeats=repeats, rounds=rounds)
        default_name = f"train_compare_{device}.csv"
        mine = [row["positions_per_sec_vs_baseline"] for row in rows if row["role"] == "config"]
        summary = (f"{cfg.name or 'config'} vs {baseline.name or 'baseline'}: positions/s "
                   f"ratio {sum(mine) / len(mine):.3f} "
                   f"(rounds: {', '.join(f'{ratio:.3f}' for ratio in mine)})")
    for row in rows:
        for key, value in row.items():
            print(f"{key:>30s}: {value}")
        print()
    if summary is not None:
        print(summary)
    path = Path(out) if out is not None else DEFAULT_OUT_DIR / default_name
    append_csv(path, rows)
    print(f"appended to {path}")
    return path
