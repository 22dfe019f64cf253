"""The native CPU kernel of the fast P(best) (curiosity/fast_pbest_cpu.cc) against the
array programs it transcribes (best_arm._fast_core_array, best_arm._fast_aggregates_array),
in every regime of
issue 11's accuracy list that the fast kernel serves, at the block edges of its 16-arm
lanes, on other grids and under vmap; and the build's fallback and switch.

The accuracy of the method itself (within 0.01 of a Monte Carlo in logit space) is
tests/test_best_arm.py's, which runs through this kernel on the CPU by default.
"""

from __future__ import annotations

import os
import shutil
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.curiosity import best_arm, native_cpu

HAVE_COMPILER = shutil.which(os.environ.get("CXX", "g++")) is not None
needs_native = pytest.mark.skipif(not HAVE_COMPILER, reason="no C++ compiler on this machine")


def _rows(regime: str, rows: int, arms: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(concentrations [rows, arms, 2]`` floored with (1, 1) stand-ins for invalid
    arms, as ``_fast_core`` receives them, ``valid [rows, arms])`` inside the fast
    kernel's envelope (components >= 1e-3, totals <= 64)."""
    rng = np.random.default_rng(zlib.crc32(f"{regime}/{rows}/{arms}/{seed}".encode()))
    mean = rng.uniform(0.02, 0.98, (rows, arms))
    total = np.exp(rng.uniform(np.log(0.05), np.log(64.0), (rows, arms)))
    if regime == "far_below_one":  # p near 0 or 1: one component near the 1e-3 floor
        total = np.exp(rng.uniform(np.log(0.002), np.log(0.5), (rows, arms)))
        mean = np.where(rng.uniform(size=(rows, arms)) < 0.5, 0.01, 0.99)
    elif regime == "sharp_vs_flat":  # totals of 64 (the envelope's cap) against flat ones
        total = np.where(rng.uniform(size=(rows, arms)) < 0.5, 64.0, 1.0)
    elif regime == "identical":
        mean, total = mean[:, :1].repeat(arms, 1), total[:, :1].repeat(arms, 1)
    elif regime == "zero_cdf":  # sharp arms near p = 1 on a grid that broad arms near
        # p = 0 stretch far below them: the sharp arms' CDFs are exactly 0 there
        sharp = rng.uniform(size=(rows, arms)) < 0.5
        mean = np.where(sharp, rng.uniform(0.99, 0.999, (rows, arms)), 0.02)
        total = np.where(sharp, 60.0, rng.uniform(0.5, 5.0, (rows, arms)))
    conc = np.maximum(np.stack([mean * total, (1.0 - mean) * total], -1), 1e-3)
    valid = rng.uniform(size=(rows, arms)) > (0.3 if regime == "masked" else 0.0)
    if regime == "one_legal":
        valid = np.arange(arms) == rng.integers(arms, size=(rows, 1))
    valid[0] = False  # a row without a valid arm: all zeros
    conc = np.where(valid[..., None], conc, 1.0).astype(np.float32)
    return conc, valid


def _normalized(p: np.ndarray) -> np.ndarray:
    total = p.sum(-1, keepdims=True)
    return np.where(total > 0, p / np.where(total > 0, total, 1.0), 0.0)


@needs_native
@pytest.mark.parametrize("regime", ["random", "far_below_one", "sharp_vs_flat", "identical",
                                    "one_legal", "masked", "zero_cdf"])
def test_native_kernel_matches_the_array_program(regime):
    """Normalized P(best) within 2e-5 of the array program at every arm count that
    meets a lane-block edge (1, 15, 16, 17, 26 for hex5, 122 for 11x11) on the default
    grid, row by row; zero rows stay zero and invalid arms get 0. ``zero_cdf`` (a CDF
    exactly 0 at some sub-nodes: a mistake there costs ~0.1) within 1e-4: its sharp
    arms' float32 sums differ between the two programs by up to ~2e-5."""
    assert native_cpu.native_available()
    atol = 1e-4 if regime == "zero_cdf" else 2e-5
    for arms in (1, 15, 16, 17, 26, 122):
        conc, valid = _rows(regime, 48, arms, 0)
        native = np.asarray(jax.jit(
            lambda c, v: native_cpu.native_fast_core(c, v, 21))(conc, valid))
        array = np.asarray(jax.jit(
            lambda c, v: best_arm._fast_core_array(c, v, 21))(conc, valid))
        assert np.all(np.isfinite(native)) and np.all(native >= 0.0)
        assert np.all(native[~valid] == 0.0) and np.all(native[0] == 0.0)
        np.testing.assert_allclose(_normalized(native), _normalized(array), atol=atol,
                                   err_msg=f"{regime}, {arms} arms")


def _selection_probability(aggregates, table) -> np.ndarray:
    """P(best) ``[rows, A]`` that the two-stage selection draw over ``fast_selection``'s
    stages and the arms' stored ``table`` encodes (``beliefs.two_stage_index``)."""
    weights = np.asarray(best_arm.fast_selection(aggregates), np.float64)
    table = np.asarray(table, np.float64)
    columns = table / np.maximum(table.sum(axis=-2, keepdims=True), 1e-300)
    return _normalized(np.einsum("rs,ras->ra", weights, columns))


@needs_native
@pytest.mark.parametrize("regime", ["random", "far_below_one", "sharp_vs_flat", "identical",
                                    "one_legal", "masked"])
def test_native_aggregates_match_the_array_program(regime):
    """``best_arm.fast_aggregates`` (an incremental root's cache) by the native kernel
    against its array program: the same grid, the same P(best) through the selection
    draw's two stages and the same mixture, at the lane-block edges. (Single stored
    terms at the grid's lowest sub-nodes divide by the mass below the grid, a
    difference of sums near 1 whose rounding differs between the two; what they
    encode is compared.)"""
    for arms in (1, 15, 16, 17, 26, 122):
        conc, valid = _rows(regime, 48, arms, 2)
        lowered = jax.jit(best_arm.fast_aggregates).lower(conc, valid)
        assert native_cpu.AGGREGATES_TARGET in lowered.as_text()
        native, native_table, native_logs = lowered.compile()(conc, valid)
        array, array_table, _ = jax.jit(best_arm._fast_aggregates_array, static_argnums=2)(
            conc, valid, 21)
        message = f"{regime}, {arms} arms"
        np.testing.assert_allclose(native.edges, array.edges, rtol=1e-6, atol=1e-6,
                                   err_msg=message)
        np.testing.assert_array_equal(np.asarray(native_table)[~valid], 0.0)
        np.testing.assert_array_equal(np.asarray(native_logs)[~valid], 0.0)
        inside = valid.any(-1)
        np.testing.assert_allclose(_selection_probability(native, native_table)[inside],
                                   _selection_probability(array, array_table)[inside],
                                   atol=2e-5, err_msg=message)
        # ... which is the kernel's P(best) itself.
        np.testing.assert_allclose(
            _selection_probability(native, native_table)[inside],
            _normalized(np.asarray(best_arm._fast_core_array(conc, valid, 21)))[inside],
            atol=2e-5, err_msg=message)
        np.testing.assert_allclose(best_arm.fast_mixture(native)[inside],
                                   best_arm.fast_mixture(array)[inside], rtol=1e-4,
                                   atol=1e-5, err_msg=message)


@needs_native
@pytest.mark.parametrize("grid_size", [2, 5, 33])
def test_native_kernel_on_other_grids(grid_size):
    """The grid size is the kernel's attribute: other grids agree too."""
    conc, valid = _rows("random", 32, 9, grid_size)
    native = np.asarray(native_cpu.native_fast_core(conc, valid, grid_size))
    array = np.asarray(jax.jit(best_arm._fast_core_array, static_argnums=2)(conc, valid,
                                                                             grid_size))
    np.testing.assert_allclose(_normalized(native), _normalized(array), atol=2e-5)


@needs_native
def test_best_arm_probability_runs_the_native_kernel_batched_and_vmapped():
    """``best_arm_probability`` on the CPU lowers to the custom call, keeps leading
    batch axes, and gives under ``vmap`` what it gives unbatched."""
    conc, valid = _rows("random", 24, 7, 1)
    conc, invalid = conc.reshape(2, 12, 7, 2), ~valid.reshape(2, 12, 7)
    assert native_cpu.TARGET in jax.jit(best_arm.best_arm_probability).lower(
        conc, invalid).as_text()
    whole = np.asarray(jax.jit(best_arm.best_arm_probability)(conc, invalid))
    mapped = np.asarray(jax.jit(jax.vmap(best_arm.best_arm_probability))(conc, invalid))
    np.testing.assert_array_equal(whole, mapped)
    array = best_arm._fast_core_array(jnp.asarray(conc), jnp.asarray(~invalid), 21)
    np.testing.assert_allclose(whole[~invalid.all(-1)],
                               _normalized(np.asarray(array))[~invalid.all(-1)], atol=2e-5)


@pytest.fixture
def fresh_switch(monkeypatch):
    """``native_available`` re-read under the test's environment, and again after it."""
    native_cpu.native_available.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    native_cpu.native_available.cache_clear()


def test_kernel_switch_is_checked_and_xla_uses_the_array_program(fresh_switch):
    fresh_switch.setenv(native_cpu.KERNEL_ENV, "fortran")
    with pytest.raises(ValueError, match="CURIOSITY_SEARCH_PBEST_KERNEL.*'fortran'"):
        native_cpu.native_available()
    fresh_switch.setenv(native_cpu.KERNEL_ENV, "xla")
    assert not native_cpu.native_available()
    conc, valid = _rows("random", 4, 5, 2)
    assert native_cpu.TARGET not in jax.jit(best_arm._fast_core, static_argnums=2).lower(
        conc, valid, 21).as_text()


def test_failed_build_warns_and_falls_back(fresh_switch, tmp_path):
    """No compiler: a warning naming the switch, and the array program's numbers."""
    fresh_switch.setenv(native_cpu.KERNEL_ENV, "native")
    fresh_switch.setenv(native_cpu.CACHE_ENV, str(tmp_path))
    fresh_switch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with pytest.warns(RuntimeWarning, match="CURIOSITY_SEARCH_PBEST_KERNEL=xla"):
        assert not native_cpu.native_available()
    assert not list(tmp_path.iterdir())  # nothing half-built left behind
    conc, valid = _rows("random", 4, 5, 3)
    np.testing.assert_array_equal(best_arm._fast_core(conc, valid, 21),
                                  best_arm._fast_core_array(conc, valid, 21))


@needs_native
def test_build_is_cached_by_source_and_compiler(fresh_switch, tmp_path):
    """A second build with the same source and compiler reuses the library; another
    compiler name gets its own file."""
    fresh_switch.setenv(native_cpu.CACHE_ENV, str(tmp_path))
    compiler = os.environ.get("CXX", "g++")
    first = native_cpu.build(compiler)
    stamp = first.stat().st_mtime_ns
    assert native_cpu.build(compiler) == first and first.stat().st_mtime_ns == stamp
    assert native_cpu.library_path(shutil.which(compiler)) != first
    assert [p.name for p in tmp_path.iterdir()] == [first.name]
