"""Multi-host start-up: ``jax.distributed.initialize`` from environment variables.

A multi-host run is the same program started once per host (process); every process
must call ``jax.distributed.initialize`` before its first JAX computation, after which
``jax.devices()`` lists every process's devices and the training mesh spans them all.
``maybe_initialize_distributed()`` does that when the environment asks for it:

- ``CURIOSITY_SEARCH_COORDINATOR=host:port`` (process 0's address, reachable by all),
  with ``CURIOSITY_SEARCH_NUM_PROCESSES=N`` and ``CURIOSITY_SEARCH_PROCESS_ID=i``
  (0 <= i < N, distinct per process); optionally
  ``CURIOSITY_SEARCH_LOCAL_DEVICE_IDS=0,1`` (this process's local devices) and
  ``CURIOSITY_SEARCH_INIT_TIMEOUT_S`` (seconds to wait for every process; default 300);
- ``CURIOSITY_SEARCH_DISTRIBUTED=auto``: JAX's own cluster detection (SLURM, Open MPI,
  Cloud TPU pods, ...) fills in all of the above;
- neither: a single-process run (nothing is done).

On CPU, cross-process collectives need an implementation; gloo is selected unless
``JAX_CPU_COLLECTIVES_IMPLEMENTATION`` is set (the option only affects the CPU client,
so it is harmless on GPU/TPU hosts).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import jax

COORDINATOR_VAR = "CURIOSITY_SEARCH_COORDINATOR"
NUM_PROCESSES_VAR = "CURIOSITY_SEARCH_NUM_PROCESSES"
PROCESS_ID_VAR = "CURIOSITY_SEARCH_PROCESS_ID"
LOCAL_DEVICE_IDS_VAR = "CURIOSITY_SEARCH_LOCAL_DEVICE_IDS"
INIT_TIMEOUT_VAR = "CURIOSITY_SEARCH_INIT_TIMEOUT_S"
DISTRIBUTED_VAR = "CURIOSITY_SEARCH_DISTRIBUTED"


class DistributedError(RuntimeError):
    """The multi-host environment variables are incomplete or cannot be honoured."""


def _int_var(env: Mapping[str, str], name: str) -> int:
    text = env.get(name)
    if text is None or not text.strip():
        raise DistributedError(
            f"{COORDINATOR_VAR} is set, so {NUM_PROCESSES_VAR} and {PROCESS_ID_VAR} "
            f"must be too ({name} is missing)"
        )
    try:
        return int(text)
    except ValueError:
        raise DistributedError(f"{name}={text!r} is not an integer") from None


def distributed_kwargs(env: Mapping[str, str] | None = None) -> dict[str, object] | None:
    """The ``jax.distributed.initialize`` arguments the environment asks for.

    Returns ``None`` for a single-process run, ``{}`` (plus the timeout) for
    ``CURIOSITY_SEARCH_DISTRIBUTED=auto``. Raises ``DistributedError`` on bad values.
    """
    env = os.environ if env is None else env
    mode = env.get(DISTRIBUTED_VAR, "").strip().lower()
    coordinator = env.get(COORDINATOR_VAR, "").strip()
    if mode not in ("", "auto", "off"):
        raise DistributedError(f"{DISTRIBUTED_VAR}={mode!r}: expected 'auto' or 'off'")
    if mode == "off" or (mode == "" and not coordinator):
        return None
    kwargs: dict[str, object] = {}
    timeout = env.get(INIT_TIMEOUT_VAR, "").strip()
    if timeout:
        try:
            kwargs["initialization_timeout"] = int(float(timeout))
        except ValueError:
            raise DistributedError(f"{INIT_TIMEOUT_VAR}={timeout!r} is not a number") from None
    if not coordinator:  # auto: JAX detects the cluster
        return kwargs
    if ":" not in coordinator:
        raise DistributedError(f"{COORDINATOR_VAR}={coordinator!r}: expected host:port")
    num_processes = _int_var(env, NUM_PROCESSES_VAR)
    process_id = _int_var(env, PROCESS_ID_VAR)
    if num_processes < 1 or not 0 <= process_id < num_processes:
        raise DistributedError(
            f"{PROCESS_ID_VAR}={process_id} must be in [0, {NUM_PROCESSES_VAR}={num_processes})"
        )
    kwargs.update(
        coordinator_address=coordinator, num_processes=num_processes, process_id=process_id
    )
    local = env.get(LOCAL_DEVICE_IDS_VAR, "").strip()
    if local:
        try:
            kwargs["local_device_ids"] = [int(part) for part in local.split(",")]
        except ValueError:
            raise DistributedError(
                f"{LOCAL_DEVICE_IDS_VAR}={local!r}: expected comma-separated integers"
            ) from None
    return kwargs


def maybe_initialize_distributed(env: Mapping[str, str] | None = None) -> bool:
    """Calls ``jax.distributed.initialize`` if the environment asks for it (module doc).

    Must run before any JAX computation in the process. Calling it again is a no-op.

    Returns:
      True when this is a multi-process run (initialized now or before).

    Raises:
      DistributedError: incomplete variables, or JAX was already running computations.
    """
    if jax.distributed.is_initialized():
        return True
    kwargs = distributed_kwargs(env)
    if kwargs is None:
        return False
    env = os.environ if env is None else env
    if "JAX_CPU_COLLECTIVES_IMPLEMENTATION" not in env:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(**kwargs)  # type: ignore[arg-type]
    except (RuntimeError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise DistributedError(
            f"jax.distributed.initialize({_describe(kwargs)}) failed: "
            f"{type(error).__name__}: {first_line}"
        ) from error
    return True


def _describe(kwargs: Mapping[str, object]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in kwargs.items()) or "auto"


__all__ = [
    "COORDINATOR_VAR",
    "DISTRIBUTED_VAR",
    "INIT_TIMEOUT_VAR",
    "LOCAL_DEVICE_IDS_VAR",
    "NUM_PROCESSES_VAR",
    "PROCESS_ID_VAR",
    "DistributedError",
    "distributed_kwargs",
    "maybe_initialize_distributed",
]
