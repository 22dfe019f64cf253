"""Data parallelism: a ``Mesh`` over all devices with one ``data`` axis.

The game batch (env states and per-game records, leading axis ``[B]``) and the replay
buffer (leading axis ``[C]``) are split along ``data``; parameters, optimizer state,
counters and the traced hyperparameters are replicated. The iteration is the same
global program as on one device: ``jax.jit`` with these shardings lets GSPMD partition
it, inserting the collectives (the gradient of the batch-mean loss is all-reduced, so
averaging is exact up to float summation order). Random numbers do not depend on the
sharding: every key is derived from the iteration key by splitting by game index or
drawing for the whole global batch, and jax's threefry values are fixed by the key and
shape, not the layout.

Multi-host: call ``jax.distributed.initialize()`` before ``make_mesh()``; ``jax.devices()``
then lists every host's devices. Arrays that come back replicated (metrics, parameters)
are read on this process's first local device through ``local_copy``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from curiosity_search.train.state import TrainState

DATA_AXIS = "data"


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh with axis ``data`` over ``devices`` (default: all devices)."""
    devices = list(jax.devices()) if devices is None else list(devices)
    return Mesh(np.array(devices), (DATA_AXIS,))


def state_shardings(state: TrainState, mesh: Mesh) -> TrainState:
    """A ``TrainState``-shaped pytree of ``NamedSharding``s for ``state``.

    Raises:
      ValueError: if the game batch or the replay capacity is not divisible by the
        number of devices on the ``data`` axis.
    """
    num_shards = mesh.shape[DATA_AXIS]
    batch_size = state.records.length.shape[0]
    capacity = state.replay.capacity
    if batch_size % num_shards or capacity % num_shards:
        raise ValueError(
            f"selfplay.batch_size ({batch_size}) and selfplay.replay_capacity ({capacity}) "
            f"must be divisible by the number of devices ({num_shards})"
        )
    replicated = NamedSharding(mesh, PartitionSpec())
    split = NamedSharding(mesh, PartitionSpec(DATA_AXIS))

    def along_data(tree: Any) -> Any:
        return jax.tree.map(lambda x: split if x.ndim >= 1 else replicated, tree)

    def everywhere(tree: Any) -> Any:
        return jax.tree.map(lambda _: replicated, tree)

    return TrainState(
        params=everywhere(state.params),
        opt_state=everywhere(state.opt_state),
        replay=state.replay.replace(
            data=along_data(state.replay.data),
            insert_index=replicated,
            size=replicated,
            total_added=replicated,
        ),
        games=along_data(state.games),
        records=along_data(state.records),
        counters=everywhere(state.counters),
        hyperparams=everywhere(state.hyperparams),
        control=None
        if state.control is None
        else state.control.replace(
            buffer=everywhere(state.control.buffer), games=along_data(state.control.games)
        ),
    )


def placement(abstract_state: Any, mesh: Mesh) -> Any:
    """``NamedSharding``s for a state of the shape of ``abstract_state`` on ``mesh``.

    A ``TrainState`` is split as ``state_shardings`` says; any other state (a custom
    trainer's) is replicated.

    Raises:
      ConfigError: the game batch or replay capacity does not split across the devices.
    """
    if isinstance(abstract_state, TrainState):
        try:
            return state_shardings(abstract_state, mesh)
        except ValueError as error:
            from curiosity_search.config import ConfigError

            raise ConfigError(
                f"cannot split the run over {mesh.devices.size} devices: {error}"
            ) from error
    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.tree.map(lambda _: replicated, abstract_state)


def local_copy(tree: Any) -> Any:
    """Copies of fully replicated arrays on this process's first local device.

    Metrics and parameters come back from the mesh replicated; host reads, FLOP
    accounting and evaluation use this process's copy (no collective needed).
    """
    device = jax.local_devices()[0]

    def one(x: Any) -> Any:
        if not isinstance(x, jax.Array) or x.sharding.device_set == {device}:
            return x
        if not x.is_fully_replicated:
            raise ValueError(f"expected a replicated array, got sharding {x.sharding}")
        return jax.device_put(x.addressable_shards[0].data, device)

    return jax.tree.map(one, tree)


def shard_state(state: TrainState, mesh: Mesh) -> TrainState:
    """``state`` placed on ``mesh``: games and replay split, the rest replicated."""
    return jax.device_put(state, state_shardings(state, mesh))


def jit_iteration(
    iteration: Callable[[TrainState, jax.Array], tuple[TrainState, dict[str, jax.Array]]],
    state: TrainState,
    mesh: Mesh,
) -> Callable[[TrainState, jax.Array], tuple[TrainState, dict[str, jax.Array]]]:
    """``jax.jit(iteration)`` with the state's shardings pinned and its buffers donated.

    Args:
      iteration: ``Trainer.iteration``.
      state: an example state (only its structure and shapes are used).
      mesh: from ``make_mesh``.

    Returns:
      The jitted iteration; metrics come back replicated.
    """
    shardings = state_shardings(state, mesh)
    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.jit(
        iteration,
        in_shardings=(shardings, replicated),
        out_shardings=(shardings, replicated),
        donate_argnums=0,
    )
