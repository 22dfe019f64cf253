"""The run directory's rules: when a workdir may be trained into, and what a resume may change.

- A fresh run refuses a workdir that already holds checkpoints or metrics rows (a lone
  ``config.yaml``, as the CLI writes before training, is fine): resume it, pick another
  workdir, or delete it. There is deliberately no ``--force``: deleting a run is the
  user's explicit act.
- A resume compares the config with the one stored in the latest checkpoint (not
  ``config.yaml``, which the CLI may already have rewritten) and refuses any change
  outside ``RESUMABLE_KEYS``; ``train.iterations`` may grow only with a constant
  learning-rate schedule (a cosine schedule spans the run's iterations).
- A resume with no complete checkpoint restarts from iteration 0.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from curiosity_search.train.checkpoint import CheckpointStore, HostCounters
from curiosity_search.train.metrics_log import METRICS_FILENAME, read_rows

CONFIG_FILENAME = "config.yaml"
# Config keys (dotted prefixes) a resumed run may change: they do not affect training.
RESUMABLE_KEYS = (
    "name", "train.iterations", "train.time_limit_s", "logging", "checkpoint", "eval",
    "search.eval_num_simulations",
)


class RunDirError(RuntimeError):
    """The run directory cannot be used as asked (occupied, missing, other config)."""


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


def prepare_workdir(
    cfg: Any, workdir: Path, resume: bool, store: CheckpointStore
) -> HostCounters | None:
    """Checks ``workdir`` against the request; returns the counters to resume from.

    Returns ``None`` when the run starts from iteration 0. Raises ``RunDirError``.
    """
    metrics = workdir / METRICS_FILENAME
    has_rows = bool(read_rows(metrics))
    latest = store.latest_step()
    if not resume:
        if latest is not None or has_rows:
            found = "checkpoints" if latest is not None else "metrics"
            raise RunDirError(
                f"{workdir} already holds a run ({found} found); continue it with --resume, "
                f"or choose another --workdir, or delete it first"
            )
        return None
    if latest is None:
        if has_rows:
            print(f"note: {workdir} has no complete checkpoint; restarting from iteration 0",
                  file=sys.stderr)
        return None
    counters = store.restore_counters(latest)
    diffs = config_differences(counters.config, config_dict(cfg))
    saved_iterations = counters.config.get("train", {}).get("iterations")
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
    return counters
