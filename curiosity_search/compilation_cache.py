"""JAX's persistent compilation cache, pointed at a folder outside the repository.

Compiling the self-play and search programs dominates short runs and the test suite on
CPU; caching the compiled executables on disk lets CI and repeated runs reuse them.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

DEFAULT_CACHE_DIR = Path.home() / ".cache" / "curiosity_search" / "jax"


def enable_compilation_cache(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Turns on JAX's persistent compilation cache and returns its folder.

    The folder is, in order: ``cache_dir``, ``$CURIOSITY_SEARCH_JAX_CACHE``, or
    ``~/.cache/curiosity_search/jax``. Setting the variable to an empty string turns
    the cache off.
    """
    if cache_dir is None:
        cache_dir = os.environ.get("CURIOSITY_SEARCH_JAX_CACHE", str(DEFAULT_CACHE_DIR))
    if not str(cache_dir):
        return Path()
    path = Path(cache_dir).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
