"""The host-side training loop: compile once, iterate, log, evaluate, checkpoint, resume.

``train(cfg, workdir)`` builds the trainer (``train.trainer.build_trainer``), jits its
``iteration(state, key)`` once with the state donated, and runs it ``train.iterations``
times (or until ``train.time_limit_s`` of training wall time, summed over resumed
sessions). Iteration ``i`` (0-based: the number completed before it) gets the key
``fold_in(key(seed), i)``, so a run resumed from a checkpoint replays exactly the keys
an uninterrupted run would have used.

Run directory (``workdir``)::

    config.yaml        the resolved config
    metrics.jsonl      one row per completed iteration (see ``metrics_log``)
    tensorboard/       TensorBoard event files (``logging.tensorboard``)
    checkpoints/<n>/   orbax checkpoints after n iterations (``checkpoint.every``, end)
    evaluation.json    the final evaluation (where the game has an exact solver)

Which workdirs a run may use and what a resume may change: see ``run_dir``. One
process at a time trains in a workdir (``workdir_lock``: a second one is refused with
the holder's pid). A resume restores the newest good checkpoint (a damaged one is
named in a warning and skipped), and only then drops the metrics rows after it and
continues; its rows equal an uninterrupted run's except for the timing keys
(``TIMING_KEYS``). ``restart`` deletes a run's checkpoints and metrics first and starts
from iteration 0. Before anything is built, ``memory_estimate.check_memory`` refuses a
config whose shapes cannot fit in the devices' memory. A non-finite loss stops the run
without saving the bad state; the last checkpoint stays the latest, and ``train_and_report``
exits 1.

Devices: the run spans every device (``jax.devices()``, every host's in a multi-host
run; see ``train.distributed`` and ``docs/multi_device.md``) through a 1-D ``data`` mesh
(``train.sharding``): a ``TrainState``'s game batch and replay buffer are split across
devices, parameters, optimizer state and counters replicated; the iteration is jitted
with these shardings, the state donated. The results do not depend on the device count
(up to float summation order). Checkpoints hold the global arrays and restore onto the
current mesh, so a run may resume on a different number of devices. A resume sets the
state's traced hyperparameters (``train.hyperparams``) from the config, also when the
checkpoint predates them. Only process 0
writes ``config.yaml``, metrics, TensorBoard and the progress bar; every process takes
part in each checkpoint save. Evaluation runs on each process's first local device.

Accounting: each completed iteration's ``metrics.jsonl`` row (see ``metrics_log``)
carries, besides the trainer's metrics, the run's cumulative cost: self-play positions and estimated
network FLOPs from a ``ComputeModel`` (built once per session by
``make_compute_model``) and wall time. The keys in ``TIMING_KEYS`` are the only ones
that differ between two identical runs. ``first_nonfinite`` is the loop's stop check
(a NaN/inf loss or gradient norm) and ``progress_postfix`` what the progress bar shows;
they read host values (python or numpy scalars) once the iteration has finished.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import jax
from jax.sharding import NamedSharding, PartitionSpec

from curiosity_search.atomic_io import write_text_atomically
from curiosity_search.train.checkpoint import (
    CheckpointStore,
    HostCounters,
    checkpoint_dir,
)
from curiosity_search.train.hyperparams import with_config_hyperparameters
from curiosity_search.train.memory_estimate import check_memory
from curiosity_search.train.metrics_log import MetricsLog
from curiosity_search.train.run_dir import (
    CONFIG_FILENAME,
    EVALUATION_FILENAME,
    clear_run,
    config_dict,
    finish_restore,
    prepare_workdir,
    restore_newest,
)
from curiosity_search.train.sharding import local_copy, make_mesh, placement
from curiosity_search.train.solver_eval import SolverEvaluation, make_solver_evaluation
from curiosity_search.train.workdir_lock import RunDirError, check_workdir, lock_workdir

# Fold-in index of the init key stream (iterations use 0, 1, 2, ...).
INIT_STREAM = 2**31 - 1

Status = Literal["completed", "time_limit", "nonfinite"]


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What a call to ``train`` did.

    Attributes:
      workdir: the run directory.
      status: ``completed`` (all iterations), ``time_limit`` or ``nonfinite``.
      iterations: iterations completed in total (over every session of the run).
      wall_time_s: training wall time in total.
      positions: self-play positions generated in total.
      train_flops: estimated network FLOPs in total.
      metrics: the last iteration's metrics row.
      evaluation: the latest evaluation (empty where there is no solver).
      message: a one-line summary (for ``nonfinite``: which iteration and metric).
    """

    workdir: Path
    status: Status
    iterations: int
    wall_time_s: float
    positions: float
    train_flops: float
    metrics: dict[str, Any]
    evaluation: dict[str, Any]
    message: str

    @property
    def ok(self) -> bool:
        """True unless the run stopped on a non-finite loss."""
        return self.status != "nonfinite"


# ----------------------------------------------------------------------------- accounting
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


# ----------------------------------------------------------------------------- helpers
def _scalars(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Host copies of every scalar metric (non-scalars are dropped)."""
    host = jax.device_get(local_copy(dict(metrics)))
    out = {}
    for key, value in host.items():
        if getattr(value, "ndim", 0) == 0:
            out[key] = value.item() if hasattr(value, "item") else value
    return out


def _sync(name: str) -> None:
    """A barrier across the processes of a multi-host run (no-op with one process)."""
    if jax.process_count() > 1:
        from orbax.checkpoint import multihost

        multihost.sync_global_processes(f"curiosity_search_{name}")


# ----------------------------------------------------------------------------- loop
def train(
    cfg: Any,
    workdir: str | Path,
    resume: bool = False,
    *,
    restart: bool = False,
    build_trainer: Callable[[Any], Any] | None = None,
    devices: Sequence[jax.Device] | None = None,
) -> RunResult:
    """Trains ``cfg`` in ``workdir``; see the module docstring for the rules.

    Args:
      cfg: a resolved ``Config`` (``config.load_config``).
      workdir: the run directory (created if missing).
      resume: continue from the newest good checkpoint in ``workdir``.
      restart: delete the run ``workdir`` holds (checkpoints, metrics, TensorBoard
        events, evaluation) and start from iteration 0.
      build_trainer: ``cfg -> Trainer`` (default ``train.trainer.build_trainer``).
      devices: the devices to train on (default: all, ``jax.devices()``).

    Returns:
      a ``RunResult``. Raises ``RunDirError`` / ``CheckpointError`` for an unusable
      run directory, ``ConfigError`` when the game batch or the replay capacity does
      not split evenly across the devices or the run cannot fit in their memory.
    """
    if resume and restart:
        raise RunDirError("resume and restart exclude each other: resume continues a run, "
                          "restart deletes it and starts over")
    workdir = check_workdir(Path(workdir), must_exist=resume)
    lead = jax.process_index() == 0
    with lock_workdir(workdir) if lead else contextlib.nullcontext(workdir):
        if restart and lead:
            deleted = clear_run(workdir)
            if deleted:
                print(f"note: --restart deleted {', '.join(deleted)} in {workdir}",
                      file=sys.stderr)
        _sync("workdir_cleared")
        store = CheckpointStore(checkpoint_dir(workdir), keep=cfg.checkpoint.keep)
        try:
            return _train(cfg, workdir, resume, store, lead, build_trainer, devices)
        finally:
            store.close()


def _train(
    cfg: Any,
    workdir: Path,
    resume: bool,
    store: CheckpointStore,
    lead: bool,
    build_trainer: Callable[[Any], Any] | None,
    devices: Sequence[jax.Device] | None,
) -> RunResult:
    from curiosity_search.config import save_config

    if build_trainer is None:
        from curiosity_search.train.trainer import build_trainer
    plan = prepare_workdir(cfg, workdir, resume, store)  # reads only
    _sync("workdir_checked")  # every process has read the run directory
    check_memory(cfg, devices)
    resolved = config_dict(cfg)
    trainer = build_trainer(cfg)
    mesh = make_mesh(devices)
    init_key = jax.random.fold_in(jax.random.key(cfg.seed), INIT_STREAM)
    abstract = jax.eval_shape(trainer.init, init_key)
    shardings = placement(abstract, mesh)  # before any file is touched
    if plan is None:
        if lead:
            save_config(cfg, workdir / CONFIG_FILENAME)
        state = jax.jit(trainer.init, out_shardings=shardings)(init_key)
        counters = HostCounters(iteration=0, config=resolved)
    else:
        target = jax.tree.map(
            lambda leaf, sharding: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype,
                                                        sharding=sharding),
            abstract, shardings,
        )
        state, counters, damaged = restore_newest(store, target, plan, workdir)
        # Only now, with a state in hand, is anything in the run directory rewritten.
        finish_restore(workdir, store, counters.iteration, damaged, lead)
        if lead:
            save_config(cfg, workdir / CONFIG_FILENAME)
        # The config is the source of truth for the traced hyperparameters (and
        # checkpoints older than TrainState.hyperparams restore without them).
        state = with_config_hyperparameters(
            state, cfg, NamedSharding(mesh, PartitionSpec())
        )
        counters = dataclasses.replace(counters, config=resolved)
    compute = make_compute_model(cfg, trainer, local_copy(state.params))
    evaluation = make_solver_evaluation(cfg, trainer)
    replicated = NamedSharding(mesh, PartitionSpec())
    step = jax.jit(
        trainer.iteration,
        in_shardings=(shardings, replicated),
        out_shardings=(shardings, replicated),
        donate_argnums=0,
    )
    return _loop(cfg, workdir, step, state, counters, compute, evaluation, store, lead)


def _loop(
    cfg: Any,
    workdir: Path,
    step: Callable[[Any, jax.Array], tuple[Any, dict[str, jax.Array]]],
    state: Any,
    counters: HostCounters,
    compute: ComputeModel,
    evaluation: SolverEvaluation | None,
    store: CheckpointStore,
    lead: bool,
) -> RunResult:
    root = jax.random.key(cfg.seed)
    limit = cfg.train.time_limit_s
    total = cfg.train.iterations
    status: Status = "completed"
    message = ""
    row: dict[str, Any] = {}
    latest_eval: dict[str, Any] = {}
    log = MetricsLog(workdir, counters.iteration, total, cfg.logging.tensorboard,
                     cfg.logging.progress, enabled=lead)
    with log:
        if limit is not None and counters.wall_time_s >= limit and counters.iteration < total:
            status = "time_limit"
        host_time = 0.0  # the previous iteration's host work (none before the first)
        while status == "completed" and counters.iteration < total:
            start = time.perf_counter()
            state, metrics = step(state, jax.random.fold_in(root, counters.iteration))
            metrics = _scalars(metrics)  # waits for the iteration
            step_end = time.perf_counter()
            elapsed = step_end - start
            positions, flops = compute.iteration(metrics)
            counters = dataclasses.replace(
                counters,
                iteration=counters.iteration + 1,
                wall_time_s=counters.wall_time_s + elapsed,
                positions=counters.positions + positions,
                train_flops=counters.train_flops + flops,
            )
            done = counters.iteration >= total
            if limit is not None and counters.wall_time_s >= limit and not done:
                status, done = "time_limit", True
            row = {
                "iteration": counters.iteration,
                **metrics,  # the host's counters below win over same-named metrics
                "wall_time_s": counters.wall_time_s,
                "iteration_time_s": elapsed,
                "host_time_s": host_time,
                "positions_per_s": positions / elapsed if elapsed > 0 else None,
                "positions": counters.positions,
                "train_flops": counters.train_flops,
            }
            bad = first_nonfinite(metrics)
            if bad is not None:
                log.write(row)
                status = "nonfinite"
                last = store.latest_step()
                message = (
                    f"stopped: iteration {counters.iteration} produced {bad[0]} = {bad[1]}; "
                    f"not saved. Last good checkpoint: "
                    + (f"iteration {last} ({store.directory / str(last)})" if last is not None
                       else "none")
                )
                break
            if evaluation is not None and (
                done or (cfg.eval.every and counters.iteration % cfg.eval.every == 0)
            ):
                latest_eval = evaluation(local_copy(state.params), counters.iteration)
                row.update(latest_eval)
            log.write(row)
            if done or counters.iteration % cfg.checkpoint.every == 0:
                store.save(state, counters)
            log.progress(counters.iteration, progress_postfix(row, latest_eval))
            host_time = time.perf_counter() - step_end
    if status != "nonfinite":
        if status == "time_limit":
            message = (f"time limit {limit:g}s reached after {counters.iteration} "
                       f"of {total} iterations")
        else:
            message = f"completed {counters.iteration} iterations"
        if evaluation is not None and not latest_eval and counters.iteration > 0:
            latest_eval = evaluation(local_copy(state.params), counters.iteration)
        if latest_eval and lead:
            summary = {"iteration": counters.iteration, **latest_eval}
            write_text_atomically(workdir / EVALUATION_FILENAME,
                                  json.dumps(summary, indent=2) + "\n")
        if latest_eval and evaluation is not None:
            message += "; " + evaluation.describe(latest_eval)
    return RunResult(
        workdir=workdir,
        status=status,
        iterations=counters.iteration,
        wall_time_s=counters.wall_time_s,
        positions=counters.positions,
        train_flops=counters.train_flops,
        metrics=row,
        evaluation=latest_eval,
        message=message,
    )


# ----------------------------------------------------------------------------- CLI
def train_and_report(
    cfg: Any,
    workdir: str | Path,
    *,
    resume: bool = False,
    restart: bool = False,
) -> int:
    """``curiosity-search train``: trains ``cfg`` in ``workdir``, prints the outcome.

    Returns the exit code: 0 done (all iterations or the time limit), 1 stopped on a
    non-finite loss, 2 an unusable multi-host environment (one ``error: ...`` line on
    stderr). An unusable run directory, checkpoint or file raises (``UserError``,
    ``OSError``: the CLI prints them on one line and exits 2).

    A multi-host run is started first (``distributed.maybe_initialize_distributed``,
    from ``CURIOSITY_SEARCH_*`` environment variables), before any JAX computation.
    """
    from curiosity_search.train.distributed import (
        DistributedError,
        maybe_initialize_distributed,
    )

    try:
        maybe_initialize_distributed()
    except DistributedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = train(cfg, workdir, resume=resume, restart=restart)
    if jax.process_index() == 0:
        print(result.message, file=sys.stderr if not result.ok else sys.stdout, flush=True)
    return 0 if result.ok else 1


__all__ = [
    "TIMING_KEYS",
    "ComputeModel",
    "RunResult",
    "first_nonfinite",
    "loss_value",
    "make_compute_model",
    "progress_postfix",
    "train",
    "train_and_report",
]
