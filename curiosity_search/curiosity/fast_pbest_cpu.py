"""The fast P(best) kernel as a native XLA:CPU custom call (``fast_pbest_cpu.cc``).

``best_arm._fast_core_array`` is an array program; XLA:CPU runs it as many fusions that move
``[rows, arms, 3 (G - 1) + 1]`` arrays through memory, at 8-12x the cost of its
arithmetic (results/bench/README.md, "The fast P(best) kernel against its own floor").
``fast_pbest_cpu.cc`` is the same computation, step for step, as one loop per row over
blocks of 16 arms (one per vector lane), with polynomial ``exp`` / ``log`` the
compiler vectorizes. Its numbers match the array program's to float32 rounding (~1e-5
relative on P(best); tests/test_fast_pbest_cpu.py), so the P(best) *method* is
unchanged: this is an implementation of ``fast`` for the CPU only.

The library is built on first use with the system's C++ compiler (``$CXX``, else
``g++``; ``-O3 -march=native``, against the XLA FFI headers that ship with jaxlib) into
``$CURIOSITY_SEARCH_NATIVE_CACHE`` (default ``~/.cache/curiosity_search/native``),
keyed by the source, the flags, jaxlib's version and the CPU, and registered with
``jax.ffi``. ``$CURIOSITY_SEARCH_PBEST_KERNEL`` picks the implementation: ``native``
(the default; where the build fails, a warning and the array program) or ``xla`` (the
array program always). Other platforms (GPU, TPU) always run the array program
(``jax.lax.platform_dependent``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pathlib
import platform
import subprocess
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search.atomic_io import atomic_path

Array = jax.Array

KERNEL_ENV = "CURIOSITY_SEARCH_PBEST_KERNEL"
KERNELS = ("native", "xla")
CACHE_ENV = "CURIOSITY_SEARCH_NATIVE_CACHE"
DEFAULT_CACHE_DIR = pathlib.Path.home() / ".cache" / "curiosity_search" / "native"
SOURCE = pathlib.Path(__file__).with_name("fast_pbest_cpu.cc")
TARGET = "curiosity_fast_pbest"
_HANDLER = "CuriosityFastPbest"
_FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math",
          "-std=c++17", "-shared", "-fPIC")


def requested_kernel() -> str:
    """``$CURIOSITY_SEARCH_PBEST_KERNEL`` (default ``native``), checked."""
    kernel = os.environ.get(KERNEL_ENV, "native")
    if kernel not in KERNELS:
        raise ValueError(f"{KERNEL_ENV} must be one of {KERNELS}, got {kernel!r}")
    return kernel


def _cpu_signature() -> str:
    """The CPU's model and feature flags (``-march=native`` code runs only there)."""
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = [line for line in lines if line.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(wanted))) or platform.machine()


def library_path(compiler: str) -> pathlib.Path:
    """Where the library built from the current source, flags, jaxlib and CPU lives."""
    import jaxlib

    key = hashlib.sha256()
    for part in (SOURCE.read_bytes(), " ".join((compiler,) + _FLAGS).encode(),
                 jaxlib.__version__.encode(), _cpu_signature().encode()):
        key.update(part)
        key.update(b"\0")
    folder = pathlib.Path(os.environ.get(CACHE_ENV, str(DEFAULT_CACHE_DIR)))
    return folder / f"fast_pbest_cpu_{key.hexdigest()[:16]}.so"


def build(compiler: str | None = None) -> pathlib.Path:
    """Compile ``fast_pbest_cpu.cc`` unless the cache holds it; returns the library.

    Compiled to a temporary file and renamed (``atomic_io.atomic_path``), so concurrent
    processes never load a half-written file. Raises ``RuntimeError`` with the
    compiler's output on failure.
    """
    compiler = compiler or os.environ.get("CXX", "g++")
    path = library_path(compiler)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as partial:
        command = [compiler, *_FLAGS, f"-I{jax.ffi.include_dir()}", str(SOURCE), "-o",
                   str(partial)]
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as error:
            raise RuntimeError(f"cannot run the C++ compiler {compiler!r}: {error}") from error
        if result.returncode != 0:
            raise RuntimeError(f"building {SOURCE.name} failed ({' '.join(command)}):\n"
                               f"{result.stderr[-4000:]}")
    return path


@functools.cache
def native_available() -> bool:
    """Whether the native kernel is requested, built and registered (once per process).

    A failed build warns once and returns False: the array program serves instead.
    """
    if requested_kernel() != "native":
        return False
    try:
        library = ctypes.cdll.LoadLibrary(str(build()))
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(getattr(library, _HANDLER)),
                                    platform="cpu")
    except (RuntimeError, OSError, AttributeError) as error:
        warnings.warn(f"the native CPU P(best) kernel is unavailable, using the array "
                      f"program (set {KERNEL_ENV}=xla to silence this): {error}",
                      RuntimeWarning, stacklevel=2)
        return False
    return True


def native_fast_core(concentrations: Array, valid: Array, grid_size: int) -> Array:
    """``best_arm._fast_core`` by the native kernel: unnormalized ``P [..., A]`` for
    ``concentrations [..., A, 2]`` (floored, a stand-in for invalid arms) and ``valid
    [..., A]``. CPU only; call ``native_available()`` first."""
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(valid.shape, jnp.float32),
                            vmap_method="broadcast_all")
    return call(jnp.asarray(concentrations, jnp.float32), jnp.asarray(valid, bool),
                grid_size=np.int64(grid_size))
