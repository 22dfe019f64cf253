"""Per-iteration accounting of a training run: compute, stop checks, progress display.

Each completed iteration's ``metrics.jsonl`` row (see ``metrics_log``) carries, besides
the trainer's metrics, the run's cumulative cost: self-play positions and estimated
network FLOPs from a ``ComputeModel`` (built once per session by
``make_compute_model``) and wall time. The keys in ``TIMING_KEYS`` are the only ones
that differ between two identical runs. ``first_nonfinite`` is the loop's stop check
(a NaN/inf loss or gradient norm) and ``progress_postfix`` what the progress bar shows;
they read host values (python or numpy scalars) once the iteration has finished.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping
from typing import Any

import jax

# Row keys that measure time: the only ones that differ between identical runs.
TIMING_KEYS = ("wall_time_s", "iteration_time_s", "host_time_s", "positions_per_s")


@dataclasses.dataclass(frozen=True)
class ComputeModel:
    """Per-iteration cost estimate from the config and one forward pass's FLOPs.

    Self-play: ``batch * moves * (simulations + 1)`` network evaluations (one at the
    root, one per simulation). Updates: ``updates * batch * 3`` forward passes
    (forward + backward ~ 3x forward). A trainer metric ``selfplay/positions`` or
    ``selfplay/network_evaluations``, when present, replaces the config estimate.
    """

    forward_flops: float
    positions: float
    network_evaluations: float
    update_forwards: float

    def iteration(self, metrics: Mapping[str, Any]) -> tuple[float, float]:
        """Returns ``(positions, flops)`` for one iteration with these metrics."""
        positions = float(metrics.get("selfplay/positions", self.positions))
        evaluations = float(metrics.get("selfplay/network_evaluations", self.network_evaluations))
        return positions, (evaluations + self.update_forwards) * self.forward_flops


def make_compute_model(cfg: Any, trainer: Any, params: Any) -> ComputeModel:
    """Measures one forward pass (``nets.flops.forward_flops``) and builds the model.

    If the FLOP count cannot be measured (no cost analysis on this backend, a
    network that is not a flax module) FLOPs are reported as NaN and training goes on.
    """
    games = cfg.selfplay.batch_size * cfg.selfplay.moves_per_iteration
    simulations = cfg.search.num_simulations or 0
    try:
        from curiosity_search.nets.flops import forward_flops

        env = trainer.env
        example = jax.jit(env.init)(jax.random.key(0)).observation[None]
        flops = forward_flops(trainer.network, params, example)
    except Exception as error:  # noqa: BLE001 - accounting must never stop training
        print(
            f"warning: FLOP accounting disabled ({type(error).__name__}: {error})", file=sys.stderr
        )
        flops = float("nan")
    return ComputeModel(
        forward_flops=flops,
        positions=float(games),
        network_evaluations=float(games * (simulations + 1)),
        update_forwards=3.0 * cfg.train.updates_per_iteration * cfg.train.batch_size,
    )


def first_nonfinite(metrics: Mapping[str, Any]) -> tuple[str, float] | None:
    """The first watched metric that is NaN or inf, if any.

    Watched: every metric whose name contains ``loss`` and the gradient norm
    (``grad_norm``), which turns non-finite as soon as the parameters are poisoned.
    """
    for key in sorted(metrics):
        if "loss" not in key and not key.endswith("grad_norm"):
            continue
        value = float(metrics[key])
        if not math.isfinite(value):
            return key, value
    return None


def loss_value(metrics: Mapping[str, Any]) -> float | None:
    """The metric ``loss``, else the first metric (by name) containing ``loss``, else None."""
    if "loss" in metrics:
        return float(metrics["loss"])
    for key in sorted(metrics):
        if "loss" in key:
            return float(metrics[key])
    return None


def progress_postfix(row: Mapping[str, Any], latest_eval: Mapping[str, Any]) -> dict[str, str]:
    """The progress bar's postfix: positions/s, the loss, each optimal-move rate."""
    postfix = {}
    if row.get("positions_per_s") is not None:
        postfix["pos/s"] = f"{row['positions_per_s']:.0f}"
    loss = loss_value(row)
    if loss is not None:
        postfix["loss"] = f"{loss:.4g}"
    for key, value in latest_eval.items():
        if key.endswith("optimal_move_rate") and value is not None:
            postfix[key.split("/")[-1].replace("_optimal_move_rate", "")] = f"{value:.1%}"
    return postfix


__all__ = [
    "TIMING_KEYS",
    "ComputeModel",
    "first_nonfinite",
    "loss_value",
    "make_compute_model",
    "progress_postfix",
]
