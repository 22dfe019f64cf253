"""A memory preflight: what a run's shapes need, checked against the machine before compiling.

    estimate = estimate_memory(cfg)   # bytes per part, from the config's shapes
    check_memory(cfg, devices)        # ConfigError when it cannot fit

The estimate is built from the shapes alone: the env's state and observation
(``jax.eval_shape`` of ``env.init``) and the network's parameters (``jax.eval_shape`` of
its ``init``), so nothing is allocated, however large the config. It is a lower bound
(float32, one copy of each array, XLA's temporaries left out) of these parts:

- parameters, gradients and optimizer state: the parameters' bytes times 2 plus the
  optimizer's moments (adam, adamw, muon: 2; sgd: 1); replicated on every device;
- replay buffer: ``selfplay.replay_capacity`` positions (observation, policy ``[A]``,
  value and belief targets, ``[A, K]`` action beliefs for curiosity);
- games: ``selfplay.batch_size`` x 2 env states (games and their records) plus
  ``search_control.capacity`` restart states;
- search trees: ``B`` x ``N`` nodes (``N = num_simulations + 1``), each 7 scalars,
  two ``[A]`` arrays, one env state, and for curiosity its beliefs (``[A, K]`` plus
  ``[A]`` caches) and, where the options keep it (``search.pbest_updates``), the root's
  incremental P(best) cache per tree (``eval_shape`` of
  ``CuriosityOptions.root_data``); the larger of self-play's trees and evaluation's
  (``eval.num_positions`` x ``search.eval_num_simulations + 1``);
- Gumbel's sequential-halving schedule: ``(max_num_considered_actions + 1) x
  num_simulations`` int32, built on the host;
- activations: the network's hidden layers for ``train.batch_size`` positions (forward
  and backward) and ``B`` leaves per simulation, and curiosity's P(best) grid
  ``B x A x grid_size``.

The machine's memory: for accelerators the smallest device's ``bytes_limit``, against
the replicated parts plus a ``1 / devices`` share of the rest; for CPU devices, which
share the host's RAM, the physical memory (or the cgroup limit where lower), against
the replicated parts once per device plus the rest.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

from curiosity_search.config import ConfigError
from curiosity_search.rules import get_rule

FLOAT_BYTES = 4
OPTIMIZER_MOMENTS = {"adam": 2, "adamw": 2, "muon": 2, "sgd": 1}
# The per-node [B, N] scalars of a tree (visits, values, rewards, discounts, parents...).
TREE_NODE_SCALARS = 7
CGROUP_LIMIT = Path("/sys/fs/cgroup/memory.max")


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per part of a run (see the module docstring).

    Attributes:
      replicated: ``(name, bytes)`` of the parts every device holds whole.
      sharded: ``(name, bytes)`` of the parts split over the devices.
      keys: the config keys that size the largest part (for the message).
    """

    replicated: tuple[tuple[str, int], ...]
    sharded: tuple[tuple[str, int], ...]
    keys: str

    def per_device(self, devices: int, shared_memory: bool) -> int:
        """Bytes one device needs (``shared_memory``: all of them, on one host)."""
        replicated = sum(size for _, size in self.replicated)
        sharded = sum(size for _, size in self.sharded)
        if shared_memory:
            return replicated * devices + sharded
        return replicated + math.ceil(sharded / devices)

    @property
    def total(self) -> int:
        """Bytes on one device."""
        return self.per_device(1, True)

    def describe(self) -> str:
        """``search trees 150 GB, replay 1.2 MB, ...``, largest first."""
        parts = sorted((*self.replicated, *self.sharded), key=lambda part: -part[1])
        return ", ".join(f"{name} {format_bytes(size)}" for name, size in parts)


def format_bytes(size: float) -> str:
    """``1536`` -> ``1.5 kB`` (decimal units)."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(size) < 1000 or unit == "PB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def tree_bytes(tree: Any) -> int:
    """Bytes of a pytree of arrays or ``ShapeDtypeStruct``s (exact Python integers)."""
    return sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in jax.tree.leaves(tree))


def _env(cfg: Any) -> Any:
    from curiosity_search import envs

    kwargs = {"size": cfg.env.size, "swap": cfg.env.swap} if cfg.env.name == "hex" else {}
    return envs.make(cfg.env.name, **kwargs)


def _root_cache_bytes(cfg: Any, num_actions: int, num_outcomes: int) -> int:
    """Bytes per tree of a curiosity search's incremental root cache
    (``curiosity.nodes.CuriosityExtraData``, from ``eval_shape`` of
    ``CuriosityOptions.root_data``); 0 where the options keep the full layout."""
    from curiosity_search.rules import curiosity_options

    beliefs = jax.ShapeDtypeStruct((1, num_actions, num_outcomes), jax.numpy.float32)
    valid = jax.ShapeDtypeStruct((1, num_actions), jax.numpy.bool_)
    return tree_bytes(jax.eval_shape(curiosity_options(cfg.search).root_data, beliefs, valid))


def _parameter_bytes(cfg: Any, num_actions: int, observation: Any) -> int:
    """The network's parameter bytes, from ``eval_shape`` of its init (0 if it cannot
    be built: the trainer then reports why)."""
    from curiosity_search.nets import make_network

    net = cfg.network
    try:
        network = make_network(
            net.trunk, net.blocks, net.width, num_actions, value_head=net.value_head,
            action_values=net.action_values, regret_heads=net.regret_heads,
            compute_dtype=net.compute_dtype,
        )
        batch = jax.ShapeDtypeStruct((1, *observation.shape), observation.dtype)
        return tree_bytes(jax.eval_shape(network.init, jax.random.key(0), batch))
    except Exception:  # noqa: BLE001 - an estimate; build_trainer raises the real error
        return 0


def estimate_memory(cfg: Any) -> MemoryEstimate:
    """The memory ``cfg`` needs, part by part (see the module docstring)."""
    env = _env(cfg)
    state = jax.eval_shape(env.init, jax.random.key(0))
    state_bytes = tree_bytes(state)
    observation = state.observation
    obs_bytes = tree_bytes(observation)
    actions = int(env.num_actions)
    rule = get_rule(cfg.search.rule)
    curiosity = rule.beliefs  # belief nodes and the P(best) grid
    outcomes = {"beta": 2, "dirichlet": 3}.get(cfg.network.value_head or "scalar", 1)
    batch, sims = cfg.selfplay.batch_size, cfg.search.num_simulations or 0

    params = _parameter_bytes(cfg, actions, observation)
    moments = OPTIMIZER_MOMENTS.get(cfg.optimizer.name, 2)
    action_beliefs = actions * outcomes if cfg.network.action_values else 0
    position = obs_bytes + FLOAT_BYTES * (actions + action_beliefs + 2 * outcomes + 8)
    node = FLOAT_BYTES * (TREE_NODE_SCALARS + 2 * actions) + state_bytes
    if curiosity:
        node += FLOAT_BYTES * (actions * outcomes + 2 * outcomes + 2 * actions + 2)

    root_cache = _root_cache_bytes(cfg, actions, outcomes) if curiosity else 0

    def trees(games: int, simulations: int) -> int:
        return games * ((simulations + 1) * node + root_cache) if simulations > 0 else 0

    selfplay_trees = trees(batch, sims)
    eval_trees = trees(cfg.eval.num_positions, cfg.search.eval_num_simulations)
    schedule = rule.replicated_bytes(cfg.search, max(sims, cfg.search.eval_num_simulations))
    if cfg.network.trunk == "resnet" and len(observation.shape) >= 3:
        hidden = math.prod(observation.shape[:-1]) * cfg.network.width
    else:
        hidden = cfg.network.width
    per_position = hidden * (2 * cfg.network.blocks + 2) * FLOAT_BYTES
    activations = per_position * (2 * cfg.train.batch_size + batch)
    if curiosity:
        activations += batch * actions * cfg.search.grid_size * FLOAT_BYTES * 4
    restart_states = cfg.search_control.capacity if cfg.search_control.kind != "none" else 0

    sharded = {
        "search trees": max(selfplay_trees, eval_trees),
        "replay buffer": cfg.selfplay.replay_capacity * position,
        "games": (2 * batch + restart_states) * state_bytes,
        "activations": activations,
    }
    replicated = {
        "parameters+gradients+optimizer": params * (2 + moments),
        "gumbel schedule": schedule,
    }
    keys = {
        "search trees": "search.eval_num_simulations or eval.num_positions"
        if eval_trees > selfplay_trees else "search.num_simulations or selfplay.batch_size",
        "replay buffer": "selfplay.replay_capacity",
        "games": "selfplay.batch_size or search_control.capacity",
        "activations": "network.width, network.blocks, train.batch_size or "
        "selfplay.batch_size",
        "parameters+gradients+optimizer": "network.width or network.blocks",
        "gumbel schedule": "search.num_simulations or search.max_num_considered_actions",
    }
    parts = {**sharded, **replicated}
    largest = max(parts, key=parts.__getitem__)
    return MemoryEstimate(
        replicated=tuple((k, v) for k, v in replicated.items() if v),
        sharded=tuple((k, v) for k, v in sharded.items() if v),
        keys=keys[largest],
    )


def host_memory() -> int | None:
    """The host's physical memory in bytes, or the cgroup's limit where it is lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        limit = CGROUP_LIMIT.read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def device_memory(devices: Sequence[Any]) -> tuple[int | None, bool, str]:
    """``(bytes per device, shared by all devices?, where)`` for ``devices``: the
    smallest accelerator's ``bytes_limit``, or the host's memory for CPU devices."""
    limits = []
    for device in devices:
        try:
            stats = device.memory_stats() or {}
        except Exception:  # noqa: BLE001 - backends without memory statistics
            stats = {}
        if "bytes_limit" in stats:
            limits.append(int(stats["bytes_limit"]))
    if limits and len(limits) == len(devices):
        return min(limits), False, f"each {devices[0].platform} device"
    return host_memory(), True, "this machine's memory"


def check_memory(cfg: Any, devices: Sequence[Any] | None = None) -> MemoryEstimate:
    """Raises ``ConfigError`` when ``cfg`` cannot fit in ``devices`` (default: all).

    The message gives the estimate, its parts, the memory there is and the keys to
    reduce. Returns the estimate.
    """
    devices = list(jax.devices()) if devices is None else list(devices)
    estimate = estimate_memory(cfg)
    available, shared, where = device_memory(devices)
    if available is None:
        return estimate
    needed = estimate.per_device(len(devices), shared)
    if needed > available:
        per = "" if shared or len(devices) == 1 else " per device"
        raise ConfigError(
            f"the run needs an estimated {format_bytes(needed)}{per} ({estimate.describe()}), "
            f"more than the {format_bytes(available)} of {where}; reduce {estimate.keys}"
        )
    return estimate


__all__ = [
    "MemoryEstimate",
    "check_memory",
    "device_memory",
    "estimate_memory",
    "format_bytes",
    "host_memory",
    "tree_bytes",
]
