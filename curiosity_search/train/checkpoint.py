"""Checkpoints of a training run: the full ``TrainState`` plus host-side counters.

A run directory holds its checkpoints under ``<workdir>/checkpoints/<iteration>/``, one
folder per saved iteration (the number of completed iterations), each with two items:

- ``state/``: the trainer's ``TrainState`` pytree (orbax ``StandardSave``);
- ``host/``: JSON with the host counters (:class:`HostCounters`): iteration, cumulative
  wall time, positions generated, training FLOPs, and the resolved config the run
  was started with (so a resume can refuse a changed config).

Config fields: the state fields in ``CONFIG_FIELDS`` (the traced hyperparameters) come
from the config, so they are saved as ``None`` and restored as ``None``, also from
checkpoints written before the field existed; the caller fills them (``run`` sets
``hyperparams`` from the config), and adding one does not break old checkpoints. Any
other mismatch is a ``CheckpointError``.

Saves are synchronous and atomic: orbax writes ``<iteration>.orbax-checkpoint-tmp-*``
and renames it into place only once every file is written, so a crash mid-write
leaves the previous checkpoint as the latest complete one. Leftover temporary
folders are ignored (and removed the next time a writable store is opened).

Damage: after each save, ``checksums.json`` in the checkpoint folder records the size
and CRC-32 of every file of its two items. ``check`` compares the files with it before
anything reads them, so a checkpoint whose files were truncated, overwritten or removed
is a ``CheckpointDamagedError`` naming the file, found without orbax ever failing
half-way through a read (its failed reads print stray ``Event loop is closed``
tracebacks from tensorstore's callbacks). A checkpoint without the record (written
before it existed, or killed between the save and the record) is unverified: any
failure to read it counts as damage too. A restore of an intact checkpoint whose tree
does not fit the target is a plain ``CheckpointError`` (the code or config changed),
never damage. ``set_aside`` renames a damaged checkpoint folder to
``<iteration>.damaged`` (kept for inspection, ignored as a checkpoint).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import shutil
import warnings
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from curiosity_search.atomic_io import write_text_atomically
from curiosity_search.errors import UserError

CHECKPOINT_DIRNAME = "checkpoints"
_STATE_ITEM = "state"
_HOST_ITEM = "host"
_STEP_DIR = re.compile(r"^\d+$")
# State fields that come from the config, not from training: saved and restored as None
# (a resume sets them from the config), so they may change, or be new, between versions.
CONFIG_FIELDS = ("hyperparams",)
CHECKSUMS_FILENAME = "checksums.json"
DAMAGED_SUFFIX = ".damaged"


class CheckpointError(UserError, RuntimeError):
    """A checkpoint is missing, incomplete or does not match the run restoring it."""


class CheckpointDamagedError(CheckpointError):
    """A checkpoint's files are missing, truncated or altered (an older one may be good)."""


def _short(error: BaseException) -> str:
    """``Type: first line of the message`` (at most 200 characters), for one-line errors."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= 200 else text[:197] + "..."


def _crc32(path: Path) -> int:
    crc = 0
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def _structural_problem(step_dir: Path) -> str:
    """What is missing from a checkpoint without ``checksums.json`` (its metadata files,
    the OCDBT manifest), or ``""``: the damage found without reading any array."""
    for name in (f"{_STATE_ITEM}/_METADATA", f"{_HOST_ITEM}/metadata"):
        try:
            json.loads((step_dir / name).read_bytes())
        except FileNotFoundError:
            return f"{name} is missing"
        except (OSError, ValueError):
            return f"{name} is not readable JSON"
    state = step_dir / _STATE_ITEM
    if any(state.glob("ocdbt.process_*")) and not (state / "manifest.ocdbt").is_file():
        return f"{_STATE_ITEM}/manifest.ocdbt is missing"
    return ""


def file_checksums(step_dir: Path) -> dict[str, list[int]]:
    """``{relative path: [size, crc32]}`` of every file of a checkpoint's two items."""
    sums = {}
    for item in (_STATE_ITEM, _HOST_ITEM):
        for path in sorted((step_dir / item).rglob("*")):
            if path.is_file():
                sums[path.relative_to(step_dir).as_posix()] = [path.stat().st_size, _crc32(path)]
    return sums


@dataclasses.dataclass(frozen=True)
class HostCounters:
    """Host-side run counters saved next to the ``TrainState``.

    Attributes:
      iteration: completed training iterations (the checkpoint's step).
      wall_time_s: training wall time so far, summed over every session of the run.
      positions: self-play positions generated so far.
      train_flops: estimated network FLOPs spent so far (self-play + updates).
      config: the resolved config the run was started with, as a plain dict.
    """

    iteration: int
    wall_time_s: float = 0.0
    positions: float = 0.0
    train_flops: float = 0.0
    config: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Returns a JSON-serialisable dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostCounters:
        """Builds counters from :meth:`to_json` output, ignoring unknown keys."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


def checkpoint_dir(workdir: str | os.PathLike[str]) -> Path:
    """Returns the folder holding a run directory's checkpoints."""
    return Path(workdir) / CHECKPOINT_DIRNAME


def complete_steps(directory: str | os.PathLike[str]) -> list[int]:
    """Returns the iterations with a complete checkpoint in ``directory``, ascending.

    Only folders named by a plain integer count: orbax's temporary folders
    (``<n>.orbax-checkpoint-tmp-*``) are in-progress or crashed writes. A folder
    must also hold both items, so a hand-truncated checkpoint is skipped too.
    """
    path = Path(directory)
    if not path.is_dir():
        return []
    steps = []
    for child in path.iterdir():
        if not (child.is_dir() and _STEP_DIR.match(child.name)):
            continue
        if (child / _STATE_ITEM).is_dir() and (child / _HOST_ITEM).is_dir():
            steps.append(int(child.name))
    return sorted(steps)


class CheckpointStore:
    """Saves and restores ``(TrainState, HostCounters)`` pairs for one run directory.

    Args:
      directory: the checkpoint folder (``<workdir>/checkpoints``).
      keep: how many of the newest checkpoints to keep (``None`` keeps all).
      read_only: open without creating folders or deleting anything (agents, evaluation).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        keep: int | None = None,
        read_only: bool = False,
    ) -> None:
        self.directory = Path(directory).absolute()
        if not read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
        options = ocp.CheckpointManagerOptions(
            max_to_keep=None if read_only else keep,
            create=not read_only,
            cleanup_tmp_directories=not read_only,
            enable_async_checkpointing=False,
        )
        self._manager = ocp.CheckpointManager(
            self.directory, options=options, item_names=(_STATE_ITEM, _HOST_ITEM)
        )

    def steps(self) -> list[int]:
        """Returns the iterations that have a complete checkpoint, ascending."""
        return complete_steps(self.directory)

    def latest_step(self) -> int | None:
        """Returns the newest complete checkpoint's iteration, or ``None``."""
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, state: Any, counters: HostCounters) -> None:
        """Saves ``state`` and ``counters`` as checkpoint ``counters.iteration``.

        Blocks until the checkpoint is on disk (and renamed into place). Saving an
        iteration that already has a checkpoint is a no-op. ``state`` may hold arrays
        sharded over a mesh; in a multi-host run every process must call this (each
        writes its own shards, process 0 the metadata and ``host/``). ``CONFIG_FIELDS``
        are saved as ``None`` (they are the config's; a resume sets them from it).
        """
        if counters.iteration in self.steps():
            return
        config_fields = [name for name in CONFIG_FIELDS if hasattr(state, name)]
        if config_fields and hasattr(state, "replace"):
            state = state.replace(**dict.fromkeys(config_fields))
        stale = self.directory / str(counters.iteration)
        if stale.exists():  # an incomplete folder (e.g. hand-truncated): unusable anyway
            warnings.warn(f"replacing incomplete checkpoint folder {stale}", stacklevel=2)
            if jax.process_index() == 0:
                shutil.rmtree(stale, ignore_errors=True)
            if jax.process_count() > 1:
                ocp.multihost.sync_global_processes("curiosity_search_stale_removed")
            self._manager.reload()
        try:
            self._manager.save(
                counters.iteration,
                args=ocp.args.Composite(
                    **{
                        _STATE_ITEM: ocp.args.StandardSave(state),
                        _HOST_ITEM: ocp.args.JsonSave(counters.to_json()),
                    }
                ),
                force=True,
            )
            self._manager.wait_until_finished()
            if jax.process_index() == 0:
                step_dir = self.directory / str(counters.iteration)
                write_text_atomically(step_dir / CHECKSUMS_FILENAME,
                                      json.dumps(file_checksums(step_dir)) + "\n")
        except OSError as error:
            raise CheckpointError(
                f"cannot write checkpoint {counters.iteration} in {self.directory}: "
                f"{error.strerror or error}"
            ) from None

    def check(self, step: int) -> bool:
        """Compares checkpoint ``step``'s files with its ``checksums.json``.

        Returns True when they match, False when there is no record to compare with
        (then only the metadata files and the OCDBT manifest are checked). Raises
        ``CheckpointDamagedError`` naming the first bad file.
        """
        step_dir = self.directory / str(step)
        record = step_dir / CHECKSUMS_FILENAME
        if not record.exists():
            problem = _structural_problem(step_dir)
            if problem:
                raise CheckpointDamagedError(f"checkpoint {step_dir} is damaged: {problem}")
            return False
        try:
            saved = json.loads(record.read_text())
            expected = {str(name): (int(size), int(crc)) for name, (size, crc) in saved.items()}
        except (OSError, ValueError, TypeError, AttributeError):
            raise CheckpointDamagedError(
                f"checkpoint {step_dir} is damaged: its {CHECKSUMS_FILENAME} is unreadable"
            ) from None
        problems = []
        for name, (size, crc) in expected.items():
            path = step_dir / name
            if not path.is_file():
                problems.append(f"{name} is missing")
            elif path.stat().st_size != size:
                problems.append(f"{name} has {path.stat().st_size} bytes, {size} when saved")
            elif _crc32(path) != crc:
                problems.append(f"{name} differs from the saved file")
        if problems:
            more = f" (and {len(problems) - 1} more file(s))" if len(problems) > 1 else ""
            raise CheckpointDamagedError(f"checkpoint {step_dir} is damaged: {problems[0]}{more}")
        return True

    def set_aside(self, step: int) -> Path:
        """Renames checkpoint folder ``step`` to ``<step>.damaged`` (``-1``, ``-2``... if
        taken), so it is no longer a checkpoint; returns the new path."""
        source = self.directory / str(step)
        for k in itertools.count():
            target = self.directory / (f"{step}{DAMAGED_SUFFIX}" + (f"-{k}" if k else ""))
            if not target.exists():
                break
        if jax.process_index() == 0:
            source.rename(target)
        if jax.process_count() > 1:
            ocp.multihost.sync_global_processes("curiosity_search_set_aside")
        self._manager.reload()
        return target

    def restore_counters(self, step: int | None = None) -> HostCounters:
        """Reads only the host counters of checkpoint ``step`` (default: the latest)."""
        step = self._resolve_step(step)
        try:
            restored = self._manager.restore(
                step, args=ocp.args.Composite(**{_HOST_ITEM: ocp.args.JsonRestore()})
            )
            counters = HostCounters.from_json(dict(restored[_HOST_ITEM]))
            iteration = counters.iteration
            if isinstance(iteration, bool) or not isinstance(iteration, int):
                raise TypeError(f"iteration {iteration!r} is not an integer")
        except Exception as error:  # noqa: BLE001 - any failure to read them is damage
            raise CheckpointDamagedError(
                f"checkpoint {self.directory / str(step)} is damaged: its host counters are "
                f"unreadable ({_short(error)})"
            ) from None
        return counters

    def restore(self, target_state: Any, step: int | None = None) -> tuple[Any, HostCounters]:
        """Restores checkpoint ``step`` (default: the latest complete one).

        Args:
          target_state: a ``TrainState`` of the right structure, shapes, dtypes and
            shardings (e.g. a fresh ``trainer.init(key)``, or ``jax.ShapeDtypeStruct``
            leaves carrying the target ``sharding``); its values are not used. The
            arrays come back with those shardings, whatever mesh saved them.
          step: which iteration to restore.

        Returns:
          ``(state, counters)``; ``CONFIG_FIELDS`` come back as ``None``.
        """
        step = self._resolve_step(step)
        verified = self.check(step)
        target_state, absent = self._without_unsaved_fields(target_state, step)
        item = target_state
        if absent:  # restore the fields the checkpoint has, as a dict of them
            item = {
                field.name: getattr(target_state, field.name)
                for field in dataclasses.fields(target_state)
                if field.name not in absent
            }
        try:
            restored = self._manager.restore(
                step,
                args=ocp.args.Composite(
                    **{
                        _STATE_ITEM: ocp.args.StandardRestore(item),
                        _HOST_ITEM: ocp.args.JsonRestore(),
                    }
                ),
            )
        except Exception as error:  # noqa: BLE001 - sorted into mismatch and damage below
            if verified and isinstance(error, ValueError | KeyError | TypeError):
                raise CheckpointError(
                    f"checkpoint {self.directory / str(step)} does not match this run's "
                    f"TrainState (was the code, the network or the search config changed?): "
                    f"{_short(error)}"
                ) from None
            raise CheckpointDamagedError(
                f"checkpoint {self.directory / str(step)} cannot be read: {_short(error)}"
            ) from None
        state = restored[_STATE_ITEM]
        if absent:
            state = target_state.replace(**state)
        return state, HostCounters.from_json(dict(restored[_HOST_ITEM]))

    def _without_unsaved_fields(self, target_state: Any, step: int) -> tuple[Any, set[str]]:
        """``(target, absent)``: ``target_state`` with the ``CONFIG_FIELDS`` that checkpoint
        ``step`` stored as ``None`` or lacks (it predates them) set to ``None``, and the
        names it lacks altogether. Targets without such fields come back unchanged."""
        if not (dataclasses.is_dataclass(target_state) and hasattr(target_state, "replace")):
            return target_state, set()
        handler = ocp.StandardCheckpointHandler()  # reads the on-disk tree's structure
        try:
            saved = handler.metadata(self.directory / str(step) / _STATE_ITEM)
        except Exception:  # noqa: BLE001 - unreadable: the restore itself reports it
            return target_state, set()
        finally:
            handler.close()
        tree = getattr(saved, "tree", saved)
        if not isinstance(tree, Mapping):
            return target_state, set()
        fields = {field.name for field in dataclasses.fields(target_state)}
        unsaved = {name for name in CONFIG_FIELDS if name in fields and tree.get(name) is None}
        if not unsaved:
            return target_state, set()
        absent = {name for name in unsaved if name not in tree}
        return target_state.replace(**dict.fromkeys(unsaved)), absent

    def restore_params(self, abstract_params: Any, step: int | None = None) -> Any:
        """Restores only ``TrainState.params`` of checkpoint ``step`` onto one device.

        Args:
          abstract_params: the params' structure with shapes and dtypes (e.g.
            ``jax.eval_shape(trainer.init, key).params``); nothing is allocated for the
            rest of the state (optimizer, replay buffer).
          step: which iteration to restore (default: the latest complete one).
        """
        step = self._resolve_step(step)
        verified = self.check(step)
        sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        target = {
            "params": jax.tree.map(
                lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding),
                abstract_params,
            )
        }
        try:
            restored = self._manager.restore(
                step,
                args=ocp.args.Composite(
                    **{
                        _STATE_ITEM: ocp.args.PyTreeRestore(
                            item=target,
                            restore_args=ocp.checkpoint_utils.construct_restore_args(target),
                            partial_restore=True,
                        )
                    }
                ),
            )
        except Exception as error:  # noqa: BLE001 - sorted into mismatch and damage below
            if verified and isinstance(error, ValueError | KeyError | TypeError):
                raise CheckpointError(
                    f"checkpoint {self.directory / str(step)} has no params matching this "
                    f"network (was the network config changed?): {_short(error)}"
                ) from None
            raise CheckpointDamagedError(
                f"checkpoint {self.directory / str(step)} cannot be read: {_short(error)}"
            ) from None
        return restored[_STATE_ITEM]["params"]

    def close(self) -> None:
        """Waits for pending writes and releases the manager."""
        self._manager.wait_until_finished()
        self._manager.close()

    def __enter__(self) -> CheckpointStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _resolve_step(self, step: int | None) -> int:
        steps = self.steps()
        if step is None:
            if not steps:
                raise CheckpointError(f"no complete checkpoint in {self.directory}")
            return steps[-1]
        if step not in steps:
            raise CheckpointError(
                f"no complete checkpoint for iteration {step} in {self.directory} "
                f"(complete: {steps or 'none'})"
            )
        return step
