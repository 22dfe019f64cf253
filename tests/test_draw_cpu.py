"""The native CPU draw (curiosity/draw_cpu.cc) against the array program it transcribes
(beliefs.two_stage_index), and the curiosity search's use of it.

Running sums of dyadic numbers are exact in any order, so there the two must agree
draw for draw; on arbitrary floats they may differ only where a uniform lands within
a rounding of a boundary, so there the check is the draws' distribution and that no
zero-probability entry is ever drawn.
"""

from __future__ import annotations

import functools
import os
import shutil

import jax
import numpy as np
import pytest

from curiosity_search.curiosity import CuriosityOptions, beliefs, curiosity_policy, native_cpu
from curiosity_search.testing.curiosity_reference import BeliefHashModel

HAVE_COMPILER = shutil.which(os.environ.get("CXX", "g++")) is not None
pytestmark = pytest.mark.skipif(not HAVE_COMPILER or not native_cpu.native_available(),
                                reason="no native CPU library on this machine")

LARGEST_BELOW_ONE = float(np.nextafter(np.float32(1.0), np.float32(0.0)))


def _dyadic_caches(rows: int, arms: int, stages: int, seed: int):
    """``(weights [rows, W], table [rows, A, W])`` of small dyadic numbers with many
    zeros: zero stages, zero entries, an all-zero column and an all-zero row."""
    rng = np.random.default_rng(seed)
    weights = rng.integers(0, 9, (rows, stages)) / 8.0 * (rng.uniform(size=(rows, stages)) > 0.3)
    table = rng.integers(0, 17, (rows, arms, stages)) / 16.0
    table *= rng.uniform(size=(rows, arms, stages)) > 0.4
    table[:, :, 0] = 0.0  # a column of zeros
    weights[0] = 0.0  # a row without weight: the last stage, as the array program
    return weights.astype(np.float32), table.astype(np.float32)


@pytest.mark.parametrize("arms,stages", [(1, 1), (7, 1), (121, 1), (5, 62), (121, 62)])
def test_native_draw_matches_the_array_program_on_exact_sums(arms, stages):
    rows = 64
    weights, table = _dyadic_caches(rows, arms, stages, seed=arms * 100 + stages)
    uniform = np.array(jax.random.uniform(jax.random.PRNGKey(stages), (rows,)))
    uniform[:3] = [0.0, 0.5, LARGEST_BELOW_ONE]
    array = jax.jit(jax.vmap(beliefs.two_stage_index))(weights, table, uniform)
    native = jax.jit(jax.vmap(native_cpu.native_draw))(weights, table, uniform)
    np.testing.assert_array_equal(native, array)
    # Unbatched, and batched without vmap, the same.
    np.testing.assert_array_equal(native_cpu.native_draw(weights, table, uniform), array)
    for r in (0, 1, rows - 1):
        assert int(native_cpu.native_draw(weights[r], table[r], uniform[r])) == int(array[r])


def test_native_draw_of_no_rows_is_empty():
    draws = native_cpu.native_draw(np.zeros((0, 4), np.float32), np.zeros((0, 3, 4), np.float32),
                                   np.zeros((0,), np.float32))
    assert draws.shape == (0,) and draws.dtype == np.int32


def test_native_draw_follows_its_mixture_and_never_draws_a_zero():
    # Arbitrary floats (not exact sums): the draws' frequencies are the two-stage
    # mixture's, and boundaries never reach a zero-probability entry.
    rng = np.random.default_rng(7)
    arms, stages = 9, 4
    weights = np.array([0.7, 0.0, 1.3, 0.25], np.float32)
    table = rng.uniform(0.01, 1.0, (arms, stages)).astype(np.float32)
    table[[0, 4, 8], :] = 0.0
    table[2, 2] = 0.0
    columns = table / table.sum(0, keepdims=True)
    prob = columns @ weights / weights.sum()
    num_samples = 40_000
    uniform = jax.random.uniform(jax.random.PRNGKey(3), (num_samples,))
    draws = np.asarray(jax.jit(jax.vmap(lambda u: native_cpu.native_draw(weights, table, u)))(
        uniform))
    freq = np.bincount(draws, minlength=arms) / num_samples
    tolerance = 4.0 * np.sqrt(prob * (1 - prob) / num_samples) + 1e-3
    assert np.all(np.abs(freq - prob) <= tolerance), (freq, prob)
    assert np.all(prob[draws] > 0)
    edges = np.concatenate([[0.0, LARGEST_BELOW_ONE],
                            np.cumsum(weights)[:-1] / weights.sum()]).astype(np.float32)
    edges = np.concatenate([edges, np.nextafter(edges, np.float32(0.0)),
                            np.nextafter(edges, np.float32(1.0))]).clip(0.0, LARGEST_BELOW_ONE)
    boundary_draws = np.asarray(native_cpu.native_draw(
        np.broadcast_to(weights, (edges.size, stages)),
        np.broadcast_to(table, (edges.size, arms, stages)), edges))
    assert np.all(prob[boundary_draws] > 0), (edges, boundary_draws)


def test_curiosity_search_draws_through_the_native_pass():
    # The root's incremental cache (62 stages at G = 21) and the interior nodes' one-stage
    # rows are both drawn by the native pass; the kernel-vs-reference tests
    # (tests/test_curiosity.py) check such searches against the slow reference search.
    model = BeliefHashModel(num_actions=6, num_outcomes=2, seed=3)
    root = model.root(2, offset=5)
    options = CuriosityOptions(pbest_updates="incremental")
    run = jax.jit(functools.partial(curiosity_policy, recurrent_fn=model.recurrent_fn,
                                    num_simulations=5, options=options))
    text = run.lower(None, jax.random.PRNGKey(0), root).compile().as_text()
    assert text.count(f'custom_call_target="{native_cpu.DRAW_TARGET}"') >= 2
