"""Where a run's numbers go: ``metrics.jsonl``, TensorBoard event files, a progress bar.

``metrics.jsonl`` holds one JSON object per completed iteration, written and flushed as
soon as the iteration ends, so a killed run loses nothing it had finished. Keys:

- ``iteration``: the 1-based count of completed iterations;
- ``wall_time_s``: training wall time so far (the compiled iterations, the first one's
  compilation included; evaluation and checkpointing excluded), summed over sessions;
  ``iteration_time_s`` and ``positions_per_s`` for this iteration alone;
  ``host_time_s``: the host work after the previous iteration of this session (its
  evaluation, metrics write, checkpoint and progress bar; 0 for a session's first);
- ``positions``: self-play positions generated so far; ``train_flops``: the estimated
  network FLOPs so far (``run_accounting.ComputeModel``);
- every scalar metric the trainer returns (``loss``, ``policy_loss``, ``grad_norm``...);
- ``eval/...`` on evaluation iterations (``solver_eval``).
 Non-finite floats are written as
``null`` (strict JSON). On resume the rows after the restored checkpoint are dropped
(:func:`truncate_rows`) so every iteration appears exactly once, and TensorBoard purges
its events from the same step on.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from curiosity_search.atomic_io import write_text_atomically

METRICS_FILENAME = "metrics.jsonl"
TENSORBOARD_DIRNAME = "tensorboard"


def to_json_value(value: Any) -> Any:
    """Converts a host scalar (python or numpy) to a JSON value; NaN/inf become ``None``."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Reads every complete row of a ``metrics.jsonl`` (a torn last line is skipped)."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
    return rows


def truncate_rows(path: str | os.PathLike[str], last_iteration: int) -> int:
    """Keeps the rows with ``iteration <= last_iteration``; returns how many were dropped.

    The file is rewritten through a temporary file and an atomic rename.
    """
    path = Path(path)
    if not path.exists():
        return 0
    rows = read_rows(path)
    kept = [row for row in rows if int(row.get("iteration", 0)) <= last_iteration]
    write_text_atomically(path, "".join(json.dumps(row) + "\n" for row in kept), fsync=True)
    return len(rows) - len(kept)


class MetricsLog:
    """Appends per-iteration rows to ``metrics.jsonl``, TensorBoard and a tqdm bar.

    Args:
      workdir: the run directory.
      start_iteration: iterations already completed (0 for a fresh run).
      total_iterations: the run's ``train.iterations`` (the progress bar's total).
      tensorboard: also write TensorBoard event files under ``<workdir>/tensorboard``.
      progress: draw a progress bar on stderr.
      enabled: ``False`` on every process but the first of a multi-host run.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        start_iteration: int,
        total_iterations: int,
        tensorboard: bool = True,
        progress: bool = True,
        enabled: bool = True,
    ) -> None:
        self.path = Path(workdir) / METRICS_FILENAME
        self.enabled = enabled
        self._file = None
        self._writer = None
        self._bar = None
        if not enabled:
            return
        self._file = self.path.open("a")
        if tensorboard:
            from tensorboardX import SummaryWriter

            # purge_step drops events at or after it left by a killed session.
            self._writer = SummaryWriter(
                logdir=str(Path(workdir) / TENSORBOARD_DIRNAME),
                purge_step=start_iteration + 1,
            )
        if progress:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total_iterations, initial=start_iteration, unit="it", dynamic_ncols=True
            )

    def write(self, row: Mapping[str, Any]) -> None:
        """Writes one iteration's row (must hold an ``iteration`` key) everywhere."""
        if not self.enabled:
            return
        row = {key: to_json_value(value) for key, value in row.items()}
        assert self._file is not None
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        iteration = int(row["iteration"])
        if self._writer is not None:
            for key, value in row.items():
                if key == "iteration" or isinstance(value, bool):
                    continue
                if isinstance(value, int | float):
                    self._writer.add_scalar(key, value, iteration)
            self._writer.flush()

    def progress(self, iteration: int, postfix: Mapping[str, str]) -> None:
        """Moves the progress bar to ``iteration`` and shows ``postfix``."""
        if self._bar is None:
            return
        self._bar.set_postfix(dict(postfix), refresh=False)
        self._bar.update(iteration - self._bar.n)

    def close(self) -> None:
        """Flushes and closes every sink."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> MetricsLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
