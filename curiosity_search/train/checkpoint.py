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
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

CHECKPOINT_DIRNAME = "checkpoints"
_STATE_ITEM = "state"
_HOST_ITEM = "host"
_STEP_DIR = re.compile(r"^\d+$")
# State fields that come from the config, not from training: saved and restored as None
# (a resume sets them from the config), so they may change, or be new, between versions.
CONFIG_FIELDS = ("hyperparams",)


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or does not match the run restoring it."""


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

    def restore_counters(self, step: int | None = None) -> HostCounters:
        """Reads only the host counters of checkpoint ``step`` (default: the latest)."""
        step = self._resolve_step(step)
        restored = self._manager.restore(
            step, args=ocp.args.Composite(**{_HOST_ITEM: ocp.args.JsonRestore()})
        )
        return HostCounters.from_json(dict(restored[_HOST_ITEM]))

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
        except (ValueError, KeyError, TypeError) as error:
            raise CheckpointError(
                f"checkpoint {self.directory / str(step)} does not match this run's "
                f"TrainState (was the network or search config changed?): {error}"
            ) from error
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
        except (KeyError, ValueError, TypeError, FileNotFoundError):
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
        except (ValueError, KeyError, TypeError) as error:
            raise CheckpointError(
                f"checkpoint {self.directory / str(step)} has no params matching this "
                f"network (was the network config changed?): {error}"
            ) from error
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
