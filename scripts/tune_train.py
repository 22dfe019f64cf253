"""Tuning helper: train from a config and print the solver's optimal-move rates.

    python scripts/tune_train.py configs/quickstart.yaml --every 5 --time 120 \
        --set search.num_simulations=16 --set train.updates_per_iteration=32

Builds the trainer, jits the iteration once, loops, and every ``--every`` iterations
prints throughput (searched positions per second of training time, evaluation excluded)
and the raw-policy / search optimal-move rates on ``eval.num_positions`` random-play
positions (``train.solver_eval``). Stops at ``train.iterations`` or ``--time`` seconds of
training time (compilation included). Not the run loop: no checkpoints, no logs.
"""

from __future__ import annotations

import argparse
import time

import jax

from curiosity_search.compilation_cache import enable_compilation_cache
from curiosity_search.config import load_config
from curiosity_search.train.solver_eval import RAW_KEY, SEARCH_KEY, make_solver_evaluation
from curiosity_search.train.trainer import build_trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("config")
    parser.add_argument("--set", action="append", default=[], help="key=value override")
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--time", type=float, default=None, help="training seconds budget")
    parser.add_argument("--no-cache", action="store_true", help="no compilation cache")
    args = parser.parse_args()
    if not args.no_cache:
        enable_compilation_cache()

    cfg = load_config(args.config, args.set)
    trainer = build_trainer(cfg)
    evaluation = make_solver_evaluation(cfg, trainer)
    root_key = jax.random.key(cfg.seed)
    budget = args.time or cfg.train.time_limit_s or float("inf")

    start = time.perf_counter()
    iteration = jax.jit(trainer.iteration, donate_argnums=0)
    state = trainer.init(jax.random.fold_in(root_key, 2**31 - 1))
    train_time = 0.0
    first = True
    for i in range(cfg.train.iterations):
        tick = time.perf_counter()
        state, metrics = iteration(state, jax.random.fold_in(root_key, i))
        metrics = jax.device_get(metrics)
        train_time += time.perf_counter() - tick
        if first:
            train_time += tick - start  # building and init count too
            print(f"first iteration (compile) done at {train_time:.1f}s", flush=True)
            first = False
        last = i + 1 == cfg.train.iterations or train_time >= budget
        if (i + 1) % args.every == 0 or last:
            line = (
                f"it {i + 1:4d} t={train_time:6.1f}s pos/s={metrics['positions'] / train_time:7.0f}"
                f" loss={metrics['loss']:.3f} pol={metrics['policy_loss']:.3f}"
                f" val={metrics['value_loss']:.3f} H={metrics['policy_entropy_bits']:.2f}b"
                f" len={metrics['mean_game_length']:.1f} replay={int(metrics['replay_size'])}"
            )
            if evaluation is not None:
                rates = evaluation(state.params, i)
                line += f" raw={rates.get(RAW_KEY, float('nan')):.2%}"
                line += f" search={rates.get(SEARCH_KEY, float('nan')):.2%}"
            print(line, flush=True)
        if last:
            break
    print(
        f"done: {i + 1} iterations, {train_time:.1f}s training time, "
        f"{time.perf_counter() - start:.1f}s wall"
    )


if __name__ == "__main__":
    main()
