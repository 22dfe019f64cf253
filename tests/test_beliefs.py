"""Beliefs: P(best) against quadrature / Monte Carlo (default method), sampling, KL, algebra.

The accuracy of both P(best) methods over every regime is in tests/test_best_arm.py."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from curiosity_search.curiosity import beliefs, best_arm_probability

A_MAX = 10


def _pbest_quadrature_k2(alpha, beta, num_points=4000):
    """P(a best) for Betas: integrate prod_{b != a} F_b over a's quantiles (float64)."""
    q = (np.arange(num_points) + 0.5) / num_points
    out = []
    for a in range(len(alpha)):
        x = special.betaincinv(alpha[a], beta[a], q)
        prod = np.ones(num_points)
        for b in range(len(alpha)):
            if b != a:
                prod *= special.betainc(alpha[b], beta[b], x)
        out.append(prod.mean())
    return np.array(out)


def _pbest_monte_carlo_k3(rng, conc, num_samples):
    """P(a best) for Dirichlet scores p_w + p_d / 2 by Monte Carlo."""
    gammas = rng.standard_gamma(conc[:, :, None], size=conc.shape + (num_samples,))
    p = gammas / gammas.sum(1, keepdims=True)
    score = p[:, 0] + 0.5 * p[:, 1]
    return np.bincount(np.argmax(score, 0), minlength=len(conc)) / num_samples


def _random_k2_case(rng, family):
    num_arms = int(rng.integers(2, A_MAX + 1))
    mean = rng.uniform(0.02, 0.98, num_arms)
    if family == "flat":
        strength = rng.uniform(1.0, 2.0, num_arms)
    elif family == "moderate":
        strength = rng.uniform(2.0, 100.0, num_arms)
    elif family == "sharp":
        strength = np.full(num_arms, 1e4)
        mean = 0.6 + rng.normal(0.0, 0.01, num_arms)
    elif family == "mixed":
        strength = 10.0 ** rng.uniform(0.0, 4.0, num_arms)
        mean = 0.6 + rng.normal(0.0, 0.05, num_arms)
    elif family == "identical":
        strength = np.full(num_arms, 10.0 ** rng.uniform(0, 4))
        mean = np.full(num_arms, rng.uniform(0.05, 0.95))
    elif family == "one_legal":
        num_arms = 1
        strength, mean = np.array([rng.uniform(1, 100)]), np.array([0.3])
    return np.stack([mean * strength, (1 - mean) * strength], -1)


def _pad(cases, num_outcomes):
    conc = np.ones((len(cases), A_MAX, num_outcomes), np.float32)
    invalid = np.ones((len(cases), A_MAX), bool)
    for i, case in enumerate(cases):
        conc[i, : len(case)] = case
        invalid[i, : len(case)] = False
    return conc, invalid


BATCH = 32


@functools.cache
def _jitted_best_arm_probability():
    return jax.jit(best_arm_probability, static_argnames="grid_size")


def _pbest(conc, invalid=None):
    """P(best) through one compiled program per K: pads to ``[BATCH, A_MAX, K]``."""
    conc = np.asarray(conc, np.float32)
    batch, num_arms, num_outcomes = conc.shape
    if invalid is None:
        invalid = np.zeros((batch, num_arms), bool)
    padded = np.ones((BATCH, A_MAX, num_outcomes), np.float32)
    padded_invalid = np.ones((BATCH, A_MAX), bool)
    padded[:batch, :num_arms] = conc
    padded_invalid[:batch, :num_arms] = invalid
    prob = np.asarray(_jitted_best_arm_probability()(padded, padded_invalid, grid_size=21))
    assert np.all(prob[:batch, num_arms:] == 0.0)
    return prob[:batch, :num_arms]


def test_best_arm_probability_k2_matches_quadrature():
    rng = np.random.default_rng(0)
    families = ["flat", "moderate", "sharp", "mixed", "identical", "one_legal"]
    cases = [(f, _random_k2_case(rng, f)) for f in families for _ in range(5)]
    conc, invalid = _pad([c for _, c in cases], 2)
    prob = _pbest(conc, invalid)
    errors = {}
    for i, (family, case) in enumerate(cases):
        case64 = conc[i, : len(case)].astype(np.float64)
        reference = _pbest_quadrature_k2(case64[:, 0], case64[:, 1])
        error = np.abs(prob[i, : len(case)] - reference).max()
        errors[family] = max(errors.get(family, 0.0), error)
        assert np.all(prob[i, len(case):] == 0.0)
    assert max(errors.values()) <= 0.01, errors


def test_best_arm_probability_k3_matches_monte_carlo():
    rng = np.random.default_rng(1)
    cases = [
        rng.dirichlet(np.ones(3), 4) * rng.uniform(1.0, 2.0, (4, 1)),  # flat
        (np.array([0.5, 0.2, 0.3]) + rng.normal(0, 0.005, (4, 3))) * 1e4,  # sharp, close
        rng.dirichlet([1, 8, 1], 5) * 10 ** rng.uniform(0, 3, (5, 1)),  # mostly draws
        (np.array([0.4, 0.3, 0.3]) + rng.normal(0, 0.03, (5, 3))).clip(0.05)
        * 10 ** rng.uniform(0, 4, (5, 1)),  # mixed sharp and flat
    ]
    conc, invalid = _pad(cases, 3)
    prob = _pbest(conc, invalid)
    for i, case in enumerate(cases):
        reference = _pbest_monte_carlo_k3(rng, conc[i, : len(case)].astype(np.float64), 200_000)
        assert np.abs(prob[i, : len(case)] - reference).max() <= 0.01, (i, prob[i], reference)


def test_dirichlet_without_draws_is_the_beta():
    rng = np.random.default_rng(2)
    win_loss = rng.uniform(0.5, 50.0, (3, 6, 2)).astype(np.float32)
    k3 = np.concatenate([win_loss[..., :1], np.full_like(win_loss[..., :1], 1e-6),
                         win_loss[..., 1:]], -1)
    np.testing.assert_allclose(_pbest(k3), _pbest(win_loss), atol=2e-3)


@pytest.mark.parametrize("num_outcomes", [2, 3])
def test_best_arm_probability_structure(num_outcomes):
    rng = np.random.default_rng(3)
    conc = rng.uniform(0.5, 30.0, (4, 7, num_outcomes)).astype(np.float32)
    invalid = rng.uniform(size=(4, 7)) < 0.3
    invalid[:, 0] = False
    prob = _pbest(conc, invalid)
    np.testing.assert_allclose(prob.sum(-1), 1.0, atol=1e-5)
    assert np.all(prob[invalid] == 0.0) and np.all(prob >= 0.0)
    # Identical arms tie exactly; one legal arm is certainly best; none legal -> zeros.
    same = np.broadcast_to(conc[:1, :1], (1, 5, num_outcomes))
    tied = _pbest(same)[0]
    assert np.all(tied == tied[0]) and tied[0] == pytest.approx(0.2)
    only = np.ones((1, 7), bool)
    only[0, 4] = False
    np.testing.assert_array_equal(_pbest(conc[:1], only)[0], np.eye(7)[4])
    assert np.all(_pbest(conc[:1], np.ones((1, 7), bool)) == 0)


@pytest.mark.parametrize("num_outcomes", [2, 3])
def test_extreme_concentrations_are_finite(num_outcomes):
    rng = np.random.default_rng(4)
    conc = (10.0 ** rng.uniform(-3, 6, (16, 6, num_outcomes))).astype(np.float32)
    prob = _pbest(conc)
    assert np.all(np.isfinite(prob))
    np.testing.assert_allclose(prob.sum(-1), 1.0, atol=1e-4)
    assert np.all(np.isfinite(beliefs.kl_dirichlet_bits(conc, conc[::-1])))
    assert np.all(np.isfinite(beliefs.entropy_bits(conc)))


def test_jit_and_vmap_agree_with_batched_call():
    rng = np.random.default_rng(5)
    conc = rng.uniform(0.5, 30.0, (3, 5, 2)).astype(np.float32)
    batched = _pbest(conc)
    mapped = jax.jit(jax.vmap(best_arm_probability))(conc)
    np.testing.assert_allclose(mapped, batched, atol=1e-5)


def test_sample_best_arm_frequencies_match_probability():
    conc = jnp.array([[3.0, 2.0], [2.0, 2.0], [8.0, 6.0], [1.0, 1.0], [5.0, 1.0]])
    invalid = jnp.array([False, False, False, True, False])
    prob = _pbest(conc[None], invalid[None])[0]
    num_samples = 20_000
    keys = jax.random.split(jax.random.PRNGKey(0), num_samples)
    draws = jax.jit(jax.vmap(lambda k: beliefs.sample_best_arm(k, conc, invalid)))(keys)
    freq = np.bincount(np.asarray(draws), minlength=5) / num_samples
    assert freq[3] == 0.0
    tolerance = 4.0 * np.sqrt(prob * (1 - prob) / num_samples) + 1e-3
    assert np.all(np.abs(freq - prob) <= tolerance), (freq, prob)


def test_kl_beta_matches_numeric_integration():
    for p, q in [((2.0, 3.0), (1.5, 4.0)), ((20.0, 5.0), (3.0, 3.0)), ((0.7, 0.9), (2.0, 1.0))]:
        dist_p, dist_q = stats.beta(*p), stats.beta(*q)

        def integrand(x, dist_p=dist_p, dist_q=dist_q):
            return dist_p.pdf(x) * (dist_p.logpdf(x) - dist_q.logpdf(x))

        kl_nats = integrate.quad(integrand, 0, 1, limit=200)[0]
        got = float(beliefs.kl_dirichlet_bits(jnp.array(p), jnp.array(q)))
        assert got == pytest.approx(kl_nats / np.log(2), rel=1e-3, abs=1e-4)


def test_kl_dirichlet_matches_monte_carlo_and_self_is_zero():
    rng = np.random.default_rng(6)
    p, q = np.array([4.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0])
    x = rng.dirichlet(p, 400_000)
    kl_mc = np.mean(stats.dirichlet(p).logpdf(x.T) - stats.dirichlet(q).logpdf(x.T)) / np.log(2)
    assert float(beliefs.kl_dirichlet_bits(jnp.array(p), jnp.array(q))) == pytest.approx(
        kl_mc, abs=0.01)
    conc = jnp.array([[2.0, 3.0, 4.0], [1e4, 1.0, 1.0]])
    np.testing.assert_allclose(beliefs.kl_dirichlet_bits(conc, conc), 0.0, atol=1e-3)


def test_entropy_matches_scipy():
    for conc in [(2.0, 3.0), (0.5, 0.5), (2.0, 3.0, 4.0), (1.0, 1.0, 1.0)]:
        expected = stats.dirichlet(conc).entropy() / np.log(2)
        assert float(beliefs.entropy_bits(jnp.array(conc))) == pytest.approx(expected, abs=1e-4)


def test_belief_algebra():
    k2 = jnp.array([3.0, 1.0])
    k3 = jnp.array([2.0, 2.0, 4.0])
    assert float(beliefs.belief_mean_score(k2)) == pytest.approx(0.75)
    assert float(beliefs.belief_mean_score(k3)) == pytest.approx(0.375)
    assert float(beliefs.to_value(k2)) == pytest.approx(0.5)
    np.testing.assert_array_equal(beliefs.flip_perspective(k3), [4.0, 2.0, 2.0])
    assert float(beliefs.to_value(beliefs.flip_perspective(k2))) == pytest.approx(-0.5)
    np.testing.assert_array_equal(beliefs.exact_belief(jnp.array([1.0, 0.5, 0.0]),
                                                       jnp.array([9.0, 4.0, 2.0]), 3),
                                  [[9.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 2.0]])
    np.testing.assert_array_equal(beliefs.exact_belief(jnp.array([1.0, 0.0]),
                                                       jnp.array([3.0, 5.0]), 2),
                                  [[3.0, 0.0], [0.0, 5.0]])
    # C = (1 - gamma) V + gamma Qbar with gamma = n / (kappa + n).
    combined = beliefs.combine_with_prior(jnp.array([2.0, 2.0]), jnp.array([6.0, 2.0]),
                                          jnp.array(4.0), 4.0)
    np.testing.assert_allclose(combined, [4.0, 2.0])
    np.testing.assert_allclose(
        beliefs.combine_with_prior(jnp.array([2.0, 2.0]), jnp.array([6.0, 2.0]), 0.0, 0.0),
        [2.0, 2.0])


def test_summarize_mixture():
    weights = jnp.array([0.25, 0.75, 0.0])
    conc = jnp.array([[4.0, 4.0], [8.0, 2.0], [1.0, 9.0]])
    np.testing.assert_allclose(beliefs.summarize_mixture(weights, conc), [7.0, 2.5])
    # Moment matching reproduces a single component exactly ...
    single = beliefs.summarize_mixture(jnp.array([0.0, 1.0, 0.0]), conc, "moment_match")
    np.testing.assert_allclose(single, [8.0, 2.0], rtol=1e-4)
    # ... and the mixture's mean and variance of p(win).
    matched = np.asarray(beliefs.summarize_mixture(weights, conc, "moment_match"))
    dists = [stats.beta(*c) for c in np.asarray(conc)]
    pairs = list(zip([0.25, 0.75, 0.0], dists, strict=True))
    mean = sum(w * d.mean() for w, d in pairs)
    second = sum(w * (d.var() + d.mean() ** 2) for w, d in pairs)
    fitted = stats.beta(*matched)
    assert fitted.mean() == pytest.approx(mean, rel=1e-4)
    assert fitted.var() == pytest.approx(second - mean**2, rel=1e-3)
    # K = 3: mean vector preserved.
    conc3 = jnp.array([[4.0, 1.0, 5.0], [1.0, 6.0, 3.0]])
    w3 = jnp.array([0.5, 0.5])
    for method in ["average", "moment_match"]:
        out = np.asarray(beliefs.summarize_mixture(w3, conc3, method))
        np.testing.assert_allclose(out / out.sum(), [0.25, 0.35, 0.4], rtol=1e-4)


def test_one_uniform_inverse_cdf_sampler_matches_probability():
    # The search's selection: one uniform per draw, inverse CDF over cached running sums.
    prob = jnp.array([0.0, 0.05, 0.3, 0.0, 0.15, 0.5, 0.0], jnp.float32)
    num_samples = 40_000
    keys = jax.random.split(jax.random.PRNGKey(3), num_samples)
    cumulative = beliefs.cumulative_probability(prob)
    draws = jax.jit(jax.vmap(lambda k: beliefs.sample_from_cumulative(k, cumulative)))(keys)
    freq = np.bincount(np.asarray(draws), minlength=prob.shape[0]) / num_samples
    assert np.all(freq[np.asarray(prob) == 0] == 0.0)
    tolerance = 4.0 * np.sqrt(prob * (1 - prob) / num_samples) + 1e-3
    assert np.all(np.abs(freq - prob) <= tolerance), (freq, prob)
    # Boundaries: u = 0 picks the first positive entry, u just below 1 the last one.
    largest = np.nextafter(np.float32(1.0), np.float32(0.0))
    picks = beliefs.inverse_cdf_index(jnp.stack([cumulative] * 2), jnp.array([0.0, largest]))
    np.testing.assert_array_equal(picks, [1, 5])


def test_two_stage_sampler_matches_its_mixture():
    # The incremental selection's draw: a stage by its weight, then an arm by its row.
    weights = jnp.array([1.0, 0.0, 2.0, 0.5], jnp.float32)
    table = jnp.array([[1.0, 0.0, 0.0, 3.0],
                       [5.0, 5.0, 5.0, 5.0],  # a stage of weight 0: never used
                       [0.0, 0.0, 1.0, 1.0],
                       [0.0, 2.0, 0.0, 0.0]], jnp.float32).T  # [A, S]: column s, stage s
    columns = np.asarray(table) / np.asarray(table).sum(0, keepdims=True)
    prob = columns @ np.asarray(weights) / np.asarray(weights).sum()
    num_samples = 40_000
    keys = jax.random.split(jax.random.PRNGKey(4), num_samples)
    uniforms = jax.vmap(lambda k: jax.random.uniform(k, ()))(keys)
    draws = jax.jit(jax.vmap(lambda u: beliefs.two_stage_index(weights, table, u)))(uniforms)
    freq = np.bincount(np.asarray(draws), minlength=4) / num_samples
    tolerance = 4.0 * np.sqrt(prob * (1 - prob) / num_samples) + 1e-3
    assert np.all(np.abs(freq - prob) <= tolerance), (freq, prob)
    # One stage is the one-uniform inverse CDF, draw for draw.
    p = jnp.array([0.0, 0.05, 0.3, 0.0, 0.15, 0.5, 0.0], jnp.float32)
    uniforms = jax.random.uniform(jax.random.PRNGKey(5), (2_000,))
    single = beliefs.inverse_cdf_index(beliefs.cumulative_probability(p)[None], uniforms)
    staged = jax.vmap(lambda u: beliefs.two_stage_index(jnp.ones(1), p[:, None], u))(uniforms)
    np.testing.assert_array_equal(single, staged)
    # Boundaries never reach a zero-probability entry.
    largest = np.nextafter(np.float32(1.0), np.float32(0.0))
    for u in (0.0, largest):
        assert prob[int(beliefs.two_stage_index(weights, table, jnp.float32(u)))] > 0
