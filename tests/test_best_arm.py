"""P(a is best): every method within 0.01 of an exact reference, in every regime.

The reference (``pbest_reference.monte_carlo_best_arm``) compares arms in logit space
with Gamma variates drawn in log space, so it is exact for concentrations far below 1
(p within 1e-300 of 0 or 1) and for 1e4-sharp arms; with 200,000 draws its standard
error is at most 0.0011 per probability. The criterion (issue 11): max abs error
<= 0.01 at G = 21, with 2 to 6 arms and with as many as wide boards have (26, 122).
"""

from __future__ import annotations

import functools
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pbest_reference import monte_carlo_best_arm, score_keys

from curiosity_search.curiosity import best_arm_probability
from curiosity_search.curiosity.best_arm import in_fast_envelope
from curiosity_search.curiosity.score_cdf import (
    SCORE_AXIS_POWER,
    logit_to_score_axis,
    score_cdf_and_density,
)

ARMS = 6
CASES = {2: 10, 3: 30}  # per K; K = 3 errs more often, so it gets more cases
SAMPLES = 200_000
TOLERANCE = 0.01


def _case(rng: np.random.Generator, regime: str, num_outcomes: int,
          num_arms: int | None = None) -> np.ndarray:
    """One case's concentrations ``[n, K]``: ``n`` arms (2 to ARMS, or ``num_arms``)."""
    k = num_outcomes
    n = int(rng.integers(2, ARMS + 1)) if num_arms is None else num_arms
    if regime == "random":
        return rng.dirichlet(np.ones(k), n) * 10 ** rng.uniform(0, 2, (n, 1))
    if regime == "far_below_one":  # p near 0 or 1 (Beta) / near a vertex (Dirichlet)
        conc = rng.dirichlet(np.ones(k), n) * 10 ** rng.uniform(0, 1.2, (n, 1))
        small = 10 ** rng.uniform(-3, -0.5, (n, k))
        return np.where(rng.random((n, k)) < 0.5, small, conc)
    if regime == "sharp_vs_flat":
        mean = rng.dirichlet(np.ones(k) * 4, n)
        return mean * np.where(rng.random((n, 1)) < 0.5, 1e4, 1.0) + 1e-3
    if regime == "identical":
        return np.tile(rng.dirichlet(np.ones(k)) * 10 ** rng.uniform(0, 3), (n, 1))
    if regime == "one_legal":
        return rng.dirichlet(np.ones(k), 1) * 5.0
    raise ValueError(regime)


REGIMES = ["random", "far_below_one", "sharp_vs_flat", "identical", "one_legal", "masked"]


@functools.cache
def _regime(regime: str, num_outcomes: int):
    """``(conc [C, ARMS, K], invalid [C, ARMS], reference [C, ARMS])`` for one regime."""
    # A stable seed (str hashes change with every process): the same cases every run.
    rng = np.random.default_rng(zlib.crc32(f"{regime}/{num_outcomes}".encode()))
    cases = CASES[num_outcomes]
    conc = np.ones((cases, ARMS, num_outcomes), np.float32)
    invalid = np.ones((cases, ARMS), bool)
    for i in range(cases):
        case = _case(rng, "random" if regime == "masked" else regime, num_outcomes)
        conc[i, : len(case)] = case
        invalid[i, : len(case)] = False
        if regime == "masked":  # illegal arms scattered among legal ones
            legal = np.flatnonzero(~invalid[i])
            drop = rng.choice(legal, size=max(1, len(legal) // 2), replace=False)
            invalid[i, drop[: len(legal) - 1]] = True
            conc[i, invalid[i]] = 10 ** rng.uniform(-3, 4, (invalid[i].sum(), num_outcomes))
    reference = monte_carlo_best_arm(conc, invalid, num_samples=SAMPLES, seed=1)
    return conc, invalid, reference


@functools.cache
def _method(method: str):
    return jax.jit(functools.partial(best_arm_probability, grid_size=21, method=method))


def _errors(method: str, num_outcomes: int, regime: str) -> float:
    conc, invalid, reference = _regime(regime, num_outcomes)
    got = np.asarray(_method(method)(conc, invalid))
    assert np.all(got[invalid] == 0.0)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)
    return float(np.abs(got - reference).max())


@pytest.mark.parametrize("method", ["fast", "accurate"])
@pytest.mark.parametrize("regime", REGIMES)
def test_k2_within_tolerance_of_the_exact_reference(method, regime):
    error = _errors(method, 2, regime)
    assert error <= TOLERANCE, (method, regime, error)


@pytest.mark.parametrize("regime", REGIMES)
def test_k3_within_tolerance_of_the_exact_reference(regime):
    error = _errors("accurate", 3, regime)
    assert error <= TOLERANCE, ("accurate", regime, error)


@functools.cache
def _wide_rows(num_arms: int):
    """``(conc [4, A, 2], invalid [4, A], reference [4, A])``: four rows of ``num_arms``
    Beta arms as wide boards have them (16-122 legal moves), inside the fast envelope
    (totals 1-64, means Dirichlet(c) with c in {0.3, 1, 3}), a fifth of the arms masked."""
    rng = np.random.default_rng(zlib.crc32(f"wide/{num_arms}".encode()))
    totals = np.exp(rng.uniform(0.0, np.log(64.0), (4, num_arms, 1)))
    spread = rng.choice([0.3, 1.0, 3.0], (4, 1, 1))
    means = np.stack([rng.dirichlet(np.ones(2) * c, num_arms) for c in spread[:, 0, 0]])
    conc = np.maximum(means * totals, 1e-3).astype(np.float32)
    invalid = rng.uniform(size=(4, num_arms)) < 0.2
    invalid[:, 0] = False
    return conc, invalid, monte_carlo_best_arm(conc, invalid, num_samples=SAMPLES, seed=1)


@functools.cache
def _many_arm_cases(num_arms: int):
    """``(conc [6, A, 2], invalid [6, A], reference [6, A])``: six rows of the random
    regime (``_case``) with ``num_arms`` arms: totals 1-100 and means anywhere, so a few
    arms with a component far below 1 have heavy logit tails and hold most of the
    max's mass far above the crowd, outside the fast envelope."""
    rng = np.random.default_rng(zlib.crc32(f"many/{num_arms}".encode()))
    conc = np.stack([_case(rng, "random", 2, num_arms) for _ in range(6)]).astype(np.float32)
    invalid = np.zeros(conc.shape[:2], bool)
    return conc, invalid, monte_carlo_best_arm(conc, invalid, num_samples=SAMPLES, seed=1)


@pytest.mark.parametrize("method", ["fast", "accurate"])
@pytest.mark.parametrize("num_arms", [26, 122])
def test_within_tolerance_on_wide_boards(method, num_arms):
    """P(best) with as many arms as hex5 and 11x11 Hex have (the regimes above have
    2-6), on rows inside the fast envelope. Before the accurate grid got its edges at the
    max's quantiles (``best_arm._max_quantile_edges``) ``accurate`` erred by 0.031 here
    at 122 arms."""
    conc, invalid, reference = _wide_rows(num_arms)
    assert bool(np.all(in_fast_envelope(jnp.asarray(conc), jnp.asarray(~invalid))))
    error = float(np.abs(np.asarray(_method(method)(conc, invalid)) - reference).max())
    assert error <= TOLERANCE, (method, num_arms, error)


@pytest.mark.parametrize("num_arms", [26, 122])
def test_accurate_within_tolerance_with_many_heavy_tailed_arms(num_arms):
    """Many arms, a few of them heavy-tailed (outside the fast envelope: both methods
    run ``accurate``). Before the max-quantile edges and the top edge: errors up to
    0.043 (26 arms) and 0.048 (122)."""
    conc, invalid, reference = _many_arm_cases(num_arms)
    error = float(np.abs(np.asarray(_method("accurate")(conc, invalid)) - reference).max())
    assert error <= TOLERANCE, (num_arms, error)


def test_k3_fast_is_the_accurate_method():
    """K = 3 has no dedicated kernel: ``fast`` returns the accurate method's values, bit
    for bit (so the accurate method's tests above judge both)."""
    conc, invalid, _ = _regime("masked", 3)
    np.testing.assert_array_equal(_method("fast")(conc, invalid),
                                  _method("accurate")(conc, invalid))


def test_fast_envelope_covers_bounded_heads_and_routes_the_rest():
    """Rows inside the envelope run the fast kernel; a row outside (here a 1e4-sharp arm)
    takes the accurate values, whatever else is in the batch."""
    bounded = np.array([[[3.0, 1.0], [0.001, 15.999], [8.0, 8.0]]], np.float32)
    sharp = np.array([[[6000.0, 4000.0], [1.0, 1.0], [2.0, 2.0]]], np.float32)
    both = np.concatenate([bounded, sharp])
    legal = np.ones((2, 3), bool)
    np.testing.assert_array_equal(in_fast_envelope(jnp.asarray(both), jnp.asarray(legal)),
                                  [True, False])
    fast, accurate = _method("fast")(both), _method("accurate")(both)
    np.testing.assert_allclose(fast[1], accurate[1], atol=1e-6)  # routed
    np.testing.assert_allclose(fast[0], accurate[0], atol=5e-3)  # kernel, close


def test_fast_kernel_holds_just_below_its_envelope_floor():
    """``search.pbest_fallback: false`` (``CuriosityOptions.bounded_beliefs``) lets the
    fast kernel compute every row: bounded heads put every component at or above the
    envelope's 1e-3, and float32 rounding of their convex combinations can put one a few
    ulps below. The kernel alone (no fallback) stays within tolerance of the reference
    there and well below (components down to 5e-4, many arms at the floor)."""
    rng = np.random.default_rng(11)
    cases, arms = 40, 6
    conc = np.empty((cases, arms, 2), np.float32)
    total = rng.uniform(1.0, 16.0, (cases, arms))
    mean = rng.uniform(0.0, 1.0, (cases, arms))
    floor = rng.choice([1e-3 * (1 - 2.0 ** -22), 9e-4, 5e-4], (cases, arms))
    at_floor = rng.random((cases, arms)) < 0.6
    win_side = rng.random((cases, arms)) < 0.5
    conc[..., 0] = np.where(at_floor & win_side, floor, np.maximum(mean * total, floor))
    conc[..., 1] = np.where(at_floor & ~win_side, floor, np.maximum((1 - mean) * total, floor))
    assert not np.all(in_fast_envelope(jnp.asarray(conc), jnp.ones((cases, arms), bool)))
    reference = monte_carlo_best_arm(conc, None, num_samples=SAMPLES, seed=1)
    kernel = jax.jit(functools.partial(best_arm_probability, grid_size=21, method="fast",
                                       fallback=False))
    error = float(np.abs(np.asarray(kernel(conc)) - reference).max())
    assert error <= TOLERANCE, error


def test_exact_arms():
    # Compiled programs (cached across runs), not the P(best) paths op by op.
    pbest = jax.jit(best_arm_probability)
    conc = jnp.array([[[3.0, 2.0], [2.0, 3.0], [1.0, 1.0], [5.0, 5.0]]])
    nan = np.nan
    # A proven loss gets 0 and does not change the others (exact).
    with_loss = np.asarray(pbest(conc, None, exact_scores=jnp.array(
        [[nan, nan, 0.0, nan]])))
    without = np.asarray(pbest(conc, jnp.array([[False, False, True, False]])))
    np.testing.assert_array_equal(with_loss, without)
    # Proven wins share everything; all proven losses share equally.
    np.testing.assert_array_equal(
        pbest(conc, None, exact_scores=jnp.array([[nan, 1.0, nan, 1.0]])),
        [[0.0, 0.5, 0.0, 0.5]])
    np.testing.assert_array_equal(
        pbest(conc, None, exact_scores=jnp.zeros((1, 4))), [[0.25] * 4])
    # K = 3: a proven draw gets prod F_b(1/2) (P(every uncertain score < 1/2)): against a
    # Monte Carlo of the uncertain arms.
    c3 = np.array([[[2, 1, 2], [1, 3, 1], [4, 1, 1], [1, 1, 1]]], np.float32)
    scores = np.array([[nan, 0.5, nan, nan]], np.float32)
    p = np.asarray(pbest(c3, None, exact_scores=scores))
    rng = np.random.default_rng(0)
    draws = np.stack([rng.dirichlet(c3[0, a], SAMPLES) for a in (0, 2, 3)])  # [3, M, 3]
    score = draws[..., 0] + 0.5 * draws[..., 1]  # [3, M]
    top = np.argmax(score, axis=0)
    below = np.all(score < 0.5, axis=0)
    expected = [np.mean(~below & (top == 0)), np.mean(below), np.mean(~below & (top == 1)),
                np.mean(~below & (top == 2))]
    np.testing.assert_allclose(p[0], expected, atol=TOLERANCE)


def test_k3_score_cdf_on_the_score_axis_against_monte_carlo():
    """The K = 3 score CDF where a Dirichlet's score sits within e^-200 of 1/2 (draw
    vertex), at a win vertex's far tail (logit(score) in the hundreds) and in between,
    against the reference's exact keys (``score_keys``: sign and log |logit(score)|)."""
    arms = np.array([[0.0062, 0.1565, 0.0034],  # mostly at the draw vertex
                     [0.0756, 0.0012, 0.0021],  # win vertex, logit(score) ~ hundreds
                     [0.0025, 7.7007, 0.1525],  # near 1/2, below it
                     [5.0805, 2.3664, 0.1551]], np.float32)  # smooth
    log_abs_z = np.array([-230.0, -50.0, -23.0, -5.0, -1.0, 0.5, 2.0, 5.4, 6.2])
    y = np.concatenate([-np.exp(log_abs_z / SCORE_AXIS_POWER)[::-1], [0.0],
                        np.exp(log_abs_z / SCORE_AXIS_POWER)]).astype(np.float32)
    np.testing.assert_allclose(logit_to_score_axis(jnp.asarray([-np.e, 0.0, np.e])),
                               [-np.exp(1 / SCORE_AXIS_POWER), 0.0, np.exp(1 / SCORE_AXIS_POWER)],
                               rtol=1e-6)
    cdf, density = jax.jit(score_cdf_and_density)(jnp.asarray(arms), jnp.asarray(y))
    keys = score_keys(np.random.default_rng(3), arms.astype(np.float64), 400_000)  # [M, A]
    with np.errstate(divide="ignore", invalid="ignore"):
        edge_keys = np.where(y == 0, 0.0, np.sign(y) * (SCORE_AXIS_POWER * np.log(np.abs(
            y.astype(np.float64))) + 1e7))
    expected = (keys[:, :, None] <= edge_keys[None, None, :]).mean(axis=0)  # [A, E]
    np.testing.assert_allclose(np.asarray(cdf), expected, atol=0.004)
    assert np.all(np.isfinite(np.asarray(density))) and np.all(np.asarray(density) >= 0)


def test_fast_aggregates_updated_in_place_equal_a_fresh_build():
    """Updating one arm per row in place (the incremental backup, compiled) gives the
    mixture and the selection distribution a fresh build gives, over 40 successive
    changes that include arms leaving and rejoining; the aggregates' P(best) is the
    fast method's."""
    from curiosity_search.curiosity import best_arm as ba

    rng = np.random.default_rng(zlib.crc32(b"in place"))
    rows, arms = 128, 9
    conc = np.exp(rng.uniform(np.log(0.5), np.log(16.0), (rows, arms, 2))).astype(np.float32)
    valid = rng.uniform(size=(rows, arms)) > 0.2
    valid[:, 0] = True

    def selection(aggregates, table):
        w, t = np.asarray(ba.fast_selection(aggregates)), np.asarray(table)
        p = np.einsum("rs,ras->ra", w, t / np.maximum(t.sum(-2, keepdims=True), 1e-30))
        return p / p.sum(-1, keepdims=True)

    build = jax.jit(ba.fast_aggregates)
    aggregates, table, logs = build(conc, valid)
    # Compared with the fast kernel's array program (on the CPU the aggregates and
    # best_arm_probability run native transcriptions, within 2e-5 of their array
    # programs: tests/test_fast_pbest_cpu.py).
    fast = np.asarray(ba._fast_core_array(jnp.asarray(conc), jnp.asarray(valid), 21))
    fast = fast / fast.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(best_arm_probability(conc, ~valid, 21, "fast")),
                               fast, atol=2e-5)
    np.testing.assert_allclose(selection(aggregates, table), fast, atol=2e-5)
    mixture = np.einsum("ra,rak->rk", fast, np.where(valid[..., None], conc, 0.0))
    np.testing.assert_allclose(ba.fast_mixture(aggregates), mixture, rtol=5e-5)

    update = jax.jit(ba.update_fast_aggregates)
    index, moved = np.arange(rows), 0
    table, logs = np.asarray(table).copy(), np.asarray(logs).copy()
    for _ in range(40):
        arm = rng.integers(arms, size=rows)
        new, new_valid = conc.copy(), valid.copy()
        new[index, arm] *= np.exp(rng.normal(0.0, 0.05, (rows, 2))).astype(np.float32)
        new_valid[index, arm] ^= rng.uniform(size=rows) < 0.1  # a child resolved / back
        new_valid[:, 0] |= ~new_valid.any(-1)
        stepped, terms, log_terms = update(aggregates, table[index, arm], logs[index, arm],
                                           conc[index, arm], new[index, arm],
                                           new_valid[index, arm])
        table[index, arm], logs[index, arm] = np.asarray(terms), np.asarray(log_terms)
        fresh, fresh_table, fresh_logs = build(new, new_valid)
        same = np.all(np.asarray(fresh.edges) == np.asarray(aggregates.edges), axis=-1)
        moved += int((~same).sum())
        keep = same.reshape(-1, 1, 1)
        table = np.where(keep, table, np.asarray(fresh_table))
        logs = np.where(keep, logs, np.asarray(fresh_logs))
        aggregates = jax.tree_util.tree_map(
            lambda a, b, same=same: jnp.where(same.reshape((-1,) + (1,) * (a.ndim - 1)), a, b),
            stepped, fresh)
        conc, valid = new, new_valid
    assert 0 < moved < 0.1 * 40 * rows  # both paths taken, mostly in place
    fresh, fresh_table, _ = build(conc, valid)
    np.testing.assert_allclose(selection(aggregates, table), selection(fresh, fresh_table),
                               atol=2e-5)
    # On the CPU the fresh build is the native kernel's and the updated arms' terms are
    # the array program's: each within ~2e-5 of the other.
    np.testing.assert_allclose(ba.fast_mixture(aggregates), ba.fast_mixture(fresh), rtol=1e-4)


def test_same_fast_grid_compares_grid_steps():
    """Grids placed by the native kernel and by the array program for the same rows are
    the same grid (their edges may differ in the last bit); grids of other rows are the
    same exactly where the array program places equal edges."""
    from curiosity_search.curiosity import best_arm as ba

    rng = np.random.default_rng(zlib.crc32(b"same grid"))
    conc = np.exp(rng.uniform(np.log(0.05), np.log(30.0), (256, 7, 2))).astype(np.float32)
    valid = rng.uniform(size=(256, 7)) > 0.2
    array = ba.fast_grid_edges(conc, valid, 21)
    built = jax.jit(ba.fast_aggregates)(conc, valid)[0].edges
    assert bool(jnp.all(ba.same_fast_grid(array, built)))
    shuffled = array[rng.permutation(256)]
    expected = np.all(np.asarray(array) == np.asarray(shuffled), axis=-1)
    np.testing.assert_array_equal(ba.same_fast_grid(array, shuffled), expected)
    assert 0 < expected.sum() < 256  # both answers occur
