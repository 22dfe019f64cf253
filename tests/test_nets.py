"""Networks: output shapes and ranges for every trunk/head combination, bfloat16 compute,
presets, and FLOP counts against the analytic count of a Dense-only MLP."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.nets import (
    PRESETS,
    NetworkOutput,
    belief_to_value,
    forward_flops,
    make_network,
    make_preset,
    update_flops,
)

# (observation shape without batch, number of actions): Hex 3x3 with swap, tic-tac-toe.
GAMES = {"hex3": ((3, 3, 4), 10), "tictactoe": ((3, 3, 2), 9)}
BATCH = 3


def _observation(key, shape):
    """``[B, H, W, C]`` random boolean planes, as pgx gives."""
    return jax.random.bernoulli(key, 0.4, (BATCH, *shape))


def _key(seed):
    """An RBG key: XLA compiles its random-bit generator far faster than threefry on CPU."""
    return jax.random.key(seed, impl="rbg")


def _init_apply(model, obs, seed=0):
    variables = model.init(_key(seed), obs)
    return variables, model.apply(variables, obs)


# Every trunk x value head x (no extra heads / all extra heads), alternating the games.
CASES = [
    (trunk, value_head, extras, ("hex3", "tictactoe")[index % 2])
    for index, (trunk, value_head, extras) in enumerate(
        (trunk, value_head, extras)
        for trunk in ("resnet", "mlp")
        for value_head in ("scalar", "beta", "dirichlet")
        for extras in (False, True)
    )
]


@pytest.mark.parametrize("trunk,value_head,extras,game", CASES)
def test_output_shapes_and_ranges(trunk, value_head, extras, game):
    obs_shape, num_actions = GAMES[game]
    num_classes = {"scalar": None, "beta": 2, "dirichlet": 3}[value_head]
    action_values = extras and value_head != "scalar"
    model = make_network(
        trunk, 1, 8, num_actions, value_head, action_values=action_values, regret_heads=extras
    )
    obs = _observation(_key(1), obs_shape)
    variables, out = _init_apply(model, obs)
    # Exaggerate the parameters so the output nonlinearities are pushed to their limits.
    big = jax.tree.map(lambda p: 8.0 * p + 0.5, variables)
    for output in (out, model.apply(big, obs)):
        assert isinstance(output, NetworkOutput)
        assert output.policy_logits.shape == (BATCH, num_actions)
        assert output.value.shape == (BATCH,)
        for leaf in jax.tree.leaves(output):
            assert leaf.dtype == jnp.float32
            assert bool(jnp.all(jnp.isfinite(leaf)))
        assert bool(jnp.all(jnp.abs(output.value) <= 1.0))
        if num_classes is None:
            assert output.value_belief is None
        else:
            assert output.value_belief.shape == (BATCH, num_classes)
            assert bool(jnp.all(output.value_belief > 0))
            totals = jnp.sum(output.value_belief, -1)  # bounded: [floor, cap] = [1, 16]
            assert bool(jnp.all((totals >= 1.0 - 1e-5) & (totals <= 16.0 + 1e-4))), totals
            np.testing.assert_allclose(
                output.value, belief_to_value(output.value_belief), rtol=1e-5, atol=1e-6
            )
        if action_values:
            assert output.action_beliefs.shape == (BATCH, num_actions, num_classes)
            assert bool(jnp.all(output.action_beliefs > 0))
            totals = jnp.sum(output.action_beliefs, -1)
            assert bool(jnp.all((totals >= 1.0 - 1e-5) & (totals <= 16.0 + 1e-4))), totals
        else:
            assert output.action_beliefs is None
        if extras:
            assert output.regret_rank.shape == (BATCH,)
            assert output.regret_value.shape == (BATCH,)
            assert bool(jnp.all(output.regret_value >= 0))
        else:
            assert output.regret_rank is None and output.regret_value is None
    # A fresh belief network starts near the uniform belief (all concentrations ~1).
    if num_classes is not None:
        assert float(jnp.mean(out.value_belief)) == pytest.approx(1.0, abs=0.2)


def test_parameters_are_float32_without_batch_stats():
    model = make_network("resnet", 1, 8, 10, "beta", compute_dtype="bfloat16")
    obs = jax.ShapeDtypeStruct((1, 3, 3, 4), jnp.bool_)
    variables = jax.eval_shape(model.init, jax.random.key(0), obs)
    assert set(variables) == {"params"}
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))


@pytest.mark.parametrize("trunk", ["resnet", "mlp"])
def test_bfloat16_compute_close_to_float32(trunk):
    obs_shape, num_actions = GAMES["hex3"]
    obs = _observation(_key(2), obs_shape)
    kwargs = dict(value_head="dirichlet", action_values=True)
    full = make_network(trunk, 1, 8, num_actions, **kwargs)
    half = make_network(trunk, 1, 8, num_actions, compute_dtype="bfloat16", **kwargs)
    variables, out_full = _init_apply(full, obs)
    out_half = half.apply(variables, obs)
    for a, b in zip(jax.tree.leaves(out_full), jax.tree.leaves(out_half), strict=True):
        assert b.dtype == jnp.float32
        np.testing.assert_allclose(a, b, atol=0.1, rtol=0.1)


def test_belief_to_value():
    beta = jnp.array([[3.0, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(belief_to_value(beta), [0.5, 0.0])
    dirichlet = jnp.array([[2.0, 1.0, 1.0], [0.5, 3.0, 0.5], [1.0, 0.0, 3.0]])
    np.testing.assert_allclose(belief_to_value(dirichlet), [0.25, 0.0, -0.5])


def test_invalid_configurations_raise():
    with pytest.raises(ValueError):
        make_network("transformer", 1, 8, 9)
    with pytest.raises(ValueError):
        make_network("mlp", 1, 8, 9, value_head="gaussian")
    with pytest.raises(ValueError):
        make_network("mlp", 1, 8, 9, value_head="scalar", action_values=True)
    with pytest.raises(ValueError):
        make_network("mlp", 1, 8, 9, compute_dtype="float16")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_construct(name):
    model = make_preset(name, 26, value_head="beta", action_values=True)
    obs = jax.ShapeDtypeStruct((2, 5, 5, 4), jnp.bool_)
    variables = jax.eval_shape(model.init, jax.random.key(0), obs)
    output = jax.eval_shape(model.apply, variables, obs)
    assert output.policy_logits.shape == (2, 26)
    assert output.action_beliefs.shape == (2, 26, 2)


def test_resnet6x128_size():
    model = make_preset("ResNet6x128", 82)
    variables = jax.eval_shape(
        model.init, jax.random.key(0), jax.ShapeDtypeStruct((1, 9, 9, 4), bool)
    )
    conv_kernels = [
        leaf
        for path, leaf in jax.tree_util.tree_leaves_with_path(variables)
        if "block_" in jax.tree_util.keystr(path) and leaf.ndim == 4
    ]
    assert len(conv_kernels) == 12 and all(k.shape == (3, 3, 128, 128) for k in conv_kernels)


class _DenseOnly(nn.Module):
    """Three bias-free Dense layers: 2 * (12 * 32 + 32 * 32 + 32 * 5) FLOPs per position."""

    @nn.compact
    def __call__(self, x):
        x = x.reshape(x.shape[0], -1)
        for features in (32, 32, 5):
            x = nn.Dense(features, use_bias=False)(x)
        return x


@pytest.mark.parametrize("compiled", [True, False])
def test_flops_match_analytic_dense_count(compiled):
    model = _DenseOnly()
    obs = jnp.ones((4, 2, 2, 3))
    variables = model.init(_key(0), obs)
    analytic = 2 * (12 * 32 + 32 * 32 + 32 * 5)
    measured = forward_flops(model, variables, obs, compiled=compiled)
    assert measured == pytest.approx(analytic, rel=0.1)
    # Backward: two matmuls per layer (input and weight gradients), minus the input
    # gradient of the first layer, which nothing needs.
    assert update_flops(model, variables, obs, compiled=compiled) == pytest.approx(
        analytic + 2 * analytic - 2 * 12 * 32, rel=0.2
    )


def test_network_flops_scale_with_width():
    obs = jax.ShapeDtypeStruct((2, 3, 3, 4), jnp.bool_)
    counts = []
    for width in (8, 16):
        model = make_network("resnet", 1, width, 10)
        variables = jax.eval_shape(model.init, _key(0), obs)  # shapes are enough
        counts.append(forward_flops(model, variables, obs, compiled=False))
    # The residual block's convs (9 * w * w per cell) dominate: roughly 4x when w doubles.
    assert 2.5 < counts[1] / counts[0] < 4.5


def test_bounded_belief_heads_stay_in_bounds_and_start_at_init():
    from curiosity_search.nets import BeliefBounds, bounded_belief

    bounds = BeliefBounds(floor=2.0, cap=20.0, init=3.0)
    logits = jnp.array([[0.0, 0.0], [50.0, -50.0], [-1e4, 1e4]])
    for t in (-1e4, -3.0, 0.0, 3.0, 1e4):
        belief = bounded_belief(logits, jnp.full((3,), t), bounds)
        total = jnp.sum(belief, -1)
        assert bool(jnp.all(belief > 0)) and bool(jnp.all(jnp.isfinite(belief)))
        assert bool(jnp.all((total >= 2.0 - 1e-5) & (total <= 20.0 + 1e-4)))
    t0 = bounds.concentration_bias(2)
    np.testing.assert_allclose(jnp.sum(bounded_belief(logits[:1], jnp.array([t0]), bounds)),
                               3.0, rtol=1e-5)
    # A fresh network's beliefs start at the init total with a uniform mean.
    model = make_network("mlp", 1, 8, 5, "beta", action_values=True, belief_bounds=bounds)
    obs = _observation(_key(3), (3, 3, 4))
    _, out = _init_apply(model, obs)
    np.testing.assert_allclose(jnp.sum(out.value_belief, -1), 3.0, rtol=0.05)
    np.testing.assert_allclose(jnp.sum(out.action_beliefs, -1), 3.0, rtol=0.05)
    np.testing.assert_allclose(out.value_belief / 3.0, 0.5, atol=0.05)


@pytest.mark.parametrize("floor, cap", [(1.0, 16.0), (3.0, 16.0), (0.5, 64.0)])
def test_concentration_logit_inverts_the_squash_with_unit_slope(floor, cap):
    from curiosity_search.nets import BeliefBounds, bounded_belief, concentration_logit

    bounds = BeliefBounds(floor=floor, cap=cap)
    logits = jax.random.normal(_key(5), (6, 3)) * 3.0
    t = jnp.array([-15.0, -8.0, -1.0, 0.0, 4.0, 12.0])
    recovered = concentration_logit(bounded_belief(logits, t, bounds), bounds)
    np.testing.assert_allclose(recovered, t, atol=0.1)  # float32 totals: coarse near -15
    # d t_recovered / d t = 1 even where sigmoid is flat (its slope at -15 is ~3e-7).
    slope = jax.vmap(jax.grad(lambda ti, li: concentration_logit(
        bounded_belief(li, ti, bounds), bounds)))(t, logits)
    np.testing.assert_allclose(slope, 1.0, atol=0.1)


@pytest.mark.parametrize("floor, cap, init, match", [
    (0.0, 16.0, None, "floor and cap"),
    (4.0, 2.0, None, "floor and cap"),
    (1.0, 16.0, 16.0, "init"),
    (3.0, 16.0, None, "init"),  # K = 2 is below the floor
])
def test_belief_bounds_are_validated(floor, cap, init, match):
    from curiosity_search.nets import BeliefBounds

    with pytest.raises(ValueError, match=match):
        make_network("mlp", 1, 8, 5, "beta", belief_bounds=BeliefBounds(floor, cap, init))
