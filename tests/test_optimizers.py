"""Optimizers: Muon really orthogonalises conv kernels (checked against an independent
Newton-Schulz in numpy), biases/norms/heads stay on Adam, schedules, clipping, and every
optimizer descends a quadratic."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from curiosity_search.nets import make_network
from curiosity_search.train.optimizers import (
    make_optimizer,
    make_schedule,
    muon_dimension_numbers,
)

LEARNING_RATE = 0.1


def _newton_schulz(matrix, steps=5, coeffs=(3.4445, -4.7750, 2.0315), eps=1e-8):
    """Keller Jordan's quintic Newton-Schulz orthogonalisation, in float64 numpy."""
    x = np.asarray(matrix, np.float64)
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    x = x / (np.linalg.norm(x) + eps)
    a, b, c = coeffs
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if transposed else x


@pytest.fixture(scope="module")
def resnet_step():
    """One Muon step and one Nesterov-AdamW step on a tiny ResNet: (params, grads, muon
    updates, adam updates), all ``{"params": ...}`` trees."""
    model = make_network("resnet", 1, 8, 10, value_head="beta", action_values=True)
    # RBG keys: XLA compiles them far faster than threefry on CPU.
    obs = jax.random.bernoulli(jax.random.key(0, impl="rbg"), 0.4, (4, 3, 3, 4))
    params = jax.jit(model.init)(jax.random.key(1, impl="rbg"), obs)

    def loss(p):
        out = model.apply(p, obs)
        return jnp.sum(jax.nn.log_softmax(out.policy_logits)[:, 3]) + jnp.sum(out.value**2)

    # optax.contrib.muon's Adam side is Nesterov AdamW without weight decay.
    muon = make_optimizer("muon", LEARNING_RATE)
    adam = optax.adamw(LEARNING_RATE, weight_decay=0.0, nesterov=True)

    @jax.jit
    def one_step(p):
        grads = jax.grad(loss)(p)
        muon_updates, _ = muon.update(grads, muon.init(p), p)
        adam_updates, _ = adam.update(grads, adam.init(p), p)
        return grads, muon_updates, adam_updates

    return params, *one_step(params)


def test_muon_routes_conv_and_dense_kernels_but_not_heads_or_vectors(resnet_step):
    params = resnet_step[0]
    specs = muon_dimension_numbers(params)
    flat = {
        jax.tree_util.keystr(path): spec
        for path, spec in jax.tree_util.tree_leaves_with_path(
            specs, is_leaf=lambda x: x is None or isinstance(x, tuple)
        )
    }
    trunk_kernels = [k for k in flat if "trunk" in k and "kernel" in k]
    assert len(trunk_kernels) == 3  # stem + two block convs
    for key in trunk_kernels:
        assert tuple(flat[key]) == ((0, 1, 2), 3)
    for key, spec in flat.items():
        if "_head" in key or "bias" in key or "scale" in key:
            assert spec is None, key
    with_heads = muon_dimension_numbers(params, muon_heads=True)
    assert tuple(with_heads["params"]["policy_head"]["out"]["kernel"]) == ((0,), 1)


@pytest.mark.parametrize("layer", ["stem_conv", "conv1"])
def test_conv_kernel_update_is_newton_schulz_orthogonalised(resnet_step, layer):
    _, grads, muon_updates, adam_updates = resnet_step
    trunk = "block_0" if layer == "conv1" else None
    pick = lambda tree: (
        tree["params"]["trunk"][trunk][layer]["kernel"]
        if trunk
        else tree["params"]["trunk"][layer]["kernel"]
    )
    grad, update = np.asarray(pick(grads)), np.asarray(pick(muon_updates))
    fan_out = grad.shape[-1]
    # First Nesterov step: the momentum is a positive multiple of the gradient, and the
    # orthogonalisation is scale invariant; width scale sqrt(max(1, out / in)) is 1 here.
    expected = -LEARNING_RATE * _newton_schulz(grad.reshape(-1, fan_out))
    np.testing.assert_allclose(update.reshape(-1, fan_out), expected, atol=2e-5)
    # Near-orthogonal: on the gradient's range every singular value is O(1) (Newton-Schulz
    # lands them in ~[0.5, 1.5]), unlike the raw gradient's spread. The LayerNorm after
    # the conv removes the channel mean, so the gradient has a null direction, kept null.
    singular = np.linalg.svd(update.reshape(-1, fan_out) / LEARNING_RATE, compute_uv=False)
    raw = np.linalg.svd(grad.reshape(-1, fan_out), compute_uv=False)
    in_range = raw > 1e-3 * raw.max()
    assert in_range.sum() >= fan_out - 1
    assert singular[in_range].min() > 0.4 and singular[in_range].max() < 1.6
    assert np.all(singular[~in_range] < 1e-2)
    assert raw[in_range].max() / raw[in_range].min() > 2 * (
        singular[in_range].max() / singular[in_range].min()
    )
    # And not what Adam would have done (Adam's first step is ~ -lr * sign(g) per entry).
    assert not np.allclose(update, np.asarray(pick(adam_updates)), atol=1e-3)


def test_biases_norms_and_heads_get_adam_updates(resnet_step):
    _, _, muon_updates, adam_updates = resnet_step
    muon_flat = dict(jax.tree_util.tree_leaves_with_path(muon_updates))
    adam_flat = dict(jax.tree_util.tree_leaves_with_path(adam_updates))
    checked = 0
    for path, update in muon_flat.items():
        key = jax.tree_util.keystr(path)
        if "_head" in key or update.ndim < 2:
            np.testing.assert_allclose(update, adam_flat[path], rtol=1e-5, atol=1e-7)
            checked += 1
    assert checked > 10


def test_schedules():
    cosine = make_schedule(1e-2, "cosine", total_steps=100)
    assert float(cosine(0)) == pytest.approx(1e-2)
    assert float(cosine(50)) == pytest.approx(5e-3, rel=1e-3)
    assert float(cosine(100)) == pytest.approx(0.0, abs=1e-9)
    warm = make_schedule(1e-2, "warmup_cosine", total_steps=100, warmup_steps=10)
    assert float(warm(0)) == pytest.approx(0.0, abs=1e-9)
    assert float(warm(5)) == pytest.approx(5e-3, rel=1e-3)
    assert float(warm(10)) == pytest.approx(1e-2)
    assert float(warm(100)) == pytest.approx(0.0, abs=1e-9)
    assert float(make_schedule(3e-4)(12345)) == pytest.approx(3e-4)
    custom = optax.linear_schedule(1.0, 0.0, 10)
    assert make_schedule(custom) is custom
    with pytest.raises(ValueError):
        make_schedule(1e-2, "cosine")  # no total_steps
    with pytest.raises(ValueError):
        make_optimizer("adam", 1e-3, weight_decay=0.1)
    with pytest.raises(ValueError):
        make_optimizer("lion", 1e-3)


def test_gradient_clipping_bounds_update_norm():
    params = {"w": jnp.zeros((3, 3)), "b": jnp.zeros(3)}
    grads = {"w": jnp.full((3, 3), 10.0), "b": jnp.full(3, 10.0)}
    optimizer = make_optimizer("sgd", 1.0, momentum=0.0, grad_clip=0.5)
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    assert float(optax.tree.norm(updates)) == pytest.approx(0.5, rel=1e-5)


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd", "muon"])
def test_optimizers_descend_a_quadratic(name):
    target = {
        "w": jax.random.normal(jax.random.key(0), (6, 4)),
        "b": jax.random.normal(jax.random.key(1), (4,)),
    }
    params = jax.tree.map(jnp.zeros_like, target)
    loss = lambda p: sum(
        jnp.sum((p[k] - target[k]) ** 2) for k in target
    )  # minimum 0 at the target
    learning_rate = {"adam": 0.1, "adamw": 0.1, "sgd": 0.05, "muon": 0.1}[name]
    optimizer = make_optimizer(
        name,
        learning_rate,
        schedule="cosine",
        total_steps=200,
        weight_decay=1e-4 if name != "adam" else 0.0,
        grad_clip=10.0,
    )

    def step(carry, _):
        p, state = carry
        grads = jax.grad(loss)(p)
        updates, state = optimizer.update(grads, state, p)
        return (optax.apply_updates(p, updates), state), None

    (final, _), _ = jax.lax.scan(step, (params, optimizer.init(params)), None, length=200)
    assert float(loss(final)) < 0.02 * float(loss(params))
