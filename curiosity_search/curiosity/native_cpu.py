"""The native XLA:CPU custom calls: the fast P(best) kernel, the curiosity backup's
levels, its lazy prior fill, the selection draw and K = 3's score distribution.

Parts of a curiosity search are array programs that XLA:CPU runs far below their
arithmetic's speed; each has a native transcription, called through ``jax.ffi``:

- ``fast_pbest_cpu.cc`` (the row itself in ``fast_pbest_cpu.h``):
  ``best_arm._fast_core_array``. XLA:CPU runs that array program as many fusions that
  move ``[rows, arms, 3 (G - 1) + 1]`` arrays through memory, at 8-12x the cost of its
  arithmetic (results/bench/README.md, "The fast P(best) kernel against its own
  floor"); the native kernel is the same computation, step for step, as one loop per
  row over blocks of 16 arms (one per vector lane), with polynomial ``exp`` / ``log``
  the compiler vectorizes. Its numbers
  match the array program's to float32 rounding (~1e-5 relative on P(best);
  tests/test_fast_pbest_cpu.py), so the P(best) *method* is unchanged. The same file
  builds the kernel's per-row aggregates (``best_arm.fast_aggregates``: an incremental
  root's cache, built at the start of a search and on a rebuild).
- ``backup_cpu.cc``: the curiosity backup's levels (``backup._level``) in the layout
  most searches use (K = 2, the fast P(best), the ``"average"`` mixture, selection from
  a cached table), each tree's path walked leaf to root in one loop; the root's
  in-place incremental update (``backup._root_update``) in that layout; and
  ``prior_fill_cpu.cc``: the lazy prior fill (``nodes.fill_prior_best``), each needed
  row computed in place. The same numbers as the XLA programs to float32 rounding
  (tests/test_backup_cpu.py). Those programs are a while_loop of a few dozen small ops
  per tree level and a compacted map around P(best)'s array-program wrapper: on the CPU
  their cost is mostly dispatch (results/bench/README.md).
- ``draw_cpu.cc``: Thompson selection's draw from a node's cached selection
  distribution (``policy._draw``, ``beliefs.two_stage_index``): XLA:CPU lowers its two
  ``cumsum`` calls to padded reduce-windows, ~10% of an 11x11 search.
- ``score_cdf_cpu.cc``: K = 3's score distribution (Dirichlet beliefs, tic-tac-toe):
  each arm's score CDF and density at the accurate grid's edges
  (``score_cdf.score_cdf_and_density_dirichlet``) and its grid candidates
  (``score_cdf.score_sample``). XLA:CPU runs their table lookups as gathers over
  ``[rows, arms, edges, 8]`` arrays, most of a tic-tac-toe iteration; the same numbers
  to float32 rounding (tests/test_score_cdf_cpu.py).

All are implementations for the CPU only: other platforms (GPU, TPU) always run the
array programs (``jax.lax.platform_dependent``).

The library is built on first use with the system's C++ compiler (``$CXX``, else
``g++``; ``-O3 -march=native``, against the XLA FFI headers that ship with jaxlib) into
``$CURIOSITY_SEARCH_NATIVE_CACHE`` (default ``~/.cache/curiosity_search/native``),
keyed by the sources, the flags, jaxlib's version and the CPU, and registered with
``jax.ffi``. ``$CURIOSITY_SEARCH_PBEST_KERNEL`` picks the implementation of all:
``native`` (the default; where the build fails, a warning and the array programs) or
``xla`` (the array programs always).
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
import jaxlib
import numpy as np

from curiosity_search.atomic_io import atomic_path

Array = jax.Array

KERNEL_ENV = "CURIOSITY_SEARCH_PBEST_KERNEL"
KERNELS = ("native", "xla")
CACHE_ENV = "CURIOSITY_SEARCH_NATIVE_CACHE"
DEFAULT_CACHE_DIR = pathlib.Path.home() / ".cache" / "curiosity_search" / "native"
_FOLDER = pathlib.Path(__file__).parent
SOURCES = (_FOLDER / "fast_pbest_cpu.cc", _FOLDER / "backup_cpu.cc",
           _FOLDER / "prior_fill_cpu.cc", _FOLDER / "draw_cpu.cc", _FOLDER / "score_cdf_cpu.cc")
HEADERS = (_FOLDER / "fast_pbest_cpu.h", _FOLDER / "custom_call_cpu.h")
TARGET = "curiosity_fast_pbest"
BACKUP_TARGET = "curiosity_backup"
PRIOR_FILL_TARGET = "curiosity_prior_fill"
ROOT_UPDATE_TARGET = "curiosity_root_update"
AGGREGATES_TARGET = "curiosity_fast_aggregates"
DRAW_TARGET = "curiosity_draw"
DIRICHLET_SCORE_CDF_TARGET = "curiosity_dirichlet_score_cdf"
DIRICHLET_SCORE_SAMPLE_TARGET = "curiosity_dirichlet_score_sample"
_HANDLERS = {TARGET: "CuriosityFastPbest", BACKUP_TARGET: "CuriosityBackup",
             PRIOR_FILL_TARGET: "CuriosityPriorFill", ROOT_UPDATE_TARGET: "CuriosityRootUpdate",
             AGGREGATES_TARGET: "CuriosityFastAggregates", DRAW_TARGET: "CuriosityDraw",
             DIRICHLET_SCORE_CDF_TARGET: "CuriosityDirichletScoreCdf",
             DIRICHLET_SCORE_SAMPLE_TARGET: "CuriosityDirichletScoreSample"}
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
    """Where the library built from the current sources, flags, jaxlib and CPU lives."""
    key = hashlib.sha256()
    sources = tuple(path.read_bytes() for path in SOURCES + HEADERS)
    for part in (*sources, " ".join((compiler,) + _FLAGS).encode(),
                 jaxlib.__version__.encode(), _cpu_signature().encode()):
        key.update(part)
        key.update(b"\0")
    folder = pathlib.Path(os.environ.get(CACHE_ENV, str(DEFAULT_CACHE_DIR)))
    return folder / f"curiosity_native_cpu_{key.hexdigest()[:16]}.so"


def build(compiler: str | None = None) -> pathlib.Path:
    """Compile the sources into one library unless the cache holds it; returns it.

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
        command = [compiler, *_FLAGS, f"-I{jax.ffi.include_dir()}", *map(str, SOURCES),
                   "-o", str(partial)]
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as error:
            raise RuntimeError(f"cannot run the C++ compiler {compiler!r}: {error}") from error
        if result.returncode != 0:
            raise RuntimeError(f"building the native CPU library failed ({' '.join(command)}):\n"
                               f"{result.stderr[-4000:]}")
    return path


@functools.cache
def native_available() -> bool:
    """Whether the native library is requested, built and registered (once per
    process).

    A failed build warns once and returns False: the array programs serve instead.
    """
    if requested_kernel() != "native":
        return False
    try:
        library = ctypes.cdll.LoadLibrary(str(build()))
        for target, handler in _HANDLERS.items():
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(library, handler)),
                                        platform="cpu")
    except (RuntimeError, OSError, AttributeError) as error:
        warnings.warn(f"the native CPU custom calls are unavailable, using the array "
                      f"programs (set {KERNEL_ENV}=xla to silence this): {error}",
                      RuntimeWarning, stacklevel=2)
        return False
    return True


def passes_on(platform: str) -> str:
    """Which implementation a program lowered for ``platform`` runs where
    ``native_or_array`` chooses: ``"native"`` (this library's CPU passes) or
    ``"array"`` (the array programs). Benchmarks record it beside their timings."""
    return "native" if platform == "cpu" and native_available() else "array"


def native_or_array(native, array, *args):
    """``native(*args)`` where the program runs on the CPU and the native library is
    available, else ``array(*args)``: one ``jax.lax.platform_dependent``, so a program
    lowered for another platform holds only the array program, and one without the
    library never refers to its custom calls."""
    if not native_available():
        return array(*args)
    return jax.lax.platform_dependent(*args, cpu=native, default=array)


def native_fast_core(concentrations: Array, valid: Array, grid_size: int) -> Array:
    """``best_arm._fast_core`` by the native kernel: unnormalized ``P [..., A]`` for
    ``concentrations [..., A, 2]`` (floored, a stand-in for invalid arms) and ``valid
    [..., A]``. CPU only; call ``native_available()`` first."""
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(valid.shape, jnp.float32),
                            vmap_method="broadcast_all")
    return call(jnp.asarray(concentrations, jnp.float32), jnp.asarray(valid, bool),
                grid_size=np.int64(grid_size))


def native_fast_aggregates(concentrations: Array, valid: Array,
                           grid_size: int) -> tuple[Array, ...]:
    """``best_arm.fast_aggregates``'s arrays by the native kernel, for rows of raw
    ``concentrations [..., A, 2]`` and ``valid [..., A]``: ``(edges [..., G], log_total,
    zeros, ratio_sum [..., S], vector_sum [..., S, 2], lower_log, rate_sum [...],
    rate_vector [..., 2], table, logs [..., A, S + 1])``, ``S = 3 (G - 1) + 1``. CPU
    only; call ``native_available()`` first."""
    lead, arms = valid.shape[:-1], valid.shape[-1]
    subnodes = 3 * (grid_size - 1) + 1
    shapes = ((grid_size,), (subnodes,), (subnodes,), (subnodes,), (subnodes, 2), (), (), (2,),
              (arms, subnodes + 1), (arms, subnodes + 1))
    call = jax.ffi.ffi_call(
        AGGREGATES_TARGET,
        tuple(jax.ShapeDtypeStruct(lead + shape, jnp.float32) for shape in shapes),
        vmap_method="broadcast_all")
    return call(jnp.asarray(concentrations, jnp.float32), jnp.asarray(valid, bool),
                grid_size=np.int64(grid_size))


def native_draw(weights: Array, table: Array, uniform: Array) -> Array:
    """``policy._draw`` by the native pass (``draw_cpu.cc``): the action ``[...]`` int32
    a two-stage inverse-CDF draw of ``uniform [...]`` picks from selection caches'
    ``weights [..., W]`` and ``table [..., A, W]``. CPU only; call ``native_available()``
    first."""
    call = jax.ffi.ffi_call(DRAW_TARGET, jax.ShapeDtypeStruct(uniform.shape, jnp.int32),
                            vmap_method="broadcast_all")
    return call(jnp.asarray(weights, jnp.float32), jnp.asarray(table, jnp.float32),
                jnp.asarray(uniform, jnp.float32))


def native_dirichlet_score_cdf(concentrations: Array, edges: Array) -> tuple[Array, Array]:
    """``score_cdf.score_cdf_and_density_dirichlet`` by the native pass
    (``score_cdf_cpu.cc``): each arm's score CDF and its density on the score axis,
    ``([..., A, E], [..., A, E])``, for ``concentrations [..., A, 3]`` and ``edges [...,
    E]`` (the same leading shape). CPU only; call ``native_available()`` first."""
    shape = concentrations.shape[:-1] + edges.shape[-1:]
    call = jax.ffi.ffi_call(DIRICHLET_SCORE_CDF_TARGET,
                            (jax.ShapeDtypeStruct(shape, jnp.float32),) * 2,
                            vmap_method="broadcast_all")
    return call(jnp.asarray(concentrations, jnp.float32), jnp.asarray(edges, jnp.float32))


def native_dirichlet_score_sample(concentrations: Array, points: int) -> Array:
    """``score_cdf.score_sample`` by the native pass (``score_cdf_cpu.cc``): each arm's
    ``points`` (= ``score_cdf._PRODUCT_LEVELS ** 2``) score-axis points ``[..., A,
    points]`` (unsorted, in the array program's order) for ``concentrations [..., A,
    3]``. CPU only; call ``native_available()`` first."""
    call = jax.ffi.ffi_call(DIRICHLET_SCORE_SAMPLE_TARGET,
                            jax.ShapeDtypeStruct(concentrations.shape[:-1] + (points,),
                                                 jnp.float32),
                            vmap_method="broadcast_all")
    return call(jnp.asarray(concentrations, jnp.float32))


def native_backup_levels(leaf: Array, parents: Array, children: Array, invalid: Array,
                         value_belief: Array, action_beliefs: Array, kappa: Array,
                         belief: Array, visits: Array, proven: Array, score: Array,
                         length: Array, weights: Array, table: Array, *, grid_size: int,
                         two_player: bool, root_apart: bool,
                         check_envelope: bool = True) -> tuple[Array, ...]:
    """``backup._level``'s walk for every tree by the native pass (``backup_cpu.cc``).

    Reads ``leaf [B]``, ``parents [B, N]``, ``children [B, N, A]``, ``invalid [B, N,
    A]``, ``value_belief [B, N, 2]``, ``action_beliefs [B, N, A, 2]``, ``kappa []``;
    returns the updated ``(belief [B, N, 2], visits [B, N], proven [B, N], score [B,
    N], length [B, N], weights [B, N, 1], table [B, N, A, 1])`` (each aliased to its
    input), ``top_child [B]`` (the path's node whose parent is the root) and
    ``fallback [B]`` (trees left untouched: a node on the path needs the accurate
    P(best)). ``root_apart``: stop below the root (its incremental update is the
    caller's). ``check_envelope`` False: every belief counts as inside the fast
    kernel's envelope (``nodes.CuriosityOptions.bounded_beliefs``), so only a fractional
    proven score flags a tree. CPU only; call ``native_available()`` first.
    """
    updated = (belief, visits, proven, score, length, weights, table)
    outputs = tuple(jax.ShapeDtypeStruct(array.shape, array.dtype) for array in updated)
    outputs += (jax.ShapeDtypeStruct(leaf.shape, jnp.int32),
                jax.ShapeDtypeStruct(leaf.shape, bool))
    first = 7  # the updated arrays' first argument
    call = jax.ffi.ffi_call(BACKUP_TARGET, outputs,
                            input_output_aliases={first + i: i for i in range(len(updated))})
    return call(jnp.asarray(leaf, jnp.int32), parents, children, invalid, value_belief,
                action_beliefs, jnp.asarray(kappa, jnp.float32), *updated,
                grid_size=np.int64(grid_size), two_player=bool(two_player),
                root_apart=bool(root_apart), check_envelope=bool(check_envelope))


def native_prior_fill(node: Array, needed: Array, action_beliefs: Array, invalid: Array,
                      weights: Array, table: Array, *, grid_size: int,
                      check_envelope: bool = True) -> tuple[Array, ...]:
    """``nodes.fill_prior_best``'s rows by the native pass (``prior_fill_cpu.cc``): the
    selection row over the Q_a priors of node ``node [B]`` where ``needed [B]``, from
    ``action_beliefs [B, N, A, 2]`` and ``invalid [B, N, A]``. Returns the updated
    ``(weights [B, N, 1], table [B, N, A, 1])`` (aliased to their inputs) and
    ``fallback [B]``: needed rows left unwritten, outside the fast kernel's envelope
    (none with ``check_envelope`` False, as ``native_backup_levels``). CPU only; call
    ``native_available()`` first."""
    outputs = (jax.ShapeDtypeStruct(weights.shape, weights.dtype),
               jax.ShapeDtypeStruct(table.shape, table.dtype),
               jax.ShapeDtypeStruct(needed.shape, bool))
    call = jax.ffi.ffi_call(PRIOR_FILL_TARGET, outputs, input_output_aliases={4: 0, 5: 1})
    return call(jnp.asarray(node, jnp.int32), jnp.asarray(needed, bool), action_beliefs,
                invalid, weights, table, grid_size=np.int64(grid_size),
                check_envelope=bool(check_envelope))


def native_root_update(top_child: Array, action_from_parent: Array, current: Array,
                       children: Array, invalid: Array, value_belief: Array,
                       action_beliefs: Array, kappa: Array, updated: tuple[Array, ...], *,
                       grid_size: int, two_player: bool,
                       check_envelope: bool = True) -> tuple[tuple[Array, ...], Array]:
    """``backup._root_update``'s in-place part for every tree by the native pass
    (``backup_cpu.cc``): the root's visit, its incremental cache updated for the one
    child ``top_child [B]`` that changed (the root for a skipped simulation: nothing
    done), its belief settled.

    Reads ``action_from_parent [B, N]``, the cache's ``current [B]``, ``children [B, N,
    A]``, ``invalid [B, N, A]``, ``value_belief [B, N, 2]``, ``action_beliefs [B, N, A,
    2]``, ``kappa []``. ``updated``: the 18 arrays it updates, each returned aliased to
    its input: ``belief [B, N, 2]``, ``visits``, ``proven``, ``score``, ``length [B,
    N]``, then the root cache's ``weights [B, W]``, ``table``, ``logs [B, A, W]``,
    ``arms [B, A, 2]``, ``arms_valid [B, A]`` and its aggregates' ``edges [B, G]``,
    ``log_total``, ``zeros``, ``ratio_sum [B, S]``, ``vector_sum [B, S, 2]``,
    ``lower_log``, ``rate_sum [B]``, ``rate_vector [B, 2]``. Also returns ``rebuild
    [B]``: the trees whose root must be rebuilt (nothing but the visit written;
    ``check_envelope`` as ``native_backup_levels``). CPU only; call
    ``native_available()`` first.
    """
    outputs = tuple(jax.ShapeDtypeStruct(array.shape, array.dtype) for array in updated)
    outputs += (jax.ShapeDtypeStruct(top_child.shape, bool),)
    first = 8  # the updated arrays' first argument
    call = jax.ffi.ffi_call(ROOT_UPDATE_TARGET, outputs,
                            input_output_aliases={first + i: i for i in range(len(updated))})
    *arrays, rebuild = call(jnp.asarray(top_child, jnp.int32), action_from_parent, current,
                            children, invalid, value_belief, action_beliefs,
                            jnp.asarray(kappa, jnp.float32), *updated,
                            grid_size=np.int64(grid_size), two_player=bool(two_player),
                            check_envelope=bool(check_envelope))
    return tuple(arrays), rebuild
