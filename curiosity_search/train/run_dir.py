"""The run directory's rules: when a workdir may be trained into, what a resume restores.

- A fresh run refuses a workdir that already holds checkpoints or metrics (a lone
  ``config.yaml``, as the CLI writes before training, is fine): resume it, start it
  over with ``restart`` (``--restart``: ``clear_run`` deletes its checkpoints, metrics,
  TensorBoard events and evaluation, nothing else), or pick another workdir.
- A resume compares the config with the one stored in the checkpoint (not
  ``config.yaml``, which the CLI may already have rewritten) and refuses any change
  outside ``RESUMABLE_KEYS``; ``train.iterations`` may grow only with a constant
  learning-rate schedule (a cosine schedule spans the run's iterations).
- A resume restores the newest *good* checkpoint: one whose files are damaged
  (``CheckpointStore.check``) or whose counters or state cannot be read is named in a
  warning and the next older one is tried; damaged folders are set aside
  (``<n>.damaged``) only once a restore has succeeded. When none is good, a
  ``CheckpointError`` lists them and says how to start over.
- A resume of a workdir with metrics but no complete checkpoint refuses (restarting
  would throw the rows away): ``restart`` or another workdir. With neither (killed
  while compiling) it starts from iteration 0. A workdir that does not exist is an
  error.
- Nothing in the workdir is rewritten until the restore has succeeded; ``finish_restore``
  then sets the damaged checkpoints aside and cuts ``metrics.jsonl`` back to the
  restored iteration (``metrics_log.truncate_rows``), warning about holes and
  unreadable lines (``metrics_log.resume_warnings``).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from curiosity_search.train.checkpoint import (
    CHECKPOINT_DIRNAME,
    CheckpointDamagedError,
    CheckpointError,
    CheckpointStore,
    HostCounters,
)
from curiosity_search.train.metrics_log import (
    METRICS_FILENAME,
    TENSORBOARD_DIRNAME,
    resume_warnings,
    scan_rows,
    truncate_rows,
)
from curiosity_search.train.workdir_lock import RunDirError

CONFIG_FILENAME = "config.yaml"
EVALUATION_FILENAME = "evaluation.json"
# Config keys (dotted prefixes) a resumed run may change: they do not affect training.
RESUMABLE_KEYS = (
    "name", "train.iterations", "train.time_limit_s", "logging", "checkpoint", "eval",
    "search.eval_num_simulations",
)
START_OVER = "start over with --restart (deletes its checkpoints and metrics) or choose " \
             "another --workdir"


class RunDirWarning(UserWarning):
    """Something in the run directory was damaged; the run continues without it."""


@dataclasses.dataclass(frozen=True)
class ResumePlan:
    """Where a resume starts: the newest checkpoint whose files and counters are good.

    Attributes:
      counters: that checkpoint's host counters (its config already checked).
      older: the complete checkpoints before it, newest first (fallbacks for the state).
      damaged: ``(iteration, reason)`` of the newer checkpoints found damaged.
    """

    counters: HostCounters
    older: tuple[int, ...]
    damaged: tuple[tuple[int, str], ...] = ()


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(_flatten(value, path))
        else:
            flat[path] = value
    return flat


def config_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two config dicts, minus ``RESUMABLE_KEYS``.

    Each entry reads ``key: saved -> current``.
    """
    old, new = _flatten(saved), _flatten(current)

    def resumable(key: str) -> bool:
        return any(key == p or key.startswith(p + ".") for p in RESUMABLE_KEYS)

    diffs = []
    for key in sorted(set(old) | set(new)):
        if resumable(key):
            continue
        a, b = old.get(key, "<absent>"), new.get(key, "<absent>")
        if _normalise(a) != _normalise(b):
            diffs.append(f"{key}: {a!r} -> {b!r}")
    return diffs


def _normalise(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_normalise(v) for v in value)
    return value


def config_dict(cfg: Any) -> dict[str, Any]:
    """The resolved config as plain data (``config.config_to_dict``)."""
    from curiosity_search.config import config_to_dict

    return config_to_dict(cfg)


def warn(message: str) -> None:
    """A ``RunDirWarning`` (the CLI prints it as one ``warning: ...`` line)."""
    warnings.warn(message, RunDirWarning, stacklevel=3)


def _check_config(cfg: Any, workdir: Path, counters: HostCounters) -> None:
    saved = counters.config if isinstance(counters.config, Mapping) else {}
    diffs = config_differences(saved, config_dict(cfg))
    saved_train = saved.get("train")
    saved_iterations = saved_train.get("iterations") if isinstance(saved_train, Mapping) else None
    if saved_iterations != cfg.train.iterations and cfg.optimizer.schedule != "constant":
        diffs.append(
            f"train.iterations: {saved_iterations!r} -> {cfg.train.iterations!r} "
            f"(the {cfg.optimizer.schedule} learning-rate schedule spans the run's iterations)"
        )
    if diffs:
        raise RunDirError(
            f"cannot resume {workdir}: the config differs from the checkpointed run in "
            f"{len(diffs)} key(s): " + "; ".join(diffs)
            + ". A resume may change only " + ", ".join(RESUMABLE_KEYS)
            + " (train.iterations only with optimizer.schedule constant)"
        )


def _good_counters(
    store: CheckpointStore, steps: list[int], damaged: list[tuple[int, str]]
) -> Iterator[HostCounters]:
    """Counters of the checkpoints in ``steps`` (newest first) whose files and counters
    are good; each damaged one is warned about and appended to ``damaged``."""
    for i, step in enumerate(steps):
        try:
            store.check(step)
            yield store.restore_counters(step)
        except CheckpointDamagedError as error:
            damaged.append((step, str(error)))
            fallback = f"trying checkpoint {steps[i + 1]}" if i + 1 < len(steps) else \
                "no older checkpoint"
            warn(f"{error}; {fallback}")


def _none_good(workdir: Path, damaged: list[tuple[int, str]]) -> CheckpointError:
    listed = ", ".join(str(step) for step, _ in damaged)
    return CheckpointError(
        f"cannot resume {workdir}: no checkpoint can be restored (damaged: {listed}; "
        f"newest: {damaged[0][1]}); {START_OVER}"
    )


def prepare_workdir(
    cfg: Any, workdir: Path, resume: bool, store: CheckpointStore
) -> ResumePlan | None:
    """Checks ``workdir`` against the request; returns where to resume from.

    Returns ``None`` when the run starts from iteration 0. Reads, never writes. Raises
    ``RunDirError`` (occupied, missing, other config) or ``CheckpointError`` (every
    checkpoint damaged).
    """
    metrics = scan_rows(workdir / METRICS_FILENAME)
    steps = store.steps()
    if not resume:
        if steps or metrics.lines:
            found = "checkpoints" if steps else "metrics"
            raise RunDirError(
                f"{workdir} already holds a run ({found} found); continue it with --resume, "
                f"{START_OVER}"
            )
        return None
    if not workdir.is_dir():
        raise RunDirError(f"cannot resume {workdir}: it does not exist (nothing to resume); "
                          "drop --resume to start a new run there")
    if not steps:
        if metrics.lines:
            rows = metrics.rows()
            last = max((row["iteration"] for row in rows), default=0)
            raise RunDirError(
                f"cannot resume {workdir}: it has no complete checkpoint, but "
                f"{METRICS_FILENAME} holds {len(rows)} row(s) (up to iteration {last}); "
                f"{START_OVER}"
            )
        print(f"note: {workdir} has no checkpoint yet; starting from iteration 0",
              file=sys.stderr)
        return None
    newest_first = sorted(steps, reverse=True)
    damaged: list[tuple[int, str]] = []
    for counters in _good_counters(store, newest_first, damaged):
        _check_config(cfg, workdir, counters)
        older = tuple(s for s in newest_first if s < counters.iteration)
        return ResumePlan(counters=counters, older=older, damaged=tuple(damaged))
    raise _none_good(workdir, damaged)


def restore_newest(
    store: CheckpointStore, target_state: Any, plan: ResumePlan, workdir: Path
) -> tuple[Any, HostCounters, tuple[tuple[int, str], ...]]:
    """Restores the plan's checkpoint, falling back to older ones whose state is damaged.

    Returns ``(state, counters, damaged)`` with every damaged checkpoint newer than the
    restored one. Raises ``CheckpointError`` when none restores.
    """
    damaged = list(plan.damaged)
    candidates = [plan.counters.iteration, *plan.older]
    for i, step in enumerate(candidates):
        try:
            state, counters = store.restore(target_state, step)
            return state, counters, tuple(damaged)
        except CheckpointDamagedError as error:
            damaged.append((step, str(error)))
            fallback = f"trying checkpoint {candidates[i + 1]}" if i + 1 < len(candidates) \
                else "no older checkpoint"
            warn(f"{error}; {fallback}")
    raise _none_good(workdir, damaged)


def finish_restore(
    workdir: Path, store: CheckpointStore, iteration: int,
    damaged: tuple[tuple[int, str], ...], lead: bool = True,
) -> None:
    """After a successful restore of ``iteration``: sets the damaged checkpoints aside,
    warns about the metrics log and cuts it back to ``iteration`` (on the lead process)."""
    for step, _ in damaged:
        moved = store.set_aside(step)
        warn(f"resumed from checkpoint {iteration}; damaged checkpoint {step} moved to {moved}")
    if not lead:
        return
    path = workdir / METRICS_FILENAME
    for message in resume_warnings(scan_rows(path), iteration):
        warn(message)
    truncate_rows(path, iteration)


def clear_run(workdir: Path) -> list[str]:
    """Deletes a run's checkpoints, metrics, TensorBoard events and evaluation (for
    ``--restart``); returns the names deleted. Anything else in ``workdir`` stays.

    Call it before a ``CheckpointStore`` is opened on the workdir.
    """
    deleted = []
    for name in (CHECKPOINT_DIRNAME, METRICS_FILENAME, TENSORBOARD_DIRNAME,
                 EVALUATION_FILENAME):
        path = workdir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        deleted.append(name)
    return deleted
