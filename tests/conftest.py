"""Test-wide setup: 4 host devices for the multi-device tests, the compilation cache,
and a guard on the process's memory mappings."""

import gc
import os

# Must happen before JAX initialises its backends.
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

from curiosity_search.compilation_cache import enable_compilation_cache  # noqa: E402

enable_compilation_cache()


def _line_count(path: str) -> int | None:
    """Lines of a Linux ``/proc`` file, or None where there is none."""
    try:
        with open(path) as lines:
            return sum(1 for _ in lines)
    except OSError:
        return None


def _mapping_limit() -> int | None:
    """The kernel's per-process limit on memory mappings (``vm.max_map_count``)."""
    try:
        with open("/proc/sys/vm/max_map_count") as limit:
            return int(limit.read())
    except (OSError, ValueError):
        return None


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs_near_the_mapping_limit():
    """After a test module, frees every compiled program if the process holds more than
    half the memory mappings it may.

    XLA:CPU maps each executable's code into memory, and JAX's in-memory caches keep the
    executables alive: the whole suite in one process reached 61,000 mappings on
    2026-12-06 (with a K = 3 variant of the search since set aside). At the kernel's
    limit (``vm.max_map_count``, 65,530 by default) the next executable's symbols fail
    to materialize and jaxlib crashes in ``executable.serialize()``, the persistent-cache
    write (results/bench/README.md, "the test suite's crash"). Later modules get freed
    programs back from the persistent compilation cache.
    """
    yield
    limit = _mapping_limit()
    mappings = _line_count("/proc/self/maps")
    if limit is not None and mappings is not None and mappings > limit // 2:
        jax.clear_caches()
        gc.collect()
