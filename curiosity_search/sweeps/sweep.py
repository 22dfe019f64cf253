"""Sweeps: a grid of training runs from one YAML file, each trained, evaluated, marked done.

A sweep file::

    name: hex_scaling_cpu            # default: the file's stem
    base: ../quickstart.yaml         # a config path (relative to this file) or an
                                     # inline mapping (which may `extends:` a path)
    set: [checkpoint.keep=100]       # overrides for every run (optional)
    grid:                            # axes, expanded as a cartesian product in order
      board:
        - {name: hex3, set: [env.size=3, train.iterations=40]}
        - {name: hex4, set: [env.size=4]}
      algorithm: [algorithm=gumbel, algorithm=curiosity]   # a string is one override
      seed: [seed=0, seed=1]
    evaluation: {...}                # the plan, see ``eval.evaluation``

An axis entry is ``{name: N, set: [overrides]}``, one override string, or a list of
override strings; without a name it is named after its first override's value (or
``<axis><value>`` when the value does not start with a letter). A run's name joins its
entries' names with ``-`` (``hex3-gumbel-seed0``); its config is the base plus the
sweep's ``set``, the entries' overrides in axis order, and ``name=<run>``.

Runs live in ``<root>/<run>/`` with root ``results/<sweep name>`` (or ``--workdir``). A
run is finished when its directory holds ``DONE``, written after training and
evaluation with the run's resolved config, and that config is still the one the sweep
file gives it (``logging`` and ``checkpoint`` aside): a run whose sweep file was edited
since is ``changed`` and runs again (a resume, which refuses a config change it cannot
continue). An unfinished run with a directory is resumed (``train(resume=True)``,
which starts from iteration 0 if nothing was saved, and is told to start over when the
directory holds metrics but no checkpoint). A run whose directory another process
holds (``train.workdir_lock``) is ``busy``: reported, not started. ``--shard I/N`` takes
runs ``I, I+N, ...`` of the name-sorted list; ``--jobs J`` runs J at a time, each in
its own process (``python -m curiosity_search.cli.sweep_run FILE --run NAME``, which
trains, evaluates and marks one run, and dies with the sweep that started it) with
one GPU per process where there are GPUs.

A malformed sweep file (not found, not YAML, a repeated key, an unknown key, no base,
an empty grid, repeated run names, a bad evaluation plan) is a ``SweepError`` naming
the file and key; the CLI prints it on one line and exits 2.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from curiosity_search.atomic_io import write_text_atomically
from curiosity_search.errors import UserError
from curiosity_search.eval.evaluation import EvalPlan, evaluate_run, plan_from_dict
from curiosity_search.sweeps.jobs import run_parallel

DONE_FILENAME = "DONE"
_SWEEP_KEYS = ("name", "base", "set", "grid", "evaluation")
# Config sections a finished run may differ in and still count as done.
UNCOMPARED_SECTIONS = ("logging", "checkpoint")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class SweepError(UserError, ValueError):
    """A malformed sweep file; the message names the key, the value and what is allowed."""


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: its name, overrides (in order) and the entry chosen per axis."""

    name: str
    overrides: tuple[str, ...]
    axes: tuple[tuple[str, str], ...]
    grid_overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sweep:
    """A parsed sweep file: base config (raw mapping), runs, evaluation plan, root folder."""

    name: str
    file: Path
    base: dict[str, Any]
    runs: tuple[SweepRun, ...]
    evaluation: EvalPlan
    root: Path
    common: tuple[str, ...] = ()

    def run_dir(self, run: SweepRun) -> Path:
        return self.root / run.name

    def config(self, run: SweepRun) -> Any:
        """The run's resolved ``Config`` (raises ``ConfigError`` naming the bad key)."""
        from curiosity_search.config import ConfigError, apply_overrides, config_from_dict

        try:
            return config_from_dict(apply_overrides(self.base, run.overrides))
        except ConfigError as error:
            raise ConfigError(f"sweep run {run.name}: {error}") from None

    def status(self, run: SweepRun) -> str:
        """``done``, ``changed`` (done under another config), ``busy`` (another process
        holds its directory), ``partial`` or ``new``."""
        from curiosity_search.config import config_to_dict
        from curiosity_search.train.workdir_lock import lock_holder

        run_dir = self.run_dir(run)
        if run_dir.is_dir() and lock_holder(run_dir) is not None:
            return "busy"
        return run_status(run_dir, config_to_dict(self.config(run)))

    def get(self, name: str) -> SweepRun:
        for run in self.runs:
            if run.name == name:
                return run
        raise SweepError(
            f"run {name!r} is not in sweep {self.name}; runs: {[r.name for r in self.runs]}"
        )


def _entry(axis: str, entry: Any) -> tuple[str, tuple[str, ...]]:
    """(name, overrides) of one axis entry."""
    if isinstance(entry, str):
        entry = [entry]
    if isinstance(entry, list):
        entry = {"set": entry}
    if not isinstance(entry, dict) or set(entry) - {"name", "set"}:
        raise SweepError(
            f"grid.{axis}: entry {entry!r}; allowed: an override string, a list "
            "of them, or {name: ..., set: [...]}"
        )
    overrides = entry.get("set") or []
    overrides = [overrides] if isinstance(overrides, str) else overrides
    if not isinstance(overrides, list) or not all(isinstance(o, str) and "=" in o
                                                  for o in overrides):
        raise SweepError(f"grid.{axis}: overrides {overrides!r}; allowed: 'key.path=value'")
    name = entry.get("name")
    if name is None:
        if not overrides:
            raise SweepError(f"grid.{axis}: an entry without overrides needs a name")
        value = overrides[0].split("=", 1)[1].strip()
        name = value if value[:1].isalpha() else f"{axis}{value}"
    name = re.sub(r"[^A-Za-z0-9_.]+", "_", str(name)).strip("_")
    if not name:
        raise SweepError(f"grid.{axis}: entry {entry!r} has an empty name")
    return name, tuple(overrides)


def expand_grid(grid: Mapping[str, Any], common: Sequence[str] = ()) -> list[SweepRun]:
    """All runs of a grid, sorted by name. Raises SweepError on duplicates or bad entries."""
    if not isinstance(grid, Mapping) or not grid:
        raise SweepError(f"grid: {grid!r}; allowed: a mapping axis -> list of entries")
    axes = []
    for axis, entries in grid.items():
        if not isinstance(entries, list) or not entries:
            raise SweepError(f"grid.{axis}: {entries!r}; allowed: a non-empty list")
        axes.append([(str(axis), *_entry(str(axis), e)) for e in entries])
    runs = []
    for combo in itertools.product(*axes):
        name = "-".join(entry_name for _, entry_name, _ in combo)
        overrides = (*common, *(o for _, _, ovs in combo for o in ovs), f"name={name}")
        own = tuple(o for _, _, ovs in combo for o in ovs)
        runs.append(SweepRun(name, overrides, tuple((axis, n) for axis, n, _ in combo), own))
    names = [r.name for r in runs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SweepError(f"grid: run names {duplicates} repeat; give the entries distinct names")
    return sorted(runs, key=lambda r: r.name)


def _base(value: Any, folder: Path) -> dict[str, Any]:
    from curiosity_search.config import deep_merge, load_raw

    def resolve(path: str) -> Path:
        candidate = Path(path)
        if not candidate.is_absolute() and (folder / candidate).exists():
            return folder / candidate
        return candidate

    if isinstance(value, str):
        return load_raw(resolve(value))
    if isinstance(value, Mapping):
        data = dict(value)
        parent = data.pop("extends", None)
        return deep_merge(load_raw(resolve(parent)), data) if parent else data
    raise SweepError(f"base: {value!r}; allowed: a config path or an inline mapping")


def load_sweep(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Sweep:
    """Parses a sweep file; ``root`` defaults to ``results/<sweep name>``.

    Raises ``SweepError`` naming the file and the key for anything malformed.
    """
    from curiosity_search.config import ConfigError
    from curiosity_search.config.loading import read_yaml_file

    path = Path(path)
    try:
        data = read_yaml_file(path, "sweep file")
    except ConfigError as error:
        raise SweepError(str(error)) from None
    if data is None:
        raise SweepError(f"{path}: the sweep file is empty; it needs at least base and grid")
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a sweep file is a mapping with keys {list(_SWEEP_KEYS)}")
    unknown = sorted(set(map(str, data)) - set(_SWEEP_KEYS))
    if unknown:
        raise SweepError(f"{path}: unknown key(s) {unknown}; allowed: {list(_SWEEP_KEYS)}")
    if "base" not in data:
        raise SweepError(f"{path}: missing key 'base' (a config path or inline mapping)")
    name = data.get("name")
    if name is None:
        name = path.stem
    if not isinstance(name, str) or not _NAME.match(name):
        raise SweepError(f"{path}: name: {name!r}; allowed: letters, digits, _ . - "
                         "(it names the results folder)")
    common = data.get("set") or []
    common = [common] if isinstance(common, str) else common
    if not isinstance(common, list) or not all(isinstance(o, str) and "=" in o for o in common):
        raise SweepError(f"{path}: set: {common!r}; allowed: a list of 'key.path=value'")
    evaluation = data.get("evaluation")
    if evaluation is not None and not isinstance(evaluation, dict):
        raise SweepError(f"{path}: evaluation: {evaluation!r}; allowed: a mapping")
    try:
        plan = plan_from_dict(evaluation)
    except ValueError as error:
        raise SweepError(f"{path}: {error}") from None
    except TypeError as error:  # e.g. a number where a list of player specs belongs
        raise SweepError(f"{path}: evaluation: {evaluation!r} holds a value of the wrong "
                         f"type ({error})") from None
    try:
        base = _base(data["base"], path.parent)
    except ConfigError as error:
        raise SweepError(f"{path}: base: {error}") from None
    except SweepError as error:
        raise SweepError(f"{path}: {error}") from None
    try:
        runs = tuple(expand_grid(data.get("grid") or {}, common))
    except SweepError as error:
        raise SweepError(f"{path}: {error}") from None
    return Sweep(
        name=name,
        file=path,
        base=base,
        runs=runs,
        evaluation=plan,
        root=Path(root) if root is not None else Path("results") / name,
        common=tuple(common),
    )


def shard(runs: Sequence[SweepRun], index: int, count: int) -> list[SweepRun]:
    """Round-robin slice ``index`` of ``count`` over the name-sorted runs."""
    if count < 1 or not 0 <= index < count:
        raise SweepError(f"shard {index}/{count}: allowed I/N with 0 <= I < N")
    return sorted(runs, key=lambda r: r.name)[index::count]


def parse_shard(value: str | tuple[int, int] | None) -> tuple[int, int]:
    """``"I/N"`` or ``(I, N)`` -> ``(I, N)``; None -> ``(0, 1)``."""
    if value is None:
        return 0, 1
    if isinstance(value, str):
        index, _, count = value.partition("/")
        try:
            value = (int(index), int(count))
        except ValueError:
            raise SweepError(f"shard {value!r}: allowed I/N, e.g. 0/4") from None
    shard((), *value)
    return value


def _compared(config: Any) -> Any:
    if not isinstance(config, Mapping):
        return config
    return {key: value for key, value in config.items() if key not in UNCOMPARED_SECTIONS}


def finished_config(run_dir: Path) -> dict[str, Any] | None:
    """The resolved config a finished run was trained with: recorded in ``DONE`` (or,
    for a ``DONE`` written before that, the run's ``config.yaml``); None if unreadable."""
    from curiosity_search.config import ConfigError
    from curiosity_search.config.loading import read_yaml_file

    try:
        summary = json.loads((run_dir / DONE_FILENAME).read_text())
    except (OSError, ValueError):
        summary = None
    if isinstance(summary, dict) and isinstance(summary.get("config"), dict):
        return summary["config"]
    try:
        saved = read_yaml_file(run_dir / "config.yaml")
    except ConfigError:
        return None
    return saved if isinstance(saved, dict) else None


def run_status(run_dir: Path, config: Mapping[str, Any] | None = None) -> str:
    """``done`` (a DONE marker), ``partial`` (a directory without one) or ``new``; with
    the run's resolved ``config`` (``config_to_dict``), a DONE run trained with another
    one (``logging`` and ``checkpoint`` aside) is ``changed``."""
    if (run_dir / DONE_FILENAME).exists():
        if config is None or _compared(finished_config(run_dir)) == _compared(dict(config)):
            return "done"
        return "changed"
    return "partial" if run_dir.exists() else "new"


TrainFn = Callable[..., Any]
EvaluateFn = Callable[[Path, EvalPlan], Any]


def execute_run(
    sweep: Sweep,
    run: SweepRun,
    *,
    train_fn: TrainFn | None = None,
    evaluate_fn: EvaluateFn | None = None,
) -> dict[str, Any]:
    """Trains (resuming a partial run), evaluates and marks one run ``DONE``.

    A run directory with metrics but no complete checkpoint (killed before its first)
    is started over (``train(restart=True)``): the sweep owns its run directories.
    """
    from curiosity_search.config import config_to_dict
    from curiosity_search.train.checkpoint import checkpoint_dir, complete_steps
    from curiosity_search.train.metrics_log import METRICS_FILENAME, scan_rows

    if train_fn is None:
        from curiosity_search.train.run import train as train_fn
    evaluate_fn = evaluate_fn or evaluate_run
    run_dir = sweep.run_dir(run)
    cfg = sweep.config(run)
    resume = run_dir.exists()
    options: dict[str, bool] = {"resume": resume}
    if resume and not complete_steps(checkpoint_dir(run_dir)) \
            and scan_rows(run_dir / METRICS_FILENAME).lines:
        print(f"{run.name}: no checkpoint was saved; starting it over", flush=True)
        options = {"restart": True}
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    result = train_fn(cfg, run_dir, **options)
    evaluate_fn(run_dir, sweep.evaluation)
    summary = {
        "run": run.name,
        "status": getattr(result, "status", "completed"),
        "iterations": getattr(result, "iterations", None),
        "train_flops": getattr(result, "train_flops", None),
        "resumed": resume,
        "seconds": round(time.time() - start, 3),
        "overrides": list(run.overrides),
        "config": config_to_dict(cfg),
    }
    write_text_atomically(run_dir / DONE_FILENAME, json.dumps(summary, indent=2) + "\n")
    return summary


def run_sweep(
    sweep: Sweep,
    *,
    shard_spec: tuple[int, int] = (0, 1),
    jobs: int = 1,
    dry_run: bool = False,
    train_fn: TrainFn | None = None,
    evaluate_fn: EvaluateFn | None = None,
    out: Callable[[str], None] = print,
) -> list[str]:
    """Runs this shard's unfinished runs; returns the names of failed runs.

    ``dry_run`` validates every config of the shard and lists the runs with their
    status instead. ``jobs > 1`` uses child processes (``train_fn`` / ``evaluate_fn``
    apply to ``jobs == 1`` only).
    """
    runs = shard(sweep.runs, *shard_spec)
    if dry_run:
        for run in runs:
            status = sweep.status(run)  # validates the run's config
            out(f"{status:8s} {run.name:32s} {' '.join(run.grid_overrides)}")
        out(
            f"{len(runs)} run(s) in shard {shard_spec[0]}/{shard_spec[1]} of {sweep.name} "
            f"({len(sweep.runs)} in all), root {sweep.root}"
        )
        if sweep.common:
            out(f"every run also sets: {' '.join(sweep.common)}")
        return []
    statuses = {run.name: sweep.status(run) for run in runs}  # validates every config
    todo = [run for run in runs if statuses[run.name] not in ("done", "busy")]
    busy = [run.name for run in runs if statuses[run.name] == "busy"]
    out(
        f"{sweep.name}: {len(todo)} of {len(runs)} run(s) to do in shard "
        f"{shard_spec[0]}/{shard_spec[1]}"
    )
    for name in busy:
        from curiosity_search.train.workdir_lock import lock_holder

        holder = lock_holder(sweep.root / name)
        out(f"busy {name}: another process (pid {holder or 'unknown'}) holds its run "
            "directory; not started")
    for run in todo:
        if statuses[run.name] == "changed":
            out(f"changed {run.name}: finished under another config (the sweep file was "
                "edited); running it again")
    if jobs > 1:
        def finished(run: SweepRun) -> bool:
            return run_status(sweep.run_dir(run)) == "done"

        return busy + run_parallel(sweep, todo, jobs, out, finished=finished)
    failed = list(busy)
    for run in todo:
        out(f"{statuses[run.name]} -> running {run.name}")
        try:
            summary = execute_run(sweep, run, train_fn=train_fn, evaluate_fn=evaluate_fn)
        except Exception as error:  # noqa: BLE001 - one crashed run must not stop the sweep
            out(f"FAILED {run.name}: {type(error).__name__}: {error}")
            failed.append(run.name)
            continue
        finally:
            # Each run's programs are its own (another config compiles others), and
            # XLA:CPU keeps every live executable mapped into memory: freed here, a long
            # sweep in one process stays below the kernel's mapping limit
            # (vm.max_map_count), where compiling fails (results/bench/README.md, "the
            # test suite's crash"). A later run with the same programs reloads them from
            # the persistent compilation cache.
            jax.clear_caches()
        out(f"done {run.name}: {summary['status']}, {summary['seconds']:.0f} s")
    return failed
