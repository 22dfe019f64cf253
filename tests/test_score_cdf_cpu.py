"""The native CPU passes of K = 3's score distribution (curiosity/score_cdf_cpu.cc) against
the array programs they transcribe (score_cdf._score_cdf_and_density_dirichlet_array and
score_cdf._score_sample_array), in the regimes of issue 11's accuracy list that Dirichlet
beliefs reach, on the edges the accurate P(best) places; and ``best_arm_probability`` at
K = 3 through them.

The accuracy of the method itself (within 0.01 of a Monte Carlo in log space) is
tests/test_best_arm.py's, which runs through this pass on the CPU by default.
"""

from __future__ import annotations

import os
import shutil
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.curiosity import best_arm, native_cpu, score_cdf

HAVE_COMPILER = shutil.which(os.environ.get("CXX", "g++")) is not None
pytestmark = pytest.mark.skipif(not HAVE_COMPILER or not native_cpu.native_available(),
                                reason="no native CPU library on this machine")

REGIMES = ["random", "far_below_one", "sharp_vs_flat", "draw_vertex", "win_loss_vertex",
           "identical"]


def _beliefs(regime: str, rows: int, arms: int) -> np.ndarray:
    """Dirichlet concentrations ``[rows, arms, 3]`` (win, draw, loss) of one regime."""
    rng = np.random.default_rng(zlib.crc32(f"{regime}/{rows}/{arms}".encode()))
    shape = (rows, arms, 3)
    if regime == "far_below_one":  # components far below 1: mass at the vertices
        return np.exp(rng.uniform(np.log(1e-3), np.log(2.0), shape)).astype(np.float32)
    if regime == "sharp_vs_flat":  # totals of 1e4 against flat ones
        conc = np.exp(rng.uniform(np.log(0.5), np.log(3.0), shape))
        conc[:, ::2] *= 1e4 / conc[:, ::2].sum(-1, keepdims=True)
        return conc.astype(np.float32)
    if regime == "draw_vertex":  # scores within e^-1000 of 1/2 and beside it
        conc = np.exp(rng.uniform(np.log(0.01), np.log(1.0), shape))
        conc[..., 1] *= 1e3
        return conc.astype(np.float32)
    if regime == "win_loss_vertex":  # almost no draws, win or loss sharp
        conc = np.exp(rng.uniform(np.log(0.5), np.log(20.0), shape))
        conc[..., 1] = 1e-3
        return conc.astype(np.float32)
    conc = np.exp(rng.uniform(np.log(0.05), np.log(30.0), shape))
    if regime == "identical":
        conc = np.repeat(conc[:, :1], arms, axis=1)
    return conc.astype(np.float32)


def _edges(conc: np.ndarray, count: int = 24) -> jax.Array:
    """Sorted score-axis edges ``[rows, count + 1]`` where the arms' mass is (spread
    over their pooled score samples, as the accurate grid places them) and y = 0."""
    sample = jnp.sort(score_cdf.score_sample(jnp.asarray(conc)).reshape(conc.shape[0], -1),
                      axis=-1)
    pick = np.linspace(0, sample.shape[-1] - 1, count).astype(int)
    zero = jnp.zeros((conc.shape[0], 1), jnp.float32)
    return jnp.sort(jnp.concatenate([sample[:, pick], zero], axis=-1), axis=-1)


@pytest.mark.parametrize("regime", REGIMES)
def test_native_score_cdf_matches_the_array_program(regime):
    """CDFs within 5e-5 and densities within 1e-3 of each arm's largest density on the
    row (the two agree to ~1e-6 relative where the density matters; its far tails
    differ in the exponent's underflow), and finite, on 9 arms (tic-tac-toe) and 1."""
    for arms in (9, 1):
        conc = _beliefs(regime, 96, arms)
        edges = _edges(conc)
        native = jax.jit(native_cpu.native_dirichlet_score_cdf)(conc, edges)
        array = jax.jit(score_cdf._score_cdf_and_density_dirichlet_array)(conc, edges)
        (cdf, density), (cdf_array, density_array) = (map(np.asarray, native),
                                                      map(np.asarray, array))
        assert np.all(np.isfinite(cdf)) and np.all(np.isfinite(density))
        np.testing.assert_allclose(cdf, cdf_array, atol=5e-5, err_msg=f"{regime}, {arms}")
        scale = np.max(density_array, axis=-1, keepdims=True)
        assert np.max(np.abs(density - density_array) / scale) < 1e-3, f"{regime}, {arms}"


@pytest.mark.parametrize("regime", REGIMES)
def test_native_score_sample_matches_the_array_program(regime):
    """The grid candidates: the same points in the same order, within 5e-5 on the score
    axis (|y| <= 1; y = |logit|^(1/128), so 5e-5 is ~0.6% of |logit|)."""
    conc = _beliefs(regime, 64, 9)
    native = jax.jit(score_cdf.score_sample)(conc)
    assert native_cpu.DIRICHLET_SCORE_SAMPLE_TARGET in jax.jit(score_cdf.score_sample).lower(
        conc).as_text()
    array = jax.jit(score_cdf._score_sample_array)(conc)
    assert native.shape == array.shape == (64, 9, 100)
    np.testing.assert_allclose(native, array, atol=5e-5, err_msg=regime)


def test_native_densities_are_the_cdf_slopes():
    """Where a density lies a rounding error outside its table cell (the array program
    read it as 0 at other points; fixed in both), the two and a centred difference of
    the CDF agree."""
    conc = np.asarray([[[15.7233, 0.2854017, 9.874194]]], np.float32)
    y, step = 0.9933592677116394, 3e-4
    edges = jnp.asarray([[y - step, y, y + step]], jnp.float32)
    cdf, density = map(np.asarray, native_cpu.native_dirichlet_score_cdf(conc, edges))
    slope = (cdf[0, 0, 2] - cdf[0, 0, 0]) / float(edges[0, 2] - edges[0, 0])
    np.testing.assert_allclose(density[0, 0, 1], slope, rtol=1e-3)
    _, density_array = score_cdf._score_cdf_and_density_dirichlet_array(conc, edges)
    np.testing.assert_allclose(density_array[0, 0, 1], slope, rtol=1e-3)


def test_best_arm_probability_at_k3_runs_the_native_pass_batched_and_vmapped(monkeypatch):
    """``best_arm_probability`` on Dirichlet beliefs lowers to the custom call, keeps
    leading batch axes, gives under ``vmap`` what it gives unbatched, and is within
    1e-4 of the array programs' P(best) (illegal arms included)."""
    conc = _beliefs("random", 24, 9).reshape(2, 12, 9, 3)
    invalid = np.random.default_rng(5).uniform(size=(2, 12, 9)) < 0.3
    invalid[..., 0] = False
    run = jax.jit(best_arm.best_arm_probability)
    assert native_cpu.DIRICHLET_SCORE_CDF_TARGET in run.lower(conc, invalid).as_text()
    whole = np.asarray(run(conc, invalid))
    mapped = np.asarray(jax.jit(jax.vmap(best_arm.best_arm_probability))(conc, invalid))
    np.testing.assert_array_equal(whole, mapped)
    monkeypatch.setattr(native_cpu, "native_available", lambda: False)
    array = np.asarray(jax.jit(lambda c, i: best_arm.best_arm_probability(c, i))(conc, invalid))
    np.testing.assert_allclose(whole, array, atol=1e-4)
    assert np.all(whole[invalid] == 0.0)


def test_native_score_sample_refuses_another_sample_size():
    """The pass's level count is compiled in: a call for another size is an error, not
    a buffer overrun."""
    conc = _beliefs("random", 2, 3)
    with pytest.raises(Exception, match="_PRODUCT_LEVELS"):
        jax.block_until_ready(native_cpu.native_dirichlet_score_sample(jnp.asarray(conc), 64))
