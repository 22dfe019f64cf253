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
  network FLOPs so far (``run.ComputeModel``);
- every scalar metric the trainer returns (``loss``, ``policy_loss``, ``grad_norm``...);
- ``eval/...`` on evaluation iterations (``solver_eval``).

Non-finite floats are written as ``null`` (strict JSON).

Resume: ``scan_rows`` reads the file line by line without trusting it (bytes that are
not UTF-8, lines that are not JSON objects with a positive integer ``iteration``, a line
cut short by a crash); ``resume_warnings`` says what a resume from a checkpoint will
find (holes, repeated iterations, unreadable lines) and ``truncate_rows`` then drops the
rows after the checkpoint and any unreadable lines after the last kept row, leaving
every earlier line byte for byte as it was: a resume never writes an iteration twice
and never loses a good row. TensorBoard purges its events from the same step on.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from curiosity_search.atomic_io import write_bytes_atomically

METRICS_FILENAME = "metrics.jsonl"
TENSORBOARD_DIRNAME = "tensorboard"


def to_json_value(value: Any) -> Any:
    """Converts a host scalar (python or numpy) to a JSON value; NaN/inf become ``None``."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclasses.dataclass(frozen=True)
class MetricsLine:
    """One non-blank line of ``metrics.jsonl``.

    Attributes:
      number: the 1-based line number.
      start, end: its byte offsets (``end`` past its newline, if it has one).
      row: the parsed row, or ``None`` when the line is not a metrics row.
      problem: why it is not a row (empty for a row).
    """

    number: int
    start: int
    end: int
    row: dict[str, Any] | None
    problem: str = ""


@dataclasses.dataclass(frozen=True)
class MetricsScan:
    """What ``scan_rows`` found: every non-blank line, and whether the file ends cleanly.

    Attributes:
      path: the file.
      lines: the non-blank lines in file order.
      torn: the file does not end with a newline (its last write was cut short).
    """

    path: Path
    lines: tuple[MetricsLine, ...]
    torn: bool

    def rows(self) -> list[dict[str, Any]]:
        """The readable rows in file order."""
        return [line.row for line in self.lines if line.row is not None]


def _parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    try:
        row = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None, f"not JSON: {_excerpt(text)}"
    if not isinstance(row, dict):
        return None, f"not a JSON object: {_excerpt(text)}"
    iteration = row.get("iteration")
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 1:
        return None, f"'iteration' is {_excerpt(repr(iteration))}, not a positive integer"
    return row, ""


def _excerpt(text: str, limit: int = 40) -> str:
    text = text.strip()
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def scan_rows(path: str | os.PathLike[str]) -> MetricsScan:
    """Reads ``metrics.jsonl`` line by line, whatever it holds (a missing file is empty)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return MetricsScan(path, (), False)
    lines = []
    start = 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        end = min(start + len(raw) + 1, len(data))
        if raw.strip():
            row, problem = _parse_line(raw)
            lines.append(MetricsLine(number, start, end, row, problem))
        start = end
    return MetricsScan(path, tuple(lines), bool(data) and not data.endswith(b"\n"))


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every readable row of a ``metrics.jsonl`` (unreadable lines, e.g. a torn last
    line, are skipped)."""
    return scan_rows(path).rows()


def _kept_lines(scan: MetricsScan, last_iteration: int) -> list[MetricsLine]:
    """The lines a resume from ``last_iteration`` keeps: rows up to it, and unreadable
    lines before the last of them (left as they are)."""
    last_kept = max(
        (i for i, line in enumerate(scan.lines)
         if line.row is not None and line.row["iteration"] <= last_iteration),
        default=-1,
    )
    return [
        line for i, line in enumerate(scan.lines)
        if (line.row is not None and line.row["iteration"] <= last_iteration)
        or (line.row is None and i < last_kept)
    ]


def _ranges(numbers: list[int]) -> str:
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(str(start) if start == n else f"{start}-{n}")
            start = None
    shown = ", ".join(parts[:5])
    return shown + (f" and {len(parts) - 5} more" if len(parts) > 5 else "")


def resume_warnings(scan: MetricsScan, last_iteration: int) -> list[str]:
    """One-line warnings about the log a resume from ``last_iteration`` continues.

    Names missing and repeated iterations up to ``last_iteration``, unreadable lines that
    stay (before the last kept row) and those ``truncate_rows`` will drop.
    """
    name = scan.path.name
    kept = _kept_lines(scan, last_iteration)
    warnings_ = []
    seen = [line.row["iteration"] for line in kept if line.row is not None]
    missing = sorted(set(range(1, last_iteration + 1)) - set(seen))
    if missing:
        why = " (the file is missing)" if not scan.lines and not scan.path.exists() else ""
        warnings_.append(
            f"{scan.path}: no rows for iteration(s) {_ranges(missing)} of the checkpoint's "
            f"{last_iteration}{why}; the log continues at {last_iteration + 1} without them"
        )
    repeated = sorted(n for n, count in collections.Counter(seen).items() if count > 1)
    if repeated:
        warnings_.append(f"{scan.path}: iteration(s) {_ranges(repeated)} appear more than "
                         "once; the rows are kept as they are")
    for line in kept:
        if line.row is None:
            warnings_.append(f"{name} line {line.number} is not a metrics row "
                             f"({line.problem}); kept as it is")
    kept_numbers = {line.number for line in kept}
    dropped = [line for line in scan.lines if line.row is None
               and line.number not in kept_numbers]
    if dropped:
        first = dropped[0]
        warnings_.append(
            f"{name}: dropping {len(dropped)} unreadable line(s) after iteration "
            f"{last_iteration}'s row (line {first.number}: {first.problem})"
        )
    return warnings_


def truncate_rows(path: str | os.PathLike[str], last_iteration: int) -> int:
    """Keeps the rows with ``iteration <= last_iteration``; returns how many lines went.

    Unreadable lines after the last kept row go too; every kept line stays byte for byte.
    The file is rewritten (only if anything goes) through a temporary file and an atomic
    rename.
    """
    path = Path(path)
    scan = scan_rows(path)
    if not scan.lines:
        return 0
    kept = _kept_lines(scan, last_iteration)
    if len(kept) == len(scan.lines) and not scan.torn:
        return 0
    data = path.read_bytes()
    pieces = [data[line.start:line.end] for line in kept]
    text = b"".join(p if p.endswith(b"\n") else p + b"\n" for p in pieces)
    write_bytes_atomically(path, text, fsync=True)
    return len(scan.lines) - len(kept)


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
