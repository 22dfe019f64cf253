"""Test-wide setup: 4 host devices for the multi-device tests, and the compilation cache."""

import os

# Must happen before JAX initialises its backends.
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()

from curiosity_search.compilation_cache import enable_compilation_cache  # noqa: E402

enable_compilation_cache()
